"""The executor: W1's MLP forward and backward against an independent numpy implementation,
MXNet's memory-plan figures, debug_str's layout against MXNet 1.9.1's output, bind semantics
and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nnsym import cpu, nd, sym
from nnsym.errors import NNSymError, OperatorParamError, ShapeError
from nnsym.executor.executor import BindError
from nnsym.testing import as_nd

EVIDENCE = Path(__file__).resolve().parents[1] / "golden" / "evidence"


def mlp(hidden=(512, 256), classes=10):
    x = sym.Variable("data")
    for i, h in enumerate(hidden, 1):
        x = sym.FullyConnected(x, num_hidden=h, name=f"fc{i}")
        x = sym.Activation(x, act_type="relu", name=f"relu{i}")
    x = sym.FullyConnected(x, num_hidden=classes, name=f"fc{len(hidden) + 1}")
    return sym.SoftmaxOutput(x, name="softmax")


def _fill(exe, rng, batch, classes=10):
    for name, a in exe.arg_dict.items():
        if name == "softmax_label":
            a[:] = rng.integers(0, classes, batch)
        elif name == "data":
            a[:] = rng.standard_normal(a.shape)
        else:
            a[:] = rng.standard_normal(a.shape) * np.sqrt(2.0 / a.shape[-1])


def numpy_mlp(args, n_layers):
    """Hand-written forward and backward of the MLP (SoftmaxOutput, normalization null)."""
    x = args["data"]
    acts, pre = [x], []
    for i in range(1, n_layers + 1):
        z = acts[-1] @ args[f"fc{i}_weight"].T + args[f"fc{i}_bias"]
        pre.append(z)
        acts.append(np.maximum(z, 0) if i < n_layers else z)
    z = acts[-1]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    d = p.copy()
    d[np.arange(len(d)), args["softmax_label"].astype(int)] -= 1
    grads = {}
    for i in range(n_layers, 0, -1):
        grads[f"fc{i}_weight"] = d.T @ acts[i - 1]
        grads[f"fc{i}_bias"] = d.sum(0)
        d = d @ args[f"fc{i}_weight"]
        if i > 1:
            d = d * (pre[i - 2] > 0)
    grads["data"] = d
    return p, grads


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_w1_mlp_forward_and_backward_match_numpy(dtype):
    net = mlp()
    exe = net.simple_bind(data=(64, 784), type_dict={"data": dtype})
    rng = np.random.default_rng(0)
    _fill(exe, rng, 64)
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward()
    args = {k: v.asnumpy().astype(np.float64) for k, v in exe.arg_dict.items()}
    p, grads = numpy_mlp(args, 3)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, p, rtol=rtol, atol=rtol * 1e-2)
    for k, want in grads.items():
        got = exe.grad_dict[k].asnumpy()
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max(),
                                   err_msg=k)
    # a second step with new data: same storage, new values
    exe.arg_dict["data"][:] = rng.standard_normal((64, 784))
    out2 = exe.forward(is_train=True)[0]
    exe.backward()
    p2, grads2 = numpy_mlp({k: v.asnumpy().astype(np.float64) for k, v in exe.arg_dict.items()}, 3)
    np.testing.assert_allclose(out2.asnumpy(), p2, rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(exe.grad_dict["fc1_weight"].asnumpy(), grads2["fc1_weight"],
                               rtol=rtol, atol=rtol * np.abs(grads2["fc1_weight"]).max())


def test_memory_plan_totals_are_within_mxnets_figures():
    # MXNet 1.9.1 prints floor(bytes / 2**20): 64 MB (write) and 32 MB (null) for this MLP,
    # 448 MB and 64 MB for six chained tanh (../shared/MXNET-FACTS.md 6.8).
    net = mlp(hidden=(1024,))
    w = net.simple_bind(data=(8192, 784), grad_req="write").plan.total_bytes
    n = net.simple_bind(data=(8192, 784), grad_req="null").plan.total_bytes
    assert w >> 20 <= 64 and n >> 20 <= 32
    assert w == 8 * 8192 * (1024 + 10)  # MXNet's exact worked figure: two N*H blocks
    assert n == 4 * 8192 * (1024 + 10)
    y = sym.Variable("x")
    for i in range(6):
        y = sym.tanh(y, name=f"t{i}")
    assert y.simple_bind(x=(4096, 4096), grad_req="write").plan.total_bytes <= 448 << 20
    assert y.simple_bind(x=(4096, 4096), grad_req="null").plan.total_bytes <= 64 << 20


def test_memory_plan_counts_real_dtype_sizes():
    y = sym.Variable("x")
    for i in range(3):
        y = sym.tanh(y, name=f"t{i}")
    f16 = y.simple_bind(x=(256, 256), grad_req="null", type_dict={"x": "float16"})
    f64 = y.simple_bind(x=(256, 256), grad_req="null", type_dict={"x": "float64"})
    assert f16.plan.total_bytes == 256 * 256 * 2  # MXNet counts 4 bytes for every dtype
    assert f64.plan.total_bytes == 256 * 256 * 8


def test_in_place_chain_gives_right_values(monkeypatch):
    monkeypatch.setenv("NNSYM_FUSION", "0")  # the in-place planner on the unfused chain
    x = sym.Variable("x")
    y = sym.sigmoid(sym.tanh(sym.exp(x, name="e"), name="t"), name="s")
    a = np.random.default_rng(5).standard_normal((3, 4))
    inference = y.bind(None, {"x": as_nd(a)}, grad_req="null")
    assert len(inference.plan.block_bytes) == 1  # t and s run in place on e's block
    np.testing.assert_allclose(inference.forward()[0].asnumpy(),
                               1 / (1 + np.exp(-np.tanh(np.exp(a)))), rtol=1e-12)
    # With gradients every forward output is read by backward: no sharing in forward, and
    # the backward chain runs in place on the head gradient's copy.
    exe = y.bind(None, {"x": as_nd(a)}, args_grad={"x": nd.zeros((3, 4), dtype="float64")})
    assert len(exe.plan.block_bytes) == 4
    out = exe.forward()[0].asnumpy()
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-np.tanh(np.exp(a)))), rtol=1e-12)
    exe.backward(nd.ones((3, 4), dtype="float64"))
    t = np.tanh(np.exp(a))
    s = 1 / (1 + np.exp(-t))
    want = s * (1 - s) * (1 - t * t) * np.exp(a)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), want, rtol=1e-12)


def test_debug_str_layout_matches_mxnet(monkeypatch):
    monkeypatch.setenv("NNSYM_FUSION", "0")  # MXNet's graph: FullyConnected and relu apart
    net = mlp(hidden=(128,))
    exe = net.simple_bind(data=(64, 784))
    got = exe.debug_str().splitlines()
    want = (EVIDENCE / "debug_str-mlp-write-NONE.txt").read_text().splitlines()
    # MXNet's backward SoftmaxOutput also outputs the label's (zero) gradient; nnsym gives the
    # label a zeros_like node instead. Everything else is line for line the same.
    cut = got.index("Op:zeros_like, Name=softmax_label_zeros_like") - 1
    assert got[:7] == want[:7] and got[8:cut] == want[8:-2]
    assert got[-2] == "Total 0 MB allocated" and got[-1].startswith("Total ")


def test_fan_out_sums_gradients_and_blockgrad_gives_zero():
    x, w = sym.Variable("x"), sym.Variable("w")
    y = sym.elemwise_mul(x, x) + sym.BlockGrad(w) * 3.0 + sym.sin(x)
    a, b = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    grads = {"x": nd.zeros(3, dtype="float64"), "w": nd.ones(3, dtype="float64")}
    exe = y.bind(None, {"x": as_nd(a), "w": as_nd(b)}, args_grad=grads)
    exe.forward()
    exe.backward(nd.ones(3, dtype="float64"))
    np.testing.assert_allclose(grads["x"].asnumpy(), 2 * a + np.cos(a), rtol=1e-12)
    np.testing.assert_array_equal(grads["w"].asnumpy(), 0)  # write mode writes the zeros
    assert "sum_grad" in exe.debug_str()


def test_same_gradient_entry_for_two_arguments_gets_copies():
    x, y = sym.Variable("x"), sym.Variable("y")
    s = x + y  # both gradients are the head gradient itself
    ga, gb = nd.zeros(2), nd.zeros(2)
    exe = s.bind(None, {"x": nd.ones(2), "y": nd.ones(2)}, args_grad={"x": ga, "y": gb})
    exe.forward()
    exe.backward(nd.array([2.0, 3.0]))
    np.testing.assert_array_equal(ga.asnumpy(), [2, 3])
    np.testing.assert_array_equal(gb.asnumpy(), [2, 3])


def test_bind_uses_the_given_arrays_and_outputs_share_storage():
    x = sym.Variable("x")
    y = sym.exp(x)
    a = nd.array([0.0, 1.0])
    exe = y.bind(None, [a], grad_req="null")
    first = exe.forward()[0]
    a[:] = 2.0  # seen by the next forward, as in MXNet
    exe.forward()
    np.testing.assert_allclose(first.asnumpy(), np.exp([2.0, 2.0]), rtol=1e-6)
    assert exe.grad_arrays == [None]
    np.testing.assert_allclose(exe.forward(x=nd.array([1.0, 1.0]))[0].asnumpy(), np.e, rtol=1e-6)


def test_eval_and_reshape_like_ops():
    x = sym.Variable("x")
    y = sym.Flatten(sym.Reshape(x, shape=(2, 3, 2))) * 2.0
    out = y.eval(x=nd.array(np.arange(12, dtype=np.float32)))[0]
    np.testing.assert_array_equal(out.asnumpy(), np.arange(12).reshape(2, 6) * 2.0)


def test_bad_input_is_reported_clearly():
    net = mlp(hidden=(8,))
    with pytest.raises(BindError, match="missing"):
        net.bind(None, {"data": nd.zeros((2, 5))})
    exe = net.simple_bind(data=(4, 5))
    with pytest.raises(ShapeError, match="Argument data"):
        exe.forward(data=nd.zeros((3, 5)))
    with pytest.raises(TypeError, match="Unknown argument"):
        exe.forward(bogus=nd.zeros((4, 5)))
    with pytest.raises(BindError, match="grad_req"):
        net.simple_bind(data=(4, 5), grad_req="sometimes")
    x = sym.Variable("x")
    t = sym.tanh(x)
    exe = t.simple_bind(x=(3,))
    with pytest.raises(BindError, match="head gradient is required"):
        exe.backward()
    with pytest.raises(ShapeError, match="head gradient"):
        exe.backward(nd.ones(4))
    with pytest.raises(BindError, match="gradient array for 'x'"):
        t.bind(None, {"x": nd.ones(3)}, args_grad={"x": nd.ones(4)})
    with pytest.raises(OperatorParamError, match="ord"):
        sym.norm(x, ord=3).simple_bind(x=(3,))
    with pytest.raises(NNSymError, match="csr array is 2-D"):
        t.simple_bind(x=(3,), stype_dict={"x": "csr"})
    with pytest.raises(BindError, match="unknown argument"):
        t.simple_bind(x=(3,), stype_dict={"y": "csr"})
    with pytest.raises(BindError, match="storage type of 'x'"):
        t.simple_bind(x=(3,), stype_dict={"x": "sparse"})
    with pytest.raises(ShapeError, match="cannot decide"):
        net.simple_bind()


def test_inferred_json_has_storage_ids_and_in_place_decisions(monkeypatch):
    import json

    monkeypatch.setenv("NNSYM_FUSION", "0")  # the unfused chain (fused: tests/passes/test_fuse.py)

    x = sym.Variable("x")
    y = sym.sigmoid(sym.tanh(sym.exp(x, name="e"), name="t"), name="s")
    exe = y.simple_bind(x=(3, 4), grad_req="null")
    nodes = {n["name"]: n for n in json.loads(exe.tojson())["nodes"]}
    sid = {k: nodes[k]["attrs"]["__inferred_storage_id__"] for k in ("x", "e", "t", "s")}
    assert sid == {"x": "[-1]", "e": "[0]", "t": "[0]", "s": "[0]"}
    assert nodes["t"]["attrs"]["__inferred_inplace__"] == "[0]"
    assert nodes["e"]["attrs"]["__inferred_inplace__"] == "[-1]"
    assert sym.load_json(exe.tojson()).list_outputs() == ["s_output"]


def test_dropout_trains_with_fresh_masks_and_is_the_identity_at_inference():
    x = sym.Variable("x")
    y = sym.Dropout(x, p=0.5, name="dp")
    a = np.random.default_rng(7).uniform(1, 2, (64, 32))
    grads = {"x": nd.zeros(a.shape, dtype="float64")}
    exe = y.bind(None, {"x": as_nd(a)}, args_grad=grads)
    np.testing.assert_array_equal(exe.forward(is_train=False)[0].asnumpy(), a)
    out1 = exe.forward(is_train=True)[0].asnumpy().copy()
    ratio = out1 / a
    assert set(np.unique(ratio)) <= {0.0, 2.0}
    assert 0.4 < (ratio == 0).mean() < 0.6
    head = np.random.default_rng(8).standard_normal(a.shape)
    exe.backward(as_nd(head))
    np.testing.assert_allclose(grads["x"].asnumpy(), head * ratio, rtol=1e-15)
    out2 = exe.forward(is_train=True)[0].asnumpy()
    assert (out2 != out1).any()  # a new mask every training run


@pytest.mark.parametrize("fix_gamma", [True, False])
def test_batch_norm_training_forward_backward_and_moving_statistics(fix_gamma):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 3, 2, 5))
    s = sym.BatchNorm(sym.Variable("data"), fix_gamma=fix_gamma, momentum=0.8, eps=1e-3,
                      name="bn")
    exe = s.simple_bind(data=x.shape, type_dict={"data": "float64"})
    exe.arg_dict["data"][:] = x
    gamma = rng.uniform(0.5, 1.5, 3)
    beta = rng.standard_normal(3)
    exe.arg_dict["bn_gamma"][:] = gamma
    exe.arg_dict["bn_beta"][:] = beta
    mm0, mv0 = rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    exe.aux_dict["bn_moving_mean"][:] = mm0
    exe.aux_dict["bn_moving_var"][:] = mv0
    out = exe.forward(is_train=True)[0].asnumpy()
    mu = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    b = (1, 3, 1, 1)
    xhat = (x - mu.reshape(b)) / np.sqrt(var.reshape(b) + 1e-3)
    g_eff = np.ones(3) if fix_gamma else gamma
    np.testing.assert_allclose(out, xhat * g_eff.reshape(b) + beta.reshape(b), rtol=1e-12,
                               atol=1e-12)
    # moving statistics move in backward, not in forward (MXNet 1.x)
    np.testing.assert_array_equal(exe.aux_dict["bn_moving_mean"].asnumpy(), mm0)
    head = rng.standard_normal(x.shape)
    exe.backward(as_nd(head))
    m = float(np.float32(0.8))  # MXNet's momentum is a C float
    np.testing.assert_allclose(exe.aux_dict["bn_moving_mean"].asnumpy(),
                               mm0 * m + mu * (1 - m), rtol=1e-12)
    np.testing.assert_allclose(exe.aux_dict["bn_moving_var"].asnumpy(),
                               mv0 * m + var * (1 - m), rtol=1e-9)

    # gradients against central differences of the training-mode forward
    def f(xv, gv, bv):
        m = xv.mean(axis=(0, 2, 3)).reshape(b)
        v = xv.var(axis=(0, 2, 3)).reshape(b)
        gg = np.ones(b) if fix_gamma else gv.reshape(b)
        return float(np.sum(head * ((xv - m) / np.sqrt(v + 1e-3) * gg + bv.reshape(b))))

    eps = 1e-6
    num_x = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        num_x[i] = (f(xp, gamma, beta) - f(xm, gamma, beta)) / (2 * eps)
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), num_x, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(exe.grad_dict["bn_beta"].asnumpy(), head.sum(axis=(0, 2, 3)),
                               rtol=1e-12)
    want_g = np.zeros(3) if fix_gamma else (head * xhat).sum(axis=(0, 2, 3))
    np.testing.assert_allclose(exe.grad_dict["bn_gamma"].asnumpy(), want_g, rtol=1e-10,
                               atol=1e-12)


def mxnet_convnet():
    """The conv net of MXNET-FACTS 6.8: conv3x3(16)+BN+relu+maxpool2, conv3x3(32)+relu+maxpool2,
    flatten, FC10, softmax."""
    x = sym.Variable("data")
    x = sym.Convolution(x, kernel=(3, 3), num_filter=16, pad=(1, 1), name="conv1")
    x = sym.Activation(sym.BatchNorm(x, name="bn1"), act_type="relu", name="relu1")
    x = sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = sym.Convolution(x, kernel=(3, 3), num_filter=32, pad=(1, 1), name="conv2")
    x = sym.Activation(x, act_type="relu", name="relu2")
    x = sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool2")
    x = sym.FullyConnected(sym.Flatten(x, name="flat"), num_hidden=10, name="fc")
    return sym.SoftmaxOutput(x, name="softmax")


@pytest.mark.parametrize(("batch", "write_mb", "null_mb"), [(32, 9, 4), (256, 78, 36)])
def test_convnet_memory_plan_is_within_mxnets(batch, write_mb, null_mb):
    net = mxnet_convnet()
    for req, mb in (("write", write_mb), ("null", null_mb)):
        total = net.simple_bind(data=(batch, 3, 32, 32), grad_req=req).plan.total_bytes
        assert total >> 20 <= mb, (req, total)


def test_convnet_backward_graph_has_mxnets_nodes(monkeypatch):
    # the gradient graph as built, before fusion (a large lone relu would run as a fused node)
    monkeypatch.setenv("NNSYM_FUSION", "0")
    exe = mxnet_convnet().simple_bind(data=(4, 3, 32, 32))
    ops = [ln for ln in exe.debug_str().splitlines() if ln.startswith("Op:")]
    want = [ln for ln in (EVIDENCE / "debug_str-convnet-write-NONE.txt").read_text().splitlines()
            if ln.startswith("Op:")]
    # Differences, all deliberate: nnsym gives the label's zero gradient its own zeros_like
    # node; MXNet's MKLDNN max Pooling has a hidden workspace output whose gradient is a
    # _zeros_without_dtype node; nnsym's Flatten/Reshape gradient is _backward_reshape (it reads
    # the data's shape) where MXNet's is _backward_copy.
    want = [w.replace("_backward_copy", "_backward_reshape") for w in want
            if "_zeros_without_dtype" not in w]
    assert [o for o in ops if "zeros_like" not in o] == want


def test_convnet_trains_one_step_against_finite_differences():
    net = mxnet_convnet()
    exe = net.simple_bind(data=(2, 3, 8, 8), type_dict={"data": "float64"})
    rng = np.random.default_rng(10)
    for k, a in exe.arg_dict.items():
        a[:] = rng.integers(0, 10, a.shape) if k == "softmax_label" else \
            rng.standard_normal(a.shape) * 0.3
    exe.aux_dict["bn1_moving_var"][:] = 1.0
    exe.forward(is_train=False)
    exe.backward()
    w = exe.arg_dict["conv2_weight"]._data
    label = exe.arg_dict["softmax_label"].asnumpy().astype(int)

    def loss():
        p = exe.forward(is_train=False)[0].asnumpy()
        return -np.log(p[np.arange(2), label]).sum()

    g = exe.grad_dict["conv2_weight"].asnumpy()
    for idx in [(0, 0, 0, 0), (5, 3, 1, 2), (31, 15, 2, 2)]:
        old = w[idx]
        w[idx] = old + 1e-6
        up = loss()
        w[idx] = old - 1e-6
        down = loss()
        w[idx] = old
        np.testing.assert_allclose(g[idx], (up - down) / 2e-6, rtol=1e-5, atol=1e-8)


def test_reshape_shares_parameters_and_refuses_growing():
    net = mlp(hidden=(16,))
    exe = net.simple_bind(data=(8, 20))
    rng = np.random.default_rng(11)
    _fill(exe, rng, 8)
    small = exe.reshape(data=(4, 20), softmax_label=(4,))
    assert small.arg_dict["data"].shape == (4, 20)
    exe.arg_dict["fc1_weight"][:] = 0.5  # the same memory
    np.testing.assert_array_equal(small.arg_dict["fc1_weight"].asnumpy(), 0.5)
    small.arg_dict["data"][:] = rng.standard_normal((4, 20))
    small.forward(is_train=True)
    small.backward()
    args = {k: v.asnumpy().astype(np.float64) for k, v in small.arg_dict.items()}
    p, grads = numpy_mlp(args, 2)
    np.testing.assert_allclose(small.outputs[0].asnumpy(), p, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(small.grad_dict["fc1_weight"].asnumpy(), grads["fc1_weight"],
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(BindError, match="larger than the original"):
        exe.reshape(data=(16, 20), softmax_label=(16,))
    assert exe.reshape(data=(16, 20), softmax_label=(16,),
                       allow_up_sizing=True).arg_dict["data"].shape == (16, 20)
    with pytest.raises(BindError, match="unspecified arg: softmax_label"):
        exe.reshape(data=(4, 20))
    assert exe.reshape(data=(4, 20), partial_shaping=True).arg_dict["softmax_label"].shape == (4,)


def test_shared_exec_and_shared_buffer_for_buckets():
    import warnings

    net = mlp(hidden=(16,))
    params = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    big = net.simple_bind(data=(8, 20))
    _fill(big, np.random.default_rng(12), 8)
    buf: dict = {}
    small = net.simple_bind(data=(4, 20), shared_exec=big, shared_arg_names=params,
                            shared_buffer=buf)
    for k in params:  # the very same arrays
        assert small.arg_dict[k] is big.arg_dict[k] and small.grad_dict[k] is big.grad_dict[k]
    assert set(buf) == {"data", "softmax_label", "grad of data", "grad of softmax_label"}
    assert all(a is not None for a in small._pools)
    assert {id(a) for a in small._pools} <= {id(a) for a in big._pools}  # the pool is shared
    small.arg_dict["data"][:] = np.random.default_rng(13).standard_normal((4, 20))
    small.forward(is_train=True)
    small.backward()
    args = {k: v.asnumpy().astype(np.float64) for k, v in small.arg_dict.items()}
    _, grads = numpy_mlp(args, 2)
    np.testing.assert_allclose(big.grad_dict["fc1_weight"].asnumpy(), grads["fc1_weight"],
                               rtol=1e-4, atol=1e-5)
    # a smaller bucket takes views of the buffer; a larger one replaces it, with a warning
    tiny = net.simple_bind(data=(2, 20), shared_exec=big, shared_arg_names=params,
                           shared_buffer=buf)
    assert np.shares_memory(tiny.arg_dict["data"]._data, buf["data"]._data)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        net.simple_bind(data=(6, 20), shared_exec=big, shared_arg_names=params,
                        shared_buffer=buf)
    assert any("too small" in str(m.message) for m in w) and buf["data"].shape == (6, 20)
    with pytest.raises(BindError, match="shared_exec's argument 'fc1_weight'"):
        mlp(hidden=(32,)).simple_bind(data=(4, 20), shared_exec=big, shared_arg_names=params)


def test_rrelu_trains_with_random_slopes_and_its_gradient_uses_them():
    x = sym.Variable("x")
    y = sym.LeakyReLU(x, act_type="rrelu", lower_bound=0.1, upper_bound=0.3, name="rr")
    a = np.random.default_rng(14).uniform(-2, 2, (50, 40))
    grads = {"x": nd.zeros(a.shape, dtype="float64")}
    exe = y.bind(None, {"x": as_nd(a)}, args_grad=grads)
    inference = exe.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(inference, np.where(a > 0, a, 0.2 * a), rtol=1e-15)
    out = exe.forward(is_train=True)[0].asnumpy().copy()
    neg = a < 0
    slopes = out[neg] / a[neg]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.04
    np.testing.assert_array_equal(out[~neg], a[~neg])
    head = np.random.default_rng(15).standard_normal(a.shape)
    exe.backward([as_nd(head), nd.zeros(a.shape, dtype="float64")])  # the mask is an output
    want = np.where(a > 0, head, 0.0)
    want[neg] = head[neg] * slopes
    np.testing.assert_allclose(grads["x"].asnumpy(), want, rtol=1e-12)
    again = exe.forward(is_train=True)[0].asnumpy()
    assert (again[neg] != out[neg]).any()  # fresh slopes every training run


def test_binding_on_the_numpy_backend_is_a_clear_error(monkeypatch):
    from nnsym.codegen import compiler

    monkeypatch.setenv("NNSYM_BACKEND", "numpy")
    compiler.reset_backend()
    try:
        with pytest.raises(NNSymError, match="numpy backend"):
            sym.tanh(sym.Variable("x")).simple_bind(x=(3,))
    finally:
        monkeypatch.delenv("NNSYM_BACKEND")
        compiler.reset_backend()


@pytest.mark.parametrize("req", ["write", "add"])
def test_fully_connected_with_a_column_bias_trains(req):
    """MXNet's shape rule takes a (num_hidden, 1) bias; its gradient, computed as (num_hidden,),
    lands in the (num_hidden, 1) gradient array (column sums of the output gradient)."""
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((3, 5)), rng.standard_normal((4, 5)), rng.standard_normal((4, 1))
    g = rng.standard_normal((3, 4))
    data = sym.Variable("data")
    bias = sym.Variable("fc_bias", shape=(4, 1))
    net = sym.FullyConnected(data, bias=bias, num_hidden=4, name="fc")
    grads = {"data": nd.zeros((3, 5)), "fc_weight": nd.zeros((4, 5)), "fc_bias": nd.zeros((4, 1))}
    ex = net.bind(cpu(), {"data": nd.array(x), "fc_weight": nd.array(w),
                                "fc_bias": nd.array(b)}, args_grad=grads, grad_req=req)
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward(nd.array(g))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), x @ w.T + b.T, rtol=1e-5, atol=1e-5)
    steps = 2 if req == "add" else 1
    np.testing.assert_allclose(grads["fc_bias"].asnumpy(), steps * g.sum(0)[:, None], rtol=1e-5)
    np.testing.assert_allclose(grads["fc_weight"].asnumpy(), steps * g.T @ x, rtol=1e-5,
                               atol=1e-5)
