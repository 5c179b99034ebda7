"""Integer gradients whose derivative divides by the data (``g / x``) are refused with a clear
error naming the node, instead of trapping (SIGFPE) on a zero divisor; float gradients of the
same graphs work, and integer gradients that do not divide still run."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym
from nnsym import nd, sym
from nnsym.errors import DTypeError


def _bind(net, dtype, **shapes):
    return net.simple_bind(ctx=nnsym.cpu(), type_dict={k: dtype for k in shapes}, **shapes)


@pytest.mark.parametrize("make", [
    lambda a, b: sym.broadcast_div(a, b, name="q"),
    lambda a, b: sym.elemwise_div(a, b, name="q"),
    lambda a, b: sym.log(a, name="q") + b,
    lambda a, b: sym.prod(a, axis=1, name="q") + sym.sum(b, axis=1),
], ids=["broadcast_div", "elemwise_div", "log", "prod"])
def test_dividing_integer_gradients_are_refused_with_the_node_name(make):
    net = make(sym.Variable("a"), sym.Variable("b"))
    with pytest.raises(DTypeError, match=r"node .*int32 divides.*floating-point"):
        _bind(net, "int32", a=(2, 3), b=(2, 3))
    ex = _bind(net, "float32", a=(2, 3), b=(2, 3))  # the same graph in float trains
    ex.arg_dict["a"][:] = np.full((2, 3), 2.0, np.float32)
    ex.arg_dict["b"][:] = np.full((2, 3), 4.0, np.float32)
    ex.forward(is_train=True)
    ex.backward(nd.ones(ex.outputs[0].shape))
    assert np.all(np.isfinite(ex.grad_dict["a"].asnumpy()))


def test_integer_gradients_without_division_still_run():
    a, b = sym.Variable("a"), sym.Variable("b")
    ex = _bind(sym.broadcast_mul(a, b) + a, "int32", a=(2, 3), b=(1, 3))
    ex.arg_dict["a"][:] = np.arange(6, dtype=np.int32).reshape(2, 3)
    ex.arg_dict["b"][:] = np.array([[0, 2, -1]], np.int32)
    ex.forward(is_train=True)
    ex.backward(nd.ones((2, 3), dtype="int32"))
    np.testing.assert_array_equal(ex.grad_dict["a"].asnumpy(), [[1, 3, 0], [1, 3, 0]])
    np.testing.assert_array_equal(ex.grad_dict["b"].asnumpy(), [[3, 5, 7]])
