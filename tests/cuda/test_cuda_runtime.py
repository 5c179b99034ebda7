"""The gpu context end to end: arrays on ``nnsym.gpu()``, copies between devices, operators and
bound graphs (forward and backward) run as CUDA kernels, compared with the same work on the CPU
(bit for bit where the family computes each element as C does).

Every test runs on the emulated device (``NNSYM_CUDA=emulate``: device memory is host memory,
kernels are the CUDA twins run through the host shim), and again on a real device through cupy
where one is available (those runs are marked ``gpu``: ``pytest -m gpu tests/cuda``)."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym
from nnsym import nd
from nnsym.cuda import runtime
from nnsym.errors import NNSymError, ShapeError
from nnsym.ndarray.gpu import ContextError, GPUNDArray

# every test runs on the emulated device and, where one is available, on a real one
pytestmark = pytest.mark.usefixtures("gpu_backend")


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


def test_arrays_live_on_the_gpu_and_copy_between_devices():
    g = nnsym.gpu(0)
    a = _rand((3, 5))
    x = nd.array(a, ctx=g)
    assert isinstance(x, GPUNDArray) and x.context == g
    assert x.shape == (3, 5) and x.dtype == np.float32
    np.testing.assert_array_equal(x.asnumpy(), a)
    back = x.as_in_context(nnsym.cpu())
    assert type(back) is nd.NDArray and back.context == nnsym.cpu()
    np.testing.assert_array_equal(back.asnumpy(), a)
    y = nd.zeros((3, 5), ctx=g)
    x.copyto(y)
    np.testing.assert_array_equal(y.asnumpy(), a)
    c = nd.zeros((3, 5))
    x.copyto(c)
    np.testing.assert_array_equal(c.asnumpy(), a)
    z = nd.ones((3, 5), ctx=g)
    nd.array(a).copyto(z)  # cpu into an existing gpu array
    np.testing.assert_array_equal(z.asnumpy(), a)
    z[:] = 2.5
    np.testing.assert_array_equal(z.asnumpy(), np.full((3, 5), 2.5, np.float32))
    assert nd.full((2,), 7, ctx=g, dtype="int32").asnumpy().tolist() == [7, 7]
    with pytest.raises(ShapeError, match="shape mismatch"):
        x.copyto(nd.zeros((2, 2), ctx=g))


ELEMENTWISE = [
    ("relu", lambda x: nd.relu(x)),
    ("sigmoid", lambda x: nd.sigmoid(x)),
    ("scalar", lambda x: (x * 3 - 1) / 2),
    ("tanh", lambda x: nd.tanh(x)),
    ("clip", lambda x: nd.clip(x, a_min=-1, a_max=0.5)),
    ("cast", lambda x: nd.cast(x, dtype="float16")),
    ("transpose", lambda x: nd.transpose(x)),
    ("reshape", lambda x: x.reshape((5, 3))),
    ("slice", lambda x: nd.slice_axis(x, axis=1, begin=1, end=4)),
    ("concat", lambda x: nd.concat(x, x * 2, dim=0)),
    ("add_n", lambda x: nd.add_n(x, x, x)),
    ("activation", lambda x: nd.Activation(x, act_type="softrelu")),
    ("maximum", lambda x: nd.broadcast_maximum(x, nd.zeros_like(x))),
]


@pytest.mark.parametrize("name,f", ELEMENTWISE, ids=[n for n, _ in ELEMENTWISE])
def test_elementwise_and_shape_operators_match_the_cpu_bit_for_bit(name, f):
    a = _rand((3, 5), seed=1)
    mine = f(nd.array(a, ctx=nnsym.gpu())).asnumpy()
    theirs = f(nd.array(a)).asnumpy()
    assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
    if name in ("sigmoid", "tanh", "activation"):  # libm vs the C build's libmvec: a few ulp
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(mine, theirs)


REDUCING = [
    ("sum", lambda x, w: nd.sum(x, axis=1)),
    ("mean", lambda x, w: nd.mean(x, axis=0, keepdims=True)),
    ("max", lambda x, w: nd.max(x, axis=1)),
    ("dot", lambda x, w: nd.dot(x, w)),
    ("fc", lambda x, w: nd.FullyConnected(x, nd.transpose(w), nd.ones((4,), ctx=x.context),
                                          num_hidden=4)),
    ("softmax", lambda x, w: nd.softmax(x)),
    ("log_softmax", lambda x, w: nd.log_softmax(x, axis=0)),
]


@pytest.mark.parametrize("name,f", REDUCING, ids=[n for n, _ in REDUCING])
def test_reductions_and_products_match_the_cpu(name, f):
    a, w = _rand((6, 5), seed=2), _rand((5, 4), seed=3)
    g = nnsym.gpu()
    mine = f(nd.array(a, ctx=g), nd.array(w, ctx=g)).asnumpy()
    theirs = f(nd.array(a), nd.array(w)).asnumpy()
    np.testing.assert_allclose(mine, theirs, rtol=2e-5, atol=2e-6)


def test_conv_pool_batchnorm_match_the_cpu():
    x = _rand((2, 3, 8, 8), seed=4)
    w = _rand((4, 3, 3, 3), seed=5)
    b = _rand((4,), seed=6)
    gamma, beta = _rand((4,), 7) + 3, _rand((4,), 8)
    mean, var = _rand((4,), 9), np.abs(_rand((4,), 10)) + 0.5

    def net(ctx):
        def on(a):
            return nd.array(a, ctx=ctx)

        y = nd.Convolution(on(x), on(w), on(b), kernel=(3, 3), pad=(1, 1), num_filter=4)
        y = nd.BatchNorm(y, on(gamma), on(beta), on(mean), on(var), fix_gamma=False)
        y = nd.Activation(y, act_type="relu")
        return nd.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="max").asnumpy()

    np.testing.assert_allclose(net(nnsym.gpu()), net(nnsym.cpu()), rtol=1e-4, atol=1e-5)


def test_mlp_forward_and_backward_operators_match_the_cpu():
    """An MLP's forward and its gradient (the backward operators a bound graph would run)."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=(8, 10)).astype(np.float32)
    w1, b1 = rng.normal(size=(16, 10)).astype(np.float32), np.zeros(16, np.float32)
    w2, b2 = rng.normal(size=(3, 16)).astype(np.float32), np.zeros(3, np.float32)
    label = rng.integers(0, 3, 8).astype(np.float32)

    def run(ctx):
        def on(a):
            return nd.array(a, ctx=ctx)

        h = nd.FullyConnected(on(x), on(w1), on(b1), num_hidden=16)
        a = nd.Activation(h, act_type="relu")
        o = nd.FullyConnected(a, on(w2), on(b2), num_hidden=3)
        p = nd.softmax(o)
        # d(cross entropy)/d(o) = p - onehot; back through the second layer and the relu
        dout = p - on(np.eye(3, dtype=np.float32)[label.astype(int)])
        dw2 = nd.dot(dout, a, transpose_a=True)
        da = nd.dot(dout, on(w2))
        dh = da * nd.sign(a)  # relu'(h): 1 where h > 0
        dw1 = nd.dot(dh, on(x), transpose_a=True)
        return [t.asnumpy() for t in (p, dw2, dw1, nd.sum(dh, axis=0))]

    for mine, theirs in zip(run(nnsym.gpu()), run(nnsym.cpu())):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


def test_dropout_masks_are_the_cpu_masks():
    """Dropout draws its mask from nnsym_uniform(seed, i) in C and CUDA alike: the same seed
    gives the same mask on both devices."""
    from nnsym.ops.nn import dropout

    a = np.ones((4, 64), np.float32)
    outs = []
    for ctx in (nnsym.gpu(), nnsym.cpu()):
        dropout.seed(123)
        outs.append(nd.Dropout(nd.array(a, ctx=ctx), p=0.5, mode="always").asnumpy())
    assert 0 < np.count_nonzero(outs[0]) < a.size
    np.testing.assert_array_equal(outs[0], outs[1])


def test_mixed_devices_and_unsupported_uses_are_clear_errors():
    g = nnsym.gpu()
    x = nd.array(_rand((2, 2)), ctx=g)
    with pytest.raises(ContextError, match="different devices"):
        nd.broadcast_add(x, nd.array(_rand((2, 2))))
    with pytest.raises(NNSymError, match="indexing a gpu NDArray"):
        x[0]
    from nnsym import sym

    net = sym.relu(sym.Variable("x"))
    with pytest.raises(NNSymError, match="must be on that device"):
        net.bind(g, {"x": nd.array(_rand((2, 2)))})
    with pytest.raises(NNSymError, match="bind on that gpu context"):
        net.bind(nnsym.cpu(), {"x": x})
    csr = sym.Variable("x", stype="csr")
    with pytest.raises(NNSymError, match="sparse storage"):
        sym.dot(csr, sym.Variable("w")).simple_bind(ctx=g, x=(2, 3), w=(3, 2))
    sparse = nd.array(_rand((2, 3))).tostype("csr")
    with pytest.raises(NNSymError, match=r"csr array cannot be copied to gpu\(0\).*tostype"):
        sparse.as_in_context(g)


def _bind_and_step(net, ctx, shapes, seed=0, grad_req="write", steps=1):
    ex = net.simple_bind(ctx=ctx, grad_req=grad_req, **shapes)
    rng = np.random.default_rng(seed)
    for k, a in sorted(ex.arg_dict.items()):
        if k.endswith("label"):
            a[:] = rng.integers(0, 3, a.shape).astype(np.float32)
        else:
            a[:] = (rng.normal(size=a.shape) * 0.5).astype(np.float32)
    for _k, a in sorted(ex.aux_dict.items()):
        a[:] = np.abs(rng.normal(size=a.shape)).astype(np.float32) + 0.5
    for _ in range(steps):
        ex.forward(is_train=True)
        ex.backward()
    out = {"out": ex.outputs[0].asnumpy()}
    out.update({f"grad_{k}": g.asnumpy() for k, g in ex.grad_dict.items() if g is not None})
    out.update({f"aux_{k}": a.asnumpy() for k, a in ex.aux_dict.items()})
    return ex, out


def _mlp():
    from nnsym import sym

    h = sym.FullyConnected(sym.Variable("data"), num_hidden=16, name="fc1")
    h = sym.Activation(h, act_type="relu")
    o = sym.FullyConnected(h, num_hidden=3, name="fc2")
    return sym.SoftmaxOutput(o, sym.Variable("label"), name="sm")


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_bound_mlp_trains_on_the_gpu_as_on_the_cpu(grad_req):
    shapes = {"data": (8, 10), "label": (8,)}
    ex, mine = _bind_and_step(_mlp(), nnsym.gpu(), shapes, grad_req=grad_req, steps=2)
    _, theirs = _bind_and_step(_mlp(), nnsym.cpu(), shapes, grad_req=grad_req, steps=2)
    assert isinstance(ex.outputs[0], GPUNDArray)
    assert all(isinstance(g, GPUNDArray) for g in ex.grad_dict.values() if g is not None)
    assert set(mine) == set(theirs)
    for k in mine:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_bound_conv_net_with_batchnorm_and_dropout_matches_the_cpu():
    from nnsym import sym
    from nnsym.ops.nn import dropout

    x = sym.Variable("data")
    y = sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=4, name="conv")
    y = sym.BatchNorm(y, fix_gamma=False, name="bn")
    y = sym.Activation(y, act_type="relu")
    y = sym.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="avg")
    y = sym.Dropout(y, p=0.25)
    y = sym.FullyConnected(sym.Flatten(y), num_hidden=3, name="fc")
    net = sym.SoftmaxOutput(y, sym.Variable("label"), name="sm")
    shapes = {"data": (2, 3, 8, 8), "label": (2,)}
    dropout.seed(7)
    _, mine = _bind_and_step(net, nnsym.gpu(), shapes, seed=3)
    dropout.seed(7)
    _, theirs = _bind_and_step(net, nnsym.cpu(), shapes, seed=3)
    for k in mine:
        np.testing.assert_allclose(mine[k], theirs[k], rtol=2e-4, atol=2e-5, err_msg=k)


def test_missing_cupy_is_a_clear_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_cupy(name, *a, **k):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_cupy)
    with pytest.raises(runtime.CudaUnavailableError, match=r"nnsym\[cuda\]"):
        runtime.use_backend("cupy")


def test_kernel_modules_are_built_once(monkeypatch):
    """Operator calls look their kernels up by spec: a repeated call loads (renders, hashes,
    compiles) nothing; a new kernel is loaded once."""
    be = runtime.backend()
    a = nd.array(_rand((4,)), ctx=nnsym.gpu())
    nd.relu(a)
    loads: list = []
    real = be._load_functions
    monkeypatch.setattr(be, "_load_functions", lambda specs: loads.append(specs) or real(specs))
    for _ in range(3):
        nd.relu(a)
    assert loads == []
    nd.sigmoid(a)
    nd.sigmoid(a)
    assert len(loads) == 1
