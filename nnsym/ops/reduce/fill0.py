"""fill_element_0index: one element of each row of lhs replaced (at rhs[i], value mhs[i])."""

from __future__ import annotations

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import NoParams
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.types import shape_str


def fill0_shape(p: object, ins: list, outs: list) -> tuple[list, list]:
    lhs, mhs, rhs = ins
    if lhs is None:
        return list(ins), list(outs)
    if len(lhs) != 2:
        raise RuleError(f"lhs must be a matrix, not shape {shape_str(lhs)}")
    vec = (lhs[0],)
    for what, s in (("mhs", mhs), ("rhs", rhs)):
        if s is not None and tuple(s) != vec:
            raise RuleError(f"{what} must have shape {shape_str(vec)}, not {shape_str(s)}")
    return [lhs, vec, vec], [lhs]


def fill0_reference(p: object, lhs: np.ndarray, mhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    out: np.ndarray = lhs.copy()
    k = rhs.astype(np.int64)
    rows = np.nonzero((k >= 0) & (k < lhs.shape[1]))[0]
    out[rows, k[rows]] = mhs[rows]
    return out


def fill0_lowering(call: KernelCall) -> Lowered:
    n, m = call.in_shapes[0]
    if size((n, m)) == 0:
        return Lowered()
    spec = KernelSpec.make("reduce/reduce_fill0.c.j2", dtype=call.in_dtypes[0].name,
                           req=call.req)
    return Lowered((Launch(spec, (n, m)),))


FILL_ELEMENT_0INDEX = register(OpDef(
    name="fill_element_0index",
    params=NoParams,
    inputs=("lhs", "mhs", "rhs"),
    infer_shape=fill0_shape,
    infer_type=same_dtype,
    reference=fill0_reference,
    kernels={DENSE: Kernel(fill0_lowering)},
    doc="lhs with element rhs[i] of row i set to mhs[i] (0-based; no gradient, as MXNet).",
    examples=(
        Example(((3, 4), (3,), (3,)), ints={2: (0, 4)}),
        Example(((2, 5), (2,), (2,)), dtype="float64", ints={2: (0, 5)}),
    ),
))
