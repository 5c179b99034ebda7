"""KVStoreBase: the key/value bookkeeping, reduction, compression and updater logic of MXNet's
kvstore. A subclass supplies the transport: how a reduced value is combined across workers
(``_allreduce``), how initial values reach every worker (``_broadcast_init``), ``rank``,
``num_workers`` and ``_barrier``. The local store's transport is the identity."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np

from nnsym import ndarray as nd
from nnsym import optimizer as _opt
from nnsym.errors import ShapeError, StorageTypeError, warn
from nnsym.fileio import write_bytes
from nnsym.kvstore.compression import TwoBitCompression, make_compression
from nnsym.kvstore.errors import (
    DuplicateKeyError,
    KeyNotInitializedError,
    KeyTypeError,
    UnsupportedError,
    ValueMismatchError,
)
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import RowSparseNDArray

Key = int | str
Updater = Callable[[Any, NDArray, NDArray], None]


def _as_arrays(key: Key, value: Any, what: str) -> list[NDArray]:
    if isinstance(value, NDArray):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, NDArray) for v in value):
        return list(value)
    raise ValueMismatchError(
        f"{what} of key {key!r}: expected an NDArray or a non-empty list of NDArrays, "
        f"got {type(value).__name__}")


class KVStoreBase:
    """A key-value store of NDArrays: ``init``, ``push`` (values summed, then stored or handed
    to the updater), ``pull`` (broadcast into arrays), ``row_sparse_pull``, optimizer and
    gradient compression settings. Keys are ints or strs (not both in one store)."""

    OPTIMIZER = "optimizer"
    kv_registry: dict[str, type[KVStoreBase]] = {}

    def __init__(self, name: str | None = None):
        self._type = type(self).__name__.lower() if name is None else name
        self._store: dict[Key, NDArray] = {}
        self._key_kind: type | None = None
        self._updater: Updater | None = None
        self._compression: TwoBitCompression | None = None

    @staticmethod
    def register(klass: type[KVStoreBase]) -> type[KVStoreBase]:
        """Class decorator: ``create(klass.__name__)`` (any case) makes a ``klass()``. A
        later class of the same name replaces the earlier one, with a warning."""
        if not (isinstance(klass, type) and issubclass(klass, KVStoreBase)):
            raise KeyTypeError(f"register expects a KVStoreBase subclass, got {klass!r}")
        name = klass.__name__.lower()
        old = KVStoreBase.kv_registry.get(name)
        if old is not None and old is not klass:
            warn(f"kvstore {klass.__module__}.{klass.__name__} replaces "
                 f"{old.__module__}.{old.__name__}")
        KVStoreBase.kv_registry[name] = klass
        return klass

    # -- transport (overridden by a distributed store)
    @property
    def rank(self) -> int:
        """This worker's rank, in ``[0, num_workers)``."""
        return 0

    @property
    def num_workers(self) -> int:
        """The number of workers."""
        return 1

    def _allreduce(self, key: Key, merged: NDArray) -> NDArray:
        """``merged`` summed over all workers (one worker: itself)."""
        return merged

    def _allreduce_many(self, items: list[tuple[Key, NDArray]]) -> list[NDArray]:
        """``_allreduce`` of each (key, local sum), in order; a transport may fuse them."""
        return [self._allreduce(k, m) for k, m in items]

    def _broadcast_init(self, key: Key, value: NDArray) -> NDArray:
        """Rank 0's initial value for ``key`` (one worker: ``value``)."""
        return value

    def _barrier(self) -> None:
        """Waits for every worker (one worker: returns at once)."""

    def _compression_allowed(self) -> bool:
        return False

    # -- properties
    @property
    def type(self) -> str:
        """The store's type, as given to ``create``."""
        return self._type

    def is_capable(self, capability: str) -> bool:
        """Whether the store supports ``capability`` (MXNet knows only 'optimizer')."""
        if str(capability).lower() == self.OPTIMIZER:
            return True
        raise UnsupportedError(f"unknown capability {capability!r}; known: 'optimizer'")

    def barrier(self) -> None:
        """Global barrier among workers."""
        self._barrier()

    # -- keys and values
    def _check_key(self, key: Any) -> Key:
        if isinstance(key, bool) or not isinstance(key, (int, str, np.integer)):
            raise KeyTypeError(f"kvstore keys are ints or strs, got {key!r} "
                               f"({type(key).__name__})")
        k: Key = int(key) if isinstance(key, np.integer) else key
        kind = type(k)
        if self._key_kind is not None and kind is not self._key_kind:
            raise KeyTypeError(f"key {k!r}: int and str keys cannot be mixed in one kvstore "
                               f"(this store uses {self._key_kind.__name__} keys)")
        return k

    def _pairs(self, key: Any, value: Any, what: str) -> list[tuple[Key, list[NDArray]]]:
        """``[(key, [arrays...]), ...]`` from a key or a list of keys and matching values."""
        if isinstance(key, (list, tuple)):
            if not isinstance(value, (list, tuple)) or len(value) != len(key):
                n = len(value) if isinstance(value, (list, tuple)) else 1
                raise ValueMismatchError(
                    f"{what}: {len(key)} keys {list(key)} but {n} values")
            keys = [self._check_key(k) for k in key]
            if len({type(k) for k in keys}) > 1:
                raise KeyTypeError(f"{what}: int and str keys mixed in {list(key)}")
            return [(k, _as_arrays(k, v, what)) for k, v in zip(keys, value)]
        k = self._check_key(key)
        return [(k, _as_arrays(k, value, what))]

    def _stored(self, key: Key, what: str) -> NDArray:
        try:
            return self._store[key]
        except KeyError:
            raise KeyNotInitializedError(
                f"{what}: key {key!r} has not been initialized (call init first)") from None

    # -- init / push / pull
    def init(self, key: Any, value: Any) -> None:
        """Initialises one key or a list of keys with values (copied into the store)."""
        pairs = self._pairs(key, value, "init")
        seen: set[Key] = set()
        for k, vals in pairs:
            if k in self._store or k in seen:
                raise DuplicateKeyError(f"init: duplicate init of key {k!r}")
            if len(vals) != 1:
                raise DuplicateKeyError(f"init: key {k!r} given {len(vals)} values, expected 1")
            seen.add(k)
        for k, vals in pairs:
            self._key_kind = type(k)
            self._store[k] = self._broadcast_init(k, vals[0]).copy()

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """``init`` then ``pull`` into ``out``."""
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Pushes values: those of one key are summed (after compression, when set), then
        the updater (when set) applies the sum to the stored value, or the sum replaces it.
        ``priority`` is accepted and ignored (work is synchronous)."""
        grouped: dict[Key, list[NDArray]] = {}
        for k, vals in self._pairs(key, value, "push"):
            grouped.setdefault(k, []).extend(vals)
        for k, vals in grouped.items():  # check everything before changing anything
            stored = self._stored(k, "push")
            for v in vals:
                if v.shape != stored.shape:
                    raise ShapeError(f"push: key {k!r} holds shape {stored.shape}, "
                                     f"pushed value has shape {v.shape}")
                if v.stype == "csr":
                    raise StorageTypeError(f"push: key {k!r}: csr values cannot be pushed; "
                                           "push default or row_sparse arrays")
        reduced = [(k, self._reduce(k, vals)) for k, vals in grouped.items()]
        for (k, _), merged in zip(reduced, self._allreduce_many(reduced)):
            stored = self._store[k]
            if self._updater is not None:
                self._updater(k, merged, stored)
            else:
                merged.copyto(stored)

    def _reduce(self, key: Key, vals: list[NDArray]) -> NDArray:
        """The sum of one key's pushed values: row_sparse ones by the sparse kernels."""
        if self._compression is not None:
            vals = [self._compress(key, i, v) for i, v in enumerate(vals)]
        if len(vals) == 1:
            return vals[0]
        total: NDArray
        if all(v.stype == "row_sparse" for v in vals):
            total = nd.sparse.add_n(*vals)
        else:
            total = nd.add_n(*[v if v.stype == "default" else v.tostype("default") for v in vals])
        return total

    def _compress(self, key: Key, source: int, v: NDArray) -> NDArray:
        """``v`` as the store receives it: quantised (residual kept per key and source) and
        dequantised. Row_sparse values are not compressed."""
        comp = self._compression
        if comp is None or v.stype != "default":
            return v
        g = v.asnumpy()
        packed = comp.quantize(key, source, g)
        return nd.array(comp.dequantize(packed, g.shape, g.dtype), ctx=v.context, dtype=g.dtype)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copies each key's stored value into its ``out`` array(s). With ``ignore_sparse``
        (the default), sparse ``out`` arrays are skipped: use ``row_sparse_pull``."""
        if out is None:
            raise ValueMismatchError("pull: out= is required (an NDArray or a list of them)")
        pairs = self._pairs(key, out, "pull")
        for k, outs in pairs:
            stored = self._stored(k, "pull")
            for o in outs:
                if o.shape != stored.shape:
                    raise ShapeError(f"pull: key {k!r} holds shape {stored.shape}, "
                                     f"out has shape {o.shape}")
        for k, outs in pairs:
            for o in outs:
                if ignore_sparse and o.stype != "default":
                    continue
                self._store[k].copyto(o)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """``push`` then ``pull`` into ``out`` (into ``value`` when ``out`` is None)."""
        self.push(key, value, priority)
        self.pull(key, out=value if out is None else out, priority=priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Pulls the rows ``row_ids`` (unsorted, repeats allowed) of row_sparse stored values
        into row_sparse ``out`` arrays, which then hold exactly those rows, sorted and
        unique. One ``row_ids`` array with a list of ``out`` serves them all."""
        if out is None or row_ids is None:
            raise ValueMismatchError("row_sparse_pull: out= and row_ids= are required")
        if isinstance(row_ids, NDArray):
            row_ids = [row_ids]
        if not isinstance(row_ids, list):
            raise ValueMismatchError("row_sparse_pull: row_ids must be an NDArray or a list "
                                     f"of NDArrays, got {type(row_ids).__name__}")
        rest: list[NDArray] = []
        first_out = out
        if len(row_ids) == 1 and isinstance(out, list):
            first_out, rest = [out[0]], list(out[1:])
        outs = self._pairs(key, first_out, "row_sparse_pull")
        ids = self._pairs(key, row_ids, "row_sparse_pull")
        jobs: list[tuple[Key, NDArray, NDArray]] = []
        for (k, os_), (_, rs) in zip(outs, ids):
            if len(os_) != len(rs):
                raise ValueMismatchError(f"row_sparse_pull: key {k!r} has {len(os_)} out "
                                         f"arrays but {len(rs)} row_ids arrays")
            stored = self._stored(k, "row_sparse_pull")
            if stored.stype != "row_sparse":
                raise StorageTypeError(f"row_sparse_pull: key {k!r} holds a {stored.stype} "
                                       "value; row_sparse_pull needs a row_sparse one")
            for o in os_ + rest:
                if o.stype != "row_sparse":
                    raise StorageTypeError(f"row_sparse_pull: key {k!r}: out must be "
                                           f"row_sparse, not {o.stype}")
                if o.shape != stored.shape:
                    raise ShapeError(f"row_sparse_pull: key {k!r} holds shape "
                                     f"{stored.shape}, out has shape {o.shape}")
            jobs.extend((k, o, r) for o, r in zip(os_, rs))
        for k, o, r in jobs:
            self._rows(k, self._store[k], r).copyto(o)
        for o in rest:
            out[0].copyto(o)

    @staticmethod
    def _rows(key: Key, stored: NDArray, row_ids: NDArray) -> NDArray:
        """The rows ``row_ids`` of ``stored`` (zero where it stores none), as row_sparse."""
        raw = row_ids.asnumpy().ravel()
        ids = raw.astype(np.int64)
        nrows = stored.shape[0]
        if ids.size and (not np.array_equal(ids, raw) or ids.min() < 0 or ids.max() >= nrows):
            raise ValueMismatchError(f"row_sparse_pull: key {key!r}: row_ids must be integers "
                                     f"in [0, {nrows}), got {raw.tolist()}")
        uniq = np.unique(ids)
        # row_sparse data gives row_sparse
        held = cast(RowSparseNDArray, nd.sparse.retain(stored, nd.array(uniq, dtype=np.int64)))
        held_ids = held.indices.asnumpy()
        data = np.zeros((uniq.size, *stored.shape[1:]), np.dtype(stored.dtype))
        data[np.searchsorted(uniq, held_ids)] = held.data.asnumpy()
        return RowSparseNDArray(data, uniq, stored.shape, ctx=stored.context)

    # -- optimizer and compression
    def set_optimizer(self, optimizer: Any) -> None:
        """Runs ``optimizer`` on the store: each push updates the stored weight with it."""
        self._set_updater(_opt.get_updater(optimizer))

    def _set_updater(self, updater: Updater) -> None:
        """Sets ``updater(key, pushed_sum, stored)``, run by each push in place of a copy."""
        if not callable(updater):
            raise ValueMismatchError(
                f"the updater must be callable, got {type(updater).__name__}")
        self._updater = updater

    set_updater = _set_updater

    def set_gradient_compression(self, compression_params: Mapping[str, Any]) -> None:
        """Compresses pushed dense values: ``{'type': '2bit', 'threshold': t}``."""
        if not self._compression_allowed():
            raise UnsupportedError(f"gradient compression is not supported for a "
                                   f"{self._type!r} kvstore; use 'device'")
        self._compression = make_compression(compression_params)

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Writes the updater's states to ``fname`` (atomically)."""
        write_bytes(fname, self._states_updater("save").get_states(dump_optimizer))

    def load_optimizer_states(self, fname: str) -> None:
        """Restores the updater's states from a file written by ``save_optimizer_states``."""
        updater = self._states_updater("load")
        updater.set_states(Path(fname).read_bytes())

    def _states_updater(self, what: str) -> Any:
        u = self._updater
        if u is None or not (hasattr(u, "get_states") and hasattr(u, "set_states")):
            raise UnsupportedError(f"cannot {what} optimizer states: set_optimizer was not "
                                   "called on this kvstore")
        return u
