"""Every operator's rules on arbitrary parameters and (partial) input shapes: the result is an
answer or an NNSymError, never a raw IndexError/TypeError/ZeroDivisionError from inside a rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym.errors import NNSymError
from nnsym.ops import REGISTRY
from nnsym.testing import infer_node

OPS = sorted(REGISTRY.values(), key=lambda op: op.name)

dims = st.one_of(st.none(), st.integers(0, 7))
shapes = st.one_of(st.none(), st.lists(dims, max_size=5).map(tuple))
dtypes = st.sampled_from([None, "float32", "float16", "float64", "int32", "uint8", "int64"])


def _value(spec):
    base = {
        "int": st.integers(-3, 9),
        "float": st.floats(-3, 3, allow_nan=False),
        "bool": st.booleans(),
        "str": st.sampled_from(list(spec.choices or ("x",))),
        "dtype": st.sampled_from(["float32", "float16", "int32", "uint8"]),
        "tuple": st.lists(st.integers(-4, 5), max_size=4).map(tuple),
        "tuple_opt": st.lists(st.one_of(st.none(), st.integers(-4, 5)), max_size=4).map(tuple),
        "tuple_float": st.lists(st.floats(-3, 3, allow_nan=False), max_size=4).map(tuple),
    }[spec.base]
    return st.one_of(st.none(), base) if spec.optional else base


@st.composite
def calls(draw, op):
    specs = op.params.specs()
    params = {}
    for name, spec in specs.items():
        if spec.required or draw(st.booleans()):
            params[name] = draw(_value(spec))
    n_in = draw(st.integers(1, 4))
    return params, [draw(shapes) for _ in range(n_in)], [draw(dtypes) for _ in range(n_in)]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_rules_fail_only_with_nnsym_errors(op):
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(calls(op))
    def check(call):
        params, in_shapes, in_dtypes = call
        try:
            p, _ = op.parse_params(params)
        except NNSymError:
            return
        n = op.num_inputs(p)
        in_shapes = (in_shapes * n)[:n]
        in_dtypes = (in_dtypes * n)[:n]
        try:
            infer_node(op, p, in_shapes, [None if d is None else np.dtype(d) for d in in_dtypes])
        except NNSymError:
            pass

    check()
