"""Elementwise kernels, storage casts and reductions for csr and row_sparse arrays.

Storage (raw numpy, canonical):

* csr of shape (rows, cols): ``(data, indices, indptr)``; data (nnz,) of the dtype, indices
  (nnz,) int64 column ids strictly increasing within a row, indptr (rows + 1,) int64 from 0 to
  nnz.
* row_sparse of shape (rows, *row_shape): ``(data, indices)``; data (k, *row_shape) C-contiguous,
  indices (k,) int64 strictly increasing row ids.

The loops are C (``cast_storage.c.j2``, ``reduce_sparse.c.j2``, compiled per dtype; the
elementwise merges, per dtype and expression, are in ``ops/elemwise/sparse.py``); Python
only checks arguments, allocates and calls. Outputs whose size depends on the data are built in
three steps: a C count pass, a numpy allocation, a C fill pass. Nothing allocates rows * cols
unless the result is dense, and every size is int64, so logical shapes beyond 2**31 elements
work. Kernels with more than ~64k elements of work split pure per-row work over the worker pool;
each output element is computed by one thread in a fixed order, so results do not depend on the
thread count.

Dtypes: float16 (stored as _Float16, computed in float), float32, float64, int32, int64; all
outputs keep the input dtype. Sums (``csr_sum``, ``rsp_square_sum``) accumulate in float64 for
the floating dtypes and in int64 for the integer ones, then round to the dtype once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nnsym.ir import native
from nnsym.ir.spec import comptype

Array = npt.NDArray[Any]
Csr = tuple[Array, Array, Array]
Rsp = tuple[Array, Array]

DTYPES = ("float16", "float32", "float64", "int32", "int64")
KINDS = ("union", "intersection")
_CAST_CDEF = """
int64_t nse_dense_csr_count(const void *dense, int64_t rows, int64_t cols, void *indptr);
void nse_dense_csr_fill(const void *dense, int64_t rows, int64_t cols, void *indptr,
                        void *data, void *indices);
int64_t nse_dense_rsp_rows(const void *dense, int64_t rows, int64_t width, void *idx);
void nse_gather_rows(const void *src, const void *src_idx, int64_t k_src, const void *out_idx,
                     int64_t k_out, int64_t width, void *out);
void nse_csr_dense(const void *data, const void *indices, const void *indptr, int64_t rows,
                   int64_t cols, void *out);
void nse_rsp_dense(const void *data, const void *indices, int64_t k, int64_t rows,
                   int64_t width, void *out);
int64_t nse_retain_count(const void *indices, int64_t k, void *keep, int64_t m);
void nse_retain_fill(const void *indices, int64_t k, const void *keep, int64_t m,
                     void *out_idx);
"""
_REDUCE_CDEF = """
void nse_csr_sum_rows(const void *data, const void *indptr, int64_t rows, void *out);
void nse_csr_sum_cols(const void *data, const void *indices, int64_t nnz, int64_t cols,
                      void *acc, void *out);
void nse_rsp_sqsum_rows(const void *data, const void *indices, int64_t k, int64_t width,
                        void *out);
void nse_rsp_sqsum_cols(const void *data, int64_t k, int64_t width, void *out);
int64_t nse_addn_merge(const void *idx_ptrs, const void *lens, int64_t n, void *cur,
                       void *out_idx);
void nse_addn_fill(const void *idx_ptrs, const void *data_ptrs, const void *lens, int64_t n,
                   int64_t width, const void *out_idx, int64_t ko, void *out_data);
"""


# ---- libraries and argument helpers ----

def _dtype_name(dt: Any) -> str:
    name: str = np.dtype(dt).name
    if name not in DTYPES:
        raise TypeError(f"sparse kernels support {', '.join(DTYPES)}, not {name}")
    return name


def _cast_lib(dt: Any) -> Any:
    name = _dtype_name(dt)
    return native.loader().library("common/cast_storage.c.j2", _CAST_CDEF, dtype=name,
                                   comp=comptype(name))


def _reduce_lib(dt: Any) -> Any:
    name = _dtype_name(dt)
    acc = "double" if np.dtype(name).kind == "f" else "int64_t"
    return native.loader().library("common/reduce_sparse.c.j2", _REDUCE_CDEF, dtype=name,
                                   comp=comptype(name), acc=acc)


def _p(a: Array) -> Any:
    return native.loader().ptr(a)


def _null() -> Any:
    return native.loader().NULL


def _idx(a: Any) -> Array:
    return np.ascontiguousarray(a, dtype=np.int64)


def _arr(a: Any) -> Array:
    out = np.ascontiguousarray(a)
    _dtype_name(out.dtype)
    return out


def _shape(shape: Sequence[int], ndim: int | None = None) -> tuple[int, ...]:
    s = tuple(int(d) for d in shape)
    if (ndim is not None and len(s) != ndim) or len(s) < 1 or min(s) < 0:
        raise ValueError(f"bad shape {tuple(shape)} for this sparse kernel")
    return s


def _width(shape: tuple[int, ...]) -> int:
    return math.prod(shape[1:])


def _same_dtype(*arrays: Array) -> np.dtype[Any]:
    dts = {a.dtype for a in arrays}
    if len(dts) != 1:
        raise TypeError(f"operands have different dtypes: {sorted(str(d) for d in dts)}")
    return arrays[0].dtype


def _kind(kind: str) -> int:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    return int(kind == "intersection")


def _csr(a: Csr) -> Csr:
    return _arr(a[0]), _idx(a[1]), _idx(a[2])


def _rsp(a: Rsp) -> Rsp:
    return _arr(a[0]), _idx(a[1])


def _dense_out(out: Array | None, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    if out is None:
        return np.empty(shape, dtype=dtype)
    if (not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != dtype
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ValueError(f"out must be a writeable C-contiguous {dtype} array of shape {shape}")
    return out


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} out of range for {ndim} dimensions")
    return axis % ndim


# ---- structure checks ----

# C templates with no CUDA twin: host-side checks run before data reaches any kernel; the
# value-shaped operators' kernels (ops/dynamic) count on the host what sizes their outputs.
HOST_ONLY_TEMPLATES = ("common/check_sparse.c.j2", "dynamic/boolean_mask.c.j2",
                       "dynamic/dgl_graph.c.j2")
_CHECK_CDEF = """
int64_t nse_check_csr(const int64_t *indptr, const int64_t *indices, int64_t rows, int64_t cols,
                      int64_t nnz, int64_t nparts, int64_t *scratch, int64_t *pos);
int64_t nse_check_rsp(const int64_t *indices, int64_t k, int64_t rows, int64_t *pos);
"""
# Entries per part of the parallel csr check at least.
CHECK_PART_NNZ = 1 << 16


def _check_lib() -> Any:
    return native.loader().library("common/check_sparse.c.j2", _CHECK_CDEF)


def _problem(code: int, pos: int, indptr: Array | None, indices: Array, rows: int,
             cols: int, nnz: int) -> str | None:
    if code == 0:
        return None
    if code == 1:
        return f"indptr[0] is {int(indptr[0])}, expected 0"  # type: ignore[index]
    if code == 2:
        return (f"indptr decreases at position {pos}: {int(indptr[pos - 1])} "  # type: ignore
                f"then {int(indptr[pos])}")  # type: ignore[index]
    if code == 3:
        return f"indptr[{rows}] (the last) is {int(indptr[rows])}, expected nnz = {nnz}"  # type: ignore
    if code == 4:
        return (f"column index {int(indices[pos])} at position {pos} is out of range for "
                f"{cols} columns")
    if code == 5:
        return (f"column indices are not strictly increasing within a row at position {pos} "
                f"({int(indices[pos - 1])} then {int(indices[pos])})")
    if code == 6:
        return f"row id {int(indices[pos])} at position {pos} is out of range for {rows} rows"
    return (f"row ids are not strictly increasing at position {pos} "
            f"({int(indices[pos - 1])} then {int(indices[pos])})")


def _np_check_csr(indptr: Array, indices: Array, rows: int, cols: int) -> tuple[int, int]:
    nnz = indices.size
    if indptr[0] != 0:
        return 1, 0
    d = np.diff(indptr)
    if (d < 0).any():
        return 2, int(np.flatnonzero(d < 0)[0]) + 1
    if indptr[-1] != nnz:
        return 3, rows
    bad = (indices < 0) | (indices >= cols)
    same_row = np.ones(max(nnz - 1, 0), bool)
    starts = indptr[1:-1]
    same_row[starts[(starts > 0) & (starts < nnz)] - 1] = False
    order = np.zeros(nnz, bool)
    order[1:] = same_row & (indices[1:] <= indices[:-1])
    first = [int(np.flatnonzero(m)[0]) if m.any() else nnz for m in (bad, order)]
    if min(first) == nnz:
        return 0, 0
    return (4, first[0]) if first[0] <= first[1] else (5, first[1])


def csr_problem(indptr: Array, indices: Array, shape: Sequence[int]) -> str | None:
    """None when ``(indices, indptr)`` is the canonical structure of a csr of ``shape``
    (lengths, indptr from 0 to nnz and monotone, column ids strictly increasing within each row
    and in range); otherwise what is wrong, naming the first offending position and value.
    One O(rows + nnz) pass in C over any content (never an out-of-bounds access)."""
    rows, cols = (int(d) for d in shape)
    if not (isinstance(indptr, np.ndarray) and isinstance(indices, np.ndarray)) or \
            indptr.dtype != np.int64 or indices.dtype != np.int64:
        return "index arrays must be int64 numpy arrays"
    if indptr.shape != (rows + 1,):
        return f"indptr has shape {indptr.shape}, expected ({rows + 1},) for {rows} rows"
    if indices.ndim != 1:
        return f"indices must be 1-D, not of shape {indices.shape}"
    ip, ix = np.ascontiguousarray(indptr), np.ascontiguousarray(indices)
    nnz = ix.size
    if not native.loader().available():
        code, pos = _np_check_csr(ip, ix, rows, cols)
        return _problem(code, pos, ip, ix, rows, cols, nnz)
    nparts = max(1, min(native.loader().num_threads(), nnz // CHECK_PART_NNZ))
    scratch = np.empty(2 * nparts, np.int64)
    at = np.zeros(1, np.int64)
    code = int(_check_lib().nse_check_csr(_p(ip), _p(ix), rows, cols, nnz, nparts, _p(scratch),
                                          _p(at)))
    return _problem(code, int(at[0]), ip, ix, rows, cols, nnz)


def rsp_problem(indices: Array, rows: int) -> str | None:
    """None when row ids ``indices`` are strictly increasing in [0, rows); otherwise what is
    wrong, naming the first offending position and value (one pass in C)."""
    if not isinstance(indices, np.ndarray) or indices.dtype != np.int64:
        return "row ids must be an int64 numpy array"
    if indices.ndim != 1:
        return f"row ids must be 1-D, not of shape {indices.shape}"
    ix = np.ascontiguousarray(indices)
    if not native.loader().available():
        bad = (ix < 0) | (ix >= rows)
        order = np.zeros(ix.size, bool)
        order[1:] = ix[1:] <= ix[:-1]
        first = [int(np.flatnonzero(m)[0]) if m.any() else ix.size for m in (bad, order)]
        if min(first) == ix.size:
            return None
        code, pos = (6, first[0]) if first[0] <= first[1] else (7, first[1])
        return _problem(code, pos, None, ix, rows, 0, ix.size)
    at = np.zeros(1, np.int64)
    code = int(_check_lib().nse_check_rsp(_p(ix), ix.size, int(rows), _p(at)))
    return _problem(code, int(at[0]), None, ix, int(rows), 0, ix.size)


# ---- storage casts ----

def cast_dense_to_csr(dense: Array) -> Csr:
    """The csr of a 2-D dense array: its entries != 0 (NaN counts as non-zero)."""
    d = _arr(dense)
    if d.ndim != 2:
        raise ValueError(f"csr needs a 2-D array, not {d.ndim}-D")
    rows, cols = d.shape
    lib = _cast_lib(d.dtype)
    indptr = np.empty(rows + 1, dtype=np.int64)
    nnz = int(lib.nse_dense_csr_count(_p(d), rows, cols, _p(indptr)))
    data = np.empty(nnz, dtype=d.dtype)
    indices = np.empty(nnz, dtype=np.int64)
    lib.nse_dense_csr_fill(_p(d), rows, cols, _p(indptr), _p(data), _p(indices))
    return data, indices, indptr


def cast_dense_to_rsp(dense: Array) -> Rsp:
    """The row_sparse of a dense array (at least 1-D): the rows with any element != 0."""
    d = _arr(dense)
    if d.ndim < 1:
        raise ValueError("row_sparse needs at least one dimension")
    rows, width = d.shape[0], _width(d.shape)
    lib = _cast_lib(d.dtype)
    scratch = np.empty(rows, dtype=np.int64)
    k = int(lib.nse_dense_rsp_rows(_p(d), rows, width, _p(scratch)))
    indices = scratch[:k].copy()
    data = np.empty((k, *d.shape[1:]), dtype=d.dtype)
    lib.nse_gather_rows(_p(d), _null(), rows, _p(indices), k, width, _p(data))
    return data, indices


def csr_to_dense(data: Array, indices: Array, indptr: Array, shape: Sequence[int],
                 out: Array | None = None) -> Array:
    """The dense array of a csr (written into ``out`` when given, which is zero-filled first)."""
    s = _shape(shape, 2)
    d, ix, ip = _csr((data, indices, indptr))
    res = _dense_out(out, s, d.dtype)
    _cast_lib(d.dtype).nse_csr_dense(_p(d), _p(ix), _p(ip), s[0], s[1], _p(res))
    return res


def rsp_to_dense(data: Array, indices: Array, shape: Sequence[int],
                 out: Array | None = None) -> Array:
    """The dense array of a row_sparse (written into ``out`` when given)."""
    s = _shape(shape)
    d, ix = _rsp((data, indices))
    res = _dense_out(out, s, d.dtype)
    _cast_lib(d.dtype).nse_rsp_dense(_p(d), _p(ix), len(ix), s[0], _width(s), _p(res))
    return res


def rsp_retain(data: Array, indices: Array, keep: Any, shape: Sequence[int]) -> Rsp:
    """The rows of a row_sparse whose id is in ``keep`` (int ids in any order; duplicates and
    ids without a stored row are allowed). The result is canonical (sorted, unique)."""
    s = _shape(shape)
    d, ix = _rsp((data, indices))
    scratch = np.array(keep, dtype=np.int64).ravel()  # a copy: sorted in place by the kernel
    lib = _cast_lib(d.dtype)
    n = int(lib.nse_retain_count(_p(ix), len(ix), _p(scratch), len(scratch)))
    out_idx = np.empty(n, dtype=np.int64)
    lib.nse_retain_fill(_p(ix), len(ix), _p(scratch), len(scratch), _p(out_idx))
    out = np.empty((n, *s[1:]), dtype=d.dtype)
    lib.nse_gather_rows(_p(d), _p(ix), len(ix), _p(out_idx), n, _width(s), _p(out))
    return out, out_idx


# ---- binary elementwise ----

def rsp_square_sum(data: Array, indices: Array, shape: Sequence[int], axis: int,
                   keepdims: bool) -> tuple[str, Any]:
    """Sum of squares of a 2-D row_sparse along ``axis``. axis 1 with keepdims: ("row_sparse",
    (data (k, 1), indices)); axis 1 without: ("default", (rows,) dense, 0 for absent rows);
    axis 0: ("default", (cols,) dense, or (1, cols) with keepdims)."""
    s = _shape(shape, 2)
    ax = _axis(axis, 2)
    d, ix = _rsp((data, indices))
    lib = _reduce_lib(d.dtype)
    k = len(ix)
    if ax == 1 and keepdims:
        out = np.empty((k, 1), dtype=d.dtype)
        lib.nse_rsp_sqsum_rows(_p(d), _null(), k, s[1], _p(out))
        return "row_sparse", (out, ix.copy())
    if ax == 1:
        dense = np.zeros(s[0], dtype=d.dtype)
        lib.nse_rsp_sqsum_rows(_p(d), _p(ix), k, s[1], _p(dense))
        return "default", dense
    dense = np.empty((1, s[1]) if keepdims else (s[1],), dtype=d.dtype)
    lib.nse_rsp_sqsum_cols(_p(d), k, s[1], _p(dense))
    return "default", dense


def csr_sum(data: Array, indices: Array, indptr: Array, shape: Sequence[int], axis: int,
            keepdims: bool) -> Array:
    """Sum of a csr along ``axis`` as a dense array: axis 0 the column sums (cols,), axis 1 the
    row sums (rows,); keepdims keeps the reduced axis with length 1."""
    rows, cols = _shape(shape, 2)
    ax = _axis(axis, 2)
    d, ix, ip = _csr((data, indices, indptr))
    lib = _reduce_lib(d.dtype)
    if ax == 1:
        out = np.empty((rows, 1) if keepdims else (rows,), dtype=d.dtype)
        lib.nse_csr_sum_rows(_p(d), _p(ip), rows, _p(out))
        return out
    out = np.empty((1, cols) if keepdims else (cols,), dtype=d.dtype)
    acc = np.empty(cols, dtype=np.float64 if d.dtype.kind == "f" else np.int64)
    lib.nse_csr_sum_cols(_p(d), _p(ix), len(d), cols, _p(acc), _p(out))
    return out


def add_n_rsp(arrays: Sequence[Rsp], shape: Sequence[int]) -> Rsp:
    """The sum of row_sparse arrays of ``shape``: the union of their rows, each the sum of the
    inputs' rows with that id, added in input order."""
    s = _shape(shape)
    if not arrays:
        raise ValueError("add_n_rsp needs at least one array")
    ins = [_rsp(a) for a in arrays]
    dt = _same_dtype(*(d for d, _ in ins))
    lib = _reduce_lib(dt)
    n = len(ins)
    idx_ptrs = np.array([ix.ctypes.data for _, ix in ins], dtype=np.uintp)
    data_ptrs = np.array([d.ctypes.data for d, _ in ins], dtype=np.uintp)
    lens = np.array([len(ix) for _, ix in ins], dtype=np.int64)
    cur = np.empty(n, dtype=np.int64)
    k = int(lib.nse_addn_merge(_p(idx_ptrs), _p(lens), n, _p(cur), _null()))
    indices = np.empty(k, dtype=np.int64)
    lib.nse_addn_merge(_p(idx_ptrs), _p(lens), n, _p(cur), _p(indices))
    data = np.empty((k, *s[1:]), dtype=dt)
    lib.nse_addn_fill(_p(idx_ptrs), _p(data_ptrs), _p(lens), n, _width(s), _p(indices), k,
                      _p(data))
    return data, indices


def serves(dtype: Any) -> bool:
    """Whether these kernels run arrays of ``dtype`` here (a native loader is active and the
    dtype is one of ``DTYPES``); otherwise callers take their numpy path."""
    return native.loader().available() and np.dtype(dtype).name in DTYPES
