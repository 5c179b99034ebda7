"""Custom operators (nnsym.operator, MXNet's CustomOp): rules through the prop, Python steps in
bound graphs and nd calls, write modes, aux states, JSON, errors; references are numpy, hand
derivations, central differences and the built-in SoftmaxOutput."""

import json
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, operator, sym
from nnsym.errors import NNSymError, OperatorParamError, ShapeError
from nnsym.ops.custom import CustomOpError
from nnsym.test_utils import check_numeric_gradient

# ---------------------------------------------------------------------------------------------
# Operators used below (registered once, at import of this module)


class Softmax(operator.CustomOp):
    """MXNet's documented example: softmax forward, (p - onehot(label)) backward."""

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        y = np.exp(x - x.max(axis=1).reshape((x.shape[0], 1)))
        y /= y.sum(axis=1).reshape((x.shape[0], 1))
        self.assign(out_data[0], req[0], nd.array(y))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].asnumpy().ravel().astype(int)
        y = out_data[0].asnumpy()
        y[np.arange(label.shape[0]), label] -= 1.0
        self.assign(in_grad[0], req[0], nd.array(y))


@operator.register("test_softmax")
class SoftmaxProp(operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return Softmax()


SEEN: dict[str, object] = {}


class SumProd(operator.CustomOp):
    """Outputs s = a + k*b and p = a*b; counts training forwards in its aux state."""

    def __init__(self, k):
        self.k = k

    def forward(self, is_train, req, in_data, out_data, aux):
        SEEN["forward_req"] = list(req)
        a, b = in_data
        self.assign(out_data[0], req[0], a + self.k * b)
        self.assign(out_data[1], req[1], a * b)
        if is_train:
            aux[0][:] += 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        SEEN["backward_req"] = list(req)
        gs, gp = out_grad
        a, b = in_data
        self.assign(in_grad[0], req[0], gs + gp * b)
        self.assign(in_grad[1], req[1], self.k * gs + gp * a)


@operator.register("test_sumprod")
class SumProdProp(operator.CustomOpProp):
    def __init__(self, k="1"):
        super().__init__(need_top_grad=True)
        SEEN["k_type"] = type(k)
        self.k = float(k)

    def list_arguments(self):
        return ["a", "b"]

    def list_outputs(self):
        return ["sum", "prod"]

    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return [in_shape[0], in_shape[0]], [in_shape[0], in_shape[0]], [(1,)]

    def create_operator(self, ctx, shapes, dtypes):
        SEEN["create"] = (shapes, dtypes)
        return SumProd(self.k)


class Sigmoid(operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], 1 / (1 + nd.exp(-in_data[0])))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        y = out_data[0]
        self.assign(in_grad[0], req[0], out_grad[0] * y * (1 - y))


@operator.register("test_sigmoid")
class SigmoidProp(operator.CustomOpProp):
    """Backward reads only the output gradient and the output."""

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return [out_grad[0], out_data[0]]

    def create_operator(self, ctx, shapes, dtypes):
        return Sigmoid()


class Failing(operator.CustomOp):
    def __init__(self, where):
        self.where = where

    def forward(self, is_train, req, in_data, out_data, aux):
        if self.where == "forward":
            raise ZeroDivisionError("boom in forward")
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise KeyError("boom in backward")


@operator.register("test_failing")
class FailingProp(operator.CustomOpProp):
    def __init__(self, where="forward", shapes="ok"):
        super().__init__()
        self.where, self.shapes = where, shapes

    def infer_shape(self, in_shape):
        if self.shapes == "too_many":
            return [in_shape[0]], [in_shape[0], in_shape[0]], []
        if self.shapes == "raise":
            raise RuntimeError("bad rule")
        return [in_shape[0]], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return Failing(self.where)


# ---------------------------------------------------------------------------------------------


def _np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _mlp(head):
    data, label = sym.var("data"), sym.var("softmax_label")
    fc1 = sym.FullyConnected(data, num_hidden=8, name="fc1")
    act = sym.Activation(fc1, act_type="tanh", name="act")
    fc2 = sym.FullyConnected(act, num_hidden=3, name="fc2")
    return head(fc2, label)


def test_softmax_custom_op_trains_an_mlp_like_softmax_output():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=6).astype(np.float32)
    custom = _mlp(lambda h, lab: sym.Custom(h, lab, op_type="test_softmax", name="softmax"))
    builtin = _mlp(lambda h, lab: sym.SoftmaxOutput(h, lab, name="softmax"))
    assert custom.list_arguments() == builtin.list_arguments()
    assert custom.list_outputs() == ["softmax_output"]
    shapes = {"data": x.shape, "softmax_label": y.shape}
    exes = [s.simple_bind(mx.cpu(), grad_req={"data": "null", "softmax_label": "null",
                                              "fc1_weight": "write", "fc1_bias": "write",
                                              "fc2_weight": "write", "fc2_bias": "write"},
                          **shapes) for s in (custom, builtin)]
    init = {n: rng.normal(scale=0.5, size=a.shape).astype(np.float32)
            for n, a in exes[0].arg_dict.items() if n.startswith("fc")}
    for ex in exes:
        for n, v in init.items():
            ex.arg_dict[n][:] = v
    for _ in range(3):  # SGD steps: both paths stay identical
        outs = []
        for ex in exes:
            ex.forward(is_train=True, data=x, softmax_label=y)
            ex.backward()
            outs.append(ex.outputs[0].asnumpy())
            for n in init:
                ex.arg_dict[n][:] = ex.arg_dict[n].asnumpy() - 0.1 * ex.grad_dict[n].asnumpy()
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
        for n in init:
            np.testing.assert_allclose(exes[0].grad_dict[n].asnumpy(),
                                       exes[1].grad_dict[n].asnumpy(), rtol=1e-5, atol=1e-6)
    # and the forward is numpy's softmax of the logits
    w1, b1 = exes[0].arg_dict["fc1_weight"].asnumpy(), exes[0].arg_dict["fc1_bias"].asnumpy()
    w2, b2 = exes[0].arg_dict["fc2_weight"].asnumpy(), exes[0].arg_dict["fc2_bias"].asnumpy()
    exes[0].forward(is_train=False, data=x, softmax_label=y)
    want = _np_softmax(np.tanh(x @ w1.T + b1) @ w2.T + b2)
    np.testing.assert_allclose(exes[0].outputs[0].asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_two_inputs_two_outputs_and_an_aux_state():
    s = sym.Custom(sym.var("a"), sym.var("b"), op_type="test_sumprod", k=2.5, name="sp")
    assert s.list_arguments() == ["a", "b"]
    assert s.list_outputs() == ["sp_sum", "sp_prod"]
    assert s.list_auxiliary_states() == ["sp_count"]
    assert SEEN["k_type"] is str  # attributes reach the prop as strings, as in MXNet
    arg_s, out_s, aux_s = s.infer_shape(a=(2, 3))
    assert (arg_s, out_s, aux_s) == ([(2, 3), (2, 3)], [(2, 3), (2, 3)], [(1,)])
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    hs, hp = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    ex = s.simple_bind(mx.cpu(), a=(2, 3), b=(2, 3), type_dict={"a": "float64", "b": "float64"})
    assert SEEN["create"] == ([[2, 3], [2, 3], [1]], [1, 1, 1])  # MXNet's float64 flag
    ex.aux_dict["sp_count"][:] = 0
    ex.forward(is_train=True, a=a, b=b)
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), a + 2.5 * b)
    np.testing.assert_allclose(ex.outputs[1].asnumpy(), a * b)
    ex.backward([nd.array(hs, dtype="float64"), nd.array(hp, dtype="float64")])
    np.testing.assert_allclose(ex.grad_dict["a"].asnumpy(), hs + hp * b)
    np.testing.assert_allclose(ex.grad_dict["b"].asnumpy(), 2.5 * hs + hp * a)
    ex.forward(is_train=False, a=a, b=b)
    ex.forward(is_train=True, a=a, b=b)
    assert ex.aux_dict["sp_count"].asnumpy().tolist() == [2.0]  # training forwards only
    assert SEEN["forward_req"] == ["write", "write"]


def test_gradients_through_custom_ops_match_central_differences():
    data = sym.var("data")
    fc = sym.FullyConnected(data, num_hidden=4, name="fc")
    sp = sym.Custom(fc, sym.var("b"), op_type="test_sumprod", k="-0.5", name="sp")
    out = sym.Custom(sp[1], op_type="test_sigmoid", name="sig")
    out = sym.Group([out, sp[0]])
    rng = np.random.default_rng(2)
    loc = {"data": rng.normal(size=(3, 5)), "fc_weight": rng.normal(size=(4, 5)),
           "fc_bias": rng.normal(size=(4,)), "b": rng.normal(size=(3, 4))}
    check_numeric_gradient(out, loc, aux_states={"sp_count": np.zeros(1)}, numeric_eps=1e-6,
                           rtol=1e-5, atol=1e-7)


def test_need_top_grad_false_backward_needs_no_head_gradient():
    s = sym.Custom(sym.var("x"), sym.var("label"), op_type="test_softmax", name="sm")
    x = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)
    lab = np.array([0, 2, 1, 2], np.float32)
    ex = s.simple_bind(mx.cpu(), x=(4, 3), grad_req={"x": "write", "label": "null"})
    ex.forward(is_train=True, x=x, label=lab)
    ex.backward()  # no out_grads: the prop said need_top_grad=False
    want = _np_softmax(x)
    want[np.arange(4), lab.astype(int)] -= 1
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_grad_req_add_accumulates_and_null_is_passed():
    s = sym.Custom(sym.var("a"), sym.var("b"), op_type="test_sumprod", k=3, name="sp")
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 2.0, np.float32)
    ex = s.simple_bind(mx.cpu(), a=(2, 2), b=(2, 2), grad_req={"a": "add", "b": "null"})
    ex.grad_dict["a"][:] = 10.0
    heads = [nd.ones((2, 2)), nd.ones((2, 2))]
    for _ in range(2):
        ex.forward(is_train=True, a=a, b=b)
        ex.backward(heads)
    assert SEEN["backward_req"] == ["add", "null"]
    np.testing.assert_allclose(ex.grad_dict["a"].asnumpy(), 10.0 + 2 * (1 + b))


def test_nd_custom_imperative():
    x = np.random.default_rng(4).normal(size=(3, 4)).astype(np.float32)
    y = nd.Custom(nd.array(x), nd.array([0, 1, 2]), op_type="test_softmax")
    np.testing.assert_allclose(y.asnumpy(), _np_softmax(x), rtol=1e-5, atol=1e-6)
    s, p = nd.Custom(nd.array(x), nd.array(2 * x), nd.zeros((1,)), op_type="test_sumprod", k=2)
    np.testing.assert_allclose(s.asnumpy(), x + 4 * x, rtol=1e-6)
    np.testing.assert_allclose(p.asnumpy(), 2 * x * x, rtol=1e-6)
    out = nd.zeros((3, 4))
    nd.Custom(nd.array(x), op_type="test_sigmoid", out=out)
    np.testing.assert_allclose(out.asnumpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)


def test_json_round_trip_keeps_op_type_and_string_attributes():
    s = sym.Custom(sym.var("a"), sym.var("b"), op_type="test_sumprod", k=1.5, name="sp")
    text = s.tojson()
    node = next(n for n in json.loads(text)["nodes"] if n["op"] == "Custom")
    assert node["attrs"] == {"k": "1.5", "op_type": "test_sumprod"}
    back = sym.load_json(text)
    assert back.tojson() == text
    assert back.list_auxiliary_states() == ["sp_count"]
    ex = back.simple_bind(mx.cpu(), a=(2,), b=(2,), grad_req="null")
    ex.forward(a=np.array([1.0, 2.0]), b=np.array([3.0, 4.0]))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), [5.5, 8.0])


def test_unknown_op_type_names_it_and_the_registered_ones():
    with pytest.raises(OperatorParamError, match=r"'no_such_op'.*'test_softmax'"):
        sym.Custom(sym.var("x"), op_type="no_such_op")
    with pytest.raises(OperatorParamError, match="no_such_op"):
        nd.Custom(nd.ones((2,)), op_type="no_such_op")
    text = sym.Custom(sym.var("x"), op_type="test_sigmoid").tojson().replace(
        "test_sigmoid", "gone")
    with pytest.raises(OperatorParamError, match="gone"):
        sym.load_json(text)


def test_wrong_number_of_shapes_names_node_and_op_type():
    s = sym.Custom(sym.var("x"), op_type="test_failing", shapes="too_many", name="bad")
    with pytest.raises(ShapeError, match=r"bad.*test_failing.*2 output values, expected 1"):
        s.infer_shape(x=(2, 3))
    s = sym.Custom(sym.var("x"), op_type="test_failing", shapes="raise", name="bad2")
    with pytest.raises(ShapeError, match=r"bad2.*test_failing.*bad rule") as ei:
        s.infer_shape(x=(2, 3))
    assert isinstance(ei.value.__cause__, RuntimeError)


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_exceptions_in_user_code_name_node_op_type_and_cause(where):
    s = sym.Custom(sym.var("x"), op_type="test_failing", where=where, name="failer")
    ex = s.simple_bind(mx.cpu(), x=(2,))
    with pytest.raises(CustomOpError, match=rf"failer.*'test_failing'.*{where}") as ei:
        ex.forward(is_train=True, x=np.ones(2))
        ex.backward(nd.ones((2,)))
    assert isinstance(ei.value, NNSymError)
    assert isinstance(ei.value.__cause__, ZeroDivisionError if where == "forward" else KeyError)


# ---------------------------------------------------------------------------------------------
# MXNet 1.9.1's own results (tests/golden/custom_op, made by its make.py with the same props)

GOLDEN = Path(__file__).parents[1] / "golden" / "custom_op"


def _golden():
    with np.load(GOLDEN / "custom.npz", allow_pickle=False) as z:
        return dict(z)


def test_mxnet_mlp_with_custom_softmax_matches():
    g = _golden()
    text = (GOLDEN / "mlp-symbol.json").read_text()
    s = sym.load_json(text)
    assert json.loads(s.tojson())["nodes"] == json.loads(text)["nodes"]
    ex = s.simple_bind(mx.cpu(), data=(4, 5), grad_req={
        "data": "write", "fc_weight": "write", "fc_bias": "write", "softmax_label": "null"})
    for k in ("data", "fc_weight", "fc_bias", "softmax_label"):
        ex.arg_dict[k][:] = g[f"mlp_{k}"]
    ex.forward(is_train=True)
    ex.backward()
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), g["mlp_output"], rtol=1e-5, atol=1e-6)
    for k in ("data", "fc_weight", "fc_bias"):
        np.testing.assert_allclose(ex.grad_dict[k].asnumpy(), g[f"mlp_grad_{k}"], rtol=1e-5,
                                   atol=1e-6)


def test_mxnet_sumprod_with_aux_matches():
    g = _golden()
    text = (GOLDEN / "sumprod-symbol.json").read_text()
    s = sym.load_json(text)
    assert json.loads(s.tojson())["nodes"] == json.loads(text)["nodes"]
    ex = s.simple_bind(mx.cpu(), a=(2, 3), b=(2, 3))
    ex.aux_dict["sp_count"][:] = 3
    ex.forward(is_train=True, a=g["sp_a"], b=g["sp_b"])
    ex.backward([nd.array(g["sp_head_sum"]), nd.array(g["sp_head_prod"])])
    for k, got in (("sum", ex.outputs[0]), ("prod", ex.outputs[1]), ("grad_a", ex.grad_dict["a"]),
                   ("grad_b", ex.grad_dict["b"]), ("count", ex.aux_dict["sp_count"])):
        np.testing.assert_allclose(got.asnumpy(), g[f"sp_{k}"], rtol=1e-6, atol=1e-6)


class Densify(operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        SEEN["densify_in"] = in_data[0].stype
        self.assign(out_data[0], req[0], in_data[0].tostype("default") * 2)


@operator.register("test_densify")
class DensifyProp(operator.CustomOpProp):
    def __init__(self, sparse="1"):
        super().__init__()
        self.sparse = sparse == "1"

    def infer_storage_type(self, in_stype):
        if not self.sparse:
            return super().infer_storage_type(in_stype)
        return in_stype, ["default"], []

    def create_operator(self, ctx, shapes, dtypes):
        if SEEN.get("fail_create"):
            raise MemoryError("no room")
        return Densify()


def test_storage_types_come_from_the_prop():
    x = np.array([[0, 1.5, 0], [0, 0, -2]], np.float32)
    got = nd.Custom(nd.array(x).tostype("csr"), op_type="test_densify")
    assert SEEN["densify_in"] == "csr" and got.stype == "default"
    np.testing.assert_allclose(got.asnumpy(), 2 * x)
    s = sym.Custom(sym.var("x", stype="csr"), op_type="test_densify", name="dz")
    ex = s.bind(mx.cpu(), {"x": nd.array(x).tostype("csr")}, grad_req="null")
    np.testing.assert_allclose(ex.forward()[0].asnumpy(), 2 * x)
    # the default infer_storage_type refuses sparse inputs, naming the op_type
    with pytest.raises(NNSymError, match=r"test_densify.*infer_storage_type"):
        nd.Custom(nd.array(x).tostype("csr"), op_type="test_densify", sparse=0)


def test_create_operator_failure_names_node_and_cause():
    SEEN["fail_create"] = True
    try:
        with pytest.raises(CustomOpError, match=r"'cz'.*test_densify.*create_operator.*no room"
                           ) as ei:
            sym.Custom(sym.var("x"), op_type="test_densify", name="cz").simple_bind(
                mx.cpu(), x=(2,))
    finally:
        SEEN["fail_create"] = False
    assert isinstance(ei.value.__cause__, MemoryError)
