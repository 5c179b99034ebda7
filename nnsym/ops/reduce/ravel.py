"""ravel_multi_index and unravel_index (MXNet's ``_ravel_multi_index``, ``_unravel_index``):
flat indices from per-axis indices of a shape, and back. No gradient (integer-valued)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient


@dataclass(frozen=True, kw_only=True)
class RavelParams(Params):
    shape: tuple[int, ...] = field(doc="Shape of the array the indices refer to.")


def _dims(p: RavelParams) -> tuple[int, ...]:
    if not p.shape or any(d < 1 for d in p.shape):
        raise RuleError(f"shape {p.shape} must be non-empty with positive dimensions")
    return p.shape


def ravel_shape(p: RavelParams, ins: list, outs: list) -> tuple[list, list]:
    d, dims = ins[0], _dims(p)
    if d is None:
        return list(ins), list(outs)
    if len(d) < 1 or d[0] != len(dims):
        raise RuleError(f"data's first axis must have {len(dims)} rows (one per axis of "
                        f"{dims}), not shape {d}")
    return [d], [tuple(d[1:]) or (1,)]


def unravel_shape(p: RavelParams, ins: list, outs: list) -> tuple[list, list]:
    d, dims = ins[0], _dims(p)
    if d is None:
        return list(ins), list(outs)
    return [d], [(len(dims), *d)]


def _launch(call: KernelCall, kind: str, n: int) -> Lowered:
    if n == 0:
        return Lowered()
    dims = _dims(call.params)
    spec = KernelSpec.make("reduce/reduce_ravel.c.j2", dtype=call.in_dtypes[0].name, kind=kind)
    return Lowered((Launch(spec, (len(dims), n, *dims)),))


def ravel_reference(p: RavelParams, data: np.ndarray) -> np.ndarray:
    dims = _dims(p)
    idx = data.astype(np.int64).reshape(len(dims), -1)
    flat = np.zeros(idx.shape[1], np.int64)
    for i, d in enumerate(dims):
        flat = flat * d + idx[i]
    return flat.reshape(data.shape[1:] or (1,)).astype(data.dtype)


def unravel_reference(p: RavelParams, data: np.ndarray) -> np.ndarray:
    dims = _dims(p)
    v = data.astype(np.int64).reshape(-1)
    out = np.zeros((len(dims), v.size), np.int64)
    for i in range(len(dims) - 1, 0, -1):
        out[i] = v % dims[i]
        v = v // dims[i]
    out[0] = v
    return out.reshape(len(dims), *data.shape).astype(data.dtype)


RAVEL = register(OpDef(
    name="_ravel_multi_index",
    aliases=("ravel_multi_index",),
    params=RavelParams,
    infer_shape=ravel_shape,
    infer_type=same_dtype,
    reference=ravel_reference,
    kernels={DENSE: Kernel(lambda call: _launch(call, "ravel", size(call.out_shapes[0])))},
    grad=no_gradient,
    differentiable=False,
    doc="Flat indices (row-major) of the columns of per-axis indices into ``shape``.",
    examples=(
        Example(((2, 5),), {"shape": (7, 6)}, ints={0: (0, 6)}),
        Example(((3, 4),), {"shape": (2, 3, 4)}, dtype="int32", ints={0: (0, 2)}),
    ),
    bad_params=({}, {"shape": "x"}),
))

UNRAVEL = register(OpDef(
    name="_unravel_index",
    aliases=("unravel_index",),
    params=RavelParams,
    infer_shape=unravel_shape,
    infer_type=same_dtype,
    reference=unravel_reference,
    kernels={DENSE: Kernel(lambda call: _launch(call, "unravel", size(call.in_shapes[0])))},
    grad=no_gradient,
    differentiable=False,
    doc="Per-axis indices of flat (row-major) indices into ``shape`` (the first not wrapped).",
    examples=(
        Example(((5,),), {"shape": (7, 6)}, ints={0: (0, 42)}),
        Example(((4,),), {"shape": (2, 3, 4)}, dtype="int64", ints={0: (0, 30)}),
    ),
    bad_params=({}, {"shape": "x"}),
))
