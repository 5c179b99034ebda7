"""stack, repeat, reverse/flip, Pad/pad, depth_to_space, space_to_depth, diag, broadcast_like,
reshape_like, slice_like, shape_array and size_array.

Every example's dense kernel in write and add mode against the numpy reference (exactly: these
kernels only move or sum elements), other dtypes, gradients against central differences for
parameter variants the examples do not cover, partial shape inference, rejected configurations,
and cases computed by MXNet 1.9.1 (pasted below as literals; see ``_MXNET``).
"""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError
from nnsym.ops import REGISTRY
from nnsym.runtime.imperative import run_op
from nnsym.test_utils import check_numeric_gradient
from nnsym.testing import infer_node, make_inputs, reference_outputs

NEW = (
    "stack", "repeat", "reverse", "Pad", "depth_to_space", "space_to_depth", "diag",
    "broadcast_like", "reshape_like", "slice_like", "shape_array", "size_array",
)  # fmt: skip
CASES = [
    pytest.param(REGISTRY[n], ex, req, id=f"{n}-{ex}-{req}")
    for n in NEW for ex in REGISTRY[n].examples for req in ("write", "add")
]  # fmt: skip


def _random(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0 if dt.kind == "u" else -50, 50, size=shape).astype(dt)
    return rng.uniform(-4, 4, size=shape).astype(dt)


def _check(op, params, inputs, req="write"):
    p, _ = op.parse_params(params)
    want = reference_outputs(op, p, inputs)
    if req == "add":
        pre = [_random(w.shape, w.dtype, 7) for w in want]
        got = run_op(op, dict(params), inputs, req="add", outputs=[x.copy() for x in pre])
        want = [a + b for a, b in zip(pre, want)]
    else:
        got = run_op(op, dict(params), inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w, strict=True)


def test_the_operators_and_aliases_are_registered():
    assert set(NEW) <= set(REGISTRY)
    assert sym.flip(sym.Variable("x"), axis=(0,)).tojson().count('"op": "reverse"') == 1
    assert sym.pad(sym.Variable("x"), mode="edge", pad_width=(0,) * 8).tojson().count(
        '"op": "Pad"') == 1


@pytest.mark.parametrize(("op", "ex", "req"), CASES)
def test_example_kernels_match_the_reference(op, ex, req):
    _check(op, ex.params, make_inputs(op, ex), req)


@pytest.mark.parametrize("dtype", ["float16", "int8", "uint8", "int64", "bool"])
@pytest.mark.parametrize("name", NEW)
def test_other_dtypes(name, dtype):
    op = REGISTRY[name]
    ex = op.examples[0]
    ins = [_random(s, dtype, i) for i, s in enumerate(ex.shapes)]
    _check(op, ex.params, ins)
    _check(op, ex.params, ins, "add")


# (name, input shapes, params): variants beyond the examples, run and differentiated
VARIANTS = [
    ("stack", [(3,), (3,), (3,), (3,)], {"num_args": 4, "axis": -1}),
    ("stack", [(2, 1, 3), (2, 1, 3)], {"num_args": 2, "axis": 3}),
    ("repeat", [(2, 3, 2)], {"repeats": 3}),
    ("repeat", [(2, 3, 2)], {"repeats": 2, "axis": -1}),
    ("reverse", [(2, 3, 4)], {"axis": (2, 0, 1)}),
    ("reverse", [(3, 4)], {"axis": (-1, 0, -1)}),
    ("Pad", [(1, 1, 2, 3)], {"mode": "edge", "pad_width": (0, 0, 0, 0, 3, 4, 5, 2)}),
    ("Pad", [(1, 2, 3, 3)], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 2, 2, 2, 2)}),
    ("Pad", [(1, 1, 3, 2, 4)], {"mode": "constant", "pad_width": (0, 0, 0, 0, 0, 2, 1, 1, 3, 0),
                                "constant_value": 2.5}),
    ("Pad", [(2, 1, 3, 2, 4)], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 2, 2, 1, 1, 3, 3)}),
    ("depth_to_space", [(2, 12, 2, 3)], {"block_size": 2}),
    ("space_to_depth", [(2, 3, 6, 4)], {"block_size": 2}),
    ("diag", [(5,)], {"k": -3}),
    ("diag", [(2, 3, 4, 5)], {"k": -1, "axis1": 3, "axis2": 1}),
    ("diag", [(4, 4)], {"k": -4}),
    ("broadcast_like", [(1, 3, 1), (4, 3, 5)], {}),
    ("broadcast_like", [(2, 1, 1), (6, 7)], {"lhs_axes": (1, 2), "rhs_axes": (1, 0)}),
    ("reshape_like", [(2, 3, 4), (6, 2, 2)], {"lhs_begin": 0, "lhs_end": 2, "rhs_end": 1}),
    ("slice_like", [(5, 4, 3), (2, 4, 1)], {}),
    ("slice_like", [(5, 4, 3), (1, 3)], {"axes": (1, 0)}),
]


@pytest.mark.parametrize(("name", "shapes", "params"), VARIANTS,
                         ids=[f"{n}-{s}-{p}" for n, s, p in VARIANTS])
def test_variants_values_shapes_and_gradients(name, shapes, params):
    op = REGISTRY[name]
    ins = [_random(s, "float64", i) for i, s in enumerate(shapes)]
    _check(op, params, ins)
    _check(op, params, ins, "add")
    p, _ = op.parse_params(params)
    want = reference_outputs(op, p, ins)
    _, out_s, _, _ = infer_node(op, p, shapes, [np.dtype("float64")] * len(shapes))
    assert out_s == [w.shape for w in want]
    names = [f"x{i}" for i in range(len(ins))]
    s = getattr(sym, name)(*[sym.Variable(n) for n in names], **params)
    wrt = names[:1] if name.endswith("_like") else names
    check_numeric_gradient(s, dict(zip(names, ins)), grad_nodes=wrt, rtol=1e-5)


def test_second_input_of_like_operators_gets_a_zero_gradient():
    for name, shapes in (("broadcast_like", [(1, 3), (4, 3)]), ("reshape_like", [(2, 3), (3, 2)]),
                         ("slice_like", [(4, 5), (2, 3)])):
        a, b = sym.Variable("a"), sym.Variable("b")
        s = getattr(sym, name)(a, b)
        args = {"a": nd.array(_random(shapes[0], "float32")),
                "b": nd.array(_random(shapes[1], "float32"))}
        grads = {k: nd.array(np.full(v.shape, 9.0, np.float32)) for k, v in args.items()}
        exe = s.bind(None, args, args_grad=grads)
        outs = exe.forward(is_train=True)
        exe.backward([nd.ones(outs[0].shape)])
        np.testing.assert_array_equal(grads["b"].asnumpy(), 0)


# ---------------------------------------------------------------------------------------------
# Shape inference with unknown dims and shapes (None); MXNet's own answers are in the comments
# where it infers less (it does not infer backward through stack, repeat, Pad or
# space_to_depth: nnsym fills the input in where it is determined).

F32 = np.dtype("float32")

PARTIAL = [
    # (name, params, input shapes, expected inputs, expected outputs)
    ("stack", {"num_args": 2, "axis": 1}, [(2, 3), None], [(2, 3), (2, 3)], [(2, 2, 3)]),
    ("stack", {"num_args": 2}, [(None, 3), (4, None)], [(4, 3), (4, 3)], [(2, 4, 3)]),
    ("repeat", {"repeats": 2}, [(2, None)], [(2, None)], [(None,)]),
    ("repeat", {"repeats": 2, "axis": 0}, [(2, None)], [(2, None)], [(4, None)]),
    ("reverse", {"axis": (0,)}, [(None, 3)], [(None, 3)], [(None, 3)]),
    ("Pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 0, 3)}, [(1, None, 4, None)],
     [(1, None, 4, None)], [(1, None, 7, None)]),
    ("depth_to_space", {"block_size": 2}, [(None, 8, None, 3)], [(None, 8, None, 3)],
     [(None, 2, None, 6)]),
    ("space_to_depth", {"block_size": 3}, [(1, None, 6, None)], [(1, None, 6, None)],
     [(1, None, 2, None)]),
    ("diag", {}, [(None,)], [(None,)], [(None, None)]),
    ("diag", {"k": 1}, [(3, None, 2)], [(3, None, 2)], [(2, None)]),
    ("broadcast_like", {}, [(1, None), (4, 3)], [(1, None), (4, 3)], [(4, 3)]),
    ("broadcast_like", {}, [(1, 3), None], [(1, 3), None], [None]),
    ("broadcast_like", {"lhs_axes": (0,), "rhs_axes": (1,)}, [(1, 3), (4, None)],
     [(1, 3), (4, None)], [(None, 3)]),
    ("reshape_like", {}, [(2, 3), (3, None)], [(2, 3), (3, None)], [(3, None)]),
    ("slice_like", {"axes": (1,)}, [(4, 5), (None, 3)], [(4, 5), (None, 3)], [(4, 3)]),
    ("slice_like", {}, [(4, 5), None], [(4, 5), None], [None]),
    ("shape_array", {}, [None], [None], [(None,)]),  # MXNet: (0,), its "unknown 1-D"
    ("shape_array", {}, [(None, 2, None)], [(None, 2, None)], [(3,)]),
    ("size_array", {}, [None], [None], [(1,)]),
]


@pytest.mark.parametrize(("name", "params", "shapes", "want_in", "want_out"), PARTIAL,
                         ids=[f"{c[0]}-{c[2]}" for c in PARTIAL])
def test_partial_shape_inference(name, params, shapes, want_in, want_out):
    op = REGISTRY[name]
    p, _ = op.parse_params(params)
    in_s, out_s, _, _ = infer_node(op, p, shapes, [F32] * len(shapes))
    assert in_s == want_in
    assert out_s == want_out


def test_shape_inference_from_the_output():
    """A known output shape fills the input in (bound through an elementwise_add)."""
    cases = [
        (sym.stack(sym.Variable("a"), sym.Variable("a2"), axis=1), (2, 2, 3), (2, 3)),
        (sym.reverse(sym.Variable("a"), axis=(1,)), (2, 3), (2, 3)),
        (sym.Pad(sym.Variable("a"), mode="edge", pad_width=(0, 0, 0, 0, 1, 1, 2, 2)),
         (1, 2, 4, 6), (1, 2, 2, 2)),
        (sym.depth_to_space(sym.Variable("a"), block_size=2), (1, 2, 4, 6), (1, 8, 2, 3)),
        (sym.space_to_depth(sym.Variable("a"), block_size=2), (1, 8, 2, 3), (1, 2, 4, 6)),
    ]
    for s, out, want in cases:
        total = sym.elemwise_add(s, sym.Variable("b"))
        args, outs, _ = total.infer_shape_partial(b=out)
        assert dict(zip(total.list_arguments(), args))["a"] == want
        assert outs == [out]


def test_dtypes():
    for name, shapes in (("broadcast_like", [(1, 3), (4, 3)]), ("slice_like", [(4, 5), (2, 3)]),
                         ("reshape_like", [(2, 3), (3, 2)])):
        op = REGISTRY[name]
        p, _ = op.parse_params({})
        _, _, in_t, out_t = infer_node(op, p, shapes, [np.dtype("float16"), np.dtype("int32")])
        assert [t.name for t in in_t] == ["float16", "int32"]
        assert [t.name for t in out_t] == ["float16"]
    for name in ("shape_array", "size_array"):
        op = REGISTRY[name]
        p, _ = op.parse_params({})
        _, _, _, out_t = infer_node(op, p, [(2, 3)], [np.dtype("float16")])
        assert out_t[0].name == "int64"
    op = REGISTRY["stack"]
    p, _ = op.parse_params({"num_args": 2})
    with pytest.raises(NNSymError):
        infer_node(op, p, [(2,), (2,)], [np.dtype("float32"), np.dtype("int32")])


BAD = [
    # configurations MXNet 1.9.1 rejects at shape inference
    ("stack", {"num_args": 2, "axis": 3}, [(2, 3), (2, 3)]),
    ("stack", {"num_args": 2}, [(2, 3), (2, 4)]),
    ("repeat", {"repeats": 2, "axis": 2}, [(2, 3)]),
    ("reverse", {"axis": (2,)}, [(2, 3)]),
    ("Pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2)}, [(1, 2, 3)]),
    ("Pad", {"mode": "constant", "pad_width": (0, 0, 1, 0, 1, 2, 3, 4)}, [(1, 2, 3, 4)]),
    ("Pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 3)}, [(1, 2, 3, 4)]),
    ("Pad", {"mode": "reflect", "pad_width": (0, 0, 0, 0, 3, 2, 3, 3)}, [(1, 2, 3, 4)]),
    ("depth_to_space", {"block_size": 2}, [(1, 6, 2, 3)]),
    ("depth_to_space", {"block_size": 2}, [(1, 8, 2)]),
    ("space_to_depth", {"block_size": 2}, [(1, 2, 3, 6)]),
    ("diag", {"k": 5}, [(3, 4)]),
    ("diag", {"axis1": 1, "axis2": 1}, [(3, 4, 5)]),
    ("diag", {"axis1": 3}, [(3, 4, 5)]),
    ("broadcast_like", {}, [(2, 3), (4, 3)]),
    ("broadcast_like", {}, [(1, 3), (4, 3, 5)]),
    ("broadcast_like", {"lhs_axes": (1,), "rhs_axes": (0,)}, [(1, 3), (4, 3, 5)]),
    ("reshape_like", {}, [(2, 3), (3, 3)]),
    ("slice_like", {"axes": (-1,)}, [(4, 5, 6), (2, 3)]),
    ("slice_like", {}, [(4, 5), (2, 6)]),
    ("slice_like", {}, [(4, 5), (2, 3, 4)]),
]


@pytest.mark.parametrize(("name", "params", "shapes"), BAD, ids=[f"{c[0]}-{c[1]}" for c in BAD])
def test_rejected_configurations(name, params, shapes):
    op = REGISTRY[name]
    p, _ = op.parse_params(params)
    with pytest.raises(NNSymError):
        infer_node(op, p, shapes, [F32] * len(shapes))


# ---------------------------------------------------------------------------------------------
# MXNet 1.9.1: made in ~/mxref with mx.nd and autograd: inputs as given, y = op(*inputs, **params)
# recorded, then backward of sum(y * w) with w = arange(1, y.size + 1).reshape(y.shape)
# (float32); the literals are y and the first input's gradient.

X23 = np.arange(6, dtype=np.float32).reshape(2, 3)
X4 = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)

_MXNET = [
    ("repeat", [X23], {"repeats": 2}, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5],
     [[3, 7, 11], [15, 19, 23]]),
    ("repeat", [X23], {"repeats": 2, "axis": 1},
     [[0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5]], [[3, 7, 11], [15, 19, 23]]),
    ("reverse", [X23], {"axis": (1, 1)}, [[0, 1, 2], [3, 4, 5]], [[1, 2, 3], [4, 5, 6]]),
    ("flip", [X23], {"axis": (0, 1)}, [[5, 4, 3], [2, 1, 0]], [[6, 5, 4], [3, 2, 1]]),
    ("stack", [X23, X23 + 10], {"axis": 1},
     [[[0, 1, 2], [10, 11, 12]], [[3, 4, 5], [13, 14, 15]]], [[1, 2, 3], [7, 8, 9]]),
    ("pad", [X4], {"mode": "edge", "pad_width": (0, 0, 0, 0, 1, 2, 2, 1)},
     [[[[0, 0, 0, 1, 2, 3, 3], [0, 0, 0, 1, 2, 3, 3], [4, 4, 4, 5, 6, 7, 7],
        [8, 8, 8, 9, 10, 11, 11], [8, 8, 8, 9, 10, 11, 11], [8, 8, 8, 9, 10, 11, 11]],
       [[12, 12, 12, 13, 14, 15, 15], [12, 12, 12, 13, 14, 15, 15],
        [16, 16, 16, 17, 18, 19, 19], [20, 20, 20, 21, 22, 23, 23],
        [20, 20, 20, 21, 22, 23, 23], [20, 20, 20, 21, 22, 23, 23]]]],
     [[[[33, 15, 17, 40], [48, 18, 19, 41], [270, 96, 99, 207]],
       [[285, 99, 101, 208], [174, 60, 61, 125], [648, 222, 225, 459]]]]),
    ("Pad", [X4], {"mode": "reflect", "pad_width": (0, 0, 0, 0, 2, 1, 1, 3)},
     [[[[9, 8, 9, 10, 11, 10, 9, 8], [5, 4, 5, 6, 7, 6, 5, 4], [1, 0, 1, 2, 3, 2, 1, 0],
        [5, 4, 5, 6, 7, 6, 5, 4], [9, 8, 9, 10, 11, 10, 9, 8], [5, 4, 5, 6, 7, 6, 5, 4]],
       [[21, 20, 21, 22, 23, 22, 21, 20], [17, 16, 17, 18, 19, 18, 17, 16],
        [13, 12, 13, 14, 15, 14, 13, 12], [17, 16, 17, 18, 19, 18, 17, 16],
        [21, 20, 21, 22, 23, 22, 21, 20], [17, 16, 17, 18, 19, 18, 17, 16]]]],
     [[[[42, 59, 42, 21], [174, 249, 174, 87], [84, 118, 84, 42]],
       [[138, 203, 138, 69], [462, 681, 462, 231], [276, 406, 276, 138]]]]),
    ("Pad", [X4], {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 0, 0, 1),
                   "constant_value": -1},
     [[[[-1, -1, -1, -1, -1], [0, 1, 2, 3, -1], [4, 5, 6, 7, -1], [8, 9, 10, 11, -1]],
       [[-1, -1, -1, -1, -1], [12, 13, 14, 15, -1], [16, 17, 18, 19, -1],
        [20, 21, 22, 23, -1]]]],
     [[[[6, 7, 8, 9], [11, 12, 13, 14], [16, 17, 18, 19]],
       [[26, 27, 28, 29], [31, 32, 33, 34], [36, 37, 38, 39]]]]),
    ("depth_to_space", [np.arange(16, dtype=np.float32).reshape(1, 8, 1, 2)], {"block_size": 2},
     [[[[0, 4, 1, 5], [8, 12, 9, 13]], [[2, 6, 3, 7], [10, 14, 11, 15]]]],
     [[[[1, 3]], [[9, 11]], [[2, 4]], [[10, 12]], [[5, 7]], [[13, 15]], [[6, 8]],
       [[14, 16]]]]),
    ("space_to_depth", [np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)], {"block_size": 2},
     [[[[0, 2], [8, 10]], [[1, 3], [9, 11]], [[4, 6], [12, 14]], [[5, 7], [13, 15]]]],
     [[[[1, 5, 2, 6], [9, 13, 10, 14], [3, 7, 4, 8], [11, 15, 12, 16]]]]),
    ("diag", [np.arange(24, dtype=np.float32).reshape(2, 3, 4)],
     {"k": 1, "axis1": 2, "axis2": 0}, [[12], [16], [20]],
     [[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], [[1, 0, 0, 0], [2, 0, 0, 0], [3, 0, 0, 0]]]),
    ("diag", [np.arange(3, dtype=np.float32)], {"k": -1},
     [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 2, 0]], [5, 10, 15]),
    ("broadcast_like", [np.array([[1, 2, 3]], np.float32), np.zeros((4, 3, 2), np.float32)],
     {"lhs_axes": (0,), "rhs_axes": (-1,)}, [[1, 2, 3], [1, 2, 3]], [[5, 7, 9]]),
    ("reshape_like", [np.arange(12, dtype=np.float32).reshape(2, 6),
                      np.zeros((5, 2, 3, 7), np.float32)],
     {"lhs_begin": 1, "rhs_begin": 1, "rhs_end": 3},
     [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10, 11]]],
     [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]),
    ("slice_like", [np.arange(20, dtype=np.float32).reshape(4, 5), np.zeros((2, 3), np.float32)],
     {"axes": (-1,)}, [[0, 1, 2], [5, 6, 7], [10, 11, 12], [15, 16, 17]],
     [[1, 2, 3, 0, 0], [4, 5, 6, 0, 0], [7, 8, 9, 0, 0], [10, 11, 12, 0, 0]]),
    ("slice_like", [np.arange(20, dtype=np.float32).reshape(4, 5), np.zeros((2, 3), np.float32)],
     {}, [[0, 1, 2], [5, 6, 7]],
     [[1, 2, 3, 0, 0], [4, 5, 6, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]),
]


@pytest.mark.parametrize(("name", "ins", "params", "out", "grad"), _MXNET,
                         ids=[f"{c[0]}-{c[2]}" for c in _MXNET])
def test_mxnet_values_and_gradients(name, ins, params, out, grad):
    names = [f"x{i}" for i in range(len(ins))]
    s = getattr(sym, name)(*[sym.Variable(n) for n in names], **params)
    args = {n: nd.array(x) for n, x in zip(names, ins)}
    grads = {n: nd.zeros(x.shape) for n, x in zip(names, ins)}
    exe = s.bind(None, args, args_grad=grads)
    (y,) = exe.forward(is_train=True)
    w = np.arange(1, y.size + 1, dtype=np.float32).reshape(y.shape)
    exe.backward([nd.array(w)])
    np.testing.assert_array_equal(y.asnumpy(), np.array(out, np.float32))
    np.testing.assert_array_equal(grads["x0"].asnumpy(), np.array(grad, np.float32))


def test_mxnet_shape_and_size_array():
    # mx.nd.shape_array(mx.nd.zeros((4, 1, 5))) -> [4 1 5] int64; size_array -> [20] int64
    x = nd.zeros((4, 1, 5))
    assert nd.shape_array(x).asnumpy().tolist() == [4, 1, 5]
    assert nd.shape_array(x).dtype == np.int64
    assert nd.size_array(x).asnumpy().tolist() == [20]
    assert nd.size_array(x).dtype == np.int64
