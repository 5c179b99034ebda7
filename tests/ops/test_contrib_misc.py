"""MXNet's miscellaneous contrib operators: values MXNet 1.9.1 gives (hand-checked) and the
gradients that are not derivatives (straight-through, scaled), which the finite-difference
table leaves out."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, sym


def _grad(s, x, og):
    ex = s.simple_bind(mx.cpu(), data=x.shape)
    ex.forward(is_train=True, data=x)
    ex.backward(nd.array(og))
    return ex.outputs[0].asnumpy(), ex.grad_dict["data"].asnumpy()


@pytest.mark.parametrize(("name", "want"), [
    ("round_ste", [[-3, -2, -1], [1, 2, 3]]),  # halves away from zero, as MXNet
    ("sign_ste", [[-1, -1, -1], [1, 1, 1]]),
])
def test_straight_through_ops_pass_the_gradient(name, want):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    og = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1
    y, dx = _grad(getattr(sym.contrib, name)(sym.Variable("data")), x, og)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(dx, og)
    np.testing.assert_array_equal(getattr(nd.contrib, name)(nd.array(x)).asnumpy(), want)


def test_gradientmultiplier_is_identity_with_a_scaled_gradient():
    x = np.array([[1.5, -2.0, 0.25]], np.float32)
    og = np.array([[1.0, 2.0, -4.0]], np.float32)
    s = sym.contrib.gradientmultiplier(sym.Variable("data"), scalar=-0.5)
    y, dx = _grad(s, x, og)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(dx, og * -0.5)


def test_div_sqrt_dim_divides_by_the_root_of_the_last_axis():
    x = np.arange(18, dtype=np.float32).reshape(2, 9)
    y, dx = _grad(sym.contrib.div_sqrt_dim(sym.Variable("data")), x, np.ones_like(x))
    np.testing.assert_allclose(y, x / 3, rtol=1e-6)
    np.testing.assert_allclose(dx, np.full_like(x, 1 / 3), rtol=1e-6)
