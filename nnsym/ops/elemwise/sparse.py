"""Storage kernels of the elementwise family: binary operators on csr / row_sparse operands
(merges over the union or intersection of the stored coordinates, or the sparse operand's
pattern against a dense one) and add_n over row_sparse arrays. The C kernels of
``ops.common.sparse`` run where they serve the dtype; otherwise the operator's own dense kernel
runs over the stored values laid side by side, with the index work in numpy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.ir.storage import Csr, Env, Rsp, Storage, StorageCall, StorageKernel
from nnsym.ops.common import sparse as kernels
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
            return kernels.rsp_dense_result(expr, (a.data, a.indices), (b.data, b.indices),
                                            shape)
        v, ix = kernels.rsp_binary(expr, kind, (a.data, a.indices), (b.data, b.indices), shape)
        return Rsp(v, ix, shape)
    if isinstance(a, Csr) and isinstance(b, Csr):
        v, ix, ip = kernels.csr_binary(expr, kind, (a.data, a.indices, a.indptr),
                                       (b.data, b.indices, b.indptr), shape)
        return Csr(v, ix, ip, shape)
    lhs = isinstance(a, (Csr, Rsp))
    s, d = (a, b) if lhs else (b, a)
    dd = np.ascontiguousarray(d)
    r: Any
    if isinstance(s, Rsp):
        r = kernels.rsp_dense_binary(expr, (s.data, s.indices), dd, lhs, shape,
                                     "dense" if out == D else "row_sparse")
        return r if out == D else Rsp(r[0], r[1], shape)
    assert isinstance(s, Csr)
    r = kernels.csr_dense_binary(expr, (s.data, s.indices, s.indptr), dd, lhs, shape,
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
