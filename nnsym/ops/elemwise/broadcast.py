"""Broadcasting binary operators (``broadcast_add``, ...): the same-shape operators' scalar
expressions and numpy references (``BINARY`` in ``nnsym.ops.elemwise.elemwise``: ``broadcast_add``
is ``elemwise_add``'s ``a + b`` over numpy-broadcast indices), their shape rule and their
gradients, which sum over the broadcast axes. Shape rules follow MXNet 1.9.1 exactly.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from nnsym.ir.graph import Entry
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops.common.grad import GradFn, no_gradient, node_gradient
from nnsym.ops.common.lowering import binary_grad_launch
from nnsym.ops.elemwise.elemwise import (
    BINARY_BY_NAME,
    COMPARISONS,
    binary_kernel,
    binary_reference,
)
from nnsym.types import shape_str

# ---------------------------------------------------------------------------------------------
# Broadcasting binary operators


def broadcast_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's BinaryBroadcastShape: numpy rules; a dim unknown on either side stays unknown.

    Both inputs need a known ndim; nothing is filled back into the inputs.
    """
    lhs, rhs = ins
    if lhs is None or rhs is None:
        return list(ins), list(outs)
    if lhs == rhs:
        return list(ins), [lhs]
    n = max(len(lhs), len(rhs))
    lp = (1,) * (n - len(lhs)) + tuple(lhs)
    rp = (1,) * (n - len(rhs)) + tuple(rhs)
    out: list[int | None] = []
    for ld, rd in zip(lp, rp):
        if ld is None or rd is None:
            out.append(None)
        elif ld == rd or rd == 1:
            out.append(ld)
        elif ld == 1:
            out.append(rd)
        else:
            raise RuleError(
                f"operands could not be broadcast together with shapes {shape_str(lhs)} "
                f"{shape_str(rhs)}"
            )
    return list(ins), [tuple(out)]


class Broadcast(NamedTuple):
    name: str
    aliases: tuple[str, ...]
    elemwise: str  # the same-shape operator whose expression and reference it shares
    sparse: bool


# fmt: off
BROADCAST: tuple[Broadcast, ...] = (
    Broadcast("broadcast_add", ("broadcast_plus",), "elemwise_add", True),
    Broadcast("broadcast_sub", ("broadcast_minus",), "elemwise_sub", True),
    Broadcast("broadcast_mul", (), "elemwise_mul", True),
    Broadcast("broadcast_div", (), "elemwise_div", True),
    Broadcast("broadcast_power", (), "_power", False),
    Broadcast("broadcast_maximum", (), "_maximum", False),
    Broadcast("broadcast_minimum", (), "_minimum", False),
    *(Broadcast(f"broadcast{name}", (), name, False) for name in COMPARISONS),
    Broadcast("broadcast_mod", (), "_mod", False),
    Broadcast("broadcast_hypot", (), "_hypot", False),
)
# fmt: on


def _broadcast_examples(positive: bool) -> tuple[Example, ...]:
    lo, hi = (0.5, 3.0) if positive else (-2.0, 2.0)
    return (
        Example(((2, 3), (2, 3)), low=lo, high=hi),
        Example(((2, 3), (1, 3)), low=lo, high=hi),
        Example(((2, 1, 4), (3, 1)), low=lo, high=hi),
        Example(((5, 1, 4, 1), (3, 1, 6)), dtype="float64", low=lo, high=hi),
        Example(((1,), (2, 3)), dtype="float16", low=lo, high=hi),
        Example(((3,), (4, 3)), dtype="int32", low=max(lo, 1.0), high=hi + 3),
    )


# ---------------------------------------------------------------------------------------------
# Gradients (common/broadcast_reduce_backward.c.j2): a broadcasting operator's gradient sums
# over the broadcast axes.


def broadcast_binary_gradient(name: str, exprs: tuple[str, str]) -> GradFn:
    """``_backward_<name>(ograd, lhs, rhs[, output]) -> (lhs grad, rhs grad)``: the same-shape
    operator's derivative expressions, summed over each input's broadcast axes."""
    uses_y = any(re.search(r"\by\b", e) for e in exprs)

    def lower(call: KernelCall) -> Lowered:
        _, lhs, rhs = call.in_shapes[:3]
        return Lowered((binary_grad_launch(call, lhs, rhs, exprs, uses_y),))

    op = register(OpDef(
        name=f"_backward_{name}",
        inputs=("ograd", "lhs", "rhs") + (("output",) if uses_y else ()),
        outputs=("lhs_grad", "rhs_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0], ins[2] or outs[1]]),
        infer_type=same_dtype,
        kernels={DENSE: Kernel(lower)},
        differentiable=False,
        doc=f"Gradient of {name}: ({exprs[0]}, {exprs[1]}) summed over broadcast axes.",
    ))

    return node_gradient(op, lambda n: [*n.inputs[:2], *([Entry(n, 0)] if uses_y else [])])


# ---------------------------------------------------------------------------------------------
# Registration

BROADCAST_OPS: dict[str, OpDef] = {}
for _row in BROADCAST:
    _ew = BINARY_BY_NAME[_row.elemwise]
    BROADCAST_OPS[_row.name] = register(
        OpDef(
            name=_row.name,
            inputs=("lhs", "rhs"),
            infer_shape=broadcast_shape,
            infer_type=same_dtype,
            inplace=((0, 0), (1, 0)),
            expr=_ew.expr,
            kernels={DENSE: binary_kernel(_ew.name, _ew.expr)},
            grad=(no_gradient if _ew.grad == ("0", "0")
                  else broadcast_binary_gradient(_row.name, _ew.grad)),
            sparse=_row.sparse,
            reference=binary_reference(_ew.ref),
            aliases=_row.aliases,
            doc=f"Elementwise {_ew.doc} with numpy-style broadcasting.",
            examples=_broadcast_examples(
                _row.name in ("broadcast_div", "broadcast_power", "broadcast_mod")),
            bad_params=({"axis": 0},),
        )
    )

