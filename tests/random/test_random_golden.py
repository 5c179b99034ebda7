"""Random symbols against MXNet 1.9.1 (tests/random/golden/random_symbols.json, written by
make.py there): the same calls build the same JSON (names, attributes), MXNet's JSON loads
and saves back unchanged, and inferred shapes, dtypes and names agree; bound, they run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, sym
from nnsym.errors import DTypeError

GOLDEN = json.loads((Path(__file__).parent / "golden" / "random_symbols.json").read_text())


def build_all() -> dict:
    """The calls of make.py's cases(), through nnsym, in its order (one name counter)."""
    mu, sigma, probs, data = sym.var("mu"), sym.var("sigma"), sym.var("probs"), sym.var("data")
    S = sym.random
    calls = {
        "uniform": lambda: S.uniform(-1, 3, shape=(2, 3)),
        "normal_f64": lambda: S.normal(1, 2, shape=(4,), dtype="float64"),
        "gamma": lambda: S.gamma(0.5, 2, shape=(3, 2)),
        "exponential": lambda: S.exponential(2.0, shape=(5,)),
        "poisson": lambda: S.poisson(4.0, shape=(2, 2), dtype="float16"),
        "negative_binomial": lambda: S.negative_binomial(3, 0.4, shape=(3,)),
        "generalized_negative_binomial": lambda: S.generalized_negative_binomial(
            2.0, 0.5, shape=(2,)),
        "randint": lambda: S.randint(-3, 7, shape=(4,), dtype="int64"),
        "sample_normal": lambda: S.normal(mu, sigma, shape=(5,)),
        "sample_uniform": lambda: S.uniform(mu, sigma, shape=(2, 2), dtype="float64"),
        "sample_exponential": lambda: S.exponential(mu),
        "multinomial": lambda: S.multinomial(probs, shape=(3,)),
        "multinomial_1d": lambda: S.multinomial(probs, get_prob=False),
        "shuffle": lambda: S.shuffle(data),
        "uniform_like": lambda: S.uniform_like(data, low=1.0, high=2.0),
        "gamma_like": lambda: S.gamma_like(data, alpha=2.0, beta=1.0),
        "uniform_noshape": lambda: S.uniform() + data,
    }
    with sym.NameManager():
        return {k: f() for k, f in calls.items()}


def _nodes(text: str) -> list:
    return json.loads(text)["nodes"]


def test_same_calls_build_mxnets_json():
    built = build_all()
    assert set(built) == set(GOLDEN)
    for name, s in built.items():
        assert _nodes(s.tojson()) == _nodes(GOLDEN[name]["json"]), name


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_mxnet_json_loads_infers_and_runs(name):
    ref = GOLDEN[name]
    s = sym.load_json(ref["json"])
    assert s.tojson() == ref["json"]
    assert s.list_arguments() == ref["arguments"]
    assert s.list_outputs() == ref["outputs"]
    shapes = {k: tuple(v) for k, v in ref["input_shapes"].items()}
    _, out_s, _ = s.infer_shape(**shapes)
    assert [list(x) for x in out_s] == ref["out_shapes"]
    _, out_t, _ = s.infer_type(**{k: np.float32 for k in shapes})
    assert [np.dtype(t).name for t in out_t] == ref["out_dtypes"]
    args = {}
    for k, shp in shapes.items():
        # probabilities for multinomial (rows summing to 1), positive parameters elsewhere
        v = np.full(shp, 1.0 / shp[-1] if k == "probs" else 1.5, np.float32)
        args[k] = nd.array(v)
    outs = s.bind(mx.cpu(), args).forward()
    for o, shp, dt in zip(outs, ref["out_shapes"], ref["out_dtypes"]):
        assert o.shape == tuple(shp) and o.dtype == np.dtype(dt)
        assert np.isfinite(o.asnumpy().astype(np.float64)).all()


def test_dtype_none_is_float32_as_mxnet():
    """MXNet fixes a sampler's output at float32 when dtype is not given: adding a float64
    variable is a dtype conflict there and here."""
    s = sym.random.uniform() + sym.var("x", dtype="float64")
    with pytest.raises(DTypeError, match="float32"):
        s.infer_type()
