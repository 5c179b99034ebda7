"""Typed parameters: MXNet's string forms parse, print back identically, and bad values raise."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nnsym.errors import OperatorParamError
from nnsym.ir.params import Params, field, mx_str


@dataclass(frozen=True, kw_only=True)
class P(Params):
    n: int = field(lower=1, doc="count")
    k: tuple[int, ...] = field(default=(), doc="kernel")
    b: tuple[int | None, ...] = field(default=(), doc="begin")
    flag: bool = field(default=False)
    mode: str = field(default="a", choices=("a", "b"))
    dt: str = field(default="float32", kind="dtype")
    s: float | None = field(default=None, upper=10.0)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ({"n": "3"}, {"n": 3}),
        ({"n": 3, "k": "(3, 3)"}, {"k": (3, 3)}),
        ({"n": 3, "k": "(3,3)"}, {"k": (3, 3)}),
        ({"n": 3, "k": "[3, 3]"}, {"k": (3, 3)}),
        ({"n": 3, "k": "(1,)"}, {"k": (1,)}),
        ({"n": 3, "k": "()"}, {"k": ()}),
        ({"n": 3, "k": "5"}, {"k": (5,)}),
        ({"n": 3, "k": 5}, {"k": (5,)}),
        ({"n": 3, "b": "(None, -2)"}, {"b": (None, -2)}),
        ({"n": 3, "flag": "True"}, {"flag": True}),
        ({"n": 3, "flag": "false"}, {"flag": False}),
        ({"n": 3, "flag": "1"}, {"flag": True}),
        ({"n": 3, "flag": 1}, {"flag": True}),
        ({"n": 3, "dt": np.float16}, {"dt": "float16"}),
        ({"n": 3, "dt": "float64"}, {"dt": "float64"}),
        ({"n": 3, "s": "None"}, {"s": None}),
        ({"n": 3, "s": "2.5"}, {"s": 2.5}),
        ({"n": 3, "s": 2}, {"s": 2.0}),
    ],
)
def test_values_parse(raw, value):
    p, strings = P.parse("Op", raw)
    for k, v in value.items():
        assert getattr(p, k) == v
    # the strings kept for JSON are exactly what was given (or MXNet's str() of it)
    for k, v in raw.items():
        assert strings[k] == (v if isinstance(v, str) else mx_str(v))


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({}, "required parameter 'n'"),
        ({"n": 0}, ">= 1"),
        ({"n": "x"}, "expected int"),
        ({"n": True}, "expected int"),
        ({"n": 1, "mode": "c"}, "one of 'a', 'b'"),
        ({"n": 1, "flag": "yes"}, "boolean"),
        ({"n": 1, "k": "(3, x)"}, "Shape"),
        ({"n": 1, "s": 11}, "<= 10.0"),
        ({"n": 1, "dt": "float17"}, "dtype"),
        ({"n": 1, "nn": 1}, "unknown parameter 'nn'"),
        ({"n": "None"}, "expected int"),
    ],
)
def test_bad_values_raise_with_op_param_and_allowed(raw, needle):
    with pytest.raises(OperatorParamError) as info:
        P.parse("MyOp", raw)
    msg = str(info.value)
    assert "MyOp" in msg and needle in msg


def test_unknown_parameter_lists_the_allowed_ones():
    with pytest.raises(OperatorParamError) as info:
        P.parse("MyOp", {"n": 1, "kernal": "(3, 3)"})
    assert "k : Shape(tuple)" in str(info.value)


def test_to_attrs_prints_non_defaults_in_mxnet_form():
    p, _ = P.parse("Op", {"n": 2, "k": (3, 3), "flag": True})
    assert p.to_attrs() == {"n": "2", "k": "(3, 3)", "flag": "True"}


@given(st.lists(st.integers(-50, 50), max_size=5))
def test_tuple_str_round_trip(dims):
    t = tuple(dims)
    p, s = P.parse("Op", {"n": 1, "k": t})
    assert p.k == t
    p2, _ = P.parse("Op", {"n": 1, "k": s["k"]})
    assert p2.k == t


@given(st.floats(allow_nan=False, max_value=10))
def test_float_str_round_trip(x):
    p, s = P.parse("Op", {"n": 1, "s": x})
    assert P.parse("Op", {"n": 1, "s": s["s"]})[0].s == p.s
