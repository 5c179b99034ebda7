"""Table-driven tests over the whole registry: every operator's examples, shapes, dtypes, params."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym.errors import OperatorParamError
from nnsym.ops import REGISTRY
from nnsym.testing import infer_node, make_inputs, reference_outputs

OPS = sorted(REGISTRY.values(), key=lambda op: op.name)
CASES = [pytest.param(op, ex, id=f"{op.name}-{ex}") for op in OPS for ex in op.examples]
BAD = [
    pytest.param(op, bad, id=f"{op.name}-{sorted(bad.items())}")
    for op in OPS
    for bad in op.bad_params
]


def _is_backward(name: str) -> bool:
    # MXNet's newer contrib backward operators are named _contrib_backward_X
    return name.startswith(("_backward_", "_contrib_backward_"))


def test_every_operator_has_examples_and_a_reference():
    # Backward operators (_backward_*) are checked through their forward operator's gradient
    # against finite differences (tests/runtime/test_gradients.py).
    # Operators that are Python code (Custom) are tested in tests/ops/test_custom_op.py.
    lacking = [op.name for op in OPS if not _is_backward(op.name)
               and op.python is None and (not op.examples or op.reference is None)]
    assert not lacking, f"operators without examples or numpy reference: {lacking}"


@pytest.mark.parametrize(("op", "ex"), CASES)
def test_inferred_shapes_and_dtypes_match_reference(op, ex):
    params, _ = op.parse_params(ex.params)
    inputs = make_inputs(op, ex)
    outs = reference_outputs(op, params, inputs)
    assert len(outs) == op.num_outputs(params)
    in_s, out_s, _in_t, out_t = infer_node(
        op, params, [a.shape for a in inputs], [a.dtype for a in inputs]
    )
    if op.value_shaped:  # the values decide some outputs' shapes: those stay unknown
        out_s = [s if s is not None else o.shape for s, o in zip(out_s, outs)]
    assert out_s == [o.shape for o in outs]
    assert in_s == [a.shape for a in inputs]
    # compare names: np.dtype('float64') == None is True in numpy
    assert [None if t is None else t.name for t in out_t] == [o.dtype.name for o in outs]
    for o in outs:
        assert isinstance(o, np.ndarray)


@pytest.mark.parametrize(("op", "bad"), BAD)
def test_invalid_parameters_raise(op, bad):
    with pytest.raises(OperatorParamError) as info:
        op.parse_params(bad)
    assert op.name in str(info.value)
