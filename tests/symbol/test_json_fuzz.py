"""Random corruption of real MXNet JSON never escapes as a bare KeyError/IndexError/TypeError:
loading either succeeds or raises an NNSymError subclass; so does inference afterwards."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym import sym
from nnsym.errors import NNSymError

BASE = json.loads((Path(__file__).parent.parent / "golden" / "convbn-symbol.json").read_text())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8,
)
param_strings = st.sampled_from(
    ["0", "-1", "3", "(3, 3)", "(0, 0)", "()", "(1,)", "True", "x", "None", "1e400", "(3,", "[]",
     "nan", "-5", "(2, 2, 2)", "max", "full"]
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(BASE) if p]
ATTR_PATHS = [p for p in PATHS if len(p) == 4 and p[2] == "attrs"]


def _apply(doc, path, value, delete):
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    if delete:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value


def _load_and_infer(text):
    try:
        s = sym.load_json(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s.infer_shape_partial(data=(2, 3, 32, 32))
            s.infer_type_partial(data="float32")
        s.tojson()
    except NNSymError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), json_values, st.booleans()), min_size=1,
                max_size=3))
def test_structural_corruption_gives_clear_errors(mutations):
    doc = json.loads(json.dumps(BASE))
    for path, value, delete in mutations:
        try:
            _apply(doc, path, value, delete)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the path
    _load_and_infer(json.dumps(doc))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ATTR_PATHS), param_strings), min_size=1, max_size=3))
def test_bad_parameter_strings_give_clear_errors(mutations):
    doc = json.loads(json.dumps(BASE))
    for path, value in mutations:
        _apply(doc, path, value, False)
    _load_and_infer(json.dumps(doc))
