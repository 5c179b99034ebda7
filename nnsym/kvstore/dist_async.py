"""'dist_async' over MPI: a dedicated server rank, as MXNet's parameter server.

Run ``mpiexec -n N+1``: ranks 0..N-1 are workers, the last rank is the server. On the server,
``kvstore.create('dist_async')`` does not return: it serves the workers until every one has
shut down, then exits the process (status 0), as an MXNet server process did. The server
holds the only copy of every value and runs the optimizer: each push is applied on its own,
in arrival order, with no waiting for other workers; a pull returns the value as it is then.
Messages are JSON headers plus raw array bytes (no pickling). There is one store per job: a
second ``create('dist_async')`` in a worker returns the first.
"""

from __future__ import annotations

import atexit
import json
import sys
import time
from typing import Any

import numpy as np

from nnsym import ndarray as nd
from nnsym import optimizer as _opt
from nnsym.kvstore.base import Key, KVStoreBase
from nnsym.kvstore.dist import (
    DistKVStore,
    _bucket_bytes,
    _exit_without_finalize,
    _mpi,
    _optimizer_digest,
    _timeout,
)
from nnsym.kvstore.errors import (
    DistMismatchError,
    DistributedError,
    KVStoreError,
    UnsupportedError,
)
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import RowSparseNDArray

TAG_REQ, TAG_DATA, TAG_REP, TAG_REPDATA = 71, 72, 73, 74


def _bytes(a: np.ndarray) -> np.ndarray:
    """``a``'s memory as a flat uint8 view (``a`` must be contiguous)."""
    return a.reshape(-1).view(np.uint8)


def _meta(a: np.ndarray) -> list[Any]:
    return [list(a.shape), a.dtype.str]


def _arrays_of(v: NDArray) -> tuple[str, list[np.ndarray]]:
    if isinstance(v, RowSparseNDArray):
        return "row_sparse", [np.ascontiguousarray(v.indices.asnumpy().astype(np.int64)),
                              np.ascontiguousarray(v.data.asnumpy())]
    return "default", [np.ascontiguousarray(v.asnumpy())]


def _value_of(stype: str, arrays: list[np.ndarray], shape: list[int]) -> NDArray:
    if stype == "row_sparse":
        return RowSparseNDArray(arrays[1], arrays[0], tuple(shape))
    return nd.array(arrays[0], dtype=arrays[0].dtype)


class DistAsyncKVStore(DistKVStore):
    """A worker's view of the 'dist_async' store (see the module docstring)."""

    def __init__(self, name: str = "dist_async", comm: Any = None):
        KVStoreBase.__init__(self, name.lower())
        mpi = _mpi()
        self._MPI = mpi
        self._world = (mpi.COMM_WORLD if comm is None else comm).Dup()
        self._world.Set_errhandler(mpi.ERRORS_RETURN)
        self._timeout = _timeout()
        self._bucket = _bucket_bytes()
        self._broken: str | None = None
        self.stats = {"bytes": 0, "seconds": 0.0, "calls": 0}
        size = self._world.Get_size()
        if size < 2:
            raise DistMismatchError("'dist_async' needs a server rank besides the workers: "
                                    "run N workers with mpiexec -n N+1 (at least 2 ranks)")
        self._server = size - 1
        is_server = self._world.Get_rank() == self._server
        self._comm = self._world.Split(1 if is_server else 0, self._world.Get_rank())
        self._comm.Set_errhandler(mpi.ERRORS_RETURN)
        if is_server:
            code = _Server(self).serve()
            if code:
                _exit_without_finalize()  # MPI_Finalize would wait for the dead workers
            sys.exit(code)
        self._stopped = False
        atexit.register(self.close)

    def _compression_allowed(self) -> bool:
        return False

    def set_gradient_compression(self, compression_params: Any) -> None:
        raise UnsupportedError("gradient compression is not supported for 'dist_async'; "
                               "use 'dist_sync'")

    # -- point to point with the server
    def _request(self, header: dict[str, Any], arrays: list[np.ndarray], what: str,
                 wait_forever: bool = False) -> tuple[dict[str, Any], list[np.ndarray]]:
        mpi, w, s = self._MPI, self._world, self._server
        header = {**header, "arrays": [_meta(a) for a in arrays]}
        reqs = [w.Isend([json.dumps(header).encode(), mpi.BYTE], dest=s, tag=TAG_REQ)]
        reqs += [w.Isend([_bytes(a), mpi.BYTE], dest=s, tag=TAG_DATA) for a in arrays]
        self.stats["bytes"] += sum(a.nbytes for a in arrays)
        self._wait(reqs, what)
        status = mpi.Status()
        deadline = time.monotonic() + self._timeout
        while not w.Iprobe(source=s, tag=TAG_REP, status=status):
            if time.monotonic() > deadline and not wait_forever:
                self._fail(f"kvstore {self._type}: worker {self.rank} waited more than "
                           f"{self._timeout:g} s (NNSYM_KVSTORE_TIMEOUT) for the server's "
                           f"answer to {what}; the server rank has died or stopped")
            time.sleep(1e-4)
        raw = bytearray(status.Get_count(mpi.BYTE))
        self._wait([w.Irecv([raw, mpi.BYTE], source=s, tag=TAG_REP)], what)
        rep = json.loads(raw)
        out = []
        for shape, dt in rep.get("arrays", []):
            a = np.empty(shape, np.dtype(dt))
            self._wait([w.Irecv([_bytes(a), mpi.BYTE], source=s, tag=TAG_REPDATA)], what)
            out.append(a)
        if "error" in rep:
            raise KVStoreError(f"kvstore dist_async server: {rep['error']}")
        return rep, out

    def close(self) -> None:
        """Tells the server this worker is done and waits until every worker is (run at
        interpreter exit). When the server reports dead workers, this process leaves with
        status 1 without MPI_Finalize, which would wait for them forever."""
        if self._stopped or self._broken is not None:
            return
        self._stopped = True
        try:
            self._request({"op": "stop"}, [], "shutdown", wait_forever=True)
        except KVStoreError as e:
            print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
            _exit_without_finalize()

    # -- the store's operations
    def init(self, key: Any, value: Any) -> None:
        """Checked across workers; worker 0's values reach the server."""
        pairs = self._pairs(key, value, "init")
        desc = [[k, list(v[0].shape), np.dtype(v[0].dtype).name, v[0].stype] for k, v in pairs]
        self._check_same(desc, "init")
        KVStoreBase.init(self, key, value)  # local bookkeeping (shapes, duplicates)
        if self.rank == 0:
            for k, vals in pairs:
                stype, arrays = _arrays_of(vals[0])
                self._request({"op": "init", "key": k, "stype": stype,
                               "shape": list(vals[0].shape)}, arrays, f"init of key {k!r}")
        self._barrier()

    def _broadcast_init(self, key: Key, value: NDArray) -> NDArray:
        return value

    def set_optimizer(self, optimizer: Any) -> None:
        """The optimizer runs on the server (its settings sent as updater-states bytes)."""
        self._check_same(_optimizer_digest(optimizer), "set_optimizer")
        updater = _opt.get_updater(optimizer)
        KVStoreBase._set_updater(self, updater)
        if self.rank == 0:
            blob = np.frombuffer(updater.get_states(dump_optimizer=True), np.uint8)
            self._request({"op": "optimizer"}, [blob], "set_optimizer")
        self._barrier()

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sends this worker's sum per key; returns once the server has applied it."""
        if self._updater is None:
            raise UnsupportedError("'dist_async' applies pushes with the optimizer on the "
                                   "server: call set_optimizer before push")
        grouped: dict[Key, list[NDArray]] = {}
        for k, vals in self._pairs(key, value, "push"):
            grouped.setdefault(k, []).extend(vals)
        for k, vals in grouped.items():
            stored = self._stored(k, "push")
            if any(v.shape != stored.shape for v in vals):
                raise DistMismatchError(f"push: key {k!r} holds shape {stored.shape}, pushed "
                                        f"{[v.shape for v in vals]}")
        for k, vals in grouped.items():
            stype, arrays = _arrays_of(self._reduce(k, vals))
            self._request({"op": "push", "key": k, "stype": stype,
                           "shape": list(self._store[k].shape)}, arrays, f"push of key {k!r}")

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Fetches each key's current value from the server, then copies it into ``out``."""
        if out is None:
            raise DistMismatchError("pull: out= is required (an NDArray or a list of them)")
        for k, _ in self._pairs(key, out, "pull"):
            stored = self._stored(k, "pull")
            rep, arrays = self._request({"op": "pull", "key": k}, [], f"pull of key {k!r}")
            self._store[k] = _value_of(rep["stype"], arrays, list(stored.shape))
        super().pull(key, out=out, priority=priority, ignore_sparse=ignore_sparse)

    def _rows(self, key: Key, stored: NDArray, row_ids: NDArray) -> NDArray:  # type: ignore[override]
        raw = row_ids.asnumpy().ravel()
        ids = np.unique(raw.astype(np.int64))
        _, arrays = self._request({"op": "rows", "key": key}, [ids],
                                    f"row_sparse_pull of key {key!r}")
        return RowSparseNDArray(arrays[1], arrays[0], stored.shape)

    def _allreduce_many(self, items: list[tuple[Key, NDArray]]) -> list[NDArray]:
        raise UnsupportedError("'dist_async' has no allreduce")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        raise UnsupportedError("'dist_async': the optimizer states live on the server and "
                               "cannot be saved from a worker")

    def load_optimizer_states(self, fname: str) -> None:
        raise UnsupportedError("'dist_async': the optimizer states live on the server and "
                               "cannot be loaded from a worker")


_WORKER: list[DistAsyncKVStore] = []


def get_store(name: str = "dist_async") -> DistAsyncKVStore:
    """This process's 'dist_async' store: one per job, since the server rank serves one; a
    later ``create('dist_async')`` returns the same store."""
    if not _WORKER:
        _WORKER.append(DistAsyncKVStore(name))
    return _WORKER[0]


class _Server:
    """The server rank's loop: one request at a time, in arrival order."""

    def __init__(self, kv: DistAsyncKVStore):
        self.kv = kv
        self.store: dict[Any, NDArray] = {}
        self.updater: Any = None

    def serve(self) -> int:
        kv, mpi, w = self.kv, self.kv._MPI, self.kv._world
        workers = w.Get_size() - 1
        stopped: set[int] = set()
        status = mpi.Status()

        def answer(dest: int, rep: dict[str, Any], out: list[np.ndarray]) -> None:
            rep["arrays"] = [_meta(a) for a in out]
            w.Send([json.dumps(rep).encode(), mpi.BYTE], dest=dest, tag=TAG_REP)
            for a in out:
                w.Send([_bytes(np.ascontiguousarray(a)), mpi.BYTE], dest=dest, tag=TAG_REPDATA)

        while len(stopped) < workers:
            delay = 0.0
            last = time.monotonic()
            try:
                while not w.Iprobe(source=mpi.ANY_SOURCE, tag=TAG_REQ, status=status):
                    if stopped and time.monotonic() - last > kv._timeout:
                        # NOTE: a worker may compute for long, but not once others are done
                        missing = sorted(set(range(workers)) - stopped)
                        msg = (f"workers {missing} did not shut down within {kv._timeout:g} s "
                               "(NNSYM_KVSTORE_TIMEOUT) of the last request; they have "
                               "probably died")
                        print(f"kvstore dist_async server: {msg}", file=sys.stderr,
                              flush=True)
                        for dest in sorted(stopped):
                            answer(dest, {"error": msg}, [])
                        return 1
                    time.sleep(delay)
                    delay = min(2 * delay or 1e-5, 1e-3)
                src = status.Get_source()
                raw = bytearray(status.Get_count(mpi.BYTE))
                w.Recv([raw, mpi.BYTE], source=src, tag=TAG_REQ)
                h = json.loads(raw)
                arrays = []
                for shape, dt in h["arrays"]:
                    a = np.empty(shape, np.dtype(dt))
                    w.Recv([_bytes(a), mpi.BYTE], source=src, tag=TAG_DATA)
                    arrays.append(a)
            except mpi.Exception as e:
                print(f"kvstore dist_async server: MPI failed ({e}); a worker has probably "
                      "died", file=sys.stderr, flush=True)
                return 1
            try:
                rep, out = self.handle(h, arrays)
            except Exception as e:  # reported to the worker that asked
                rep, out = {"error": f"{type(e).__name__}: {e}"}, []
            if h["op"] != "stop":
                answer(src, rep, out)
                continue
            stopped.add(src)  # NOTE: answered when every worker has stopped (a rendezvous)
        for dest in sorted(stopped):
            answer(dest, {}, [])
        return 0

    def handle(self, h: dict[str, Any], arrays: list[np.ndarray]
               ) -> tuple[dict[str, Any], list[np.ndarray]]:
        op = h["op"]
        if op == "stop":
            return {}, []
        if op == "optimizer":
            u = _opt.get_updater(_opt.SGD())
            u.set_states(arrays[0].tobytes())
            self.updater = u
            return {}, []
        key = h["key"]
        if op == "init":
            if key in self.store:
                raise DistMismatchError(f"duplicate init of key {key!r}")
            self.store[key] = _value_of(h["stype"], arrays, h["shape"]).copy()
            return {}, []
        if key not in self.store:
            raise DistMismatchError(f"key {key!r} has not been initialized")
        stored = self.store[key]
        if op == "push":
            if self.updater is None:
                raise UnsupportedError("push before set_optimizer")
            self.updater(key, _value_of(h["stype"], arrays, h["shape"]), stored)
            return {}, []
        if op == "pull":
            stype, out = _arrays_of(stored)
            return {"stype": stype}, out
        if op == "rows":
            held = KVStoreBase._rows(key, stored, nd.array(arrays[0], dtype=np.int64))
            return {}, _arrays_of(held)[1]
        raise DistributedError(f"unknown request {op!r}")
