"""Elementwise fusion (nnsym/passes/fuse.py): fused bound graphs against the same graphs bound
with fusion off, over the registry's elementwise examples and random chains, forward and
backward; what fuses and what must not; the memory plan; thread-count independence.

Tolerance: none. A fused kernel stores every step's result in that node's output type, as the
unfused kernels do between launches, and the C is compiled without contraction, so the
results are expected bit for bit (NaN payloads aside)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fuse_harness import bind, run_both, same_bits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym import cpu, sym
from nnsym.codegen import compiler
from nnsym.executor.executor import Executor
from nnsym.ir.opdef import DENSE
from nnsym.ops import REGISTRY
from nnsym.ops.elemwise.fused import PAR_MIN, scalar_form
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.passes.lower import lower
from nnsym.testing import as_nd, infer_node, make_inputs


def fused_names(ex: Executor) -> set[str]:
    """Every node name that went into a fused kernel."""
    nodes = json.loads(ex.tojson())["nodes"]
    return {m for nd in nodes if nd["op"] == "_fused_elemwise"
            for m in nd["attrs"]["fused_nodes"].split(",")}


# ---------------------------------------------------------------------------------------------
# Every elementwise operator of the registry, by its examples


def _fusable(op, ex) -> bool:
    """The operator's dense kernel on this example is one a fused kernel can take over."""
    if op.train_mode or op.random or op.loss:
        return False  # never fused (a training form, random draws, a loss head)
    try:
        p, _ = op.parse_params(dict(ex.params))
        dts = [np.dtype(ex.dtype)] * len(ex.shapes)
        _, out_s, _, out_t = infer_node(op, p, list(ex.shapes), dts)
        nl = lower(op, p, ex.shapes, dts, out_s, out_t, ["write"] * len(out_s))
    except Exception:
        return False
    n = int(np.prod(out_s[0])) if len(out_s) == 1 else 0
    return n > 0 and scalar_form(nl.lowered, n) is not None


CASES = [(op, k, ex) for name, op in sorted(REGISTRY.items())
         if not name.startswith("_backward") and DENSE in op.kernels
         for k, ex in enumerate(op.examples) if _fusable(op, ex)]
DTYPES = sorted({ex.dtype for _, _, ex in CASES})


def _chains(dtype: str, differentiable_only: bool):
    """One group: per case ``op(negative(negative(x_i)), ...) * 1.1`` (the scaling is not
    exact, so a fused kernel that skipped the rounding of op's result to its dtype would
    differ); the inputs."""
    outs, arrays, members = [], {}, {}
    for op, k, ex in CASES:
        grads = op.grad is not None and op.differentiable
        if ex.dtype != dtype or (differentiable_only and not grads):
            continue
        tag = f"{op.name.strip('_')}_{k}"
        vals = make_inputs(op, ex, seed=k)
        ins = []
        for i, v in enumerate(vals):
            name = f"{tag}_in{i}"
            arrays[name] = v
            ins.append(sym.negative(sym.negative(sym.var(name), name=f"{tag}_n{i}a"),
                                    name=f"{tag}_n{i}b"))
        y = getattr(sym, op.name)(*ins, **dict(ex.params), name=f"{tag}_op")
        outs.append(sym._mul_scalar(y, scalar=1.1, name=f"{tag}_out"))
        members[f"{tag}_op"] = op.name
    return sym.Group(outs), arrays, members


def test_registry_has_fusable_operators():
    names = {op.name for op, _, _ in CASES}
    assert {"relu", "tanh", "_plus_scalar", "elemwise_add", "broadcast_mul", "clip",
            "_contrib_quadratic", "_mod"} <= names
    assert len(names) > 80


@pytest.mark.parametrize("dtype", DTYPES)
def test_registry_examples_fused_equal_unfused_forward(dtype):
    net, arrays, members = _chains(dtype, differentiable_only=False)
    (fo, _, fex), (uo, _, _) = run_both(net, arrays)
    fused = fused_names(fex)
    missing = sorted(set(members) - fused)
    assert not missing, f"not fused: {missing}"
    bad = [members[n] for n, a, b in zip(members, fo, uo) if not same_bits(a, b)]
    assert not bad, f"fused differs from unfused for {bad}"


@pytest.mark.parametrize("dtype", [d for d in DTYPES if np.dtype(d).kind == "f"])
def test_registry_examples_fused_equal_unfused_backward(dtype):
    net, arrays, _ = _chains(dtype, differentiable_only=True)
    rng = np.random.default_rng(1)
    heads = [rng.uniform(-1, 1, s).astype(dtype)
             for s in net.infer_shape(**{k: v.shape for k, v in arrays.items()})[1]]
    (fo, fg, fex), (uo, ug, _) = run_both(net, arrays, heads)
    assert all(same_bits(a, b) for a, b in zip(fo, uo))
    names = net.list_arguments()
    bad = [n for n, a, b in zip(names, fg, ug) if not same_bits(a, b)]
    assert not bad, f"gradients differ: {bad}"
    # backward nodes fused too (the generated _backward_<op> kernels)
    assert any(n.endswith("_backward") for n in fused_names(fex))


# ---------------------------------------------------------------------------------------------
# Random chains

UNARY = ["relu", "tanh", "sigmoid", "negative", "abs", "square", "softsign", "sin", "exp"]
SCALAR = [("_plus_scalar", 0.25), ("_mul_scalar", -1.5), ("_maximum_scalar", 0.1),
          ("_minus_scalar", 2.0), ("_rdiv_scalar", 3.0)]
BINARY = ["elemwise_add", "elemwise_sub", "elemwise_mul", "_maximum", "_minimum", "_hypot"]

step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(UNARY), st.integers(0, 20)),
    st.tuples(st.just("s"), st.sampled_from(SCALAR), st.integers(0, 20)),
    st.tuples(st.just("b"), st.sampled_from(BINARY), st.integers(0, 20), st.integers(0, 20)),
)


def _random_chain(steps, nvars: int):
    pool = [sym.var(f"x{i}") for i in range(nvars)]
    for s in steps:
        if s[0] == "u":
            pool.append(getattr(sym, s[1])(pool[s[2] % len(pool)]))
        elif s[0] == "s":
            name, c = s[1]
            pool.append(getattr(sym, name)(pool[s[2] % len(pool)], scalar=c))
        else:
            pool.append(getattr(sym, s[1])(pool[s[2] % len(pool)], pool[s[3] % len(pool)]))
    return pool[-1]


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=2, max_size=7), nvars=st.integers(1, 3),
       dtype=st.sampled_from(["float32", "float64"]))
def test_random_chains_fused_equal_unfused(steps, nvars, dtype):
    net = _random_chain(steps, nvars)
    rng = np.random.default_rng(len(steps))
    arrays = {n: rng.uniform(-2, 2, (3, 7)).astype(dtype) for n in net.list_arguments()}
    if not arrays:
        return
    heads = [rng.uniform(-1, 1, (3, 7)).astype(dtype)]
    (fo, fg, _), (uo, ug, _) = run_both(net, arrays, heads)
    assert same_bits(fo[0], uo[0])
    assert all(same_bits(a, b) for a, b in zip(fg, ug))


# ---------------------------------------------------------------------------------------------
# What fuses, what stays, the memory plan


def w3(x):
    return sym.relu(1.5 * x * x + (-0.5) * x + 0.25) * 0.5 + sym.tanh(x)


def test_w3_is_one_kernel_with_a_smaller_plan_and_shows_in_debug_str():
    x = sym.var("x")
    net = w3(x)
    arrays = {"x": np.random.default_rng(0).uniform(-2, 2, 4096).astype(np.float32)}
    (fo, _, fex), (uo, _, uex) = run_both(net, arrays)
    assert same_bits(fo[0], uo[0])
    want = np.maximum(1.5 * arrays["x"] ** 2 - 0.5 * arrays["x"] + 0.25, 0) * 0.5 + \
        np.tanh(arrays["x"])
    np.testing.assert_allclose(fo[0], want, rtol=1e-6, atol=1e-6)
    text = fex.debug_str()
    assert text.count("Op:") == 1 and "Op:_fused_elemwise" in text
    assert "fused_ops=_mul_scalar,elemwise_mul,_mul_scalar,elemwise_add,_plus_scalar,relu," \
        "_mul_scalar,tanh,elemwise_add" in text
    assert len(fused_names(fex)) == 9
    # the output only, against the unfused plan's intermediates
    assert fex.plan.total_bytes == 4096 * 4 < uex.plan.total_bytes


def test_fusion_off_by_environment(monkeypatch):
    monkeypatch.setenv("NNSYM_FUSION", "0")
    x = sym.var("x")
    ex = w3(x).bind(cpu(), {"x": as_nd(np.ones(8, np.float32))})
    assert "_fused_elemwise" not in ex.debug_str()
    monkeypatch.setenv("NNSYM_FUSION", "1")
    ex = w3(x).bind(cpu(), {"x": as_nd(np.ones(8, np.float32))})
    assert "_fused_elemwise" in ex.debug_str()


def test_outputs_needed_separately_stay_materialised():
    x = sym.var("x")
    h = sym.tanh(sym.relu(x, name="r"), name="h")
    y = sym.exp(sym._mul_scalar(h, scalar=2.0, name="m"), name="e")
    net = sym.Group([h, y])
    arrays = {"x": np.linspace(-2, 2, 12, dtype=np.float32)}
    (fo, _, fex), (uo, _, _) = run_both(net, arrays)
    assert all(same_bits(a, b) for a, b in zip(fo, uo))
    nodes = json.loads(fex.tojson())["nodes"]
    groups = [nd["attrs"]["fused_nodes"].split(",") for nd in nodes
              if nd["op"] == "_fused_elemwise"]
    # h is an output and read by m: the root of its own kernel, written once, read by both
    assert groups == [["r", "h"], ["m", "e"]]


def test_broadcast_inputs_fuse_but_smaller_intermediates_stay_apart():
    a, b = sym.var("a"), sym.var("b")
    # b (1, 4) is read in place by the broadcasting add; relu(b) has b's shape, not the
    # root's, so it stays a kernel of its own
    net = sym.tanh(sym.broadcast_add(sym.exp(sym.relu(a, name="ra"), name="ea"),
                                     sym.relu(b, name="rb"), name="add"), name="t")
    rng = np.random.default_rng(6)
    for sa, sb in (((3, 4), (1, 4)), ((3, 4), (3, 1)), ((2, 3, 5), (3, 1)), ((2, 3, 5), (1,)),
                   ((2, 3, 5), (2, 1, 5))):
        arrays = {"a": rng.uniform(-2, 2, sa).astype(np.float32),
                  "b": rng.uniform(-2, 2, sb).astype(np.float32)}
        (fo, _, fex), (uo, _, _) = run_both(net, arrays)
        assert same_bits(fo[0], uo[0]), (sa, sb)
        assert fused_names(fex) == {"ra", "ea", "add", "t"}, (sa, sb)


def test_no_fusion_across_dtypes():
    i = sym.var("i")
    mixed = sym.exp(sym._div_scalar(sym.abs(i, name="ab"), scalar=2.0, is_int=False,
                                    name="dv"), name="ex")
    arrays = {"i": np.arange(-6, 6, dtype=np.int32).reshape(3, 4)}
    (fo, _, fex), (uo, _, _) = run_both(mixed, arrays)
    assert fo[0].dtype == np.float64 and same_bits(fo[0], uo[0])
    assert fused_names(fex) == {"dv", "ex"}  # the int32 abs is not in the float64 kernel


def test_forward_and_backward_nodes_never_share_a_kernel():
    x = sym.var("x")
    net = sym.sigmoid(sym.tanh(x, name="t"), name="s")
    arrays = {"x": np.linspace(-1, 1, 10, dtype=np.float32)}
    heads = [np.ones(10, np.float32)]
    (fo, fg, fex), (uo, ug, _) = run_both(net, arrays, heads)
    assert same_bits(fo[0], uo[0]) and same_bits(fg[0], ug[0])
    nodes = json.loads(fex.tojson())["nodes"]
    for nd in nodes:
        if nd["op"] == "_fused_elemwise":
            ms = nd["attrs"]["fused_nodes"].split(",")
            assert len({m.endswith("_backward") for m in ms}) == 1, ms


def test_large_fused_kernel_is_independent_of_the_thread_count():
    x = sym.var("x")
    n = 4 * PAR_MIN + 37
    arrays = {"x": np.random.default_rng(5).uniform(-3, 3, n).astype(np.float32)}
    ex = bind(w3(x), arrays, fusion=True)
    old = compiler.set_num_threads(1)
    try:
        one = ex.forward()[0].asnumpy().copy()
        compiler.set_num_threads(2)
        two = ex.forward()[0].asnumpy().copy()
        compiler.set_num_threads(3)
        three = ex.forward()[0].asnumpy().copy()
    finally:
        compiler.set_num_threads(old)
    unfused = bind(w3(x), arrays, fusion=False).forward()[0].asnumpy()
    assert same_bits(one, two) and same_bits(one, three) and same_bits(one, unfused)


def test_grad_req_add_accumulates_through_a_fused_backward():
    x = sym.var("x")
    net = sym.exp(sym.tanh(x) * 0.5)
    xv = np.linspace(-1, 1, 9, dtype=np.float32)
    res = []
    for fusion in (True, False):
        g = as_nd(np.full(9, 2.0, np.float32))
        ex = Executor(net, cpu(), [as_nd(xv)], [g], "add", fusion=fusion)
        ex.forward(is_train=True)
        ex.backward(as_nd(np.ones(9, np.float32)))
        res.append(g.asnumpy().copy())
    assert same_bits(res[0], res[1])


def test_fused_graph_on_the_emulated_gpu_matches_unfused():
    """The CUDA twin (fused.cu.j2) through the emulated device: forward and backward of a
    chain bound on gpu(0) with fusion on and off (bit for bit), and against the cpu (to an ulp:
    the cpu's vectorized tanh is libmvec's)."""
    from nnsym import gpu
    from nnsym.cuda import runtime
    from nnsym.devtools.cuda import shim

    if shim.cxx() is None:
        pytest.skip("needs g++")
    x = sym.var("x")
    net = w3(x)
    xv = np.random.default_rng(2).uniform(-2, 2, 300).astype(np.float32)
    head = np.random.default_rng(3).uniform(-1, 1, 300).astype(np.float32)
    res = []
    old = runtime._BACKEND
    runtime.use_backend("emulate")
    try:
        for ctx, fusion in ((gpu(0), True), (gpu(0), False), (cpu(), True)):
            ex = Executor(net, ctx, [as_nd(xv).as_in_context(ctx)],
                          [as_nd(np.zeros(300, np.float32)).as_in_context(ctx)], "write",
                          fusion=fusion)
            out = ex.forward(is_train=True)[0].asnumpy().copy()
            ex.backward(as_nd(head).as_in_context(ctx))
            res.append((out, ex.grad_arrays[0].asnumpy().copy(), ex))
    finally:
        runtime._BACKEND = old
    assert "_fused_elemwise" in res[0][2].debug_str()
    assert "_fused_elemwise" not in res[1][2].debug_str()
    assert same_bits(res[0][0], res[1][0]) and same_bits(res[0][1], res[1][1])
    np.testing.assert_allclose(res[0][0], res[2][0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(res[0][1], res[2][1], rtol=1e-6, atol=1e-7)


def test_w3_backward_fuses_the_gradient_sum():
    """With gradients, the forward values backward reads stay materialised; the backward maps
    and the gradient sum (add_n) fuse, bit for bit."""
    x = sym.var("x")
    arrays = {"x": np.random.default_rng(4).uniform(-2, 2, 64).astype(np.float32)}
    heads = [np.random.default_rng(5).uniform(-1, 1, 64).astype(np.float32)]
    (fo, fg, fex), (uo, ug, _) = run_both(w3(x), arrays, heads)
    assert same_bits(fo[0], uo[0]) and same_bits(fg[0], ug[0])
    nodes = {nd["name"]: nd for nd in json.loads(fex.tojson())["nodes"]}
    s = nodes["sum_grad"]
    assert s["op"] == "_fused_elemwise" and s["attrs"]["fused_ops"].endswith(",add_n")
    assert "num_args" not in s["attrs"]  # the root's parameters are not the fused node's


def test_pass_on_a_graph_before_and_expected():
    """The pass alone (Graph -> Graph): x -> relu -> *2 -> +y, with the relu also an output:
    expected [relu (kept: an output), fused(mul, add) reading relu and y]; attributes carried
    over for the surviving entries."""
    from nnsym.ir.graph import Entry, Graph, GraphAttrs, Node, variable
    from nnsym.ops import get_op
    from nnsym.passes.fuse import fuse_elementwise
    from nnsym.passes.manager import run_passes
    from nnsym.passes.stype import infer_storage_type

    x, y = variable("x"), variable("y")
    relu = Node(get_op("relu"), "r", get_op("relu").parse_params({})[0], (Entry(x),))
    mul_op = get_op("_mul_scalar")
    mul = Node(mul_op, "m", mul_op.parse_params({"scalar": 2.0})[0], (Entry(relu),))
    add_op = get_op("elemwise_add")
    add = Node(add_op, "a", add_op.parse_params({})[0], (Entry(mul), Entry(y)))
    f32 = np.dtype(np.float32)
    g = Graph((Entry(relu), Entry(add)),
              GraphAttrs(shape=((4,), (4,), (4,), None, None), dtype=(f32, f32, f32, None, None)))
    g = run_passes(g, [infer_shape, infer_type, infer_storage_type])
    out = run_passes(g, [fuse_elementwise()])
    idx = out.index
    ops = [nd.op.name if nd.op else None for nd in idx.nodes]
    assert ops == [None, "relu", None, "_fused_elemwise"]
    fused = idx.nodes[3]
    assert [e.node for e in fused.inputs] == [relu, y]  # the kept relu node itself, then y
    assert fused.name == "a" and fused.attrs["fused_nodes"] == "m,a"
    assert [s.op for s in fused.params.steps] == ["_mul_scalar", "elemwise_add"]
    assert [s.operands for s in fused.params.steps] == [("v0",), ("t0", "v1")]
    assert fused.params.fa == (2.0,)
    assert out.attrs.shape == ((4,),) * 4 and out.attrs.dtype == (f32,) * 4
    assert out.outputs[0] == Entry(relu)
    # nothing to fuse (a single elementwise node): the same graph back
    alone = run_passes(Graph((Entry(relu),), GraphAttrs(shape=((4,), None), dtype=(f32, None))),
                       [infer_shape, infer_type, infer_storage_type])
    assert run_passes(alone, [fuse_elementwise()]) is alone


def test_large_broadcast_kernel_is_independent_of_the_thread_count():
    a, b, c = sym.var("a"), sym.var("b"), sym.var("c")
    net = sym.relu(sym.broadcast_mul(sym.broadcast_add(sym.tanh(a), b), c))
    rng = np.random.default_rng(8)
    arrays = {"a": rng.uniform(-2, 2, (513, 600)).astype(np.float32),
              "b": rng.uniform(-2, 2, (1, 600)).astype(np.float32),
              "c": rng.uniform(-2, 2, (513, 1)).astype(np.float32)}
    assert 513 * 600 >= 4 * PAR_MIN
    ex = bind(net, arrays, fusion=True)
    assert "_fused_elemwise" in ex.debug_str() and ex.debug_str().count("Op:") == 1
    old = compiler.set_num_threads(1)
    try:
        outs = []
        for t in (1, 2, 3):
            compiler.set_num_threads(t)
            outs.append(ex.forward()[0].asnumpy().copy())
    finally:
        compiler.set_num_threads(old)
    unfused = bind(net, arrays, fusion=False).forward()[0].asnumpy()
    assert all(same_bits(o, unfused) for o in outs)
