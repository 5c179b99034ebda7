"""``nnsym.sym.<op>`` functions generated from the registry: names, namespaces, signatures, docs."""

from __future__ import annotations

import inspect

import pytest

from nnsym import sym
from nnsym.errors import CompositionError, OperatorParamError
from nnsym.ir.opdef import all_names
from nnsym.ops import REGISTRY


def test_every_registered_name_is_a_function():
    for name in all_names():
        assert callable(getattr(sym, name)), name
    assert sym.contrib.quadratic is not None and sym._internal._plus_scalar is not None


def test_sparse_namespace_holds_only_sparse_operators():
    """Operators with sparse kernels, and MXNet's ``_sparse_<name>`` ones as ``<name>``."""
    names = all_names()
    for name in dir(sym.sparse):
        if not name.startswith("__"):
            assert f"_sparse_{name}" in names or names[name].sparse, name
    assert hasattr(sym.sparse, "dot") and hasattr(sym.sparse, "retain")


def test_signature_lists_inputs_then_parameters():
    sig = inspect.signature(sym.FullyConnected)
    names = list(sig.parameters)
    assert names[:3] == ["data", "weight", "bias"]
    assert {"num_hidden", "no_bias", "flatten", "name", "attr"} <= set(names)
    assert sig.parameters["num_hidden"].default is inspect.Parameter.empty
    assert sig.parameters["no_bias"].default is False


def test_docstring_lists_parameters():
    doc = sym.Convolution.__doc__
    for p in ("kernel", "num_filter", "stride", "dilate", "pad", "num_group", "no_bias"):
        assert p in doc
    assert "Alias of ``Reshape``" in sym.reshape.__doc__


@pytest.mark.parametrize("op", sorted(REGISTRY), ids=str)
def test_every_operator_has_a_docstring(op):
    assert len(getattr(sym, op).__doc__) > 40


def test_bad_calls_raise_clear_errors():
    x = sym.Variable("x")
    with pytest.raises(OperatorParamError, match="num_hidden"):
        sym.FullyConnected(x)
    with pytest.raises(OperatorParamError, match="unknown parameter 'kernal'"):
        sym.Convolution(x, kernal=(3, 3), num_filter=2)
    with pytest.raises(CompositionError, match="unknown input"):
        sym.FullyConnected(x, num_hidden=2, wieght=sym.Variable("w"))
    with pytest.raises(CompositionError, match="group of 2 outputs"):
        sym.relu(sym.Group([x, x]))
    with pytest.raises(CompositionError, match="inputs must be Symbols"):
        sym.relu(3)
    with pytest.raises(OperatorParamError, match="deprecated"):
        sym.FullyConnected(x, num_hidden=2, weight_lr_mult=0.1)
    with pytest.raises(AttributeError, match="no operator"):
        sym.NoSuchOperator  # noqa: B018
