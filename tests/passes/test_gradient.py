"""The gradient pass on its own: aggregation, zero gradients, and its errors."""

from __future__ import annotations

import pytest

from nnsym import sym
from nnsym.ir.graph import Entry, Node, dfs_post_order, variable
from nnsym.ir.opdef import OpDef, get_op
from nnsym.passes.gradient import GradientError, gradient


def test_fan_out_is_summed_by_one_sum_grad_node():
    x = sym.Variable("x")
    y = sym.sin(x) + sym.cos(x) + sym.exp(x)
    head = Entry(variable("_head_grad_0"))
    (gx,) = gradient(list(y.outputs), [x.outputs[0]], [head])
    assert gx.node.name == "sum_grad" and gx.node.op.name == "add_n"
    assert len(gx.node.inputs) == 3


def test_unreachable_and_blocked_arguments():
    x, w = sym.Variable("x"), sym.Variable("w")
    y = sym.tanh(x) + sym.BlockGrad(w)
    head = Entry(variable("_head_grad_0"))
    gx, gw = gradient(list(y.outputs), [x.outputs[0], w.outputs[0]], [head])
    assert gw.node.op.name == "zeros_like"  # only through BlockGrad
    assert gx.node.op.name == "_backward_tanh"
    with pytest.raises(GradientError, match="unreachable"):
        gradient(list(sym.tanh(x).outputs), [w.outputs[0]], [head])


def test_an_operator_without_gradient_is_named():
    op = OpDef(name="no_grad_for_test", infer_shape=get_op("relu").infer_shape)
    x = Entry(variable("x"))
    node = Node(op, "mystery", op.parse_params({})[0], (x,))
    with pytest.raises(GradientError, match=r"'mystery' \(no_grad_for_test\).*no gradient"):
        gradient([Entry(node)], [x], [Entry(variable("_head_grad_0"))])


def test_backward_nodes_read_only_what_their_expression_needs():
    x = sym.Variable("x")
    y = sym.exp(x)  # d/dx = g * y: reads the output, not the input
    (gx,) = gradient(list(y.outputs), [x.outputs[0]], [Entry(variable("_head_grad_0"))])
    names = [e.node.name for e in gx.node.inputs]
    assert names == ["_head_grad_0", y.outputs[0].node.name]
    assert gx.node.control_deps == (y.outputs[0].node,)
    assert y.outputs[0].node in dfs_post_order([gx])
