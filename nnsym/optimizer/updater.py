"""``Updater`` / ``get_updater`` (MXNet's kvstore updater) and its pickle-free state format.

``get_states()`` returns bytes: a zip archive holding ``manifest.json`` and arrays
``a0.npy``, ``a1.npy``, ... (numpy's .npy format, no pickled objects). The manifest::

    {"format": "nnsym-updater-states", "version": 1,
     "states": [[index, tree], ...],        # index: int or str
     "optimizer": null | {"name": ..., "attrs": {...}, "lr_scheduler": null | {...}}}

A tree is ``null``, a JSON number, ``{"nd": i}`` (dense array ``a<i>``),
``{"rsp": [values_i, indices_i], "shape": [...]}``, ``{"tuple": [...]}`` or ``{"list": [...]}``.
The optimizer part records its registered name, its hyper-parameters and counters (JSON
scalars, the lr/wd multiplier tables, update counts), never Python objects; loading builds a
fresh optimizer of that name and sets only attributes it already has. The lr_scheduler and
param_dict stay the current optimizer's (the scheduler's JSON scalar attributes are restored
when its class name matches).

``set_states`` bounds what it allocates (``max_bytes``, the member count, nesting depth) and
raises :class:`OptimizerStateError` naming what is wrong with malformed data.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from typing import Any

import numpy as np

from nnsym.errors import FileFormatError
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import BaseSparseNDArray, RowSparseNDArray
from nnsym.optimizer.base import Optimizer

FORMAT = "nnsym-updater-states"
VERSION = 1
MAX_BYTES = 1 << 34          # total array bytes set_states allocates, by default
MAX_MEMBERS = 1 << 16
MAX_DEPTH = 32
MAX_MANIFEST = 1 << 24
_DTYPES = frozenset("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 "
                    "float64".split())
_DICT_ATTRS = ("lr_mult", "wd_mult", "idx2name")


class OptimizerStateError(FileFormatError):
    """Updater states that cannot be saved or loaded (malformed, too large, unknown parts)."""


# ---------------------------------------------------------------------- encoding
class _Writer:
    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []

    def add(self, a: np.ndarray) -> int:
        self.arrays.append(np.ascontiguousarray(a))
        return len(self.arrays) - 1

    def tree(self, s: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise OptimizerStateError(f"optimizer state nested deeper than {MAX_DEPTH}")
        if s is None or isinstance(s, (bool, int, float)):
            return s
        if isinstance(s, RowSparseNDArray):
            return {"rsp": [self.add(s.data.asnumpy()), self.add(s.indices.asnumpy())],
                    "shape": list(s.shape)}
        if isinstance(s, BaseSparseNDArray):
            raise OptimizerStateError(f"cannot save a {s.stype} optimizer state")
        if isinstance(s, NDArray):
            return {"nd": self.add(s.asnumpy())}
        if isinstance(s, (tuple, list)):
            return {type(s).__name__: [self.tree(x, depth + 1) for x in s]}
        raise OptimizerStateError(f"cannot save an optimizer state of type {type(s).__name__}")


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _pairs(d: dict[Any, Any]) -> list[list[Any]]:
    return [[k, v] for k, v in d.items() if isinstance(k, (int, str)) and _scalar(v)]


def _dump_optimizer(opt: Optimizer) -> dict[str, Any]:
    attrs = {k: v for k, v in vars(opt).items()
             if _scalar(v) and not (isinstance(v, float) and not np.isfinite(v)
                                    and k != "clip_gradient")}
    for k in (*_DICT_ATTRS, *opt._saved_tables):
        attrs[k] = _pairs(getattr(opt, k))
    attrs["_all_index_update_counts"] = [[dev, _pairs(c)] for dev, c in
                                         opt._all_index_update_counts.items()]
    sched = opt.lr_scheduler
    sd = None
    if sched is not None:
        sd = {"class": type(sched).__name__,
              "attrs": {k: v for k, v in vars(sched).items() if _scalar(v)}
              if hasattr(sched, "__dict__") else {}}
    name = next((n for n, c in Optimizer.opt_registry.items() if c is type(opt)), None)
    if name is None:
        raise OptimizerStateError(f"optimizer {type(opt).__name__} is not registered; "
                                  "register it to save it with dump_optimizer=True")
    return {"name": name, "attrs": attrs, "lr_scheduler": sd}


def dumps(states: dict[Any, Any], optimizer: Optimizer | None) -> bytes:
    """The bytes of ``states`` (index -> state tree) and optionally the optimizer."""
    w = _Writer()
    entries = []
    for k, s in states.items():
        if not isinstance(k, (int, str)) or isinstance(k, bool):
            raise OptimizerStateError(f"state index {k!r} is neither int nor str")
        entries.append([k, w.tree(s)])
    manifest = {"format": FORMAT, "version": VERSION, "states": entries,
                "optimizer": None if optimizer is None else _dump_optimizer(optimizer)}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("manifest.json", json.dumps(manifest, allow_nan=True))
        for i, a in enumerate(w.arrays):
            with z.open(f"a{i}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    return buf.getvalue()


# ---------------------------------------------------------------------- decoding
def _bad(msg: str) -> OptimizerStateError:
    return OptimizerStateError(f"updater states: {msg}")


class _Reader:
    def __init__(self, z: zipfile.ZipFile, max_bytes: int):
        self.z = z
        self.left = max_bytes
        self.names = set(z.namelist())

    def array(self, i: Any) -> np.ndarray:
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise _bad(f"array reference {i!r} is not a non-negative int")
        name = f"a{i}.npy"
        if name not in self.names:
            raise _bad(f"array {name} is missing")
        with self.z.open(name) as f:
            try:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError(f"npy version {version}")
            except ValueError as e:
                raise _bad(f"{name} is not a valid .npy array ({e})") from None
            if dtype.name not in _DTYPES or dtype.byteorder == ">":
                raise _bad(f"{name} has unsupported dtype {dtype}")
            if fortran:
                raise _bad(f"{name} is Fortran-ordered")
            n = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if n > self.left:
                raise _bad(f"{name} needs {n} bytes, over the {self.left} bytes left of the "
                           "allocation bound (max_bytes)")
            self.left -= n
            data = f.read(n)
            if len(data) != n:
                raise _bad(f"{name} is truncated: {len(data)} of {n} bytes")
        out: np.ndarray = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        return out

    def tree(self, t: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise _bad(f"state nested deeper than {MAX_DEPTH}")
        if t is None or isinstance(t, (bool, int, float)):
            return t
        if isinstance(t, dict) and len(t) == 1 and "nd" in t:
            return NDArray(self.array(t["nd"]))
        if isinstance(t, dict) and set(t) == {"rsp", "shape"}:
            ref, shape = t["rsp"], t["shape"]
            if not (isinstance(ref, list) and len(ref) == 2 and isinstance(shape, list)
                    and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                            for d in shape) and shape):
                raise _bad(f"malformed row_sparse entry {t!r:.200}")
            values, indices = self.array(ref[0]), self.array(ref[1])
            try:
                return RowSparseNDArray(values, indices, tuple(shape))
            except Exception as e:  # any inconsistency of the parts
                raise _bad(f"invalid row_sparse state: {e}") from None
        if isinstance(t, dict) and len(t) == 1 and ("tuple" in t or "list" in t):
            (kind, items), = t.items()
            if not isinstance(items, list):
                raise _bad(f"{kind} entry is not a list")
            out = [self.tree(x, depth + 1) for x in items]
            return tuple(out) if kind == "tuple" else out
        raise _bad(f"unknown state entry {t!r:.200}")


def _key(k: Any) -> int | str:
    if isinstance(k, bool) or not isinstance(k, (int, str)):
        raise _bad(f"index {k!r:.100} is neither int nor str")
    return k


def _load_pairs(v: Any, what: str, value_types: tuple[type, ...]) -> dict[Any, Any]:
    if not isinstance(v, list):
        raise _bad(f"optimizer {what} is not a list of pairs")
    out = {}
    for p in v:
        if not (isinstance(p, list) and len(p) == 2 and isinstance(p[1], value_types)
                and not isinstance(p[1], bool)):
            raise _bad(f"optimizer {what} has a malformed entry {p!r:.100}")
        out[_key(p[0])] = p[1]
    return out


def _same_kind(old: Any, new: Any) -> bool:
    """A loaded hyper-parameter may replace a default of its kind (a number a number, ...);
    a default of None takes any JSON scalar."""
    if not _scalar(new):
        return False
    if old is None or new is None:
        return True
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool)
    if isinstance(old, (int, float)):
        return isinstance(new, (int, float))
    return type(old) is type(new)


def _load_optimizer(d: Any, current: Optimizer) -> Optimizer:
    if not (isinstance(d, dict) and isinstance(d.get("name"), str)
            and isinstance(d.get("attrs"), dict)):
        raise _bad("optimizer entry needs a name and attrs")
    cls = Optimizer.opt_registry.get(d["name"])
    if cls is None:
        raise _bad(f"unknown optimizer {d['name']!r}")
    opt = cls()
    have = vars(opt)
    for k, v in d["attrs"].items():
        if k in _DICT_ATTRS or k in opt._saved_tables:
            setattr(opt, k, _load_pairs(v, k, (str,) if k == "idx2name" else (int, float)))
        elif k == "_all_index_update_counts":
            if not isinstance(v, list):
                raise _bad("update counts are not a list")
            counts = {}
            for p in v:
                if not (isinstance(p, list) and len(p) == 2 and isinstance(p[0], int)):
                    raise _bad(f"malformed update-count entry {p!r:.100}")
                counts[p[0]] = _load_pairs(p[1], "update counts", (int,))
            opt._all_index_update_counts = counts or {0: {}}
            opt._index_update_count = opt._all_index_update_counts[
                0 if 0 in opt._all_index_update_counts else next(iter(counts))]
        elif k in have and _scalar(have[k]) and _same_kind(have[k], v):
            setattr(opt, k, v)
        elif k in have and _scalar(have[k]):
            raise _bad(f"optimizer {d['name']} hyper-parameter {k!r} cannot be {v!r:.100}")
        else:
            raise _bad(f"optimizer {d['name']} has no hyper-parameter {k!r:.100}")
    opt.lr_scheduler = current.lr_scheduler
    opt.param_dict = current.param_dict
    opt.sym_info = current.sym_info
    sd = d.get("lr_scheduler")
    sched = current.lr_scheduler
    if isinstance(sd, dict) and sched is not None and sd.get("class") == type(sched).__name__:
        for k, v in (sd.get("attrs") or {}).items():
            if hasattr(sched, "__dict__") and k in vars(sched) and _scalar(vars(sched)[k]) \
                    and _scalar(v):
                setattr(sched, k, v)
    return opt


# What a damaged zip member can raise while it is read (bad headers, unknown compression,
# failed decompression or CRC).
_DAMAGE = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError,
           ValueError, KeyError, IndexError, OverflowError, struct.error, zlib.error)


def loads(data: bytes, current: Optimizer,
          max_bytes: int = MAX_BYTES) -> tuple[dict[Any, Any], Optimizer | None]:
    """(states, optimizer or None) from ``get_states`` bytes; OptimizerStateError if malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise OptimizerStateError(f"updater states must be bytes, not {type(data).__name__}")
    try:
        z = zipfile.ZipFile(io.BytesIO(bytes(data)))
    except _DAMAGE as e:
        raise _bad(f"not an nnsym updater-states archive ({e})") from None
    try:
        return _loads(z, current, max_bytes)
    except OptimizerStateError:
        raise
    except _DAMAGE as e:
        raise _bad(f"damaged archive ({type(e).__name__}: {e})") from None
    finally:
        z.close()


def _loads(z: zipfile.ZipFile, current: Optimizer,
           max_bytes: int) -> tuple[dict[Any, Any], Optimizer | None]:
    infos = z.infolist()
    if len(infos) > MAX_MEMBERS:
        raise _bad(f"{len(infos)} members, more than {MAX_MEMBERS}")
    try:
        mi = z.getinfo("manifest.json")
    except KeyError:
        raise _bad("manifest.json is missing") from None
    if mi.file_size > MAX_MANIFEST:
        raise _bad(f"manifest.json is {mi.file_size} bytes, over {MAX_MANIFEST}")
    try:
        with z.open(mi) as f:
            manifest = json.loads(f.read(MAX_MANIFEST + 1).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, zipfile.BadZipFile, RecursionError) as e:
        raise _bad(f"manifest.json is not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _bad(f"manifest format is not {FORMAT!r}")
    if manifest.get("version") != VERSION:
        raise _bad(f"unsupported version {manifest.get('version')!r} (this reads {VERSION})")
    entries = manifest.get("states")
    if not isinstance(entries, list):
        raise _bad("states is not a list")
    r = _Reader(z, max_bytes)
    states: dict[Any, Any] = {}
    for ent in entries:
        if not (isinstance(ent, list) and len(ent) == 2):
            raise _bad(f"malformed state entry {ent!r:.100}")
        states[_key(ent[0])] = r.tree(ent[1])
    opt = manifest.get("optimizer")
    return states, None if opt is None else _load_optimizer(opt, current)


def _sync(state: Any, ctx: Any) -> Any:
    if isinstance(state, NDArray):
        return state.as_in_context(ctx)
    if isinstance(state, (tuple, list)):
        items = [_sync(s, ctx) for s in state]
        return tuple(items) if isinstance(state, tuple) else items
    return state


class Updater:
    """``updater(index, grad, weight)``: creates the index's state on first use
    (``create_state_multi_precision``) and runs ``update_multi_precision``."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict[Any, Any] = {}
        self.states_synced: dict[Any, bool] = {}
        self.aggregate_updates = False

    def __call__(self, index: Any, grad: Any, weight: Any) -> None:
        if isinstance(index, (list, tuple)):
            indices, grads, weights = list(index), list(grad), list(weight)
        else:
            indices, grads, weights = [index], [grad], [weight]
        if weights:
            self.optimizer._set_current_context(getattr(weights[0].context, "device_id", 0))
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                idx = indices[i] = idx.decode()
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, weights[i])
                self.states_synced[idx] = True
            elif not self.states_synced[idx]:
                self.states[idx] = _sync(self.states[idx], weights[i].context)
                self.states_synced[idx] = True
        for i, w, g in zip(indices, weights, grads):
            self.optimizer.update_multi_precision(i, w, g, self.states[i])

    def sync_state_context(self, state: Any, context: Any) -> Any:
        """``state`` with its arrays moved to ``context``."""
        return _sync(state, context)

    def set_states(self, states: bytes, max_bytes: int = MAX_BYTES) -> None:
        """Load ``get_states`` bytes (replacing the optimizer when they hold one)."""
        loaded, opt = loads(states, self.optimizer, max_bytes)
        self.states = loaded
        if opt is not None:
            self.optimizer = opt
        self.states_synced = dict.fromkeys(self.states, False)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """The states (and with ``dump_optimizer`` the optimizer's settings) as bytes."""
        return dumps(self.states, self.optimizer if dump_optimizer else None)


def get_updater(optimizer: Optimizer) -> Updater:
    """An :class:`Updater` of ``optimizer``."""
    return Updater(optimizer)
