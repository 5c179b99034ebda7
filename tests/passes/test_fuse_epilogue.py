"""Epilogue fusion (nnsym/passes/fuse.py, nnsym/ops/elemwise/fused_epilogue.py): FullyConnected
and BatchNorm with the elementwise chain that reads their output, as one node. Fused graphs
against the same graphs bound with fusion off, forward and backward, plus numpy references.

Tolerance: none. The epilogue stores every step's result in that node's output type, and the
moved FullyConnected bias is the same float addition the GEMM kernel's own bias loop does, so
the results are expected bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fuse_harness import bind, run_both, same_bits

from nnsym import sym
from nnsym.ir.spec import KernelCall
from nnsym.ops.elemwise.fused import FusedParams
from nnsym.ops.elemwise.fused_epilogue import EpilogueError, EpilogueParams, epilogue_lowering
from nnsym.passes.lower import lower
from nnsym.testing import as_nd


def epilogue_nodes(ex) -> dict[str, str]:
    """Fused producer nodes of the bound graph's JSON: fused_nodes -> op."""
    nodes = json.loads(ex.tojson())["nodes"]
    return {nd["attrs"]["fused_nodes"]: nd["op"] for nd in nodes
            if nd["op"] in ("_fused_FullyConnected", "_fused_BatchNorm")}


def ops_of(ex) -> list[str]:
    return [nd["op"] for nd in json.loads(ex.tojson())["nodes"] if nd["op"] != "null"]


def templates_of(ex, op_name: str, is_train: bool = False) -> list[str]:
    """The templates the bound graph's first ``op_name`` node launches, in order."""
    idx = ex._idx
    for nid, node in enumerate(idx.nodes):
        if node.op is not None and node.op.name == op_name:
            ins, outs = idx.input_entries[nid], list(idx.output_entries(nid))
            nl = lower(node.op, node.params, [ex._shapes[e] for e in ins],
                       [ex._dtypes[e] for e in ins], [ex._shapes[o] for o in outs],
                       [ex._dtypes[o] for o in outs], ["write"] * len(outs), train_form=True)
            low = nl.train if is_train and nl.train is not None else nl.lowered
            return [ln.spec.template for ln in low.launches]
    raise AssertionError(op_name)


def mlp(act: str = "relu"):
    x = sym.var("data")
    h = sym.FullyConnected(x, num_hidden=16, name="fc1")
    h = sym.Activation(h, act_type=act, name="act1")
    h = sym.FullyConnected(h, num_hidden=8, name="fc2")
    h = sym.Activation(h, act_type=act, name="act2")
    h = sym.FullyConnected(h, num_hidden=4, name="fc3")
    return sym.SoftmaxOutput(h, name="softmax")


def mlp_arrays(dtype: str, batch: int = 6) -> dict:
    rng = np.random.default_rng(0)
    arrays = {"data": rng.uniform(-1, 1, (batch, 12)).astype(dtype),
              "softmax_label": rng.integers(0, 4, batch).astype(dtype)}
    fan = 12
    for i, h in enumerate((16, 8, 4), 1):
        arrays[f"fc{i}_weight"] = rng.uniform(-0.5, 0.5, (h, fan)).astype(dtype)
        arrays[f"fc{i}_bias"] = rng.uniform(-0.5, 0.5, h).astype(dtype)
        fan = h
    return arrays


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu"])
def test_mlp_fc_activation_fused_equal_unfused(dtype, act):
    arrays = mlp_arrays(dtype)
    net = mlp(act)
    (fo, fg, fex), (uo, ug, uex) = run_both(net, arrays, heads=[])
    assert same_bits(fo[0], uo[0])
    assert all(same_bits(a, b) for a, b in zip(fg, ug))
    assert epilogue_nodes(fex) == {"fc1,act1": "_fused_FullyConnected",
                                   "fc2,act2": "_fused_FullyConnected"}
    # the GEMM without bias, then bias + activation in one pass
    assert templates_of(fex, "_fused_FullyConnected") == ["dot/dot_gemm.c.j2",
                                                         "elemwise/fused.c.j2"]
    assert not epilogue_nodes(uex) and ops_of(uex).count("FullyConnected") == 3
    text = fex.debug_str()
    assert "Op:_fused_FullyConnected, Name=act1" in text and "fused_ops=FullyConnected," \
        "Activation" in text


def test_mlp_forward_matches_numpy():
    arrays = mlp_arrays("float64")
    (fo, _, fex), _ = run_both(mlp(), arrays)
    h = arrays["data"]
    for i in (1, 2, 3):
        h = h @ arrays[f"fc{i}_weight"].T + arrays[f"fc{i}_bias"]
        if i < 3:
            h = np.maximum(h, 0)
    e = np.exp(h - h.max(1, keepdims=True))
    np.testing.assert_allclose(fo[0], e / e.sum(1, keepdims=True), rtol=1e-12)
    assert len(epilogue_nodes(fex)) == 2


def fc_chain(kind: str):
    x = sym.var("x")
    if kind == "no_bias":
        y = sym.FullyConnected(x, num_hidden=5, no_bias=True, name="fc")
        return sym.relu(sym._mul_scalar(y, scalar=1.5), name="out")
    if kind == "flatten3d":
        y = sym.FullyConnected(x, num_hidden=5, flatten=False, name="fc")
        return sym.LeakyReLU(y, act_type="leaky", slope=0.1, name="out")
    if kind == "bias_column":  # bias given as (num_hidden, 1): stays in the GEMM kernel
        y = sym.FullyConnected(x, sym.var("w"), sym.var("b", shape=(5, 1)), num_hidden=5,
                               name="fc")
        return sym.tanh(y, name="out")
    if kind == "swish":  # the FC output read twice inside the epilogue
        y = sym.FullyConnected(x, num_hidden=5, name="fc")
        return sym.elemwise_mul(y, sym.sigmoid(y, name="s"), name="out")
    if kind == "extra_input":  # the epilogue reads another input (a broadcast scale)
        y = sym.FullyConnected(x, num_hidden=5, name="fc")
        return sym.relu(sym.broadcast_mul(y, sym.var("scale")), name="out")
    raise AssertionError(kind)


FC_SHAPES = {"x": (4, 3, 2), "fc_weight": (5, 6), "fc_bias": (5,), "w": (5, 6), "b": (5, 1),
             "scale": (1, 5)}


@pytest.mark.parametrize("kind", ["no_bias", "flatten3d", "bias_column", "swish",
                                  "extra_input"])
def test_fc_epilogue_variants_fused_equal_unfused(kind):
    net = fc_chain(kind)
    shapes = dict(FC_SHAPES)
    if kind == "flatten3d":
        shapes["x"], shapes["fc_weight"] = (4, 3, 2), (5, 2)
    rng = np.random.default_rng(3)
    arrays = {n: rng.uniform(-1, 1, shapes[n]).astype(np.float32) for n in net.list_arguments()}
    # inference: every kind fuses
    (fo, _, fex), (uo, _, uex) = run_both(net, arrays)
    assert same_bits(fo[0], uo[0])
    fused = epilogue_nodes(fex)
    assert len(fused) == 1 and next(iter(fused)).startswith("fc,")
    if kind == "swish":
        assert next(iter(fused)) == "fc,s,out"
        # one buffer instead of the FC output, the sigmoid and the product
        assert fex.plan.total_bytes < uex.plan.total_bytes
    if kind == "bias_column":
        return  # its bias gradient has shape (num_hidden,): a bind error either way
    # training: the same gradients; fused only where no gradient reads the FC output (the
    # products' backward do; relu's and LeakyReLU's read their own output)
    out_shape = net.infer_shape(**{k: v.shape for k, v in arrays.items()})[1][0]
    heads = [rng.uniform(-1, 1, out_shape).astype(np.float32)]
    (fo, fg, fex), (uo, ug, _) = run_both(net, arrays, heads)
    assert same_bits(fo[0], uo[0])
    assert all(same_bits(a, b) for a, b in zip(fg, ug))
    assert bool(epilogue_nodes(fex)) == (kind in ("no_bias", "flatten3d"))


def test_fc_output_read_elsewhere_is_not_fused():
    x = sym.var("x")
    y = sym.FullyConnected(x, num_hidden=5, name="fc")
    net = sym.Group([sym.relu(y, name="a"), sym.sigmoid(y, name="b")])  # two groups read it
    arrays = {"x": np.ones((2, 3), np.float32), "fc_weight": np.ones((5, 3), np.float32),
              "fc_bias": np.ones(5, np.float32)}
    (fo, _, fex), (uo, _, _) = run_both(net, arrays)
    assert all(same_bits(a, b) for a, b in zip(fo, uo))
    assert not epilogue_nodes(fex) and "FullyConnected" in ops_of(fex)
    # a graph output stays materialised
    net = sym.Group([y, sym.relu(y, name="r")])
    (fo, _, fex), (uo, _, _) = run_both(net, arrays)
    assert not epilogue_nodes(fex)


def test_integer_fully_connected_is_not_fused():
    x = sym.var("x")
    net = sym.relu(sym.FullyConnected(x, num_hidden=3, name="fc"), name="r")
    arrays = {"x": np.arange(6, dtype=np.int32).reshape(2, 3) - 2,
              "fc_weight": np.ones((3, 3), np.int32), "fc_bias": np.ones(3, np.int32)}
    (fo, _, fex), (uo, _, _) = run_both(net, arrays)
    assert same_bits(fo[0], uo[0]) and not epilogue_nodes(fex)


# ---------------------------------------------------------------------------------------------
# BatchNorm + ReLU


def bn_relu(use_global_stats: bool, fix_gamma: bool = False):
    x = sym.var("x")
    y = sym.BatchNorm(x, use_global_stats=use_global_stats, fix_gamma=fix_gamma, name="bn")
    return sym.Activation(y, act_type="relu", name="relu")


def bn_arrays(dtype: str) -> dict:
    rng = np.random.default_rng(5)
    return {"x": rng.uniform(-2, 2, (3, 4, 5, 2)).astype(dtype),
            "bn_gamma": rng.uniform(0.5, 1.5, 4).astype(dtype),
            "bn_beta": rng.uniform(-0.5, 0.5, 4).astype(dtype),
            "bn_moving_mean": rng.uniform(-0.5, 0.5, 4).astype(dtype),
            "bn_moving_var": rng.uniform(0.5, 1.5, 4).astype(dtype)}


def _bind_bn(net, arrays, fusion: bool, train: bool):
    return bind(net, arrays, fusion, grads=train)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("use_global_stats", [True, False])
def test_batchnorm_relu_inference_fused_equal_unfused(dtype, use_global_stats):
    arrays = bn_arrays(dtype)
    net = bn_relu(use_global_stats)
    res = []
    for fusion in (True, False):
        ex = _bind_bn(net, arrays, fusion, train=False)
        res.append((ex.forward(is_train=False)[0].asnumpy().copy(), ex))
    assert same_bits(res[0][0], res[1][0])
    assert epilogue_nodes(res[0][1]) == {"bn,relu": "_fused_BatchNorm"}
    assert ops_of(res[0][1]) == ["_fused_BatchNorm"]
    # one pass: BatchNorm's kernel applies the relu as it stores
    assert templates_of(res[0][1], "_fused_BatchNorm") == ["nn/batch_norm.c.j2"]
    # the unfused graph: the normalized output, then a separate relu
    assert ops_of(res[1][1]) == ["BatchNorm", "Activation"]
    a = arrays
    shape = (1, 4, 1, 1)
    want = np.maximum((a["x"] - a["bn_moving_mean"].reshape(shape))
                      / np.sqrt(a["bn_moving_var"].reshape(shape) + 1e-3)
                      * a["bn_gamma"].reshape(shape) + a["bn_beta"].reshape(shape), 0)
    np.testing.assert_allclose(res[0][0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fix_gamma", [True, False])
def test_batchnorm_relu_training_fused_equal_unfused(fix_gamma):
    arrays = bn_arrays("float32")
    net = bn_relu(False, fix_gamma)
    rng = np.random.default_rng(2)
    head = rng.uniform(-1, 1, arrays["x"].shape).astype(np.float32)
    res = []
    for fusion in (True, False):
        ex = _bind_bn(net, arrays, fusion, train=True)
        out = ex.forward(is_train=True)[0].asnumpy().copy()
        ex.backward([as_nd(head)])
        res.append((out, [g.asnumpy().copy() for g in ex.grad_arrays],
                    [m.asnumpy().copy() for m in ex.aux_arrays], ex))
    (fo, fg, fa, fex), (uo, ug, ua, _) = res
    assert same_bits(fo, uo)
    assert all(same_bits(a, b) for a, b in zip(fg, ug))
    assert all(same_bits(a, b) for a, b in zip(fa, ua))  # the moving statistics move once
    assert epilogue_nodes(fex) == {"bn,relu": "_fused_BatchNorm"}
    assert templates_of(fex, "_fused_BatchNorm", is_train=True) == ["nn/batch_norm.c.j2"]


def test_epilogue_refuses_to_accumulate():
    p = EpilogueParams("relu", None, 1, FusedParams((), ("float32",), ()))
    call = KernelCall(p, ((2,),), (np.dtype("float32"),), ((2,),), (np.dtype("float32"),),
                      req="add")
    with pytest.raises(EpilogueError, match="accumulate"):
        epilogue_lowering(call)


def test_fc_epilogue_on_the_emulated_gpu_matches_unfused():
    """The CUDA twins (dot_gemm.cu.j2 without bias, then fused.cu.j2 in place) through the
    emulated device: fused and unfused bound on gpu(0), forward and backward, bit for bit."""
    from nnsym import gpu
    from nnsym.cuda import runtime
    from nnsym.devtools.cuda import shim

    if shim.cxx() is None:
        pytest.skip("needs g++")
    old = runtime._BACKEND
    runtime.use_backend("emulate")
    try:
        res = run_both(mlp(), mlp_arrays("float32"), heads=[], ctx=gpu(0))
    finally:
        runtime._BACKEND = old
    res = [(outs[0], gs, ex) for outs, gs, ex in res]
    assert len(epilogue_nodes(res[0][2])) == 2 and not epilogue_nodes(res[1][2])
    assert same_bits(res[0][0], res[1][0])
    assert all(same_bits(a, b) for a, b in zip(res[0][1], res[1][1]))


@pytest.mark.parametrize("train", [False, True])
def test_batchnorm_epilogue_on_the_emulated_gpu_matches_unfused(train):
    """batch_norm.cu.j2's inline epilogue through the emulated device, bit for bit."""
    from nnsym import gpu
    from nnsym.cuda import runtime
    from nnsym.devtools.cuda import shim

    if shim.cxx() is None:
        pytest.skip("needs g++")
    arrays = bn_arrays("float32")
    head = np.random.default_rng(4).uniform(-1, 1, arrays["x"].shape).astype(np.float32)
    old = runtime._BACKEND
    runtime.use_backend("emulate")
    try:
        res = run_both(bn_relu(False), arrays, heads=[head] if train else None, ctx=gpu(0))
    finally:
        runtime._BACKEND = old
    res = [(outs[0], gs, ex) for outs, gs, ex in res]
    assert epilogue_nodes(res[0][2]) == {"bn,relu": "_fused_BatchNorm"}
    assert same_bits(res[0][0], res[1][0])
    assert all(same_bits(a, b) for a, b in zip(res[0][1], res[1][1]))


def test_large_fc_epilogue_is_independent_of_the_thread_count():
    """An epilogue of at least PAR_MIN elements splits by rows over the pool: same bits."""
    from nnsym.runtime import get_num_threads, set_num_threads

    x = sym.var("x")
    net = sym.relu(sym.FullyConnected(x, num_hidden=300, name="fc"), name="r")
    rng = np.random.default_rng(7)
    arrays = {"x": rng.uniform(-1, 1, (256, 20)).astype(np.float32),
              "fc_weight": rng.uniform(-1, 1, (300, 20)).astype(np.float32),
              "fc_bias": rng.uniform(-1, 1, 300).astype(np.float32)}
    before = get_num_threads()
    outs = []
    try:
        for n in (1, 2, 3):
            set_num_threads(n)
            ex = bind(net, arrays, True, grads=False)
            outs.append(ex.forward()[0].asnumpy().copy())
    finally:
        set_num_threads(before)
    assert epilogue_nodes(ex) == {"fc,r": "_fused_FullyConnected"}
    assert all(same_bits(o, outs[0]) for o in outs)
    want = np.maximum(arrays["x"].astype(np.float64) @ arrays["fc_weight"].T.astype(np.float64)
                      + arrays["fc_bias"], 0)
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
