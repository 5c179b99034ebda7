"""Operators on sparse NDArrays: NDArrays become raw storage records (``nnsym.ir.storage``),
the runtime's one dispatch (``nnsym.runtime.dispatch``) runs what storage-type inference decided
(the operator's storage kernel, the dense kernel, or the fallback) and the records come back as
NDArrays. Index arrays a kernel passes through unchanged are shared with the input that held
them (read-only, copy on write), as every value map does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import nnsym.ndarray.sparse as sparse
from nnsym.errors import ShapeError, StorageTypeError
from nnsym.ir.opdef import OpDef, get_op
from nnsym.ndarray.ndarray import NDArray, install_sparse
from nnsym.ndarray.sparse import _assign, deliver, record, wrap
from nnsym.ops.common.stype import Decision, infer_storage, on_fallback
from nnsym.runtime import dispatch
from nnsym.runtime.imperative import infer_one
from nnsym.types import DispatchMode, SType


def invoke_sparse(op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
                  out: Any = None) -> list[NDArray]:
    """Run ``op`` with at least one sparse input (or output target)."""
    p, _ = op.parse_params(params)
    ins = tuple(SType.parse(a.stype) for a in inputs)
    shapes = [tuple(a.shape) for a in inputs]
    dtypes = [np.dtype(a.dtype) for a in inputs]
    out_s, out_t = infer_one(op, p, shapes, dtypes, op.name.lower())
    dec = infer_storage(op, p, ins)
    if dec.dispatch == DispatchMode.FALLBACK:
        on_fallback(op, params, ins, dec.outs)
    targets = None if out is None else [out] if isinstance(out, NDArray) else list(out)
    usable = [record(t, f"{op.name} out=") for t in targets] if targets is not None and \
        dec.dispatch == DispatchMode.FCOMPUTE_EX and not op.value_shaped and \
        _fits(targets, dec, out_s, out_t) else []
    recs = [_record_input(op, p, i, a) for i, a in enumerate(inputs)]
    res = dispatch.run(op, p, params, dec, recs, out_s, out_t, usable)
    res = res[:op.num_visible(p)]
    ctx = inputs[0].context
    if targets is None:
        return [wrap(r, ctx, inputs) for r in res if r is not None]
    if len(targets) != len(res):
        raise ShapeError(f"{op.name}: {len(res)} outputs but {len(targets)} given in out=")
    for t, r in zip(targets, res):
        assert r is not None
        if tuple(t.shape) != tuple(r.shape):
            raise ShapeError(f"{op.name}: out= has shape {t.shape}, the result "
                             f"{tuple(r.shape)}")
        if not deliver(t, r, inputs):
            _assign(t, wrap(r, ctx, inputs))
    return targets


def _record_input(op: OpDef, p: Any, i: int, a: NDArray) -> Any:
    """Input ``i``'s storage; a broken structure's error names the operator and the input
    (the name is worked out only then, off the per-call path)."""
    try:
        return record(a)
    except StorageTypeError as e:
        names = op.input_names(p)
        raise StorageTypeError(
            f"{op.name} input '{names[i] if i < len(names) else i}': {e}") from None


def _fits(targets: list[NDArray], dec: Decision, out_s: list[Any], out_t: list[Any]) -> bool:
    """Whether out= arrays can receive a storage kernel's result directly: one per output,
    each of the inferred storage type, shape and dtype."""
    return len(targets) == len(dec.outs) and all(
        t.stype == st.label and tuple(t.shape) == tuple(s) and np.dtype(t.dtype) == np.dtype(dt)
        for t, st, s, dt in zip(targets, dec.outs, out_s, out_t))


def op_call(name: str, inputs: Sequence[NDArray], **params: Any) -> NDArray:
    """``nd.<name>(*inputs, **params)`` for any storage types (one visible output)."""
    return invoke_sparse(get_op(name), inputs, params)[0]


class _Support:
    """What NDArray reaches of the sparse storage types (``install_sparse``)."""

    assign = staticmethod(_assign)
    cast_storage = staticmethod(sparse.cast_storage)
    array = staticmethod(sparse.array)
    zeros = staticmethod(sparse.zeros)
    invoke = staticmethod(invoke_sparse)


install_sparse(_Support())
