"""Products with at most 16 rows and the right operand transposed (a FullyConnected layer at a
small batch) run nnsym's own skinny kernel (codegen/templates/prologue.c.j2), not the BLAS:
against float64 numpy, over row counts around its 2-row and 4-column blocks, odd widths, row
strides, alpha / beta, and the split over the pool."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.runtime import threads


@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-6), ("float64", 1e-14)])
@pytest.mark.parametrize("m", [2, 3, 7, 16, 17])
@pytest.mark.parametrize("n,k", [(1, 3), (5, 17), (1003, 512), (6, 1)])
def test_skinny_products_match_numpy(m, n, k, dtype, rtol):
    rng = np.random.default_rng(m * 100 + n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)
    got = nd.dot(nd.array(a, dtype=dtype), nd.array(b, dtype=dtype),
                 transpose_b=True).asnumpy()
    want = a.astype(np.float64) @ b.astype(np.float64).T
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64).T  # error bound's scale
    assert got.dtype == np.dtype(dtype) and got.shape == (m, n)
    assert np.all(np.abs(got - want) <= rtol * k * scale + 1e-30)


def test_fully_connected_small_batch_with_bias_and_accumulated_gradients():
    """FullyConnected at batch 5 (forward: bias then the product with beta = 1) and its
    gradients accumulated with grad_req='add'."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 300))
    w = rng.standard_normal((41, 300))
    b = rng.standard_normal(41)
    head = rng.standard_normal((5, 41))
    net = sym.FullyConnected(sym.Variable("x"), num_hidden=41, name="fc")
    exe = net.simple_bind(x=x.shape, type_dict={"x": "float64"}, grad_req="add")
    for key, val in (("x", x), ("fc_weight", w), ("fc_bias", b)):
        exe.arg_dict[key][:] = val
        exe.grad_dict[key][:] = 1.0
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward([nd.array(head, dtype="float64")])
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 1.0 + head @ w, rtol=1e-12)
    np.testing.assert_allclose(exe.grad_dict["fc_weight"].asnumpy(), 1.0 + head.T @ x,
                               rtol=1e-12)


def test_skinny_products_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((9, 777)).astype(np.float32)
    b = rng.standard_normal((1001, 777)).astype(np.float32)
    before = threads.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            threads.set_num_threads(n)
            results.append(nd.dot(nd.array(a), nd.array(b), transpose_b=True).asnumpy())
    finally:
        threads.set_num_threads(before)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
