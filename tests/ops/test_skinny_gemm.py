"""nnsym's own paths for products the BLAS runs badly (codegen/templates/prologue.c.j2 and
ops/dot/dot_gemm.c.j2): at most 16 rows with the right operand transposed (a FullyConnected
layer at a small batch) run a skinny kernel, not the BLAS; 17 to 128 rows with more columns run
the transposed product into the workspace and move it into place. Against float64 numpy, over
row counts around the kernels' blocks, odd widths, row strides, bias and accumulation, and the
split over the pool."""

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


# ---------------------------------------------------------------------------------------------
# 17..128 rows with B transposed and more columns than rows: the product computed transposed
# into the workspace, then moved into C in register-transposed blocks (dot_gemm.c.j2's `tr`)


def _launch(lowered, arrays):
    """Run ``lowered`` on numpy arrays (inputs then outputs), as the runtime does."""
    from nnsym.codegen import compiler

    ffi = compiler.FFI
    funcs = compiler.functions([ln.spec for ln in lowered.launches])
    for ln, fn in zip(lowered.launches, funcs):
        mine = arrays if ln.args is None else [arrays[i] for i in ln.args]
        bufs = [ffi.from_buffer("char[]", a, require_writable=True) for a in mine]
        keep = []
        if ln.workspace:
            ws = np.full(ln.workspace, 0xFF, np.uint8)  # NaN garbage: never read first
            keep.append(ws)
            bufs.append(ffi.from_buffer("char[]", ws, require_writable=True))
        fn(ffi.new("void *[]", bufs), ffi.new("int64_t[]", list(ln.ia) or [0]),
           ffi.new("double[]", list(ln.fa) or [0.0]))


@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-6), ("float64", 1e-14)])
@pytest.mark.parametrize("m,n,k", [(17, 18, 5), (24, 40, 16), (31, 77, 9), (64, 512, 100),
                                   (128, 131, 3)])
@pytest.mark.parametrize("req,bias", [("write", False), ("write", True), ("add", True)])
def test_transposed_products_match_numpy(m, n, k, dtype, rtol, req, bias):
    from nnsym.ir.spec import Lowered
    from nnsym.ops.common.products import transposed_product
    from nnsym.ops.dot.dot import gemm_launch

    assert transposed_product(m, n, k, True)
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)
    bv = rng.standard_normal(n).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    ln = gemm_launch(np.dtype(dtype), req, batch=1, m=m, n=n, k=k, ta=False, tb=True,
                     n_in=3 if bias else 2, bias=bias)
    assert ln.spec.context()["tr"]
    c = c0.copy() if req == "add" else np.full((m, n), np.nan, dtype)
    _launch(Lowered((ln,)), [a, b] + ([bv] if bias else []) + [c])
    want = a.astype(np.float64) @ b.astype(np.float64).T
    if req == "add":
        want = want + c0
    if bias:
        want = want + bv
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64).T + np.abs(c0) + 1
    assert np.all(np.abs(c - want) <= rtol * (k + 2) * scale)


def test_fully_connected_mid_batch_forward_and_gradients():
    """FullyConnected at batch 40 (the transposed forward, bias, a ReLU epilogue) and its
    gradients, against float64 numpy."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 300)).astype(np.float32)
    w = rng.standard_normal((129, 300)).astype(np.float32)
    b = rng.standard_normal(129).astype(np.float32)
    head = rng.standard_normal((40, 129)).astype(np.float32)
    net = sym.Activation(sym.FullyConnected(sym.Variable("x"), num_hidden=129, name="fc"),
                         act_type="relu")
    exe = net.simple_bind(x=x.shape)
    for key, val in (("x", x), ("fc_weight", w), ("fc_bias", b)):
        exe.arg_dict[key][:] = val
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward([nd.array(head)])
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    pre = x64 @ w64.T + b
    np.testing.assert_allclose(out, np.maximum(pre, 0), rtol=1e-5, atol=1e-4)
    g = head * (pre > 0)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), g @ w64, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(exe.grad_dict["fc_weight"].asnumpy(), g.T @ x64, rtol=1e-4,
                               atol=1e-3)
