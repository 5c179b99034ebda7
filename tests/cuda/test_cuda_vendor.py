"""Products on a gpu context through the vendor library (``nnsym.ops.common.device``: cuBLAS
through cupy on a device, numpy on the emulated one): dot, batch_dot, FullyConnected and
Convolution forward and backward, compared with the CPU's C kernels and with the generated CUDA
kernels (``NNSYM_CUDA_VENDOR=0``), over transposes, bias, groups, strides, pads, dilations,
1-D to 3-D and write/add modes."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym
from nnsym import nd, sym
from nnsym.cuda import runtime
from nnsym.ops.common import device as vendor

# every test runs on the emulated device and, where one is available, on a real one
pytestmark = pytest.mark.usefixtures("gpu_backend")


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def test_products_and_convolutions_have_vendor_implementations():
    assert {"dot/dot_gemm.c.j2", "conv/conv_forward.c.j2",
            "conv/conv_backward.c.j2"} <= set(vendor.templates())


def _grads(net, shapes, ctx, seed=0, dtype=np.float32, req="write"):
    """Outputs and gradients after one step (``req="add"``: two steps accumulated)."""
    ex = net.simple_bind(ctx=ctx, grad_req=req, type_dict={"data": dtype}, **shapes)
    for k, (_name, arr) in enumerate(sorted(ex.arg_dict.items())):
        arr[:] = _rand(arr.shape, seed + k, dtype)
    for g in ex.grad_dict.values():
        if g is not None:
            g[:] = 0.5  # add mode accumulates onto what is there
    head = _rand(ex.outputs[0].shape, seed + 99, dtype)
    for _ in range(2 if req == "add" else 1):
        ex.forward(is_train=True)
        ex.backward([nd.array(head, ctx=ctx)])
    out = {"out": ex.outputs[0].asnumpy()}
    out.update({k: v.asnumpy() for k, v in ex.grad_dict.items() if v is not None})
    return out


def _check(net, shapes, rtol=1e-4, atol=1e-5, monkeypatch=None, req="write"):
    cpu = _grads(net, shapes, nnsym.cpu(), req=req)
    gpu = _grads(net, shapes, nnsym.gpu(0), req=req)
    assert cpu.keys() == gpu.keys()
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=rtol, atol=atol, err_msg=k)
    if monkeypatch is not None:  # the generated CUDA kernels agree too
        monkeypatch.setenv("NNSYM_CUDA_VENDOR", "0")
        gen = _grads(net, shapes, nnsym.gpu(0), req=req)
        for k in cpu:
            np.testing.assert_allclose(gen[k], gpu[k], rtol=rtol, atol=atol, err_msg=k)


CONVS = [
    dict(kernel=(3, 3), num_filter=8, pad=(1, 1)),
    dict(kernel=(3, 3), num_filter=8, stride=(2, 2), pad=(1, 1), no_bias=True),
    dict(kernel=(1, 1), num_filter=6, stride=(2, 2)),
    dict(kernel=(3, 2), num_filter=4, dilate=(2, 1), pad=(2, 0)),
    dict(kernel=(3, 3), num_filter=8, num_group=2, pad=(1, 1)),
    dict(kernel=(2, 2), num_filter=4, stride=(3, 3)),  # taps do not overlap
    dict(kernel=(3,), num_filter=5, pad=(1,)),
    dict(kernel=(2, 3, 3), num_filter=4, pad=(0, 1, 1), stride=(1, 2, 1)),
]


@pytest.mark.parametrize("cfg", CONVS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_convolution_forward_and_backward(cfg, monkeypatch):
    spatial = {1: (9,), 2: (9, 8), 3: (5, 6, 7)}[len(cfg["kernel"])]
    net = sym.Convolution(sym.Variable("data"), name="conv", **cfg)
    _check(net, {"data": (3, 4, *spatial)}, monkeypatch=monkeypatch)


@pytest.mark.parametrize("cfg", [CONVS[0], CONVS[1], CONVS[2], CONVS[5]],
                         ids=["pad", "stride-no_bias", "1x1-no_pad", "apart-no_pad"])
def test_convolution_gradients_accumulate(cfg):
    """grad_req="add": two steps summed onto 0.5 in every gradient array."""
    net = sym.Convolution(sym.Variable("data"), name="conv", **cfg)
    _check(net, {"data": (3, 4, 9, 8)}, req="add")


def test_convolution_batched_algorithm_and_gradient_accumulation():
    """Small outputs (the batched lowering) and a data gradient summed from two branches."""
    data = sym.Variable("data")
    a = sym.Convolution(data, kernel=(3, 3), num_filter=16, pad=(1, 1), name="a")
    b = sym.Convolution(data, kernel=(1, 1), num_filter=16, stride=(2, 2), name="b")
    net = sym.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="max") + b
    _check(net, {"data": (6, 8, 4, 4)})


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_dot_and_batch_dot(ta, tb):
    g = nnsym.gpu(0)
    a, b = _rand((5, 7), 1), _rand((7, 3), 2)
    a = a.T.copy() if ta else a
    b = b.T.copy() if tb else b
    mine = nd.dot(nd.array(a, ctx=g), nd.array(b, ctx=g), transpose_a=ta, transpose_b=tb)
    ref = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(mine.asnumpy(), ref, rtol=1e-5, atol=1e-6)
    x, y = _rand((4, 5, 7), 3), _rand((4, 7, 2), 4)
    x = x.swapaxes(1, 2).copy() if ta else x
    y = y.swapaxes(1, 2).copy() if tb else y
    got = nd.batch_dot(nd.array(x, ctx=g), nd.array(y, ctx=g), transpose_a=ta, transpose_b=tb)
    want = np.matmul(x.swapaxes(1, 2) if ta else x, y.swapaxes(1, 2) if tb else y)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_dot_other_float_dtypes(dtype):
    g = nnsym.gpu(0)
    a, b = _rand((6, 9), 5, dtype), _rand((9, 4), 6, dtype)
    mine = nd.dot(nd.array(a, ctx=g, dtype=dtype), nd.array(b, ctx=g, dtype=dtype)).asnumpy()
    assert mine.dtype == dtype
    ref = (a.astype(np.float64) @ b.astype(np.float64))
    tol = 2e-3 if dtype == np.float16 else 1e-12
    np.testing.assert_allclose(mine, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("req", ["write", "add"])
def test_fully_connected_training_with_bias(req, monkeypatch):
    data = sym.Variable("data")
    h = sym.Activation(sym.FullyConnected(data, num_hidden=12, name="fc1"), act_type="relu")
    net = sym.FullyConnected(h, num_hidden=5, name="fc2")
    _check(net, {"data": (7, 10)}, monkeypatch=monkeypatch, req=req)



def test_vendor_kernels_are_chosen_unless_turned_off(monkeypatch, gpu_backend):
    """Float GEMMs and channel-first convolutions load as vendor kernels; integer GEMMs,
    depthwise convolutions and NNSYM_CUDA_VENDOR=0 load the generated CUDA kernels."""
    from nnsym.ir.spec import KernelSpec
    from nnsym.ops.dot.dot import gemm_launch

    be = runtime.backend()
    f32 = gemm_launch(np.dtype(np.float32), "write", batch=1, m=2, n=3, k=4, ta=False,
                      tb=False).spec
    i32 = gemm_launch(np.dtype(np.int32), "write", batch=1, m=2, n=3, k=4, ta=False,
                      tb=False).spec
    depthwise = KernelSpec.make("conv/conv_forward.c.j2", algo="depthwise", dtype="float32",
                                req="write", bias=False, channel_last=False)
    fns = be.functions([f32, i32, depthwise])
    assert isinstance(fns[f32.name], runtime.VendorKernel)
    assert not isinstance(fns[i32.name], runtime.VendorKernel)
    assert not isinstance(fns[depthwise.name], runtime.VendorKernel)
    monkeypatch.setenv("NNSYM_CUDA_VENDOR", "0")
    assert not isinstance(be.functions([f32])[f32.name], runtime.VendorKernel)
