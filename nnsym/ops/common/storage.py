"""Storage kernels and record helpers shared by the operator families: conversions between
dense, csr and row_sparse records (the C kernels of ``ops.common.sparse`` where they serve the
dtype, else numpy), and the generic kernels the storage-type rules name by reference:
``map_values`` (f(0) == 0 over stored values), ``dense_result``, ``zeros_of_input_stype`` and
``backward_sparse_grad`` (an elementwise gradient that is 0 where the output gradient is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.errors import StorageTypeError
from nnsym.ir.storage import Csr, Env, Rsp, Storage, StorageCall
from nnsym.ops.common import sparse as kernels
from nnsym.types import SType

D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR


def _nonzero(d: np.ndarray) -> np.ndarray:
    nz: np.ndarray = np.not_equal(d, 0)
    if d.dtype.kind == "f":
        nz |= np.isnan(d)
    return nz


def to_dense(s: Storage) -> np.ndarray:
    """The dense array of any storage (a dense one as it is)."""
    if isinstance(s, Csr):
        if kernels.serves(s.data.dtype):
            return np.asarray(kernels.csr_to_dense(s.data, s.indices, s.indptr, s.shape))
        out = np.zeros(s.shape, s.data.dtype)
        rows = np.repeat(np.arange(s.shape[0], dtype=np.int64), np.diff(s.indptr))
        out[rows, s.indices] = s.data
        return out
    if isinstance(s, Rsp):
        if kernels.serves(s.data.dtype):
            return np.asarray(kernels.rsp_to_dense(s.data, s.indices, s.shape))
        out = np.zeros(s.shape, s.data.dtype)
        out[s.indices] = s.data
        return out
    return s


def dense_to(d: np.ndarray, stype: SType) -> Storage:
    """A dense array in csr or row_sparse form (stored entries: the non-zeros, NaN included)."""
    d = np.ascontiguousarray(d)
    if stype == D:
        return d
    if stype == C:
        if d.ndim != 2:
            raise StorageTypeError(f"cast_storage to csr needs a 2-D array, not shape {d.shape}")
        if kernels.serves(d.dtype):
            v, ix, ip = kernels.cast_dense_to_csr(d)
            return Csr(v, ix, ip, d.shape)
        r, c = np.nonzero(_nonzero(d))
        indptr = np.zeros(d.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(r, minlength=d.shape[0]), out=indptr[1:])
        return Csr(np.ascontiguousarray(d[r, c]), c.astype(np.int64), indptr, d.shape)
    if d.ndim == 0:
        raise StorageTypeError("cast_storage to row_sparse needs at least one dimension")
    if kernels.serves(d.dtype):
        v, ix = kernels.cast_dense_to_rsp(d)
        return Rsp(v, ix, d.shape)
    width = int(np.prod(d.shape[1:], dtype=np.int64))
    rows = np.flatnonzero(_nonzero(d).reshape(d.shape[0], width).any(axis=1)).astype(np.int64)
    return Rsp(np.ascontiguousarray(d[rows]), rows, d.shape)


def csr_to_rsp(a: Csr) -> Rsp:
    """Rows with a stored entry, filled from the csr (never the whole dense shape)."""
    counts = np.diff(a.indptr)
    rows = np.flatnonzero(counts).astype(np.int64)
    vals = np.zeros((rows.size, a.shape[1]), a.data.dtype)
    pos = np.repeat(np.arange(rows.size), counts[rows])
    vals[pos, a.indices] = a.data
    return Rsp(vals, rows, a.shape)


def rsp_to_csr(a: Rsp) -> Csr:
    if len(a.shape) != 2:
        raise StorageTypeError(f"cast_storage to csr needs a 2-D array, not shape {a.shape}")
    r, c = np.nonzero(_nonzero(a.data))
    rows = a.indices[r]
    indptr = np.zeros(a.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=a.shape[0]), out=indptr[1:])
    return Csr(np.ascontiguousarray(a.data[r, c]), c.astype(np.int64), indptr, a.shape)


def convert(s: Storage, stype: SType) -> Storage:
    """``s`` in storage type ``stype`` (the same object when it already is; every pair is
    supported, csr <-> row_sparse through the stored coordinates)."""
    src = s.stype if isinstance(s, (Csr, Rsp)) else D
    if src == stype:
        return s
    if src == D:
        assert isinstance(s, np.ndarray)
        return dense_to(s, stype)
    if stype == D:
        return to_dense(s)
    if isinstance(s, Csr):
        return csr_to_rsp(s)
    assert isinstance(s, Rsp)
    return rsp_to_csr(s)


def with_data(s: Csr | Rsp, data: np.ndarray) -> Csr | Rsp:
    """The same pattern (index arrays shared) holding other values."""
    if isinstance(s, Csr):
        return Csr(data, s.indices, s.indptr, s.shape)
    return Rsp(data, s.indices, s.shape)


def coords(a: Csr) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr)), a.indices


def gather_csr(a: Csr, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a``'s values at coordinates (r, c) (sorted), zeros where it stores none."""
    ra, ca = coords(a)
    cols = np.int64(a.shape[1])
    ka = ra * cols + ca
    keys = r * cols + c
    out = np.zeros(keys.size, a.data.dtype)
    if ka.size and keys.size:
        pos = np.searchsorted(keys, ka)
        hit = (pos < keys.size) & (keys[np.minimum(pos, keys.size - 1)] == ka)
        out[pos[hit]] = a.data[hit]
    return out


def rows_of(a: Rsp, ids: np.ndarray) -> np.ndarray:
    """``a``'s rows at ``ids`` (zeros where ``a`` stores none)."""
    out = np.zeros((ids.size, *a.shape[1:]), a.data.dtype)
    pos = np.searchsorted(ids, a.indices)
    hit = (pos < ids.size) & (ids[np.minimum(pos, ids.size - 1)] == a.indices) if ids.size \
        else np.zeros(a.indices.size, bool)
    out[pos[hit]] = a.data[hit]
    return out


def apply(env: Env, call: StorageCall, *arrays: np.ndarray) -> np.ndarray:
    """The operator's dense kernel over same-shaped arrays (stored values side by side)."""
    if arrays[0].size == 0:
        return np.zeros(arrays[0].shape, arrays[0].dtype)
    return env.dense(call.op, call.raw, [np.ascontiguousarray(x) for x in arrays])[0]


# ---------------------------------------------------------------------------------------------
# Generic storage kernels


def map_values(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """f over the stored values only (f(0) == 0): the operator's dense kernel on ``data``. The
    result shares the input's index arrays; a target of the same storage type receives the
    values in its own buffer when that has the right size."""
    a = ins[0]
    assert isinstance(a, (Csr, Rsp))
    vals = a.data.reshape(-1)
    return [values_of_pattern(a, call, lambda out: env.dense(call.op, call.raw, [vals], out=out))]


def values_of_pattern(a: Csr | Rsp, call: StorageCall,
                      compute: Callable[[np.ndarray | None], list[np.ndarray]]) -> Csr | Rsp:
    """A result with ``a``'s pattern (index arrays shared) and the values ``compute(out)``
    gives, one per stored value of ``a``: written into the target's values where it has the
    decided type, size and dtype (``out`` is then that buffer, flat), else into a fresh array
    (``out`` None); nothing is computed for an empty pattern."""
    n = a.data.size
    t = call.target(0)
    if (isinstance(t, type(a)) and t.data.shape == a.data.shape and t.data.flags.writeable
            and t.data.flags.c_contiguous and t.data.dtype == call.out_dtypes[0]):
        if n:
            compute(t.data.reshape(-1))
        return with_data(a, t.data)
    res = compute(None)[0] if n else np.zeros(0, call.out_dtypes[0])
    return with_data(a, res.reshape(a.data.shape))


def dense_result(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """A dense result computed everywhere (e.g. csr + scalar): the dense kernel on the
    densified inputs, by design rather than by fallback (no warning)."""
    return env.dense(call.op, call.raw, [to_dense(s) for s in ins])


def zeros_of_input_stype(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """An all-zero array of the input's storage type (zeros_like on sparse input)."""
    shape, dt = call.out_shapes[0], call.out_dtypes[0]
    st = call.out_stypes[0]
    if st == C:
        return [Csr(np.zeros(0, dt), np.zeros(0, np.int64), np.zeros(shape[0] + 1, np.int64),
                    shape)]
    if st == R:
        return [Rsp(np.zeros((0, *shape[1:]), dt), np.zeros(0, np.int64), shape)]
    return [np.zeros(shape, dt)]


def backward_sparse_grad(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """An elementwise backward operator whose gradient is 0 wherever the output gradient is:
    on the output gradient's stored coordinates only, with x (and y) read there (0 where they
    store nothing), by the operator's own dense kernel."""
    g = ins[0]
    assert isinstance(g, (Csr, Rsp))
    cols: list[np.ndarray] = [g.data.reshape(-1)]
    for a in ins[1:]:
        if isinstance(g, Csr):
            assert isinstance(a, Csr)
            r, c = coords(g)
            cols.append(gather_csr(a, r, c))
        else:
            assert isinstance(a, Rsp)
            cols.append(rows_of(a, g.indices).reshape(-1))
    vals = apply(env, call, *cols).reshape(g.data.shape)
    return [with_data(g, vals)]


def copy_storage(s: Storage) -> Storage:
    """A copy with its own buffers."""
    if isinstance(s, Csr):
        return Csr(s.data.copy(), s.indices.copy(), s.indptr.copy(), s.shape)
    if isinstance(s, Rsp):
        return Rsp(s.data.copy(), s.indices.copy(), s.shape)
    return np.array(s, copy=True)
