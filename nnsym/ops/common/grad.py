"""Gradient building blocks for operator definitions.

An operator's ``grad(node, ograds)`` receives the forward node and one output-gradient entry per
output (``None`` where no gradient flows into that output) and returns one entry per input
(``None``: no gradient, i.e. zero). It builds backward nodes (``_backward_<op>``) whose inputs
are exactly the forward entries the backward computation reads, so the memory planner can free
everything else after the forward pass.

Elementwise operators get their backward operators generated here from the scalar derivative
expression in their table row (in ``g``, ``x`` = input, ``y`` = output, parameters by name): the
backward node reads ``x`` and ``y`` only where the expression does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.errors import DTypeError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Kernel,
    OpDef,
    StypeRule,
    elemwise_shape,
    get_op,
    register,
    same_dtype,
)
from nnsym.ir.params import NoParams, Params
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.storage import backward_sparse_grad
from nnsym.ops.common.stype import zero_gradient_preserving
from nnsym.types import DispatchMode, SType

GradFn = Callable[[Node, list[Entry | None]], list[Entry | None]]


def backward_node(op: OpDef | str, fwd: Node, inputs: Sequence[Entry],
                  params: Any = None, suffix: str = "_backward") -> Node:
    """A backward node of ``fwd``: named ``<node>_backward``, the forward parameters and
    attributes, a control dependency on the forward node (as MXNet's MakeGradNode)."""
    if isinstance(op, str):
        op = get_op(op)
    if params is None:  # the forward's, unless the backward operator has other parameters
        params = fwd.params if isinstance(fwd.params, op.params) else op.parse_params({})[0]
    return Node(op, fwd.name + suffix, params, tuple(inputs), fwd.attrs, (fwd,))


def node_gradient(op: OpDef, reads: Callable[[Node], Sequence[Entry]] = lambda n: n.inputs,
                  to_inputs: Sequence[int] | None = None) -> GradFn:
    """The common gradient: one backward node ``op`` fed the output gradient and then
    ``reads(node)`` (the forward entries it needs); its output k is the gradient of forward
    input ``to_inputs[k]`` (default k); the other inputs get none."""

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        b = backward_node(op, node, [g, *reads(node)])
        res: list[Entry | None] = [None] * len(node.inputs)
        positions = range(b.num_outputs()) if to_inputs is None else to_inputs
        for k, pos in enumerate(positions):
            res[pos] = Entry(b, k)
        return res

    return grad


def no_gradient(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """BlockGrad, integer-valued and shape-only outputs: nothing flows back."""
    return [None] * len(node.inputs)


def _uses(expr: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", expr) is not None


def unary_gradient(name: str, expr: str | Callable[[Any], str], params: type[Params] = NoParams,
                   fparams: tuple[str, ...] = (), backward_name: str | None = None) -> GradFn:
    """The gradient of a one-input elementwise operator from its derivative expression (or a
    function of the parameters giving it, e.g. by ``act_type``); registers ``_backward_<name>``
    (or ``backward_name``, where MXNet names it otherwise) unless the expression is ``0`` (no
    gradient) or ``g`` (the output gradient passes through)."""
    bname = backward_name or f"_backward_{name}"
    if isinstance(expr, str):
        if expr.strip() == "0":
            return no_gradient
        if expr.strip() == "g":
            return lambda node, ograds: [ograds[0]]
        fixed = expr
        expr_of: Callable[[Any], str] = lambda p: fixed
    else:
        expr_of = expr

    def reads(p: Any) -> tuple[bool, bool]:
        e = expr_of(p)
        return _uses(e, "x"), _uses(e, "y")

    def inputs(p: Any) -> tuple[str, ...]:
        ux, uy = reads(p)
        return ("ograd",) + (("data",) if ux else ()) + (("output",) if uy else ())

    def lower(call: KernelCall) -> Lowered:
        n = size(call.out_shapes[0])
        if n == 0:
            return Lowered()
        ux, uy = reads(call.params)
        refuse_integer_division(f"operator {bname}", (expr_of(call.params),),
                                 call.out_dtypes[0])
        spec = KernelSpec.make("common/elemwise_backward.c.j2", expr=expr_of(call.params),
                               fparams=fparams, uses_x=ux, uses_y=uy,
                               dtype=call.out_dtypes[0].name, req=call.req)
        fa = tuple(float(getattr(call.params, f)) for f in fparams)
        return Lowered((Launch(spec, (n,), fa),))

    cell: list[OpDef] = []

    def sparse_ok(p: Any) -> bool:
        return zero_gradient_preserving(cell[0], p)

    # Sparse output gradients: where the derivative is 0 wherever g is (checked numerically
    # with the actual parameters), the input gradient has the output gradient's pattern and
    # storage type; x and y are read at its coordinates (MXNet's sparse quadratic backward).
    sparse_rules = tuple(
        StypeRule((st,) * n, (st,), DispatchMode.FCOMPUTE_EX, when=sparse_ok,
                  kernel=backward_sparse_grad)
        for st in (SType.CSR, SType.ROW_SPARSE) for n in (1, 2, 3)
    )
    op = register(OpDef(
        name=bname,
        params=params,
        inputs=inputs,
        outputs=("data_grad",),
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0),),
        kernels={DENSE: Kernel(lower)},
        stype_rules=sparse_rules,
        differentiable=False,
        doc=f"Gradient of {name} (elementwise, from its derivative expression).",
    ))
    cell.append(op)

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        ux, uy = reads(node.params)
        ins = [g]
        if ux:
            ins.append(node.inputs[0])
        if uy:
            ins.append(Entry(node, 0))
        return [Entry(backward_node(op, node, ins), 0)]

    return grad


def refuse_integer_division(what: str, exprs: Sequence[str], dtype: np.dtype) -> None:
    """Integer gradients whose derivative divides (``g / x``, ``-g * a / (b * b)``) would trap
    (SIGFPE) on a zero divisor in C and CUDA alike, and their truncated quotients are not a
    gradient anyone wants: refused with a clear error."""
    if np.dtype(dtype).kind in "iub" and any("/" in e or "%" in e for e in exprs):
        raise DTypeError(
            f"{what}: the gradient in integer dtype {np.dtype(dtype).name} divides "
            f"({'; '.join(exprs)}), which is undefined where a divisor is 0; compute the "
            "gradient in a floating-point dtype (cast the inputs to float32)")


def binary_gradient(name: str, exprs: tuple[str, str]) -> GradFn:
    """The gradient of a same-shape two-input elementwise operator from its two derivative
    expressions (in g, a, b, y); ``("g", "g")`` passes the output gradient to both inputs with
    no backward node at all (MXNet's CloneGradient)."""
    if exprs == ("g", "g"):
        return lambda node, ograds: [ograds[0], ograds[0]]
    uses_y = any(_uses(e, "y") for e in exprs)

    def lower(call: KernelCall) -> Lowered:
        n = size(call.out_shapes[0])
        if n == 0:
            return Lowered()
        refuse_integer_division(f"operator _backward_{name}", exprs, call.out_dtypes[0])
        spec = KernelSpec.make("common/elemwise_backward2.c.j2", expr_a=exprs[0], expr_b=exprs[1],
                               uses_y=uses_y, dtype=call.out_dtypes[0].name,
                               req_a=call.out_req(0), req_b=call.out_req(1))
        return Lowered((Launch(spec, (n,)),))

    op = register(OpDef(
        name=f"_backward_{name}",
        inputs=("ograd", "lhs", "rhs") + (("output",) if uses_y else ()),
        outputs=("lhs_grad", "rhs_grad"),
        infer_shape=elemwise_shape,
        infer_type=same_dtype,
        inplace=((0, 0), (0, 1)),
        kernels={DENSE: Kernel(lower)},
        differentiable=False,
        doc=f"Gradient of {name}: ({exprs[0]}, {exprs[1]}).",
    ))

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        ins = [g, node.inputs[0], node.inputs[1]]
        if uses_y:
            ins.append(Entry(node, 0))
        b = backward_node(op, node, ins)
        return [Entry(b, 0), Entry(b, 1)]

    return grad


def pass_through(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Every input receives the output gradient (add_n, identity-like operators)."""
    return [ograds[0]] * len(node.inputs)
