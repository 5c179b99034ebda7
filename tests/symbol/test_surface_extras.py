"""MXNet 1.9.1 API-surface extras against MXNet-made answers: ``split_v2`` (NDArray values and
errors, Symbol shapes, JSON and gradient), ``Symbol.debug_str``/``gradient``/``optimize_for``/
``get_backend_symbol``, ``Executor.copy_params_from``/``get_optimized_symbol``, ``mx.name``,
``mx.AttrScope`` and ``mx.base.MXNetError``. The expectations in
tests/golden/api/surface-extras.json were written by MXNet 1.9.1 (``make_surface_extras.py`` in
the reference venv, with MXNET_SUBGRAPH_BACKEND=NONE)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import kvstore as kvs
from nnsym.errors import NNSymError
from nnsym.executor.executor import BindError, BindShapeError
from nnsym.symbol.symbol import SubgraphBackendError, SymbolGradientNotImplemented

GOLD = json.loads((Path(__file__).resolve().parents[1] / "golden" / "api" /
                   "surface-extras.json").read_text())


def _ios(value):
    if value == "list [2]":
        return [2]  # MXNet refuses a list: only an int or a tuple
    return value if isinstance(value, int) else tuple(value)


@pytest.mark.parametrize("case", GOLD["split_v2_nd"],
                         ids=lambda c: f"{c['shape']}-{c['ios']}-{c['axis']}-{c['squeeze_axis']}")
def test_split_v2_ndarray_matches_mxnet(case):
    shape = tuple(case["shape"])
    x = mx.nd.array(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))
    call = lambda: mx.nd.split_v2(x, _ios(case["ios"]), axis=case["axis"],
                                  squeeze_axis=case["squeeze_axis"])
    if "error" in case:
        # MXNet: ValueError from its Python front end, MXNetError from the operator's checks
        with pytest.raises(mx.base.MXNetError) as info:
            call()
        assert isinstance(info.value, ValueError)
        return
    r = call()
    assert isinstance(r, mx.nd.NDArray) == case["single"]
    outs = [r] if case["single"] else r
    assert [list(o.shape) for o in outs] == case["shapes"]
    for o, want in zip(outs, case["values"]):
        np.testing.assert_array_equal(o.asnumpy().ravel(), np.array(want, np.float32))
    if not case["single"]:  # the fluent method is the same call
        again = x.split_v2(_ios(case["ios"]), axis=case["axis"],
                           squeeze_axis=case["squeeze_axis"])
        assert [o.shape for o in again] == [o.shape for o in outs]


def test_split_v2_symbol_sections_follow_mxnet_shapes():
    for c in GOLD["split_v2_sym_shapes"]:
        s = mx.sym.split_v2(mx.sym.var("x"), c["sections"], axis=0)
        assert [list(o) for o in s.infer_shape(x=(c["n"], 2))[1]] == c["outs"], c
    ex = mx.sym.var("x").split_v2(3, axis=0).bind(
        mx.cpu(), {"x": mx.nd.array(np.arange(8).reshape(4, 2))})
    assert [o.asnumpy().tolist() for o in ex.forward()] == [[[0, 1], [2, 3]], [[4, 5]], [[6, 7]]]


def test_split_v2_symbol_json_is_mxnets():
    with mx.name.NameManager():
        got = {
            "indices": mx.sym.split_v2(mx.sym.var("x"), (1, 3), axis=1).tojson(),
            "sections": mx.sym.var("x").split_v2(2, axis=1).tojson(),
            "squeeze": mx.sym.split_v2(mx.sym.var("x"), 3, axis=0, squeeze_axis=True).tojson(),
        }
    for key, want in GOLD["split_v2_json"].items():
        assert json.loads(got[key]) == json.loads(want), key
        s = mx.sym.load_json(want)  # and MXNet's JSON loads and names its outputs
        assert s.list_outputs() == [f"_split_v2{['indices', 'sections', 'squeeze'].index(key)}"
                                    f"_output{i}" for i in range(len(s.list_outputs()))]


def test_split_v2_gradient_matches_mxnet():
    g = GOLD["split_v2_grad"]
    s = mx.sym.split_v2(mx.sym.var("x"), (1, 3), axis=1)
    grad = mx.nd.zeros((4, 6))
    ex = s.bind(mx.cpu(), {"x": mx.nd.array(g["x"])}, args_grad={"x": grad})
    ex.forward(is_train=True)
    ex.backward([mx.nd.array(h) for h in g["heads"]])
    np.testing.assert_array_equal(grad.asnumpy(), np.array(g["grad"], np.float32))


def _nets():
    """The nets of make_surface_extras.py, built the same way."""
    out = {}
    with mx.name.NameManager():
        x = mx.sym.var("data")
        fc = mx.sym.FullyConnected(x, num_hidden=4, name="fc1")
        act = mx.sym.Activation(fc, act_type="relu", name="relu1")
        sp = mx.sym.split_v2(act, 2, axis=1)
        out["split_group"] = mx.sym.Group([sp[0] + 1, mx.sym.softmax(sp[1], name="sm")])
        v = mx.sym.var("x", lr_mult=2.0, shape=(2, 3))
        f1 = mx.sym.FullyConnected(v, num_hidden=4, name="fc1",
                                   attr={"ctx_group": "dev1", "__mood__": "ok"})
        out["attrs"] = mx.sym.FullyConnected(f1, num_hidden=2, no_bias=True, name="fc2")
        out["variable"] = v
        out["plus"] = v + v
        out["atomic"] = mx.sym.random.uniform(shape=(2,))  # an operator without inputs
        bx = mx.sym.var("data")
        out["batchnorm"] = mx.sym.BatchNorm(mx.sym.FullyConnected(bx, num_hidden=3, name="fc1"),
                                            name="bn")
    return out


def test_debug_str_is_mxnets_text():
    nets = _nets()
    assert set(nets) == set(GOLD["debug_str"])
    for key, s in nets.items():
        assert s.debug_str() == GOLD["debug_str"][key], key


def test_gradient_is_not_implemented_as_in_mxnet():
    assert GOLD["gradient"]["message"].endswith("not implemented")
    with pytest.raises(SymbolGradientNotImplemented, match="not implemented") as info:
        mx.sym.var("x").gradient(["x"])
    assert isinstance(info.value, NotImplementedError) and isinstance(info.value, RuntimeError)
    assert isinstance(info.value, mx.base.MXNetError)


def test_optimize_for_and_backend_symbol():
    act = _nets()["split_group"].get_internals()["relu1_output"]
    assert GOLD["optimize_for"]["foo"]["unchanged"]  # MXNet: unknown backend, graph as it is
    with pytest.warns(UserWarning, match="no subgraph backend named 'foo'"):
        r = act.optimize_for("foo", args={}, aux={})
    assert r.tojson() == act.tojson() and r is not act
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # MXNet fuses FC+relu here (GOLD outputs sg_mkldnn_...); nnsym keeps the graph
        assert act.optimize_for("MKLDNN").tojson() == act.tojson()
        assert act.get_backend_symbol("MKLDNN").list_outputs() == ["relu1_output"]
    assert "foo is not found" in GOLD["optimize_for"]["foo"]["backend_symbol"]["message"]
    with pytest.raises(SubgraphBackendError, match="'foo' is not registered"):
        act.get_backend_symbol("foo")
    with pytest.raises(SubgraphBackendError, match="must be a string"):
        act.optimize_for(3)
    with pytest.raises(TypeError, match="args must be"):
        act.optimize_for("MKLDNN", args=3)


def test_executor_copy_params_from_and_optimized_symbol():
    bn = _nets()["batchnorm"]
    ex = bn.simple_bind(mx.cpu(), data=(2, 4))
    assert GOLD["optimized_symbol_unchanged"]
    assert ex.get_optimized_symbol().tojson() == bn.tojson()
    ex.copy_params_from({"fc1_weight": mx.nd.ones((3, 4), dtype="float64") * 1.5},
                        {"bn_moving_var": mx.nd.full((3,), 2)})
    cp = GOLD["copy_params_from"]
    w = ex.arg_dict["fc1_weight"]
    assert str(w.dtype) == cp["fc1_weight"]["dtype"]  # cast to the executor's dtype
    np.testing.assert_array_equal(w.asnumpy(), cp["fc1_weight"]["value"])
    np.testing.assert_array_equal(ex.aux_dict["bn_moving_var"].asnumpy(), cp["bn_moving_var"])
    errs = {e["what"]: e for e in cp["errors"]}
    assert errs["extra arg"]["error"] == "ValueError"
    with pytest.raises(BindError, match='"zz" that is not in the arguments') as info:
        ex.copy_params_from({"zz": mx.nd.ones(1)})
    assert isinstance(info.value, ValueError)
    with pytest.raises(BindError, match='"zz" that is not in the auxiliary states'):
        ex.copy_params_from({}, {"zz": mx.nd.ones(1)})
    assert "expected [4,3], got [3,4]" in errs["bad shape"]["message"]
    with pytest.raises(BindShapeError, match=r"'fc1_weight' has shape \(4, 3\)"):
        ex.copy_params_from({"fc1_weight": mx.nd.ones((4, 3))})
    with pytest.raises(BindError, match="must be an NDArray"):
        ex.copy_params_from({"fc1_weight": np.ones((3, 4))})
    ex.copy_params_from({"zz": mx.nd.ones(1)}, {"yy": mx.nd.ones(1)}, allow_extra_params=True)
    np.testing.assert_array_equal(w.asnumpy(), cp["fc1_weight"]["value"])  # untouched


def test_top_level_names():
    assert mx.AttrScope is mx.sym.AttrScope
    assert mx.name.NameManager is mx.sym.NameManager and mx.name.Prefix is mx.sym.Prefix
    with mx.name.Prefix("net_"):
        s = mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=2)
    assert s.list_arguments() == ["x", "net_fullyconnected0_weight", "net_fullyconnected0_bias"]
    with mx.AttrScope(ctx_group="g1"):
        v = mx.sym.var("y")
    assert v.attr("__ctx_group__") == "g1"
    assert mx.base.MXNetError is NNSymError
    with pytest.raises(mx.base.MXNetError):
        mx.nd.split_v2(mx.nd.ones(3), 2)


def test_kvstore_nccl_error_lists_every_available_store():
    with pytest.raises(kvs.UnsupportedError) as info:
        kvs.create("nccl")
    for name in ("'local'", "'device'", "'dist_sync'", "'dist_device_sync'", "'dist_async'"):
        assert name in str(info.value)
