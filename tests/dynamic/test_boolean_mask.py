"""boolean_mask, a value-shaped operator: nd forward and the gradient operator against MXNet
1.9.1 (tests/dynamic/golden, made by make_boolean_mask.py) and numpy; finite differences; shape
inference and binding as MXNet (unknown output shape, refused bind); errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, sym
from nnsym.errors import NNSymError, OperatorParamError, ShapeError, ValueShapedError
from nnsym.ops import REGISTRY
from nnsym.testing import as_nd

GOLDEN = Path(__file__).resolve().parent / "golden"
FIX = np.load(GOLDEN / "boolean_mask_mxnet.npz")
META = json.loads((GOLDEN / "boolean_mask_mxnet.json").read_text())
CASES = sorted(k for k in META if not k.startswith("_"))
BACKWARD = nd._backward_contrib_boolean_mask


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("cid", CASES)
def test_forward_matches_mxnet_and_numpy(cid):
    data, index = FIX[f"{cid}/data"], FIX[f"{cid}/index"]
    got = nd.contrib.boolean_mask(as_nd(data), as_nd(index)).asnumpy()
    _close(got, FIX[f"{cid}/out"])
    _close(got, data[index != 0])


@pytest.mark.parametrize("cid", [c for c in CASES if META[c]["differentiable"]])
def test_gradient_operator_matches_mxnet_autograd(cid):
    data, index, head = FIX[f"{cid}/data"], FIX[f"{cid}/index"], FIX[f"{cid}/head"]
    d_data, d_index = BACKWARD(as_nd(head), as_nd(data), as_nd(index))
    _close(d_data.asnumpy(), FIX[f"{cid}/grad"])
    assert d_index.dtype == index.dtype and not d_index.asnumpy().any()


def test_gradient_equals_central_differences():
    """d/d data of sum(w * boolean_mask(data, index)), the forward run imperatively."""
    rng = np.random.default_rng(0)
    data = rng.normal(size=(6, 2, 3))
    index = np.array([1, 0, 0, 2, -1, 0], np.float64)
    w = rng.normal(size=(3, 2, 3))
    analytic = BACKWARD(as_nd(w), as_nd(data), as_nd(index))[0].asnumpy()

    def f(x):
        return float((nd.contrib.boolean_mask(as_nd(x), as_nd(index)).asnumpy() * w).sum())

    eps, num = 1e-6, np.zeros_like(data)
    for k in np.ndindex(data.shape):
        hi, lo = data.copy(), data.copy()
        hi[k] += eps
        lo[k] -= eps
        num[k] = (f(hi) - f(lo)) / (2 * eps)
    np.testing.assert_allclose(analytic, num, rtol=1e-6, atol=1e-8)


def test_gradient_operator_accumulates_with_add():
    """The backward kernel's 'add' mode adds the scattered rows; the index gradient (0) leaves
    the accumulated values as they are."""
    from nnsym.runtime.imperative import run_op

    op = REGISTRY["_backward_contrib_boolean_mask"]
    og = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    data = np.zeros((4, 3), np.float32)
    index = np.array([0, 5, 0, 1], np.int64)
    prev = np.full((4, 3), 10, np.float32)
    prev_i = np.full(4, 7, np.int64)
    run_op(op, {}, [og, data, index], req="add", outputs=[prev, prev_i])
    want = np.full((4, 3), 10, np.float32)
    want[[1, 3]] += og
    np.testing.assert_array_equal(prev, want)
    np.testing.assert_array_equal(prev_i, np.full(4, 7))


@pytest.mark.parametrize("idx_dtype", ["float16", "bool", "uint8", "int8", "int32", "int64",
                                       "float64"])
@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_every_index_and_data_dtype(dtype, idx_dtype):
    x = np.arange(10).astype(dtype).reshape(5, 2)
    index = np.array([1, 0, 1, 0, 1]).astype(idx_dtype)
    got = nd.contrib.boolean_mask(as_nd(x), as_nd(index)).asnumpy()
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, x[index != 0])


def test_empty_and_full_masks_and_sparse_data():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    none = nd.contrib.boolean_mask(nd.array(x), nd.zeros(4))
    assert none.shape == (0, 3) and none.dtype == np.float32
    csr = nd.array(x * (x > 5)).tostype("csr")
    got = nd.contrib.boolean_mask(csr, nd.array([1, 0, 1, 1]))
    assert got.stype == "default"
    np.testing.assert_array_equal(got.asnumpy(), (x * (x > 5))[[0, 2, 3]])


def test_out_argument_takes_the_result():
    x = nd.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    out = nd.zeros((2, 2))
    r = nd.contrib.boolean_mask(x, nd.array([1, 0, 1]), out=out)
    assert r is out
    np.testing.assert_array_equal(out.asnumpy(), [[0, 1], [4, 5]])
    with pytest.raises(ShapeError, match="out="):
        nd.contrib.boolean_mask(x, nd.array([1, 0, 0]), out=nd.zeros((2, 2)))


def test_symbol_inference_leaves_the_output_unknown_as_mxnet():
    s = sym.contrib.boolean_mask(sym.var("data"), sym.var("index"))
    assert s.list_arguments() == ["data", "index"]
    args, outs, _ = s.infer_shape_partial(data=(4, 3), index=(4,))
    want = META["_infer_shape_partial"]
    assert [list(a) for a in args] == want["args"]
    assert [list(o) for o in outs] == want["outs"]  # MXNet: () = unknown
    with pytest.warns(UserWarning):
        assert s.infer_shape(data=(4, 3), index=(4,)) == (None, None, None)
    # the index length comes from data, and a mismatch is a shape error naming the node
    args, _, _ = s.infer_shape_partial(data=(5, 2))
    assert tuple(args[1]) == (5,)
    with pytest.raises(ShapeError, match=r"index has 3 entries but data 4 rows"):
        s.infer_shape_partial(data=(4, 3), index=(3,))
    _, types, _ = s.infer_type(data="float64", index="int32")
    assert types == [np.float64]


@pytest.mark.parametrize("bind", ["simple_bind", "downstream"])
def test_binding_a_graph_with_it_is_refused_naming_the_node(bind):
    """MXNet 1.9.1's simple_bind fails in its InferShape pass; its bind runs the first forward
    and keeps that output shape when the mask changes (both recorded in the golden meta): a
    documented deviation. nnsym refuses at bind, saying which node and why."""
    assert "InferShape" in META["_simple_bind"]
    assert META["_bind"] == {"first": [2, 3], "after_new_mask": [2, 3]}
    s = sym.contrib.boolean_mask(sym.var("data"), sym.var("index"), name="bm")
    if bind == "downstream":
        s = sym.sum(s * 2)
    with pytest.raises(ValueShapedError, match=r"node 'bm' \(_contrib_boolean_mask\).*depend"):
        s.simple_bind(mx.cpu(), data=(4, 3), index=(4,))
    with pytest.raises(ValueShapedError, match=r"node 'bm'"):
        s.bind(mx.cpu(), {"data": nd.ones((4, 3)), "index": nd.array([0, 1, 0, 1])})


def test_bad_inputs_raise_clear_errors():
    x = nd.array(np.ones((4, 3), np.float32))
    with pytest.raises(ShapeError, match="index has 2 entries but data 4 rows"):
        nd.contrib.boolean_mask(x, nd.array([1, 0]))
    with pytest.raises(ShapeError, match="must be 1-D"):
        nd.contrib.boolean_mask(x, nd.array(np.ones((4, 1))))
    with pytest.raises(ShapeError, match="scalar"):
        nd.contrib.boolean_mask(nd.array(np.float32(2)), nd.array([1]))
    with pytest.raises(OperatorParamError, match="axis=1"):
        nd.contrib.boolean_mask(x, nd.array([1, 0, 1, 1]), axis=1)
    with pytest.raises(ShapeError, match="more than data's"):
        BACKWARD(nd.ones((5, 3)), x, nd.array([1, 1, 1, 1]))
    assert issubclass(ValueShapedError, (NNSymError, ValueError))


def test_the_flag_not_the_name_decides():
    """Passes read OpDef.value_shaped: a throwaway operator with the flag is refused at bind."""
    from dataclasses import replace

    from nnsym.ir.graph import Entry, Graph, Node, variable
    from nnsym.passes.infer import require_static_shapes

    op = replace(REGISTRY["relu"], value_shaped=True)
    g = Graph((Entry(Node(op, "r", op.parse_params({})[0], (Entry(variable("x")),))),))
    with pytest.raises(ValueShapedError, match="node 'r' \\(relu\\)"):
        require_static_shapes(g)
    plain = REGISTRY["relu"]
    g = Graph((Entry(Node(plain, "r", plain.parse_params({})[0], (Entry(variable("x")),))),))
    assert require_static_shapes(g) is not None


def test_gpu_arrays_run_on_the_host_and_come_back():
    """On the emulated device: the mask runs on the host (its kernel is host only), the result
    returns to the inputs' gpu; the gradient operator runs its CUDA twin."""
    from nnsym.codegen import compiler
    from nnsym.cuda import runtime
    from nnsym.devtools.cuda import shim
    from nnsym.ndarray.gpu import GPUNDArray

    if shim.cxx() is None or compiler.compiler() is None:
        pytest.skip("needs gcc and g++")
    old = runtime._BACKEND
    runtime.use_backend("emulate")
    try:
        g = mx.gpu(0)
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        index = np.array([1, 0, 0, 1], np.float32)
        y = nd.contrib.boolean_mask(nd.array(x, ctx=g), nd.array(index, ctx=g))
        assert isinstance(y, GPUNDArray) and y.context == g
        np.testing.assert_array_equal(y.asnumpy(), x[[0, 3]])
        head = np.ones((2, 3), np.float32)
        d_data, _ = BACKWARD(nd.array(head, ctx=g), nd.array(x, ctx=g), nd.array(index, ctx=g))
        assert isinstance(d_data, GPUNDArray)
        np.testing.assert_array_equal(d_data.asnumpy(), x * 0 + index[:, None])
    finally:
        runtime._BACKEND = old
