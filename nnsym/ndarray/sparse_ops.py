"""Running operators on sparse NDArrays: storage-type inference decides, per call, between the
dense kernel (``fcompute``), a storage-specialised implementation (``fcompute_ex``, the
``EX`` table below, named by the operators' storage-type rules) and the fallback (inputs
densified, dense kernel, outputs cast to the inferred storage types).

The storage-specialised implementations run C kernels: elementwise maps run the operator's own
dense kernel (the same scalar expression) over the stored values only; merges, products and
reductions run the kernels of ``nnsym.sparse``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.errors import ShapeError, StorageTypeError
from nnsym.ir.opdef import OpDef, get_op
from nnsym.ndarray.ndarray import NDArray, invoke
from nnsym.ndarray.sparse import (
    BaseSparseNDArray,
    CSRNDArray,
    RowSparseNDArray,
    _assign,
    cast_storage,
)
from nnsym.ops.common import sparse as sparse_kernels
from nnsym.ops.common.stype import Decision, infer_storage, on_fallback
from nnsym.ops.dot import csr as dot_kernels
from nnsym.runtime.imperative import infer_one
from nnsym.types import DispatchMode, SType

D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR


# ---------------------------------------------------------------------------------------------
# Conversions


def _kernels(dtype: Any) -> Any:
    """``nnsym.ops.common.sparse`` (generated C) where it serves this dtype, else None (the
    numpy path: other dtypes, or the numpy backend)."""
    return sparse_kernels if sparse_kernels.serves(dtype) else None


def _dot_kernels(*arrays: np.ndarray) -> Any:
    """``nnsym.ops.dot.csr`` where it serves these operands (C backend, one float dtype)."""
    return dot_kernels if dot_kernels.serves(*arrays) else None


def csr_to_dense(a: CSRNDArray) -> np.ndarray:
    k = _kernels(a._values.dtype)
    if k is not None:
        return np.asarray(k.csr_to_dense(a._values, a._indices, a._indptr, a.shape))
    out = np.zeros(a.shape, a._values.dtype)
    rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a._indptr))
    out[rows, a._indices] = a._values
    return out


def rsp_to_dense(a: RowSparseNDArray) -> np.ndarray:
    k = _kernels(a._values.dtype)
    if k is not None:
        return np.asarray(k.rsp_to_dense(a._values, a._indices, a.shape))
    out = np.zeros(a.shape, a._values.dtype)
    out[a._indices] = a._values
    return out


def _nonzero(d: np.ndarray) -> np.ndarray:
    nz: np.ndarray = np.not_equal(d, 0)
    if d.dtype.kind == "f":
        nz |= np.isnan(d)
    return nz


def dense_to(a: NDArray, stype: str) -> NDArray:
    d = np.ascontiguousarray(a._data)
    k = _kernels(d.dtype)
    if stype == "csr":
        if d.ndim != 2:
            raise StorageTypeError(f"cast_storage to csr needs a 2-D array, not shape {d.shape}")
        if k is not None:
            v, ix, ip = k.cast_dense_to_csr(d)
            return CSRNDArray(v, ix, ip, d.shape, a.context)
        r, c = np.nonzero(_nonzero(d))
        indptr = np.zeros(d.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(r, minlength=d.shape[0]), out=indptr[1:])
        return CSRNDArray(np.ascontiguousarray(d[r, c]), c.astype(np.int64), indptr, d.shape,
                          a.context)
    if d.ndim == 0:
        raise StorageTypeError("cast_storage to row_sparse needs at least one dimension")
    if k is not None:
        v, ix = k.cast_dense_to_rsp(d)
        return RowSparseNDArray(v, ix, d.shape, a.context)
    width = int(np.prod(d.shape[1:], dtype=np.int64))
    rows = np.flatnonzero(_nonzero(d).reshape(d.shape[0], width).any(axis=1)).astype(np.int64)
    return RowSparseNDArray(np.ascontiguousarray(d[rows]), rows, d.shape, a.context)


def csr_to_rsp(a: CSRNDArray) -> RowSparseNDArray:
    """Rows with a stored entry, filled from the csr (never the whole dense shape)."""
    counts = np.diff(a._indptr)
    rows = np.flatnonzero(counts).astype(np.int64)
    vals = np.zeros((rows.size, a.shape[1]), a._values.dtype)
    pos = np.repeat(np.arange(rows.size), counts[rows])
    vals[pos, a._indices] = a._values
    return RowSparseNDArray(vals, rows, a.shape, a.context)


def rsp_to_csr(a: RowSparseNDArray) -> CSRNDArray:
    if a.ndim != 2:
        raise StorageTypeError(f"cast_storage to csr needs a 2-D array, not shape {a.shape}")
    r, c = np.nonzero(_nonzero(a._values))
    rows = a._indices[r]
    indptr = np.zeros(a.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=a.shape[0]), out=indptr[1:])
    return CSRNDArray(np.ascontiguousarray(a._values[r, c]), c.astype(np.int64), indptr,
                      a.shape, a.context)


# ---------------------------------------------------------------------------------------------
# Imperative calls


def invoke_sparse(op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
                  out: Any = None) -> list[NDArray]:
    """Run ``op`` with at least one sparse input (or output target)."""
    p, _ = op.parse_params(params)
    ins = tuple(SType.parse(a.stype) for a in inputs)
    shapes = [tuple(a.shape) for a in inputs]
    dtypes = [np.dtype(a.dtype) for a in inputs]
    out_s, out_t = infer_one(op, p, shapes, dtypes, op.name.lower())
    dec = infer_storage(op, p, ins)
    targets = None if out is None else [out] if isinstance(out, NDArray) else list(out)
    if dec.dispatch == DispatchMode.FCOMPUTE_EX:
        assert dec.compute is not None
        usable = targets if targets is not None and _fits(targets, dec, out_s, out_t) else None
        res = EX[dec.compute](op, p, params, list(inputs), dec, out_s, out_t, usable)
    else:
        if dec.dispatch == DispatchMode.FALLBACK:
            on_fallback(op, params, ins, dec.outs)
        dense = [a if a.stype == "default" else NDArray(a.asnumpy(), a.context) for a in inputs]
        res = invoke(op, dense, params, storage_rules=False)
        res = [r if st == D else cast_storage(r, st.label) for r, st in zip(res, dec.outs)]
    if targets is None:
        return res
    if len(targets) != len(res):
        raise ShapeError(f"{op.name}: {len(res)} outputs but {len(targets)} given in out=")
    for t, r in zip(targets, res):
        if t.shape != r.shape:
            raise ShapeError(f"{op.name}: out= has shape {t.shape}, the result {r.shape}")
        if r is not t:
            _assign(t, r)
    return targets


def _fits(targets: list[NDArray], dec: Decision, out_s: list[Any], out_t: list[Any]) -> bool:
    """Whether out= arrays can receive an fcompute_ex result directly: one per output, each
    of the inferred storage type, shape and dtype."""
    return len(targets) == len(dec.outs) and all(
        t.stype == st.label and tuple(t.shape) == tuple(s) and np.dtype(t.dtype) == np.dtype(dt)
        for t, st, s, dt in zip(targets, dec.outs, out_s, out_t))


# An fcompute_ex implementation: (operator, parsed and raw parameters, inputs, the storage
# decision, inferred output shapes and dtypes, out= arrays that fit the decision or None) ->
# the outputs. It may write into the out= arrays and return them (then nothing is copied);
# any other result is assigned to them. In a bound graph an out= entry may be None: nothing
# reads that output, and an implementation may skip it (returning None there).
ExFn = Callable[[OpDef, Any, dict[str, Any], list[NDArray], Decision, list[Any], list[Any],
                 Any], list[NDArray]]


def _map_values(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
                out_s: list[Any], out_t: list[Any],
                targets: list[NDArray] | None = None) -> list[NDArray]:
    """f over the stored values only (f(0) == 0): the operator's dense kernel on ``data``.
    The result shares the input's index arrays (copy on write); an out= array of the same
    storage type receives the values in its own buffer when that has the right size."""
    a = ins[0]
    assert isinstance(a, BaseSparseNDArray)
    vals = NDArray(a._values.reshape(-1), a.context)
    t = targets[0] if targets else None
    if isinstance(t, BaseSparseNDArray) and t._values.shape == a._values.shape and \
            t._values.flags.writeable and t._values.flags.c_contiguous:
        if vals.size:
            invoke(op, [vals], raw, out=NDArray(t._values.reshape(-1), a.context),
                   storage_rules=False)
        if t is not a:
            aux = a._shared_aux()
            t._indices = aux[0]
            if isinstance(t, CSRNDArray):
                t._indptr = aux[1]
            t._aux_exposed = False
        return [t]
    mapped = invoke(op, [vals], raw, storage_rules=False)[0]._data if vals.size else \
        np.zeros(0, out_t[0])
    mapped = mapped.reshape(a._values.shape)
    return [a._with(mapped, *a._shared_aux())]


def _dense_result(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
                  out_s: list[Any], out_t: list[Any],
                  targets: list[NDArray] | None = None) -> list[NDArray]:
    """A dense result computed everywhere (e.g. csr + scalar): the dense kernel on the
    densified input, by design rather than by fallback (no warning)."""
    dense = [a if a.stype == "default" else NDArray(a.asnumpy(), a.context) for a in ins]
    return invoke(op, dense, raw, storage_rules=False)


def _zeros_like(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
                out_s: list[Any], out_t: list[Any],
                targets: list[NDArray] | None = None) -> list[NDArray]:
    from nnsym.ndarray.sparse import zeros

    return [zeros(ins[0].stype, ins[0].shape, ins[0].context, out_t[0])]


EX: dict[str, ExFn] = {
    "map_values": _map_values,
    "dense_result": _dense_result,
    "zeros_like": _zeros_like,
}


def register_ex(name: str) -> Callable[[ExFn], ExFn]:
    def deco(fn: ExFn) -> ExFn:
        EX[name] = fn
        return fn

    return deco


def op_call(name: str, inputs: Sequence[NDArray], **params: Any) -> NDArray:
    """``nd.<name>(*inputs, **params)`` for any storage types (one visible output)."""
    return invoke_sparse(get_op(name), inputs, params)[0]


# ---------------------------------------------------------------------------------------------
# Merges, products and reductions: the generated kernels of ``nnsym.sparse`` where they serve
# the dtype (on the C backend); otherwise the operators' own dense kernels over the stored
# values laid side by side, with the index work in vectorised numpy and scipy.sparse.


def _dense(a: NDArray) -> NDArray:
    return a if a.stype == "default" else NDArray(a.asnumpy(), a.context)


def _rows_of(a: RowSparseNDArray, ids: np.ndarray) -> np.ndarray:
    """``a``'s rows at ``ids`` (zeros where ``a`` stores none)."""
    out = np.zeros((ids.size, *a.shape[1:]), a._values.dtype)
    pos = np.searchsorted(ids, a._indices)
    hit = (pos < ids.size) & (ids[np.minimum(pos, ids.size - 1)] == a._indices) if ids.size \
        else np.zeros(a._indices.size, bool)
    out[pos[hit]] = a._values[hit]
    return out


def _apply(op: OpDef, raw: dict[str, Any], *arrays: np.ndarray) -> np.ndarray:
    if arrays[0].size == 0:
        return np.zeros(arrays[0].shape, arrays[0].dtype)
    res: np.ndarray = invoke(op, [NDArray(np.ascontiguousarray(x)) for x in arrays], raw,
                             storage_rules=False)[0]._data
    return res


@register_ex("binary")
def _binary(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
            out_s: list[Any], out_t: list[Any],
            targets: list[NDArray] | None = None) -> list[NDArray]:
    a, b = ins
    out = dec.outs[0]
    ctx = a.context
    k = _kernels(a.dtype) if a.dtype == b.dtype else None
    res = _binary_kernel(k, op, a, b, out) if k is not None else None
    if res is not None:
        return [res]
    if out == D:
        return [NDArray(_apply(op, raw, _dense(a)._data, _dense(b)._data), ctx)]
    union = op.name in ("elemwise_add", "elemwise_sub")
    if isinstance(a, RowSparseNDArray) and isinstance(b, RowSparseNDArray):
        ids = (np.union1d if union else np.intersect1d)(a._indices, b._indices).astype(np.int64)
        vals = _apply(op, raw, _rows_of(a, ids), _rows_of(b, ids))
        return [RowSparseNDArray(vals, ids, a.shape, ctx)]
    if out == R:  # row_sparse * dense (either side): the sparse operand's rows
        s, d = (a, b) if isinstance(a, RowSparseNDArray) else (b, a)
        assert isinstance(s, RowSparseNDArray)
        rows = np.ascontiguousarray(d._data[s._indices])
        vals = _apply(op, raw, *((s._values, rows) if s is a else (rows, s._values)))
        return [RowSparseNDArray(vals, s._indices.copy(), s.shape, ctx)]
    if isinstance(a, CSRNDArray) and isinstance(b, CSRNDArray):
        # every coordinate in the union/intersection, explicit zeros included
        r, c = _structure(a, b, union)
        va = _gather_csr(a, r, c)
        vb = _gather_csr(b, r, c)
        vals = _apply(op, raw, va, vb)
        indptr = np.zeros(a.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(r, minlength=a.shape[0]), out=indptr[1:])
        return [CSRNDArray(vals, c, indptr, a.shape, ctx)]
    # csr * dense (either side): the csr's pattern
    s, d = (a, b) if isinstance(a, CSRNDArray) else (b, a)
    assert isinstance(s, CSRNDArray)
    rows = np.repeat(np.arange(s.shape[0], dtype=np.int64), np.diff(s._indptr))
    dv = np.ascontiguousarray(d._data[rows, s._indices])
    vals = _apply(op, raw, *((s._values, dv) if s is a else (dv, s._values)))
    return [CSRNDArray(vals, s._indices.copy(), s._indptr.copy(), s.shape, ctx)]


def _binary_kernel(k: Any, op: OpDef, a: NDArray, b: NDArray, out: SType) -> NDArray | None:
    """A merge by the generated kernels of ``nnsym.ops.common.sparse`` (``k``), computing the
    operator's own scalar expression (integer division guarded as in the dense kernels); None
    for the one case they leave to numpy (integer row_sparse / row_sparse)."""
    from nnsym.ops.elemwise.elemwise import BINARY_BY_NAME, kernel_expr

    expr = kernel_expr(op.name, BINARY_BY_NAME[op.name].expr, np.dtype(a.dtype))
    kind = "union" if op.name in ("elemwise_add", "elemwise_sub") else "intersection"
    shape, ctx = tuple(a.shape), a.context
    if isinstance(a, RowSparseNDArray) and isinstance(b, RowSparseNDArray):
        if out == D:  # division: computed at every element, IEEE results where both are 0
            if np.dtype(a.dtype).kind != "f":
                return None
            return NDArray(k.rsp_dense_result(expr, (a._values, a._indices),
                                              (b._values, b._indices), shape), ctx)
        v, ix = k.rsp_binary(expr, kind, (a._values, a._indices), (b._values, b._indices),
                             shape)
        return RowSparseNDArray(v, ix, shape, ctx)
    if isinstance(a, CSRNDArray) and isinstance(b, CSRNDArray):
        v, ix, ip = k.csr_binary(expr, kind, (a._values, a._indices, a._indptr),
                                 (b._values, b._indices, b._indptr), shape)
        return CSRNDArray(v, ix, ip, shape, ctx)
    lhs = a.stype != "default"
    s, d = (a, b) if lhs else (b, a)
    dd = np.ascontiguousarray(d._data)
    if isinstance(s, RowSparseNDArray):
        r = k.rsp_dense_binary(expr, (s._values, s._indices), dd, lhs, shape,
                               "dense" if out == D else "row_sparse")
        return NDArray(r, ctx) if out == D else RowSparseNDArray(r[0], r[1], shape, ctx)
    assert isinstance(s, CSRNDArray)
    r = k.csr_dense_binary(expr, (s._values, s._indices, s._indptr), dd, lhs, shape,
                           "dense" if out == D else "csr")
    return NDArray(r, ctx) if out == D else CSRNDArray(r[0], r[1], r[2], shape, ctx)


def _coords(a: CSRNDArray) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a._indptr)), a._indices


def _structure(a: CSRNDArray, b: CSRNDArray, union: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sorted coordinates of the union (or intersection) of two csr patterns."""
    ra, ca = _coords(a)
    rb, cb = _coords(b)
    cols = np.int64(a.shape[1])
    ka, kb = ra * cols + ca, rb * cols + cb  # row-major keys (fit int64 up to ~9e18 elements)
    keys = np.union1d(ka, kb) if union else np.intersect1d(ka, kb)
    keys = keys.astype(np.int64)
    return keys // cols, keys % cols


def _gather_csr(a: CSRNDArray, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a``'s values at coordinates (r, c) (sorted), zeros where it stores none."""
    ra, ca = _coords(a)
    cols = np.int64(a.shape[1])
    ka = ra * cols + ca
    keys = r * cols + c
    out = np.zeros(keys.size, a._values.dtype)
    if ka.size and keys.size:
        pos = np.searchsorted(keys, ka)
        hit = (pos < keys.size) & (keys[np.minimum(pos, keys.size - 1)] == ka)
        out[pos[hit]] = a._values[hit]
    return out


@register_ex("dot")
def _dot(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
         out_s: list[Any], out_t: list[Any],
         targets: list[NDArray] | None = None) -> list[NDArray]:
    a, b = ins
    ctx = a.context
    k = _dot_kernels(a._values if isinstance(a, BaseSparseNDArray) else a._data,
                     b._values if isinstance(b, BaseSparseNDArray) else b._data)
    if k is not None:
        t = targets[0] if targets else None
        if (t is not None and type(t) is NDArray and isinstance(a, CSRNDArray)
                and not p.transpose_a and type(b) is NDArray
                and t._data.flags.c_contiguous and t._data.flags.writeable
                and not np.may_share_memory(t._data, b._data)):
            # csr . dense into a dense out= array: written in place
            k.csr_dot_dense(a._values, a._indices, a._indptr, tuple(a.shape), b._data,
                            out=t._data.reshape((a.shape[0], *b.shape[1:])))
            return [t]
        return [_dot_kernel(k, p, a, b, tuple(out_s[0]))]
    if isinstance(a, CSRNDArray):
        m = a.asscipy()
        rhs = b.asscipy().toarray() if isinstance(b, RowSparseNDArray) and b.ndim == 2 else \
            _dense(b)._data
        if p.transpose_a:
            rows = np.unique(a._indices)
            res = np.asarray((m.T @ rhs), dtype=out_t[0])
            vals = np.ascontiguousarray(res[rows]).reshape((rows.size, *out_s[0][1:]))
            return [RowSparseNDArray(vals, rows.astype(np.int64), tuple(out_s[0]), ctx)]
        res = np.asarray(m @ rhs, dtype=out_t[0]).reshape(out_s[0])
        return [NDArray(np.ascontiguousarray(res), ctx)]
    assert isinstance(b, CSRNDArray)
    res = np.asarray((b.asscipy().T @ a._data.T).T, dtype=out_t[0])
    return [dense_to(NDArray(np.ascontiguousarray(res), ctx), "csr")]


def _dot_kernel(k: Any, p: Any, a: NDArray, b: NDArray, shape: tuple[int, ...]) -> NDArray:
    """dot with a csr operand by the generated kernels of ``nnsym.ops.dot.csr`` (``k``)."""
    ctx = a.context
    if isinstance(a, CSRNDArray):
        csr = (a._values, a._indices, a._indptr, tuple(a.shape))
        if isinstance(b, RowSparseNDArray):
            r = k.csr_dot_rsp(*csr, b._values, b._indices, tuple(b.shape),
                              transpose_a=bool(p.transpose_a))
        elif p.transpose_a:
            r = k.csr_t_dot_dense(*csr, b._data)
        else:
            return NDArray(k.csr_dot_dense(*csr, b._data).reshape(shape), ctx)
        if isinstance(r, tuple):
            return RowSparseNDArray(r[0], r[1], shape, ctx)
        return NDArray(r.reshape(shape), ctx)
    assert isinstance(b, CSRNDArray)
    v, ix, ip = k.dense_dot_csr(a._data, b._values, b._indices, b._indptr, tuple(b.shape))
    return CSRNDArray(v, ix, ip, shape, ctx)


@register_ex("sum_csr")
def _sum_csr(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
             out_s: list[Any], out_t: list[Any],
             targets: list[NDArray] | None = None) -> list[NDArray]:
    a = ins[0]
    assert isinstance(a, CSRNDArray)
    axis = p.axis[0] % 2
    k = _kernels(a.dtype)
    if k is not None and np.dtype(out_t[0]) == np.dtype(a.dtype):
        res = k.csr_sum(a._values, a._indices, a._indptr, tuple(a.shape), axis, False)
        return [NDArray(np.ascontiguousarray(res.reshape(out_s[0])), a.context)]
    res = np.asarray(a.asscipy().sum(axis=axis, dtype=out_t[0]))
    return [NDArray(np.ascontiguousarray(res.reshape(out_s[0]).astype(out_t[0])), a.context)]


@register_ex("add_n_rsp")
def _add_n_rsp(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
               out_s: list[Any], out_t: list[Any],
               targets: list[NDArray] | None = None) -> list[NDArray]:
    arrs = [a for a in ins if isinstance(a, RowSparseNDArray)]
    k = _kernels(arrs[0].dtype)
    if k is not None and all(np.dtype(a.dtype) == np.dtype(out_t[0]) for a in arrs):
        v, ix = k.add_n_rsp([(a._values, a._indices) for a in arrs], tuple(arrs[0].shape))
        return [RowSparseNDArray(v, ix, arrs[0].shape, arrs[0].context)]
    ids = np.unique(np.concatenate([a._indices for a in arrs])).astype(np.int64)
    vals = np.zeros((ids.size, *arrs[0].shape[1:]), out_t[0])
    for a in arrs:
        vals[np.searchsorted(ids, a._indices)] += a._values
    return [RowSparseNDArray(vals, ids, arrs[0].shape, arrs[0].context)]


@register_ex("embedding_grad_rsp")
def _embedding_grad_rsp(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray],
                        dec: Decision, out_s: list[Any], out_t: list[Any],
                        targets: list[NDArray] | None = None) -> list[NDArray]:
    """Embedding's row_sparse weight gradient: for each distinct row looked up (indices
    truncated and clipped as the forward does), the sum of the output-gradient rows that looked
    it up, in lookup order."""
    g, data = _dense(ins[0])._data, _dense(ins[1])._data
    d = int(p.output_dim)
    idx = np.clip(np.trunc(data.reshape(-1)) if data.dtype.kind == "f" else data.reshape(-1),
                  0, p.input_dim - 1).astype(np.int64)
    rows = np.ascontiguousarray(g).reshape(-1, d)
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    if sorted_idx.size:
        starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
        ids = sorted_idx[starts]
        vals = np.add.reduceat(rows[order], starts, axis=0).astype(out_t[0], copy=False)
    else:
        ids = np.zeros(0, np.int64)
        vals = np.zeros((0, d), out_t[0])
    return [RowSparseNDArray(np.ascontiguousarray(vals), ids, tuple(out_s[0]), ins[0].context)]


@register_ex("backward_dot_csr")
def _backward_dot_csr(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray], dec: Decision,
                      out_s: list[Any], out_t: list[Any],
                      targets: list[NDArray] | None = None) -> list[NDArray]:
    """Gradients of ``dot(csr, W)``: lhs_grad = ograd . W^T (dense; skipped when an executor
    says nothing reads it: its target is None), rhs_grad = csr^T . ograd (row_sparse)."""
    ograd, lhs, rhs = ins
    assert isinstance(lhs, CSRNDArray)
    ctx = ograd.context
    g = _dense(ograd)._data
    res: list[Any] = [None, None]
    if targets is None or targets[0] is not None:
        w = _dense(rhs)._data
        res[0] = NDArray(np.ascontiguousarray(
            (g.reshape(g.shape[0], -1) @ w.reshape(w.shape[0], -1).T).astype(out_t[0],
                                                                              copy=False)), ctx)
    k = _dot_kernels(lhs._values, g)
    if k is not None:
        v, ix = k.csr_t_dot_dense(lhs._values, lhs._indices, lhs._indptr, tuple(lhs.shape), g)
    else:
        full = np.asarray(lhs.asscipy().T @ g.reshape(g.shape[0], -1), dtype=out_t[1])
        ix = np.unique(lhs._indices).astype(np.int64)
        v = np.ascontiguousarray(full[ix])
    res[1] = RowSparseNDArray(np.ascontiguousarray(v).reshape((ix.size, *out_s[1][1:])), ix,
                              tuple(out_s[1]), ctx)
    return res


@register_ex("backward_unary_sparse")
def _backward_unary_sparse(op: OpDef, p: Any, raw: dict[str, Any], ins: list[NDArray],
                           dec: Decision, out_s: list[Any], out_t: list[Any],
                           targets: list[NDArray] | None = None) -> list[NDArray]:
    """An elementwise backward operator whose gradient is 0 wherever the output gradient is:
    on the output gradient's stored coordinates only, with x (and y) read there (0 where they
    store nothing), by the operator's own dense kernel."""
    g = ins[0]
    assert isinstance(g, BaseSparseNDArray)
    cols: list[np.ndarray] = [g._values.reshape(-1)]
    for a in ins[1:]:
        if isinstance(g, CSRNDArray):
            assert isinstance(a, CSRNDArray)
            r, c = _coords(g)
            cols.append(_gather_csr(a, r, c))
        else:
            assert isinstance(a, RowSparseNDArray)
            cols.append(_rows_of(a, g._indices).reshape(-1))
    vals = _apply(op, raw, *cols).reshape(g._values.shape)
    return [g._with(vals, *g._shared_aux())]
