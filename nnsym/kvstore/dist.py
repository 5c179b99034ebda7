"""Distributed kvstores over MPI (mpi4py, the ``nnsym[dist]`` extra): 'dist_sync' and
'dist_device_sync' ('dist_async' is in ``dist_async.py``).

Every MPI rank is a worker and keeps a full copy of every value; there is no server. A push
sums the pushed values locally, then across ranks (dense: in-place allreduce, small keys fused
into one buffer; row_sparse: row ids and rows gathered from every rank, duplicates summed by
the sparse kernels; 2bit: the packed codes gathered and dequantised), and every rank then runs
the same update on the same sum, so the weights stay equal everywhere. Pulls are local.

Every collective is non-blocking and polled against a deadline (``NNSYM_KVSTORE_TIMEOUT``
seconds, default 120): a rank that died or stopped calling the store makes the others raise
``DistributedError`` instead of hanging. mpi4py is imported only when a store is created.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym import ndarray as nd
from nnsym.kvstore.base import Key, KVStoreBase
from nnsym.kvstore.errors import (
    DistMismatchError,
    DistributedError,
    DistUnavailableError,
    UnsupportedError,
)
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import RowSparseNDArray

TIMEOUT_ENV = "NNSYM_KVSTORE_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
BUCKET_ENV = "NNSYM_KVSTORE_BUCKET_BYTES"
DEFAULT_BUCKET = 1 << 20
SYNC_TYPES = ("dist_sync", "dist_device_sync", "dist_sync_device", "dist")
ASYNC_TYPES = ("dist_async", "dist_device_async", "dist_async_device")


def _mpi() -> Any:
    """mpi4py's MPI module, or a clear error naming the extra to install."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 -- optional dependency, imported on use
    except ImportError as e:
        raise DistUnavailableError(
            "distributed kvstores ('dist_sync', 'dist_device_sync') need MPI through mpi4py, "
            f"which is not installed ({e}); install it with: pip install 'nnsym[dist]'"
        ) from e
    return MPI


def _timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        t = float(raw)
    except ValueError:
        t = -1.0
    if not t > 0:
        raise DistMismatchError(f"{TIMEOUT_ENV} must be a positive number of seconds, "
                                f"got {raw!r}")
    return t


def _bucket_bytes() -> int:
    raw = os.environ.get(BUCKET_ENV, "")
    try:
        return int(raw) if raw else DEFAULT_BUCKET
    except ValueError:
        raise DistMismatchError(f"{BUCKET_ENV} must be an integer, got {raw!r}") from None


_BROKEN_EXIT_HOOKED = False


def _exit_without_finalize() -> None:
    """At interpreter exit after a failed collective: MPI_Finalize would wait forever for the
    dead rank, so leave at once (status 1) once the streams are flushed."""
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except (OSError, ValueError):
            pass
    os._exit(1)


class DistKVStore(KVStoreBase):
    """A synchronous data-parallel store over MPI_COMM_WORLD (a duplicate of it)."""

    def __init__(self, name: str = "dist_sync", comm: Any = None):
        kind = name.lower()
        if kind in ASYNC_TYPES:
            raise UnsupportedError(
                f"kvstore type {name!r} is served by nnsym.kvstore.dist_async (a server "
                "rank); create it with kvstore.create")
        if kind not in SYNC_TYPES:
            raise UnsupportedError(f"unknown distributed kvstore type {name!r}; expected one "
                                   f"of {list(SYNC_TYPES)}")
        super().__init__(kind)
        mpi = _mpi()
        self._MPI = mpi
        if not mpi.Is_initialized():
            mpi.Init_thread()
        self._comm = (mpi.COMM_WORLD if comm is None else comm).Dup()
        self._comm.Set_errhandler(mpi.ERRORS_RETURN)
        self._timeout = _timeout()
        self._bucket = _bucket_bytes()
        self._broken: str | None = None
        self.stats = {"bytes": 0, "seconds": 0.0, "calls": 0}

    # -- transport
    @property
    def rank(self) -> int:
        return int(self._comm.Get_rank())

    @property
    def num_workers(self) -> int:
        return int(self._comm.Get_size())

    def _compression_allowed(self) -> bool:
        return True

    def _fail(self, msg: str) -> None:
        global _BROKEN_EXIT_HOOKED
        self._broken = msg
        if not _BROKEN_EXIT_HOOKED:
            atexit.register(_exit_without_finalize)
            _BROKEN_EXIT_HOOKED = True
        raise DistributedError(msg)

    def _wait(self, reqs: Sequence[Any], what: str) -> None:
        """Completes ``reqs`` or raises DistributedError once the deadline passes."""
        if self._broken is not None:
            raise DistributedError(f"kvstore {self._type}: an earlier collective failed "
                                   f"({self._broken})")
        mpi = self._MPI
        t0 = time.monotonic()
        deadline = t0 + self._timeout
        delay = 0.0
        try:
            while not mpi.Request.Testall(list(reqs)):
                if time.monotonic() > deadline:
                    self._fail(
                        f"kvstore {self._type}: rank {self.rank} of {self.num_workers} waited "
                        f"more than {self._timeout:g} s ({TIMEOUT_ENV}) for {what}; another "
                        "rank has died or stopped calling the kvstore. This process cannot "
                        "shut MPI down cleanly and exits with status 1")
                # MPI progresses a non-blocking collective only inside Test calls: poll
                # without sleeping for the first 50 ms (a healthy allreduce of a few MB ends
                # well within that), then back off to at most 1 ms between polls.
                if time.monotonic() - t0 > 0.05:
                    time.sleep(delay)
                    delay = min(2 * delay or 1e-5, 1e-3)
        except mpi.Exception as e:
            self._fail(f"kvstore {self._type}: rank {self.rank} of {self.num_workers}: MPI "
                       f"failed during {what} (another rank has probably died): {e}")
        self.stats["seconds"] += time.monotonic() - t0
        self.stats["calls"] += 1

    def _barrier(self) -> None:
        self._wait([self._comm.Ibarrier()], "a barrier")

    def _allgather_bytes(self, payload: bytes, what: str) -> list[bytes]:
        """Every rank's ``payload``, in rank order (no pickling: raw bytes)."""
        n = self.num_workers
        counts = np.zeros(n, np.int64)
        self._wait([self._comm.Iallgather(np.array([len(payload)], np.int64), counts)], what)
        buf = np.zeros(int(counts.sum()), np.uint8)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        send = np.frombuffer(payload, np.uint8) if payload else np.zeros(0, np.uint8)
        mpi = self._MPI
        self._wait([self._comm.Iallgatherv(send, [buf, counts.tolist(), displs.tolist(),
                                                  mpi.BYTE])], what)
        return [buf[d:d + c].tobytes() for d, c in zip(displs, counts)]

    def _check_same(self, payload: Any, what: str) -> None:
        """Raises DistMismatchError unless every rank passes an equal JSON ``payload``."""
        mine = json.dumps(payload, sort_keys=True).encode()
        theirs = self._allgather_bytes(mine, what)
        if all(t == theirs[0] for t in theirs):
            return
        first = json.loads(theirs[0])
        for r, t in enumerate(theirs):
            other = json.loads(t)
            if other != first:
                raise DistMismatchError(_describe_mismatch(what, first, r, other))

    def _broadcast_init(self, key: Key, value: NDArray) -> NDArray:
        what = f"the initial value of key {key!r}"
        if isinstance(value, RowSparseNDArray):
            nnz = np.array([value.indices.shape[0]], np.int64)
            self._wait([self._comm.Ibcast(nnz, root=0)], what)
            ids = (value.indices.asnumpy().astype(np.int64) if self.rank == 0
                   else np.zeros(int(nnz[0]), np.int64))
            data = (np.ascontiguousarray(value.data.asnumpy()) if self.rank == 0
                    else np.zeros((int(nnz[0]), *value.shape[1:]), np.dtype(value.dtype)))
            self._wait([self._comm.Ibcast(ids, root=0), self._comm.Ibcast(_wire(data), root=0)],
                       what)
            return RowSparseNDArray(data, ids, value.shape, ctx=value.context)
        buf = np.ascontiguousarray(value.asnumpy())
        self._wait([self._comm.Ibcast(_wire(buf), root=0)], what)
        return nd.array(buf, ctx=value.context, dtype=buf.dtype)

    def _allreduce(self, key: Key, merged: NDArray) -> NDArray:
        return self._allreduce_many([(key, merged)])[0]

    def _allreduce_many(self, items: list[tuple[Key, NDArray]]) -> list[NDArray]:
        """Each key's locally summed value summed over all ranks. All requests of one push
        are posted before any is waited on, in the same key order on every rank."""
        mpi = self._MPI
        out: list[NDArray | None] = [None] * len(items)
        reqs: list[Any] = []
        after: list[Any] = []  # (fn) run once the requests complete
        buckets: dict[np.dtype, list[tuple[int, np.ndarray]]] = {}
        for i, (key, m) in enumerate(items):
            if m.stype == "row_sparse":
                out[i] = self._sparse_sum(key, m)
                continue
            if self._compression is not None:
                out[i] = self._compressed_sum(key, m)
                continue
            arr = _buffer(m)
            if arr is not None and arr.nbytes >= self._bucket and arr.dtype != np.float16:
                reqs.append(self._comm.Iallreduce(mpi.IN_PLACE, _wire(arr), op=mpi.SUM))
                self.stats["bytes"] += arr.nbytes
                out[i] = m
            else:  # small keys, or arrays without a host buffer: through a fused bucket
                host = m.asnumpy()
                wire = np.dtype(np.float32) if host.dtype == np.float16 else host.dtype
                buckets.setdefault(wire, []).append((i, host))
        for wire, members in buckets.items():
            flat = np.concatenate([h.astype(wire, copy=False).ravel() for _, h in members])
            reqs.append(self._comm.Iallreduce(mpi.IN_PLACE, _wire(flat), op=mpi.SUM))
            self.stats["bytes"] += flat.nbytes
            after.append((flat, members))
        if reqs:
            self._wait(reqs, f"the allreduce of keys {[k for k, _ in items]}")
        for flat, members in after:
            off = 0
            for i, host in members:
                part = flat[off:off + host.size].reshape(host.shape).astype(host.dtype)
                off += host.size
                m = items[i][1]
                buf = _buffer(m)
                if buf is not None:
                    buf[...] = part  # NOTE: in place, as the large keys are
                    out[i] = m
                else:
                    out[i] = nd.array(part, ctx=m.context, dtype=part.dtype)
        return [o for o in out if o is not None]

    def _sparse_sum(self, key: Key, m: Any) -> NDArray:
        """Gathers every rank's row ids and rows; duplicates summed by the sparse add_n."""
        mpi = self._MPI
        what = f"the row_sparse push of key {key!r}"
        ids = np.ascontiguousarray(m.indices.asnumpy().astype(np.int64))
        rows = np.ascontiguousarray(m.data.asnumpy())
        n = self.num_workers
        counts = np.zeros(n, np.int64)
        self._wait([self._comm.Iallgather(np.array([ids.size], np.int64), counts)], what)
        row_size = int(np.prod(m.shape[1:], dtype=np.int64))
        raw = rows.dtype in (np.float16, np.bool_)  # no MPI type: sent as bytes
        unit = rows.dtype.itemsize if raw else 1
        all_ids = np.zeros(int(counts.sum()), np.int64)
        all_rows = np.zeros((int(counts.sum()), *m.shape[1:]), rows.dtype)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        wire_rows = _wire(all_rows)
        self._wait([
            self._comm.Iallgatherv(ids, [all_ids, counts.tolist(), displs.tolist(), mpi.INT64_T]),
            self._comm.Iallgatherv(_wire(rows), [wire_rows[0] if raw else wire_rows,
                                                 (counts * row_size * unit).tolist(),
                                                 (displs * row_size * unit).tolist(),
                                                 mpi.BYTE if raw else _mpi_type(rows.dtype)]),
        ], what)
        self.stats["bytes"] += all_ids.nbytes + all_rows.nbytes
        parts = [RowSparseNDArray(all_rows[d:d + c], all_ids[d:d + c], m.shape, ctx=m.context)
                 for d, c in zip(displs, counts)]
        return parts[0] if n == 1 else nd.sparse.add_n(*parts)

    def _compressed_sum(self, key: Key, m: NDArray) -> NDArray:
        """2bit: gathers the packed codes (four values a byte) and sums the dequantised ones."""
        comp = self._compression
        assert comp is not None
        g = m.asnumpy()
        packed = np.ascontiguousarray(comp.quantize(key, 0, g))
        allp = np.zeros((self.num_workers, packed.size), np.uint8)
        self._wait([self._comm.Iallgather(packed, allp)], f"the 2bit push of key {key!r}")
        self.stats["bytes"] += allp.nbytes
        total = np.zeros(g.shape, g.dtype)
        for p in allp:
            total += comp.dequantize(p, g.shape, g.dtype)
        return nd.array(total, ctx=m.context, dtype=g.dtype)

    def _reduce(self, key: Key, vals: list[NDArray]) -> NDArray:
        # NOTE: compression applies to this worker's local sum, as MXNet's dist stores do
        comp, self._compression = self._compression, None
        try:
            return super()._reduce(key, vals)
        finally:
            self._compression = comp

    # -- checks across ranks
    def init(self, key: Any, value: Any) -> None:
        """``init`` on every rank; keys, shapes, dtypes and storage types must match across
        ranks (checked here, reported as DistMismatchError); rank 0's values win."""
        pairs = self._pairs(key, value, "init")
        desc = [[k, list(v[0].shape), np.dtype(v[0].dtype).name, v[0].stype] for k, v in pairs]
        self._check_same(desc, "init")
        super().init(key, value)

    def set_optimizer(self, optimizer: Any) -> None:
        """Sets the same optimizer on every rank (checked across ranks)."""
        self._check_same(_optimizer_digest(optimizer), "set_optimizer")
        super().set_optimizer(optimizer)

    def set_gradient_compression(self, compression_params: Any) -> None:
        super().set_gradient_compression(compression_params)
        self._check_same({str(k): str(v) for k, v in dict(compression_params).items()},
                         "set_gradient_compression")


def _describe_mismatch(what: str, first: Any, rank: int, other: Any) -> str:
    if what == "init" and isinstance(first, list) and isinstance(other, list):
        mine = {json.dumps(d[0]): d for d in first}
        theirs = {json.dumps(d[0]): d for d in other}
        if mine.keys() != theirs.keys():
            return (f"kvstore init: ranks initialise different keys: rank 0 has "
                    f"{[d[0] for d in first]}, rank {rank} has {[d[0] for d in other]}")
        for k, d in mine.items():
            o = theirs[k]
            if d != o:
                return (f"kvstore init: key {d[0]!r} differs across ranks: rank 0 has shape "
                        f"{tuple(d[1])} {d[2]} {d[3]}, rank {rank} has shape {tuple(o[1])} "
                        f"{o[2]} {o[3]}")
    return f"kvstore {what}: rank 0 passed {first}, rank {rank} passed {other}"


def _optimizer_digest(optimizer: Any) -> dict[str, Any]:
    simple = (bool, int, float, str, type(None))
    attrs = {k: v for k, v in sorted(vars(optimizer).items())
             if isinstance(v, simple) and not k.startswith("_")} if hasattr(
        optimizer, "__dict__") else {}
    return {"type": type(optimizer).__name__, "attrs": attrs}


def _buffer(a: NDArray) -> np.ndarray | None:
    """The NDArray's own host memory as a writable contiguous numpy array, or None."""
    raw = getattr(a, "_data", None)
    if isinstance(raw, np.ndarray) and raw.flags.c_contiguous and raw.flags.writeable:
        return raw
    return None


def _wire(a: np.ndarray) -> Any:
    """A buffer spec MPI understands for ``a`` (bool and float16 travel as raw bytes)."""
    if a.dtype in (np.float16, np.bool_):
        return [a.view(np.uint8), _mpi().BYTE]
    return a


def _mpi_type(dtype: np.dtype) -> Any:
    from mpi4py.util.dtlib import from_numpy_dtype  # noqa: PLC0415 -- optional dependency

    return from_numpy_dtype(dtype)

