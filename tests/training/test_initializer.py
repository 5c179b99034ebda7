"""nnsym.initializer against MXNet 1.9.1: deterministic fills and dumps() strings compared with
fixtures MXNet wrote (tests/golden/training/init/make.py), random ones checked statistically and
for reproducibility after nnsym.random.seed."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nnsym as mx
from nnsym import initializer as init_mod
from nnsym import random as nnsym_random
from nnsym.errors import NNSymError, ShapeError
from nnsym.initializer import InitDesc as D

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "training" / "init"
FIX = dict(np.load(GOLDEN / "fixtures.npz"))
CASES = json.loads((GOLDEN / "cases.json").read_text())


class Tagged(mx.init.Initializer):
    """Fills a weight with ``arange(size) + 1000 * len(name)`` (as make.py's Tagged)."""

    def _init_weight(self, name: str, arr: Any) -> None:
        arr[:] = np.arange(arr.size).reshape(arr.shape) + 1000 * len(name)


def fill(init: Callable[..., None], desc: str, shape: tuple[int, ...], dtype: str = "float32"
         ) -> np.ndarray:
    arr = mx.nd.full(shape, -9.0, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        init(desc, arr)
    return arr.asnumpy()


def _params() -> dict[str, Any]:
    return {"arg:fc_weight": mx.nd.array(np.arange(6).reshape(2, 3)),
            "aux:bn_moving_var": mx.nd.array([4.0, 5.0]), "plain": mx.nd.array([1.0, 2.0])}


def _load() -> init_mod.Load:
    return mx.init.Load(_params(), default_init=mx.init.Constant(3.0))


def _mixed() -> init_mod.Mixed:
    return mx.init.Mixed(["bias", ".*gamma", ".*"],
                         [mx.init.Zero(), mx.init.Constant(2.0), mx.init.Constant(5.0)])


# key in fixtures.npz / cases.json errors -> (initializer factory, desc, shape[, dtype])
TABLE: dict[str, tuple[Any, ...]] = {
    "constant_scalar": (lambda: mx.init.Constant(0.5), D("fc_weight"), (3, 4)),
    "constant_array": (lambda: mx.init.Constant(mx.nd.array([[1, 2, 3, 4]])), D("fc_weight"),
                       (3, 4)),
    "zero": (mx.init.Zero, D("fc_weight"), (2, 3)),
    "one": (mx.init.One, D("fc_weight"), (2, 3)),
    "one_f64": (mx.init.One, D("fc_weight"), (2, 3), "float64"),
    "lstmbias_default": (mx.init.LSTMBias, D("lstm_i2h_weight"), (8,)),
    "lstmbias_2.5": (lambda: mx.init.LSTMBias(forget_bias=2.5), D("lstm_i2h_weight"), (12,)),
    "lstmbias_odd": (lambda: mx.init.LSTMBias(forget_bias=3.0), D("lstm_i2h_weight"), (10,)),
    "load_fc_weight": (_load, D("fc_weight"), (2, 3)),
    "load_bn_moving_var": (_load, D("bn_moving_var"), (2,)),
    "load_plain": (_load, D("plain"), (2,)),
    "load_default_weight": (_load, D("other_weight"), (2, 2)),
    "load_default_bias": (_load, D("other_bias"), (2,)),
    "load_shape_mismatch": (_load, D("fc_weight"), (3, 2)),
    "load_missing_no_default": (lambda: mx.init.Load(_params()), D("other_weight"), (2,)),
    "loadfile_fc_weight": (lambda: mx.init.Load(str(GOLDEN / "loadme.params")), D("fc_weight"),
                           (2, 3)),
    "mixed:nomatch": (lambda: mx.init.Mixed(["bias"], [mx.init.Zero()]), D("fc_weight"), (3,)),
    "xavier_1d": (mx.init.Xavier, D("fc_weight"), (5,)),
    "bilinear_3d": (mx.init.Bilinear, D("up_weight"), (2, 3, 4)),
    "unknown_name": (mx.init.Uniform, D("data"), (2,)),
}
for _shape in [(2, 3, 4, 4), (1, 1, 3, 5), (2, 1, 5, 6), (1, 2, 1, 7), (1, 1, 2, 3, 4)]:
    TABLE["bilinear_" + "x".join(map(str, _shape))] = (mx.init.Bilinear, D("up_weight"), _shape)
for _name in CASES["dispatch_names"]:
    _s = (6,) if _name.startswith("stn_loc") and _name.endswith("bias") else (2, 3, 2, 2)
    if _name != "fc_weight_quantize":
        TABLE[f"desc:{_name}"] = (lambda: mx.init.Constant(7.0), D(_name), _s)
    TABLE[f"legacy:{_name}"] = (lambda: mx.init.Constant(7.0), _name, _s)
for _name, _init in CASES["attr_inits"].items():
    _s = (1, 1, 3, 4) if "bilinear" in _init else (8,)
    TABLE[f"attr:{_name}"] = (mx.init.Uniform, D(_name, attrs={"__init__": _init}), _s)
for _name in ["bias_x", "fc_bias", "bn_gamma", "fc_weight"]:
    TABLE[f"mixed:{_name}"] = (_mixed, D(_name), (3,))
for _mode, _layers, _bidir, _ni, _h in [("lstm", 2, True, 3, 2), ("gru", 1, False, 4, 3),
                                        ("rnn_tanh", 2, False, 2, 2)]:
    _m, _b = {"lstm": 4, "gru": 3}.get(_mode, 1), 2 if _bidir else 1
    _total = (_ni + _h + 2) * _h * _m * _b + (_layers - 1) * _m * _h * (_h + _b * _h + 2) * _b
    _key = f"fusedrnn_{_mode}_{_layers}_{int(_bidir)}_{_ni}_{_h}"
    TABLE[_key] = (
        lambda h=_h, L=_layers, mode=_mode, b=_bidir: mx.init.FusedRNN(
            Tagged(), h, L, mode, b, forget_bias=1.5),
        D("rnn_weight"), (_total,))
    _attr = mx.init.FusedRNN(None, _h, _layers, _mode, _bidir).dumps()
    TABLE[_key + "_global"] = (Tagged, D("rnn_parameters", attrs={"__init__": _attr}), (_total,))


def test_table_covers_every_fixture():
    net_keys = {k for k in FIX if k.startswith("net:")}
    assert set(TABLE) == (set(FIX) - net_keys) | set(CASES["errors"])


@pytest.mark.parametrize("key", sorted(set(TABLE) & set(FIX)))
def test_fill_matches_mxnet(key):
    factory, desc, shape, *dtype = TABLE[key]
    got = fill(factory(), desc, shape, *dtype)
    want = FIX[key]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", sorted(CASES["errors"]))
def test_mxnet_errors_are_nnsym_errors(key):
    factory, desc, shape, *dtype = TABLE[key]
    with pytest.raises(NNSymError) as info:
        fill(factory(), desc, shape, *dtype)
    assert isinstance(info.value, ValueError)
    assert str(desc) in str(info.value) or "shape" in str(info.value)


def test_load_shape_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"target \(3, 2\) vs loaded \(2, 3\)"):
        fill(_load(), D("fc_weight"), (3, 2))


INIT = mx.init
# the expressions make.py ran (keys of cases.json) -> the same call here
MADE: dict[str, Callable[[], Any]] = {
    "Zero()": lambda: INIT.Zero(),
    "One()": lambda: INIT.One(),
    "Constant(0.5)": lambda: INIT.Constant(0.5),
    "Constant(array)": lambda: INIT.Constant(mx.nd.array([1, 2])),
    "Uniform()": lambda: INIT.Uniform(),
    "Uniform(0.1)": lambda: INIT.Uniform(0.1),
    "Normal()": lambda: INIT.Normal(),
    "Normal(0.5)": lambda: INIT.Normal(0.5),
    "Xavier()": lambda: INIT.Xavier(),
    "Xavier(magnitude=2)": lambda: INIT.Xavier(magnitude=2),
    "Xavier(factor_type='in', magnitude=2.34)": lambda: INIT.Xavier(factor_type="in",
                                                                 magnitude=2.34),
    "Xavier(rnd_type='gaussian', factor_type='out', magnitude=2)": lambda: INIT.Xavier(
        rnd_type="gaussian", factor_type="out", magnitude=2),
    "MSRAPrelu()": lambda: INIT.MSRAPrelu(),
    "MSRAPrelu('in', 0.1)": lambda: INIT.MSRAPrelu("in", 0.1),
    "Orthogonal()": lambda: INIT.Orthogonal(),
    "Orthogonal(2.0, 'normal')": lambda: INIT.Orthogonal(2.0, "normal"),
    "Bilinear()": lambda: INIT.Bilinear(),
    "LSTMBias()": lambda: INIT.LSTMBias(),
    "LSTMBias(2.5)": lambda: INIT.LSTMBias(2.5),
    "FusedRNN(Xavier(), 4, 2, 'lstm', True, 2.0)": lambda: INIT.FusedRNN(
        INIT.Xavier(), 4, 2, "lstm", True, 2.0),
    "FusedRNN(None, 3, 1, 'gru')": lambda: INIT.FusedRNN(None, 3, 1, "gru"),
}


def test_every_fixture_expression_is_made_here():
    assert set(CASES["dumps"]) | set(CASES["variable_attrs"]) <= set(MADE)


@pytest.mark.parametrize("expr", sorted(CASES["dumps"]))
def test_dumps_matches_mxnet(expr):
    assert MADE[expr]().dumps() == CASES["dumps"][expr]


def test_constant_array_dumps_keeps_the_array():
    c = mx.init.Constant(np.array([[1.0, 2.0]]))
    assert c.dumps() == '["constant", {"value": [[1.0, 2.0]]}]'
    assert json.loads(c.dumps())[1]["value"] == [[1.0, 2.0]]
    np.testing.assert_array_equal(fill(c, D("w_weight"), (3, 2)), [[1.0, 2.0]] * 3)


@pytest.mark.parametrize("expr", sorted(CASES["variable_attrs"]))
def test_variable_init_attribute_matches_mxnet(expr):
    v = mx.sym.Variable("w", init=MADE[expr]())
    assert v.list_attr() == CASES["variable_attrs"][expr]


def test_variable_init_attribute_round_trips_through_create():
    v = mx.sym.Variable("w", init=mx.init.Xavier(rnd_type="gaussian", magnitude=2.5))
    again = mx.init.create(v.attr("__init__"))
    assert again == mx.init.Xavier(rnd_type="gaussian", magnitude=2.5)
    assert isinstance(again, mx.init.Xavier) and again.magnitude == 2.5


def test_registered_names_and_aliases_match_mxnet():
    # nnsym's own initializers (a doc block or another test may have registered more)
    reg = {k: v.__name__ for k, v in sorted(init_mod._REGISTRY.items())
           if v.__module__ == init_mod.__name__}
    assert reg == CASES["registered"]
    for text, cls in CASES["created"].items():
        assert type(mx.init.create(text)).__name__ == cls


def test_create_forms():
    x = mx.init.Xavier()
    assert mx.init.create(x) is x
    assert mx.init.create("Normal", 0.5) == mx.init.Normal(0.5)
    assert mx.init.create(initializer="uniform", scale=0.2) == mx.init.Uniform(0.2)
    assert mx.init.create({"initializer": "constant", "value": 2}) == mx.init.Constant(2)
    assert mx.init.create('{"initializer": "one"}') == mx.init.One()


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("nosuch",), {}, "nosuch is not registered"),
        (("[xavier",), {}, "does not parse"),
        (('["xavier"]',), {}, r'\["name", \{kwargs\}\]'),
        (("xavier",), {"bogus": 1}, "initializer xavier: .*bogus"),
        ((mx.init.Zero(), 1), {}, "already an instance"),
        ((), {}, "needs an initializer"),
    ],
)
def test_create_rejects_bad_input(args, kwargs, match):
    with pytest.raises(init_mod.InitializerError, match=match):
        mx.init.create(*args, **kwargs)


def test_create_rejects_a_non_string():
    with pytest.raises(init_mod.InitializerTypeError, match="string, not int"):
        mx.init.create(3)


def test_bad_init_attribute_names_the_variable():
    with pytest.raises(init_mod.InitializerError, match=r"variable 'w'.*nosuch"):
        fill(mx.init.Zero(), D("w", attrs={"__init__": '["nosuch", {}]'}), (2,))
    with pytest.raises(init_mod.InitializerTypeError, match=r"variable 'w'.*scale must be a"):
        fill(mx.init.Zero(), D("w", attrs={"__init__": '["uniform", {"scale": "a"}]'}), (2,))


def test_register_and_alias_a_custom_initializer():
    @mx.init.register
    @mx.init.alias("h6_custom_alias")
    class H6Custom(mx.init.Initializer):
        def _init_weight(self, _: str, arr: Any) -> None:
            arr[:] = 0.1

        def _init_bias(self, _: str, arr: Any) -> None:
            arr[:] = 1

    try:
        np.testing.assert_allclose(fill(mx.init.create("h6custom"), D("a_weight"), (2,)), 0.1)
        np.testing.assert_array_equal(
            fill(mx.init.create("H6_CUSTOM_ALIAS"), D("a_bias"), (2,)), 1.0)
        via_attr = D("x", attrs={"__init__": '["h6custom", {}]'})
        np.testing.assert_allclose(fill(mx.init.Zero(), via_attr, (2,)), 0.1)
        with pytest.warns(UserWarning, match="overriding"):
            mx.init.register(type("H6Custom", (mx.init.One,), {}))
    finally:
        init_mod._REGISTRY.pop("h6custom", None)
        init_mod._REGISTRY.pop("h6_custom_alias", None)
    with pytest.raises(init_mod.InitializerTypeError):
        mx.init.register(dict)  # type: ignore[type-var]


def test_legacy_string_call_warns_and_checks_types():
    arr = mx.nd.zeros((2,))
    with pytest.warns(DeprecationWarning, match="InitDesc"):
        mx.init.One()("fc_bias", arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(init_mod.InitializerTypeError, match="name must be a string"):
            mx.init.One()(3, arr)
        with pytest.raises(init_mod.InitializerTypeError, match="NDArray"):
            mx.init.One()("fc_weight", np.zeros(2))
    with pytest.raises(init_mod.InitializerTypeError, match="NDArray"):
        mx.init.One()(D("fc_weight"), np.zeros(2))


def test_base_initializer_has_no_weight_rule():
    with pytest.raises(NotImplementedError, match="Initializer"):
        fill(mx.init.Initializer(), D("fc_weight"), (2,))
    np.testing.assert_array_equal(fill(mx.init.Initializer(), D("fc_bias"), (2,)), 0.0)


def test_init_desc_is_a_str_and_gets_the_global_init():
    d = D("fc_weight", attrs={"k": "v"})
    assert isinstance(d, str) and d == "fc_weight" and d.attrs == {"k": "v"}
    assert d.global_init is None and D("x").attrs == {}
    one = mx.init.One()
    fill(one, d, (2,))
    assert d.global_init is one


def test_equality_is_by_type_and_arguments():
    assert mx.init.Xavier(magnitude=2) == mx.init.Xavier(magnitude=2)
    assert mx.init.Xavier(magnitude=2) != mx.init.Xavier(magnitude=3)
    assert mx.init.Zero() != mx.init.One()
    assert repr(mx.init.Zero()) == '["zero", {}]'


def test_set_verbosity_logs_name_rule_and_statistic(caplog):
    init = mx.init.Constant(2.0).set_verbosity(True)
    assert isinstance(init, mx.init.Constant)
    with caplog.at_level(logging.INFO, logger="nnsym.initializer"):
        fill(init, D("fc_weight"), (2, 2))
        fill(init, D("fc_bias"), (4,))
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["Initialized fc_weight as weight: 2.0", "Initialized fc_bias as bias: 0.0"]
    caplog.clear()
    quiet = mx.init.Constant(2.0).set_verbosity(True, print_func=lambda x: "custom")
    with caplog.at_level(logging.INFO, logger="nnsym.initializer"):
        fill(quiet, D("w", attrs={"__init__": '["one", {}]'}), (2,))
    assert [r.getMessage() for r in caplog.records] == ['Initialized w as ["one", {}]: custom']


def test_load_verbose_and_unnamed_file(caplog, tmp_path):
    with caplog.at_level(logging.INFO, logger="nnsym.initializer"):
        ld = mx.init.Load(_params(), default_init=mx.init.Zero(), verbose=True)
        fill(ld, D("fc_weight"), (2, 3))
        fill(ld, D("x_bias"), (2,))
    assert [r.getMessage() for r in caplog.records] == [
        "Initialized fc_weight by loading", "Initialized x_bias by default"]
    path = tmp_path / "list.params"
    mx.nd.save(str(path), [mx.nd.zeros((2,))])
    with pytest.raises(init_mod.InitializerError, match="needs names"):
        mx.init.Load(str(path))
    with pytest.raises(init_mod.InitializerTypeError, match="dict"):
        mx.init.Load(3)  # type: ignore[arg-type]


def test_mixed_rejects_bad_arguments():
    with pytest.raises(init_mod.InitializerError, match="2 patterns but 1 initializers"):
        mx.init.Mixed(["a", "b"], [mx.init.Zero()])
    with pytest.raises(init_mod.InitializerError, match="bad pattern"):
        mx.init.Mixed(["("], [mx.init.Zero()])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: mx.init.Xavier(rnd_type="binomial"), "rnd_type"),
        (lambda: mx.init.Xavier(factor_type="sum"), "factor_type"),
        (lambda: mx.init.MSRAPrelu(factor_type="both"), "factor_type"),
        (lambda: mx.init.Orthogonal(rand_type="gaussian"), "rand_type"),
        (lambda: mx.init.FusedRNN(None, 3, 1, "transformer"), "mode"),
        (lambda: mx.init.FusedRNN(None, 0, 1, "lstm"), "num_hidden must be a positive integer"),
        (lambda: mx.init.FusedRNN(None, 3, 1.5, "lstm"), "num_layers"),
        (lambda: mx.init.Uniform(-0.1), r"Uniform: scale must be >= 0, got -0.1"),
        (lambda: mx.init.Normal(0.0), r"Normal: sigma must be > 0"),
        (lambda: mx.init.Xavier(magnitude=-1), r"Xavier: magnitude must be >= 0"),
        (lambda: mx.init.create("normal", sigma=-2), "sigma"),
    ],
)
def test_bad_arguments_raise(make, match):
    with pytest.raises(init_mod.InitializerError, match=match):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: mx.init.Uniform("0.1"),
        lambda: mx.init.Normal(None),
        lambda: mx.init.Xavier(magnitude=True),
        lambda: mx.init.Orthogonal(scale=[1.0]),
        lambda: mx.init.LSTMBias("1"),
        lambda: mx.init.MSRAPrelu(slope="x"),
    ],
)
def test_non_numbers_are_type_errors(make):
    with pytest.raises(init_mod.InitializerTypeError, match="must be a number"):
        make()


@pytest.mark.parametrize(
    ("init", "shape"),
    [
        (mx.init.Xavier(factor_type="out"), (0, 5)),
        (mx.init.Xavier(factor_type="in"), (4, 0, 3, 3)),
        (mx.init.Bilinear(), (1, 1, 0, 0)),
        (mx.init.Orthogonal(), (0, 3)),
        (mx.init.Uniform(), (0,)),
    ],
)
def test_empty_arrays_are_left_as_they_are(init, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fill(init, D("fc_weight"), shape).shape == shape


@pytest.mark.parametrize(
    ("init", "shape", "match"),
    [
        (mx.init.Xavier(), (5,), "at least 2D"),
        (mx.init.MSRAPrelu(), (5,), "at least 2D"),
        (mx.init.Bilinear(), (3, 3, 3), "at least 4 dimensions"),
        (mx.init.LSTMBias(), (), "at least 1 dimension"),
        (mx.init.Orthogonal(), (), "at least 1 dimension"),
    ],
)
def test_too_few_dimensions(init, shape, match):
    with pytest.raises(init_mod.InitializerError, match=match):
        fill(init, D("fc_weight"), shape)


def test_fused_rnn_size_mismatch():
    with pytest.raises(init_mod.InitializerError, match="do not fit"):
        fill(mx.init.FusedRNN(mx.init.One(), 3, 1, "lstm"), D("rnn_weight"), (50,))


# ---------------------------------------------------------------- random initializers


def _xavier_scale(shape: tuple[int, ...], factor_type: str, magnitude: float) -> float:
    """sqrt(magnitude / factor), fans counting the kernel's spatial size (worked by hand)."""
    receptive = int(np.prod(shape[2:]))
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    factor = {"avg": (fan_in + fan_out) / 2, "in": fan_in, "out": fan_out}[factor_type]
    return float(np.sqrt(magnitude / factor))


def test_uniform_bounds_and_spread():
    w = fill(mx.init.Uniform(0.1), D("fc_weight"), (100, 200))
    assert w.dtype == np.float32
    assert w.min() >= -0.1 and w.max() <= 0.1
    assert w.min() < -0.099 and w.max() > 0.099
    assert abs(w.mean()) < 0.003
    assert w.std() == pytest.approx(0.1 / np.sqrt(3), rel=0.02)


def test_uniform_default_scale():
    w = fill(mx.init.Uniform(), D("fc_weight"), (50, 100))
    assert np.abs(w).max() <= 0.07 and np.abs(w).max() > 0.069


def test_normal_std():
    w = fill(mx.init.Normal(0.5), D("fc_weight"), (200, 200))
    assert abs(w.mean()) < 0.01
    assert w.std() == pytest.approx(0.5, rel=0.02)
    assert fill(mx.init.Normal(), D("fc_weight"), (200, 200)).std() == pytest.approx(
        0.01, rel=0.02)


@pytest.mark.parametrize("factor_type", ["avg", "in", "out"])
@pytest.mark.parametrize("shape", [(64, 32, 3, 3), (300, 100)])
def test_xavier_uniform_bounds(factor_type, shape):
    c = _xavier_scale(shape, factor_type, 3.0)
    w = fill(mx.init.Xavier(factor_type=factor_type), D("conv_weight"), shape)
    assert np.abs(w).max() <= c * (1 + 1e-6)
    assert np.abs(w).max() > 0.99 * c
    assert w.std() == pytest.approx(c / np.sqrt(3), rel=0.03)


@pytest.mark.parametrize("factor_type", ["avg", "in", "out"])
def test_xavier_gaussian_std(factor_type):
    shape = (128, 64, 3, 3)
    c = _xavier_scale(shape, factor_type, 2.0)
    w = fill(mx.init.Xavier("gaussian", factor_type, 2), D("conv_weight"), shape)
    assert abs(w.mean()) < 0.05 * c
    assert w.std() == pytest.approx(c, rel=0.02)


@pytest.mark.parametrize(("factor_type", "slope"), [("avg", 0.25), ("in", 0.0), ("out", 1.0)])
def test_msra_prelu_std(factor_type, slope):
    shape = (128, 64, 3, 3)
    c = _xavier_scale(shape, factor_type, 2.0 / (1 + slope**2))
    w = fill(mx.init.MSRAPrelu(factor_type, slope), D("conv_weight"), shape)
    assert w.std() == pytest.approx(c, rel=0.02)


@pytest.mark.parametrize("rand_type", ["uniform", "normal"])
@pytest.mark.parametrize("shape", [(20, 30), (30, 20), (8, 2, 3, 3), (6,)])
def test_orthogonal_is_orthogonal(rand_type, shape):
    w = fill(mx.init.Orthogonal(scale=2.0, rand_type=rand_type), D("fc_weight"), shape)
    m = w.reshape(shape[0], -1).astype(np.float64)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-4)


def test_random_fills_keep_the_arrays_dtype():
    for dtype in ("float64", "float16"):
        w = fill(mx.init.Xavier(), D("fc_weight"), (40, 30), dtype)
        assert w.dtype == np.dtype(dtype)
        assert np.abs(w).max() <= _xavier_scale((40, 30), "avg", 3.0) * (1 + 1e-3)


def test_random_initializers_leave_biases_and_gammas_to_the_name_rules():
    for init in (mx.init.Uniform(), mx.init.Normal(), mx.init.Xavier(), mx.init.Orthogonal()):
        np.testing.assert_array_equal(fill(init, D("fc_bias"), (3,)), 0.0)
        np.testing.assert_array_equal(fill(init, D("bn_gamma"), (3,)), 1.0)


def test_quantized_weight_is_one_random_integer():
    w = fill(mx.init.Uniform(), D("fc_weight_quantize"), (4, 5))
    assert len(np.unique(w)) == 1
    assert w.flat[0] == np.floor(w.flat[0]) and -127 <= w.flat[0] < 127
    np.testing.assert_array_equal(fill(mx.init.Uniform(), D("fc_bias_quantize"), (3,)), 0.0)


def test_xavier_through_the_init_attribute_uses_the_attributes_numbers():
    desc = D("anything", attrs={"__init__": mx.init.Xavier("gaussian", "in", 6).dumps()})
    w = fill(mx.init.Zero(), desc, (256, 128))
    assert w.std() == pytest.approx(np.sqrt(6 / 128), rel=0.02)


RANDOM_INITS = [
    ("Uniform", lambda: mx.init.Uniform(0.2), (5, 6)),
    ("Normal", lambda: mx.init.Normal(0.3), (5, 6)),
    ("Xavier", lambda: mx.init.Xavier(), (5, 6, 2, 2)),
    ("Xavier-gaussian", lambda: mx.init.Xavier("gaussian", "out", 2), (5, 6)),
    ("MSRAPrelu", lambda: mx.init.MSRAPrelu(), (5, 6)),
    ("Orthogonal", lambda: mx.init.Orthogonal(rand_type="normal"), (5, 6)),
    ("FusedRNN", lambda: mx.init.FusedRNN(mx.init.Uniform(), 2, 1, "lstm"), (64,)),
]


@pytest.mark.parametrize(("label", "make", "shape"), RANDOM_INITS, ids=[r[0] for r in RANDOM_INITS])
def test_random_fills_are_reproducible_after_seed(label, make, shape):
    nnsym_random.seed(1234)
    first = fill(make(), D("fc_weight"), shape)
    second = fill(make(), D("fc_weight"), shape)
    nnsym_random.seed(1234)
    again = fill(make(), D("fc_weight"), shape)
    nnsym_random.seed(4321)
    other = fill(make(), D("fc_weight"), shape)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)  # the stream moves on between calls
    assert not np.array_equal(first, other)


def test_seeded_module_initialization_order_is_reproducible():
    """A whole net's worth of arrays, initialized in order, comes out the same after seed."""
    names = [("c1_weight", (4, 3, 3, 3)), ("c1_bias", (4,)), ("bn_gamma", (4,)),
             ("fc_weight", (10, 16)), ("fc_bias", (10,))]

    def run() -> list[np.ndarray]:
        init = mx.init.Xavier(magnitude=2.0)
        return [fill(init, D(n), s) for n, s in names]

    nnsym_random.seed(99)
    a = run()
    nnsym_random.seed(99)
    b = run()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_net_initialized_like_module_init_params_matches_mxnet():
    """Each variable gets InitDesc(name, its attrs): operators' __init__ attributes (BatchNorm's
    moving stats, PReLU's gamma, UpSampling's bilinear weight) win over the name rules."""
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="c1")
    net = mx.sym.BatchNorm(net, name="bn")
    net = mx.sym.LeakyReLU(net, act_type="prelu", name="pr")
    net = mx.sym.UpSampling(net, scale=2, sample_type="bilinear", num_filter=4, name="up")
    arg_shapes, _, aux_shapes = net.infer_shape(data=(1, 3, 8, 8))
    names = net.list_arguments() + net.list_auxiliary_states()
    shapes = dict(zip(names, arg_shapes + aux_shapes, strict=True))
    assert {k: list(v) for k, v in shapes.items()} == CASES["net"]["shapes"]
    attrs = net.attr_dict()
    want_attrs = CASES["net"]["attrs"]
    assert {k: attrs.get(k) for k in names} == {k: want_attrs.get(k) for k in names}
    init = mx.init.Xavier()
    for name, shape in shapes.items():
        if name == "data":
            continue
        got = fill(init, D(name, attrs.get(name, {})), shape)
        if name == "c1_weight":
            assert np.abs(got).max() <= _xavier_scale(shape, "avg", 3.0)
        else:
            np.testing.assert_array_equal(got, FIX[f"net:{name}"], err_msg=name)


def test_every_operator_init_attribute_parses():
    from nnsym.ir.opdef import REGISTRY

    seen = {}
    for op in REGISTRY.values():
        for var, var_attrs in op.input_var_attrs.items():
            if "__init__" in var_attrs:
                seen[(op.name, var)] = type(mx.init.create(var_attrs["__init__"])).__name__
    assert seen[("BatchNorm", "moving_mean")] == "Zero"
    assert seen[("BatchNorm", "moving_var")] == "One"
    assert seen[("LeakyReLU", "gamma")] == "Constant"
    assert seen[("UpSampling", "weight")] == "Bilinear"
