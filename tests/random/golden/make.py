"""Writes random_symbols.json with MXNet 1.9.1 (run in the reference venv, never imported by the
tests): symbols built by mx.sym.random.* and the sample/shuffle operators, their JSON, inferred
shapes and dtypes, and argument names. Values are not recorded: nnsym's samples differ.

    ~/mxref/bin/python tests/random/golden/make.py
"""

from __future__ import annotations

import json
from pathlib import Path

import mxnet as mx
import numpy as np

S = mx.sym


def cases() -> dict[str, tuple[object, dict[str, tuple[int, ...]]]]:
    mu, sigma = S.var("mu"), S.var("sigma")
    probs = S.var("probs")
    data = S.var("data")
    return {
        "uniform": (S.random.uniform(-1, 3, shape=(2, 3)), {}),
        "normal_f64": (S.random.normal(1, 2, shape=(4,), dtype="float64"), {}),
        "gamma": (S.random.gamma(0.5, 2, shape=(3, 2)), {}),
        "exponential": (S.random.exponential(2.0, shape=(5,)), {}),
        "poisson": (S.random.poisson(4.0, shape=(2, 2), dtype="float16"), {}),
        "negative_binomial": (S.random.negative_binomial(3, 0.4, shape=(3,)), {}),
        "generalized_negative_binomial": (
            S.random.generalized_negative_binomial(2.0, 0.5, shape=(2,)), {}),
        "randint": (S.random.randint(-3, 7, shape=(4,), dtype="int64"), {}),
        "sample_normal": (S.random.normal(mu, sigma, shape=(5,)), {"mu": (2, 3), "sigma": (2, 3)}),
        "sample_uniform": (S.random.uniform(mu, sigma, shape=(2, 2), dtype="float64"),
                           {"mu": (3,), "sigma": (3,)}),
        "sample_exponential": (S.random.exponential(mu), {"mu": (4,)}),
        "multinomial": (S.random.multinomial(probs, shape=(3,)), {"probs": (2, 5)}),
        "multinomial_1d": (S.random.multinomial(probs, get_prob=False), {"probs": (5,)}),
        "shuffle": (S.random.shuffle(data), {"data": (4, 3)}),
        "uniform_like": (S.random.uniform_like(data, low=1.0, high=2.0),
                         {"data": (3, 2)}),
        "gamma_like": (S.random.gamma_like(data, alpha=2.0, beta=1.0),
                       {"data": (2,)}),
        # no shape: inferred from the consumer
        "uniform_noshape": (S.random.uniform() + data, {"data": (2, 3)}),
    }


def main() -> None:
    out = {}
    for name, (s, shapes) in cases().items():
        _, out_s, _ = s.infer_shape(**shapes)
        _, out_t, _ = s.infer_type(**{k: np.float32 for k in shapes})
        out[name] = {
            "json": s.tojson(),
            "arguments": s.list_arguments(),
            "outputs": s.list_outputs(),
            "input_shapes": {k: list(v) for k, v in shapes.items()},
            "out_shapes": [list(x) for x in out_s],
            "out_dtypes": [np.dtype(t).name for t in out_t],
        }
    path = Path(__file__).with_name("random_symbols.json")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    main()
