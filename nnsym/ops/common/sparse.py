"""Elementwise kernels, storage casts and reductions for csr and row_sparse arrays.

Storage (raw numpy, canonical):

* csr of shape (rows, cols): ``(data, indices, indptr)``; data (nnz,) of the dtype, indices
  (nnz,) int64 column ids strictly increasing within a row, indptr (rows + 1,) int64 from 0 to
  nnz.
* row_sparse of shape (rows, *row_shape): ``(data, indices)``; data (k, *row_shape) C-contiguous,
  indices (k,) int64 strictly increasing row ids.

The loops are C (``templates/elemwise_sparse.c.j2``, ``cast_storage.c.j2``,
``reduce_sparse.c.j2``, compiled per dtype, and per expression for the binary kernels); Python
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
import re
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
_EXPR = re.compile(r"^[A-Za-z0-9_ .,*+\-/%()<>=!?:&|~^]*$")

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
_ELEM_CDEF = """
int64_t nse_csr_bin_count(const void *ai, const void *ap, const void *bi, const void *bp,
                          int64_t rows, int64_t inter, void *out_indptr);
void nse_csr_bin_fill(const void *ad, const void *ai, const void *ap, const void *bd,
                      const void *bi, const void *bp, int64_t rows, int64_t inter,
                      const void *out_indptr, void *out_data, void *out_indices);
int64_t nse_rsp_bin_count(const void *a_idx, int64_t ka, const void *b_idx, int64_t kb,
                          int64_t inter);
void nse_rsp_bin_fill(const void *ad, const void *a_idx, int64_t ka, const void *bd,
                      const void *b_idx, int64_t kb, int64_t inter, int64_t width,
                      void *out_idx, int64_t ko, void *out_data);
void nse_rsp_rsp_dense(const void *ad, const void *a_idx, int64_t ka, const void *bd,
                       const void *b_idx, int64_t kb, int64_t rows, int64_t width, void *out);
void nse_rsp_dns_dense(const void *data, const void *idx, int64_t k, const void *dense,
                       int64_t rows, int64_t width, int64_t lhs, void *out);
void nse_rsp_dns_rsp(const void *data, const void *idx, int64_t k, const void *dense,
                     int64_t width, int64_t lhs, void *out_data);
void nse_csr_dns_dense(const void *data, const void *indices, const void *indptr,
                       const void *dense, int64_t rows, int64_t cols, int64_t lhs, void *out);
void nse_csr_dns_csr(const void *data, const void *indices, const void *indptr,
                     const void *dense, int64_t rows, int64_t cols, int64_t lhs,
                     void *out_data);
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


def _elem_lib(dt: Any, expr: str) -> Any:
    name = _dtype_name(dt)
    if not _EXPR.match(expr) or "/*" in expr or "//" in expr:
        raise ValueError(f"not a scalar expression in a and b: {expr!r}")
    return native.loader().library("common/elemwise_sparse.c.j2", _ELEM_CDEF, dtype=name,
                                   comp=comptype(name), expr=expr)


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

def csr_binary(expr: str, kind: str, a: Csr, b: Csr, shape: Sequence[int]) -> Csr:
    """``expr`` (a C expression in ``a`` and ``b``) of two csr arrays of ``shape``. kind
    "union": the union of the patterns, a missing side taken as 0 (add, sub); "intersection":
    the coordinates present in both (mul). Entries computing to 0 are kept."""
    rows = _shape(shape, 2)[0]
    inter = _kind(kind)
    ad, ai, ap = _csr(a)
    bd, bi, bp = _csr(b)
    lib = _elem_lib(_same_dtype(ad, bd), expr)
    indptr = np.empty(rows + 1, dtype=np.int64)
    nnz = int(lib.nse_csr_bin_count(_p(ai), _p(ap), _p(bi), _p(bp), rows, inter, _p(indptr)))
    data = np.empty(nnz, dtype=ad.dtype)
    indices = np.empty(nnz, dtype=np.int64)
    lib.nse_csr_bin_fill(_p(ad), _p(ai), _p(ap), _p(bd), _p(bi), _p(bp), rows, inter,
                         _p(indptr), _p(data), _p(indices))
    return data, indices, indptr


def rsp_binary(expr: str, kind: str, a: Rsp, b: Rsp, shape: Sequence[int]) -> Rsp:
    """``expr`` of two row_sparse arrays of ``shape``, on the union or intersection of their
    rows (each row computed elementwise, a missing row taken as 0)."""
    s = _shape(shape)
    inter = _kind(kind)
    ad, ai = _rsp(a)
    bd, bi = _rsp(b)
    lib = _elem_lib(_same_dtype(ad, bd), expr)
    k = int(lib.nse_rsp_bin_count(_p(ai), len(ai), _p(bi), len(bi), inter))
    indices = np.empty(k, dtype=np.int64)
    data = np.empty((k, *s[1:]), dtype=ad.dtype)
    lib.nse_rsp_bin_fill(_p(ad), _p(ai), len(ai), _p(bd), _p(bi), len(bi), inter, _width(s),
                         _p(indices), k, _p(data))
    return data, indices


def csr_dense_binary(expr: str, csr: Csr, dense: Array, csr_is_lhs: bool, shape: Sequence[int],
                     out_kind: str) -> Array | Csr:
    """``expr`` of a csr and a dense array of ``shape`` (the csr is ``a`` when csr_is_lhs).
    out_kind "dense": a dense array, the csr side 0 where it has no entry (add, sub); "csr":
    the csr's own pattern (a new ``(data, indices, indptr)``; mul)."""
    s = _shape(shape, 2)
    d, ix, ip = _csr(csr)
    dn = _arr(dense)
    lib = _elem_lib(_same_dtype(d, dn), expr)
    if dn.shape != s:
        raise ValueError(f"dense operand has shape {dn.shape}, not {s}")
    lhs = int(bool(csr_is_lhs))
    if out_kind == "dense":
        out = np.empty(s, dtype=d.dtype)
        lib.nse_csr_dns_dense(_p(d), _p(ix), _p(ip), _p(dn), s[0], s[1], lhs, _p(out))
        return out
    if out_kind == "csr":
        data = np.empty_like(d)
        lib.nse_csr_dns_csr(_p(d), _p(ix), _p(ip), _p(dn), s[0], s[1], lhs, _p(data))
        return data, ix.copy(), ip.copy()
    raise ValueError(f"out_kind must be 'dense' or 'csr', not {out_kind!r}")


def rsp_dense_binary(expr: str, rsp: Rsp, dense: Array, rsp_is_lhs: bool, shape: Sequence[int],
                     out_kind: str) -> Array | Rsp:
    """``expr`` of a row_sparse and a dense array of ``shape`` (the row_sparse is ``a`` when
    rsp_is_lhs). out_kind "dense": a dense array, absent rows taken as 0; "row_sparse": on the
    row_sparse's own rows (a new ``(data, indices)``)."""
    s = _shape(shape)
    d, ix = _rsp(rsp)
    dn = _arr(dense)
    lib = _elem_lib(_same_dtype(d, dn), expr)
    if dn.shape != s:
        raise ValueError(f"dense operand has shape {dn.shape}, not {s}")
    lhs, width = int(bool(rsp_is_lhs)), _width(s)
    if out_kind == "dense":
        out = np.empty(s, dtype=d.dtype)
        lib.nse_rsp_dns_dense(_p(d), _p(ix), len(ix), _p(dn), s[0], width, lhs, _p(out))
        return out
    if out_kind == "row_sparse":
        data = np.empty((len(ix), *s[1:]), dtype=d.dtype)
        lib.nse_rsp_dns_rsp(_p(d), _p(ix), len(ix), _p(dn), width, lhs, _p(data))
        return data, ix.copy()
    raise ValueError(f"out_kind must be 'dense' or 'row_sparse', not {out_kind!r}")


def rsp_dense_result(expr: str, a: Rsp, b: Rsp, shape: Sequence[int]) -> Array:
    """``expr`` of two row_sparse arrays computed at every element into a dense array (for
    elemwise_div: IEEE semantics, 0/0 = NaN in rows absent from both). Floating dtypes only (an
    integer division by zero would trap)."""
    s = _shape(shape)
    ad, ai = _rsp(a)
    bd, bi = _rsp(b)
    dt = _same_dtype(ad, bd)
    if dt.kind != "f":
        raise TypeError(f"rsp_dense_result needs a floating dtype, not {dt}")
    lib = _elem_lib(dt, expr)
    out = np.empty(s, dtype=dt)
    lib.nse_rsp_rsp_dense(_p(ad), _p(ai), len(ai), _p(bd), _p(bi), len(bi), s[0], _width(s),
                          _p(out))
    return out


# ---- reductions and add_n ----

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
