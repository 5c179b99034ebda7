"""The fixed-point inference engine: forward and backward filling, conflicts, partial knowledge."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nnsym import sym
from nnsym.errors import DTypeError, ShapeError


def test_weights_get_shapes_from_data():
    net = sym.FullyConnected(sym.Variable("data"), num_hidden=10, name="fc")
    arg, out, aux = net.infer_shape(data=(5, 3, 4))
    assert arg == [(5, 3, 4), (10, 12), (10,)] and out == [(5, 10)] and aux == []


def test_backward_sweep_fills_batch_dim_from_a_later_node():
    data = sym.Variable("data")
    fc1 = sym.FullyConnected(data, num_hidden=8, name="fc1")
    # only the data's feature size is given; the batch comes backward from `other`
    net = sym.elemwise_add(fc1, sym.Variable("other"), name="add")
    arg, out, _ = net.infer_shape(data=(0, 3), other=(6, 8))
    assert arg[0] == (6, 3) and arg[1] == (8, 3) and out == [(6, 8)]


def test_variable_shape_attribute_seeds_inference():
    data = sym.Variable("data", shape=(2, 7))
    net = sym.FullyConnected(data, num_hidden=3)
    arg, out, _ = net.infer_shape()
    assert arg[1] == (3, 7) and out == [(2, 3)]


def test_conflict_names_node_op_and_all_inputs():
    data = sym.Variable("data")
    net = sym.FullyConnected(data, num_hidden=10, name="fc1")
    with pytest.raises(ShapeError) as info:
        net.infer_shape(data=(64, 784), fc1_weight=(10, 3))
    msg = str(info.value)
    assert "node 'fc1' (FullyConnected)" in msg
    assert "weight" in msg and "(10, 3)" in msg and "(10, 784)" in msg and "data=(64, 784)" in msg


def test_partial_shapes_keep_unknown_dims_apart_from_zero():
    net = sym.FullyConnected(sym.Variable("data"), num_hidden=4, name="fc")
    arg, out, _ = net.infer_shape_partial(data=(0, 5))
    assert arg[0] == (0, 5) and arg[1] == (4, 5) and out == [(0, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert net.infer_shape(data=(0, 5)) == (None, None, None)


def test_dtype_flows_both_ways_and_conflicts_raise():
    data = sym.Variable("data")
    w = sym.Variable("w", dtype="float64")
    net = sym.FullyConnected(data, weight=w, num_hidden=4, name="fc")
    arg, _, _ = net.infer_type()
    assert [np.dtype(t) for t in arg] == [np.dtype("float64")] * 3
    with pytest.raises(DTypeError) as info:
        net.infer_type(data="float16")
    assert "node 'fc' (FullyConnected)" in str(info.value)


def test_positional_and_unknown_keyword_arguments():
    net = sym.FullyConnected(sym.Variable("data"), num_hidden=2, name="fc")
    arg, _, _ = net.infer_shape((3, 5))
    assert arg[1] == (2, 5)
    with pytest.raises(Exception, match="not found"):
        net.infer_shape(dta=(3, 5))


def test_bad_shape_attribute_is_reported():
    v = sym.Variable("x", attr={"__shape__": "(3, q)"})
    with pytest.raises(ShapeError, match="__shape__"):
        sym.FullyConnected(v, num_hidden=2).infer_shape()
