"""Random operators on the gpu context: the CUDA twins draw the same values as the C kernels
for the same seed (the emulated device runs the twins through the host shim; a real device,
``gpu``-marked, through cupy, where libdevice's log/cos may differ from glibc's by an ulp)."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym
import nnsym.random as mxrandom
from nnsym import nd, sym

# every test runs on the emulated device and, where one is available, on a real one
pytestmark = pytest.mark.usefixtures("gpu_backend")


def _same(a: np.ndarray, b: np.ndarray, device: str) -> None:
    if device == "emulate":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_sample_forms_on_gpu_inputs_match_the_cpu(gpu_backend):
    lam = np.array([0.5, 3.0, 25.0], np.float32)
    alpha = np.array([0.4, 2.0, 9.0], np.float32)
    outs = []
    for ctx in (nnsym.gpu(), nnsym.cpu()):
        mxrandom.seed(21)
        p = nd.random.poisson(nd.array(lam, ctx=ctx), shape=(64,))
        g = nd.random.gamma(nd.array(alpha, ctx=ctx), nd.array(alpha, ctx=ctx), shape=(64,))
        m = nd.random.multinomial(nd.array([[0.3, 0.7]], ctx=ctx), shape=(32,))
        s = nd.random.shuffle(nd.array(np.arange(12.0).reshape(6, 2), ctx=ctx))
        outs.append([a.asnumpy() for a in (p, g, m, s)])
    for a, b in zip(*outs):
        _same(a, b, gpu_backend)


def test_bound_random_symbols_on_gpu_match_the_cpu(gpu_backend):
    net = sym.Group([sym.random.normal(1.0, 2.0, shape=(5, 7)),
                     sym.random.negative_binomial(3, 0.4, shape=(9,)),
                     sym.random.randint(-4, 4, shape=(6,), dtype="int64")])
    outs = []
    for ctx in (nnsym.gpu(), nnsym.cpu()):
        ex = net.bind(ctx, {})
        mxrandom.seed(22)
        outs.append([o.asnumpy() for o in ex.forward()])
    for a, b in zip(*outs):
        _same(a, b, gpu_backend)


def test_scalar_forms_deliver_to_the_gpu_context_and_out(gpu_backend):
    g = nnsym.gpu()
    mxrandom.seed(23)
    a = nd.random.gamma(0.5, 2.0, shape=(3, 4), ctx=g)  # the CUDA kernel, on the device
    assert a.context == g and a.shape == (3, 4)
    out = nd.zeros((3, 4), ctx=g)
    mxrandom.seed(23)
    res = nd.random.gamma(0.5, 2.0, out=out)
    assert res is out
    np.testing.assert_array_equal(out.asnumpy(), a.asnumpy())
    mxrandom.seed(23)
    with g:  # the default context, as MXNet's current_context()
        b = nd.random.gamma(0.5, 2.0, shape=(3, 4))
    assert b.context == g
    mxrandom.seed(23)
    _same(a.asnumpy(), nd.random.gamma(0.5, 2.0, shape=(3, 4)).asnumpy(), gpu_backend)
