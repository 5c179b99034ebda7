"""Sparse storage through bound graphs: simple_bind(stype_dict), row_sparse gradients from the
backward storage rules (dot(csr, W), Embedding(sparse_grad=True)), write/add requests,
delivery into gradient arrays of another storage type, fallback nodes, and the storage types
in the bound graph's JSON and debug_str. References are numpy computations."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.ops.common.stype import StorageFallbackWarning


def _csr_data(rng, shape, density=0.4, empty_col=2):
    x = rng.random(shape).astype(np.float32)
    x[rng.random(shape) >= density] = 0
    x[:, empty_col] = 0  # a feature no sample has: its weight row gets no gradient
    return x


def _lin_grad(x, w, y):
    """LinearRegressionOutput's weight gradient through dot: MXNet scales the output gradient
    (out - label) by 1 / (outputs per sample)."""
    return x.T @ (x @ w - y) / y.shape[1]


def _linear(batch=5, feat=7, out=3):
    data, w, label = sym.var("data"), sym.var("weight"), sym.var("label")
    net = sym.LinearRegressionOutput(sym.dot(data, w), label)
    return net, dict(data=(batch, feat), weight=(feat, out), label=(batch, out))


def test_csr_linear_model_gives_row_sparse_weight_gradient():
    rng = np.random.default_rng(0)
    net, shapes = _linear()
    exe = net.simple_bind(grad_req={"weight": "write"}, stype_dict={"data": "csr"}, **shapes)
    assert exe.arg_dict["data"].stype == "csr"
    assert exe.grad_dict["weight"].stype == "row_sparse"
    assert exe.grad_dict["data"] is None
    x = _csr_data(rng, shapes["data"])
    w = rng.standard_normal(shapes["weight"]).astype(np.float32)
    y = rng.standard_normal(shapes["label"]).astype(np.float32)
    exe.arg_dict["weight"][:] = w
    out = exe.forward(is_train=True, data=nd.array(x).tostype("csr"), label=nd.array(y))[0]
    np.testing.assert_allclose(out.asnumpy(), x @ w, rtol=1e-5, atol=1e-6)
    exe.backward()
    g = exe.grad_dict["weight"]
    assert g.stype == "row_sparse"
    np.testing.assert_array_equal(g.indices.asnumpy(), np.flatnonzero((x != 0).any(axis=0)))
    np.testing.assert_allclose(g.asnumpy(), _lin_grad(x, w, y), rtol=1e-5, atol=1e-5)
    # a new batch with another pattern: the gradient follows it
    x2 = _csr_data(rng, shapes["data"], empty_col=5)
    exe.forward(is_train=True, data=nd.array(x2).tostype("csr"), label=nd.array(y))
    exe.backward()
    np.testing.assert_allclose(exe.grad_dict["weight"].asnumpy(), _lin_grad(x2, w, y),
                               rtol=1e-5, atol=1e-5)


def test_row_sparse_gradient_add_request_accumulates():
    rng = np.random.default_rng(1)
    net, shapes = _linear()
    exe = net.simple_bind(grad_req={"weight": "add"}, stype_dict={"data": "csr"}, **shapes)
    w = rng.standard_normal(shapes["weight"]).astype(np.float32)
    exe.arg_dict["weight"][:] = w
    y = rng.standard_normal(shapes["label"]).astype(np.float32)
    want = np.zeros(shapes["weight"], np.float32)
    for k in range(2):
        x = _csr_data(rng, shapes["data"], empty_col=k)
        exe.forward(is_train=True, data=nd.array(x).tostype("csr"), label=nd.array(y))
        exe.backward()
        want += _lin_grad(x, w, y)
    assert exe.grad_dict["weight"].stype == "row_sparse"
    np.testing.assert_allclose(exe.grad_dict["weight"].asnumpy(), want, rtol=1e-5, atol=1e-5)


def test_embedding_sparse_grad_matches_dense_gradient():
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 10, (4, 3)).astype(np.float32)
    idx[0, :2] = 7  # a row looked up several times: its rows are summed
    grads = {}
    for sparse in (True, False):
        data, label = sym.var("data"), sym.var("label")
        emb = sym.Embedding(data, input_dim=10, output_dim=5, sparse_grad=sparse, name="emb")
        net = sym.LinearRegressionOutput(sym.Flatten(emb), label)
        exe = net.simple_bind(data=(4, 3), label=(4, 15), grad_req={"emb_weight": "write"})
        exe.arg_dict["emb_weight"][:] = np.arange(50, dtype=np.float32).reshape(10, 5) / 50
        exe.forward(is_train=True, data=idx, label=np.ones((4, 15), np.float32))
        exe.backward()
        grads[sparse] = exe.grad_dict["emb_weight"]
    assert grads[True].stype == "row_sparse" and grads[False].stype == "default"
    np.testing.assert_array_equal(grads[True].indices.asnumpy(), np.unique(idx).astype(int))
    np.testing.assert_allclose(grads[True].asnumpy(), grads[False].asnumpy(), rtol=1e-6)


def test_gradient_arrays_of_another_storage_type_receive_the_gradient():
    """bind with a dense array for a row_sparse gradient, and a row_sparse array for a dense
    one (FullyConnected's): each keeps its storage type and gets the values."""
    rng = np.random.default_rng(3)
    net, shapes = _linear()
    x = _csr_data(rng, shapes["data"])
    w = rng.standard_normal(shapes["weight"]).astype(np.float32)
    y = rng.standard_normal(shapes["label"]).astype(np.float32)
    gw = nd.ones(shapes["weight"])
    exe = net.bind(None, {"data": nd.array(x).tostype("csr"), "weight": nd.array(w),
                          "label": nd.array(y)}, args_grad={"weight": gw},
                   grad_req={"weight": "write"})
    exe.forward(is_train=True)
    exe.backward()
    assert exe.grad_dict["weight"] is gw and gw.stype == "default"
    np.testing.assert_allclose(gw.asnumpy(), _lin_grad(x, w, y), rtol=1e-5, atol=1e-5)

    d = sym.var("d")
    fc = sym.FullyConnected(d, num_hidden=2, name="fc")
    net2 = sym.LinearRegressionOutput(fc, sym.var("l"))
    xd = rng.standard_normal((3, 4)).astype(np.float32)
    wd = rng.standard_normal((2, 4)).astype(np.float32)
    grs = nd.sparse.zeros("row_sparse", (2, 4))
    exe2 = net2.bind(None, {"d": nd.array(xd), "fc_weight": nd.array(wd),
                            "fc_bias": nd.zeros(2), "l": nd.zeros((3, 2))},
                     args_grad={"fc_weight": grs}, grad_req={"fc_weight": "write"})
    exe2.forward(is_train=True)
    exe2.backward()
    assert exe2.grad_dict["fc_weight"] is grs and grs.stype == "row_sparse"
    np.testing.assert_allclose(grs.asnumpy(), (xd @ wd.T).T @ xd / 2, rtol=1e-5)


def test_fallback_node_in_a_bound_graph():
    rng = np.random.default_rng(4)
    x = _csr_data(rng, (3, 4))
    data = sym.var("data", stype="csr")
    net = sym.sigmoid(data) * 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StorageFallbackWarning)
        exe = net.simple_bind(data=(3, 4), grad_req="null")
    assert any("sigmoid" in str(w.message) for w in caught)  # told once, at bind time
    assert exe.arg_dict["data"].stype == "csr"
    out = exe.forward(data=nd.array(x).tostype("csr"))[0]
    np.testing.assert_allclose(out.asnumpy(), 2 / (1 + np.exp(-x)), rtol=1e-6)


def test_storage_types_in_bound_json_and_debug_str():
    net, shapes = _linear()
    exe = net.simple_bind(grad_req={"weight": "write"}, stype_dict={"data": "csr"}, **shapes)
    nodes = {n["name"]: n for n in json.loads(exe.tojson())["nodes"]}
    assert nodes["data"]["attrs"]["__inferred_storage_type__"] == "[csr]"
    assert nodes["data"]["attrs"]["__inferred_dispatch_mode__"] == "variable"
    bwd = next(n for n in nodes.values() if n["op"] == "_backward_dot")["attrs"]
    assert bwd["__inferred_storage_type__"] == "[default, row_sparse]"
    assert bwd["__inferred_dispatch_mode__"] == "fcompute_ex"
    text = exe.debug_str()
    assert "Storage:\n\tinputs=[default, csr, default]\n\toutputs=[default, row_sparse]\n" \
           "\tdispatch=fcompute_ex" in text
    dense = net.simple_bind(**shapes)
    assert "Storage:" not in dense.debug_str()
    # the symbol-level inferred dump reads __storage_type__ attributes
    d = sym.var("d", stype="csr")
    dumped = json.loads(sym.dot(d, sym.var("w")).tojson(inferred=True, d=(2, 3), w=(3, 4)))
    dot = next(n for n in dumped["nodes"] if n["op"] == "dot")
    assert dot["attrs"]["__inferred_dispatch_mode__"] == "fcompute_ex"


def test_sparse_training_with_lazy_sgd_matches_numpy():
    """Two steps of a csr linear model trained with lazy SGD momentum: weights equal a numpy
    re-implementation, and rows of features never seen stay untouched."""
    from nnsym import optimizer

    rng = np.random.default_rng(5)
    net, shapes = _linear(batch=6, feat=9, out=2)
    exe = net.simple_bind(grad_req={"weight": "write"}, stype_dict={"data": "csr"}, **shapes)
    w0 = rng.standard_normal(shapes["weight"]).astype(np.float32)
    exe.arg_dict["weight"][:] = w0
    opt = optimizer.create("sgd", learning_rate=0.05, momentum=0.9, wd=0.01)
    state = opt.create_state(0, exe.arg_dict["weight"])
    w, m = w0.astype(np.float64), np.zeros_like(w0, np.float64)
    for _ in range(2):
        x = _csr_data(rng, shapes["data"], empty_col=4)
        y = rng.standard_normal(shapes["label"]).astype(np.float32)
        exe.forward(is_train=True, data=nd.array(x).tostype("csr"), label=nd.array(y))
        exe.backward()
        opt.update(0, exe.arg_dict["weight"], exe.grad_dict["weight"], state)
        g = _lin_grad(x.astype(np.float64), w, y)
        rows = np.flatnonzero((x != 0).any(axis=0))
        m[rows] = 0.9 * m[rows] - 0.05 * 0.01 * w[rows] - 0.05 * g[rows]
        w[rows] += m[rows]
    np.testing.assert_allclose(exe.arg_dict["weight"].asnumpy(), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(exe.arg_dict["weight"].asnumpy()[4], w0[4])


def test_sparse_arguments_refuse_reshape():
    net, shapes = _linear()
    exe = net.simple_bind(stype_dict={"data": "csr"}, grad_req="null", **shapes)
    with pytest.raises(Exception, match="sparse arguments"):
        exe.reshape(data=(8, 7), label=(8, 3), weight=(7, 3))


def test_sparse_outputs_and_values_through_value_maps():
    """A graph whose output is csr (a value map of a csr input) and one whose row_sparse
    input flows through add_n: the outputs keep their storage types and values each run."""
    rng = np.random.default_rng(6)
    a = sym.var("a", stype="csr")
    exe = (sym.square(a) * 3).simple_bind(a=(4, 5), grad_req="null")
    for _ in range(2):
        x = _csr_data(rng, (4, 5))
        out = exe.forward(a=nd.array(x).tostype("csr"))[0]
        assert out.stype == "csr"
        np.testing.assert_allclose(out.asnumpy(), 3 * x * x, rtol=1e-6)
    r1, r2 = sym.var("r1", stype="row_sparse"), sym.var("r2", stype="row_sparse")
    exe = sym.add_n(r1, r2, r1).simple_bind(r1=(6, 2), r2=(6, 2), grad_req="null")
    v1 = _csr_data(rng, (6, 2), empty_col=0)
    v2 = _csr_data(rng, (6, 2), empty_col=1)
    out = exe.forward(r1=nd.array(v1).tostype("row_sparse"),
                      r2=nd.array(v2).tostype("row_sparse"))[0]
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), 2 * v1 + v2, rtol=1e-6)
