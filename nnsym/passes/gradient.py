"""The gradient pass (MXNet's MXGradient): the backward graph of ``ys`` with respect to ``xs``.

Nodes are visited in reverse topological order. Each output's gradient contributions are summed
(one ``add_n`` node named ``sum_grad``); the operator's ``grad`` turns the output gradients into
one entry per input (``None``: nothing flows back). Operators whose outputs receive no gradient
are skipped, except loss heads, which compute their gradient from their own output and label.
Variables in ``xs`` that no gradient reaches (only through BlockGrad, say) get ``zeros_like``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from nnsym.errors import NNSymError
from nnsym.ir.graph import Entry, Node, dfs_post_order, zeros_like
from nnsym.ir.opdef import get_op


class GradientError(NNSymError):
    """The gradient cannot be built (an unreachable variable, an operator without gradient)."""


def _key(e: Entry) -> tuple[int, int]:
    return (id(e.node), e.index)


def aggregate(entries: Sequence[Entry]) -> Entry | None:
    """One entry for the sum of ``entries``: itself, or an ``add_n`` node named ``sum_grad``."""
    if not entries:
        return None
    if len(entries) == 1:
        return entries[0]
    op = get_op("add_n")
    params, _ = op.parse_params({"num_args": len(entries)})
    attrs = MappingProxyType({"num_args": str(len(entries))})
    return Entry(Node(op, "sum_grad", params, tuple(entries), attrs), 0)


def gradient(ys: Sequence[Entry], xs: Sequence[Entry],
             head_grads: Sequence[Entry | None]) -> list[Entry]:
    """Gradient entries of ``xs`` given one head gradient per ``ys`` entry (``None`` for loss
    outputs, which need none)."""
    order = dfs_post_order(ys)
    seen = {id(n) for n in order}
    for i, x in enumerate(xs):
        if id(x.node) not in seen:
            raise GradientError(
                f"cannot differentiate with respect to argument {i} ({x.node.name!r}): it is "
                "unreachable from the outputs"
            )
    grads: dict[tuple[int, int], list[Entry]] = {}
    for y, h in zip(ys, head_grads):
        if h is not None:
            grads.setdefault(_key(y), []).append(h)
    for node in reversed(order):
        op = node.op
        if op is None:
            continue
        ograds = [aggregate(grads.pop((id(node), i), [])) for i in range(node.num_outputs())]
        if all(g is None for g in ograds) and not op.is_loss(node.params):
            continue
        if op.grad is None:
            raise GradientError(
                f"node {node.name!r} ({op.name}): operator {op.name} has no gradient "
                "(non-differentiable here); use BlockGrad to stop the gradient before it"
            )
        in_grads = op.grad(node, ograds)
        if len(in_grads) != len(node.inputs):
            raise GradientError(
                f"node {node.name!r} ({op.name}): gradient gave {len(in_grads)} entries for "
                f"{len(node.inputs)} inputs"
            )
        for e, g in zip(node.inputs, in_grads):
            if g is not None:
                grads.setdefault(_key(e), []).append(g)
    out = []
    for x in xs:
        g = aggregate(grads.get(_key(x), []))
        out.append(g if g is not None else zeros_like(x))
    return out
