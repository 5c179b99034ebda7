"""Storage kernels of the elementwise family: binary operators on csr / row_sparse operands
(merges over the union or intersection of the stored coordinates, or the sparse operand's
pattern against a dense one) and add_n over row_sparse arrays. The C kernels of
``ops.common.sparse`` run where they serve the dtype; otherwise the operator's own dense kernel
runs over the stored values laid side by side, with the index work in numpy."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.ir import native
from nnsym.ir.spec import comptype
from nnsym.ir.storage import Csr, Env, Rsp, Storage, StorageCall, StorageKernel
from nnsym.ops.common import sparse as kernels
from nnsym.ops.common.sparse import (
    Array,
    _arr,
    _csr,
    _dtype_name,
    _kind,
    _p,
    _rsp,
    _same_dtype,
    _shape,
    _width,
)
from nnsym.ops.common.sparse import Csr as CsrT
from nnsym.ops.common.sparse import Rsp as RspT
from nnsym.ops.common.storage import apply, coords, gather_csr, rows_of, to_dense
from nnsym.types import SType

D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR
UNION_OPS = ("elemwise_add", "elemwise_sub")


def binary_storage_kernel(expr_of: Callable[[Any, np.dtype], str]) -> StorageKernel:
    """The storage kernel of the same-shape binary operators; ``expr_of(op, dtype)`` gives the
    operator's scalar expression for the C merges (integer division guarded as in the dense
    kernels)."""

    def binary(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
        a, b = ins
        out = call.out_stypes[0]
        if a.dtype == b.dtype and kernels.serves(a.dtype):
            res = _merge(expr_of(call.op, np.dtype(a.dtype)), call.op.name, a, b, out)
            if res is not None:
                return [res]
        return [_binary_numpy(env, call, a, b, out)]

    return binary


def _binary_numpy(env: Env, call: StorageCall, a: Storage, b: Storage, out: SType) -> Storage:
    if out == D:
        return apply(env, call, to_dense(a), to_dense(b))
    union = call.op.name in UNION_OPS
    if isinstance(a, Rsp) and isinstance(b, Rsp):
        ids = (np.union1d if union else np.intersect1d)(a.indices, b.indices).astype(np.int64)
        return Rsp(apply(env, call, rows_of(a, ids), rows_of(b, ids)), ids, a.shape)
    if out == R:  # row_sparse * dense (either side): the sparse operand's rows
        s, d = (a, b) if isinstance(a, Rsp) else (b, a)
        assert isinstance(s, Rsp) and isinstance(d, np.ndarray)
        rows = np.ascontiguousarray(d[s.indices])
        vals = apply(env, call, *((s.data, rows) if s is a else (rows, s.data)))
        return Rsp(vals, s.indices.copy(), s.shape)
    if isinstance(a, Csr) and isinstance(b, Csr):
        # every coordinate in the union/intersection, explicit zeros included
        r, c = _structure(a, b, union)
        vals = apply(env, call, gather_csr(a, r, c), gather_csr(b, r, c))
        indptr = np.zeros(a.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(r, minlength=a.shape[0]), out=indptr[1:])
        return Csr(vals, c, indptr, a.shape)
    # csr * dense (either side): the csr's pattern
    s, d = (a, b) if isinstance(a, Csr) else (b, a)
    assert isinstance(s, Csr) and isinstance(d, np.ndarray)
    rows = np.repeat(np.arange(s.shape[0], dtype=np.int64), np.diff(s.indptr))
    dv = np.ascontiguousarray(d[rows, s.indices])
    vals = apply(env, call, *((s.data, dv) if s is a else (dv, s.data)))
    return Csr(vals, s.indices.copy(), s.indptr.copy(), s.shape)


def _merge(expr: str, name: str, a: Storage, b: Storage, out: SType) -> Storage | None:
    """A merge by the generated C kernels, computing the operator's scalar expression; None
    for the one case they leave to numpy (integer row_sparse / row_sparse, dense result)."""
    kind = "union" if name in UNION_OPS else "intersection"
    shape = tuple(a.shape)
    if isinstance(a, Rsp) and isinstance(b, Rsp):
        if out == D:  # division: computed at every element, IEEE results where both are 0
            if np.dtype(a.dtype).kind != "f":
                return None
            return rsp_dense_result(expr, (a.data, a.indices), (b.data, b.indices),
                                            shape)
        v, ix = rsp_binary(expr, kind, (a.data, a.indices), (b.data, b.indices), shape)
        return Rsp(v, ix, shape)
    if isinstance(a, Csr) and isinstance(b, Csr):
        v, ix, ip = csr_binary(expr, kind, (a.data, a.indices, a.indptr),
                                       (b.data, b.indices, b.indptr), shape)
        return Csr(v, ix, ip, shape)
    lhs = isinstance(a, (Csr, Rsp))
    s, d = (a, b) if lhs else (b, a)
    dd = np.ascontiguousarray(d)
    r: Any
    if isinstance(s, Rsp):
        r = rsp_dense_binary(expr, (s.data, s.indices), dd, lhs, shape,
                                     "dense" if out == D else "row_sparse")
        return r if out == D else Rsp(r[0], r[1], shape)
    assert isinstance(s, Csr)
    r = csr_dense_binary(expr, (s.data, s.indices, s.indptr), dd, lhs, shape,
                                 "dense" if out == D else "csr")
    return r if out == D else Csr(r[0], r[1], r[2], shape)


def _structure(a: Csr, b: Csr, union: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sorted coordinates of the union (or intersection) of two csr patterns."""
    ra, ca = coords(a)
    rb, cb = coords(b)
    cols = np.int64(a.shape[1])
    ka, kb = ra * cols + ca, rb * cols + cb  # row-major keys (fit int64 up to ~9e18 elements)
    keys = np.union1d(ka, kb) if union else np.intersect1d(ka, kb)
    keys = keys.astype(np.int64)
    return keys // cols, keys % cols


def add_n_rsp(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """add_n with row_sparse operands (dense ones, if any, ignored by the rule's signature):
    the union of the stored rows, summed."""
    arrs = [a for a in ins if isinstance(a, Rsp)]
    dt = call.out_dtypes[0]
    shape = tuple(arrs[0].shape)
    if kernels.serves(arrs[0].dtype) and all(np.dtype(a.dtype) == dt for a in arrs):
        v, ix = kernels.add_n_rsp([(a.data, a.indices) for a in arrs], shape)
        return [Rsp(v, ix, shape)]
    ids = np.unique(np.concatenate([a.indices for a in arrs])).astype(np.int64)
    vals = np.zeros((ids.size, *shape[1:]), dt)
    for a in arrs:
        vals[np.searchsorted(ids, a.indices)] += a.data
    return [Rsp(vals, ids, shape)]


# ---------------------------------------------------------------------------------------------
# The C merge kernels (elemwise_sparse.c.j2, per dtype and expression)

_EXPR = re.compile(r"^[A-Za-z0-9_ .,*+\-/%()<>=!?:&|~^]*$")

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
def _elem_lib(dt: Any, expr: str) -> Any:
    name = _dtype_name(dt)
    if not _EXPR.match(expr) or "/*" in expr or "//" in expr:
        raise ValueError(f"not a scalar expression in a and b: {expr!r}")
    return native.loader().library("elemwise/elemwise_sparse.c.j2", _ELEM_CDEF, dtype=name,
                                   comp=comptype(name), expr=expr)


def csr_binary(expr: str, kind: str, a: CsrT, b: CsrT, shape: Sequence[int]) -> CsrT:
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


def rsp_binary(expr: str, kind: str, a: RspT, b: RspT, shape: Sequence[int]) -> RspT:
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


def csr_dense_binary(expr: str, csr: CsrT, dense: Array, csr_is_lhs: bool, shape: Sequence[int],
                     out_kind: str) -> Array | CsrT:
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


def rsp_dense_binary(expr: str, rsp: RspT, dense: Array, rsp_is_lhs: bool, shape: Sequence[int],
                     out_kind: str) -> Array | RspT:
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


def rsp_dense_result(expr: str, a: RspT, b: RspT, shape: Sequence[int]) -> Array:
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
