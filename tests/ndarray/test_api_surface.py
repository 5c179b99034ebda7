"""MXNet 1.9.1's API surface beyond operators: the namespaces after ``import nnsym``, fluent
methods (``x.sum(1)``) with MXNet's positional argument mapping, ``with ctx:`` and
``current_context``, DLPack both ways, ``from_numpy``, ``slice_assign``, and the
float32 default of ``nd.array``. The method lists come from MXNet 1.9.1
(tests/golden/api/mxnet-methods.json, made with ``inspect`` in the reference venv)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd
from nnsym.ir.fluent import NDARRAY_FLUENT, SYMBOL_FLUENT
from nnsym.ops import REGISTRY

MXNET = json.loads((Path(__file__).resolve().parents[1] / "golden" / "api" /
                    "mxnet-methods.json").read_text())


def test_namespaces_are_attributes_after_import():
    for name in ("optimizer", "init", "initializer", "test_utils", "sym", "symbol", "nd",
                 "ndarray", "model", "viz", "context"):
        assert hasattr(mx, name), name
    assert mx.init.Xavier is mx.initializer.Xavier
    assert mx.context.current_context() == mx.cpu()


def test_fluent_methods_match_their_operators():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = nd.array(a)
    np.testing.assert_allclose(x.sum(1).asnumpy(), a.sum(1), rtol=1e-6)  # positional axis
    np.testing.assert_allclose(x.sum(axis=0, keepdims=True).asnumpy(), a.sum(0, keepdims=True),
                               rtol=1e-6)
    assert x.argmax(axis=1).asnumpy().tolist() == a.argmax(1).astype(np.float32).tolist()
    np.testing.assert_allclose(x.mean().asnumpy(), [a.mean()], rtol=1e-6)
    np.testing.assert_allclose(x.clip(-0.5, 0.5).asnumpy(), np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(x.exp().log().asnumpy(), a, rtol=1e-5, atol=1e-6)
    assert x.transpose().shape == (4, 3) and x.expand_dims(0).shape == (1, 3, 4)
    with pytest.raises(TypeError, match="at most"):
        x.sum(1, True, False, 7)


def test_symbol_fluent_methods_build_the_same_graph():
    s = mx.sym.Variable("x")
    y = s.sum(axis=1).exp().reshape((2, 1)).astype("float64")
    _, outs, _ = y.infer_shape(x=(2, 3))
    assert outs == [(2, 1)]
    exe = y.bind(mx.cpu(), {"x": nd.array(np.ones((2, 3)))})
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), np.exp(3.0) * np.ones((2, 1)))


def test_every_fluent_method_of_a_registered_operator_exists():
    for cls, table in ((nd.NDArray, NDARRAY_FLUENT), (mx.sym.Symbol, SYMBOL_FLUENT)):
        for method, (op, _) in table.items():
            if op in REGISTRY or any(op in o.aliases for o in REGISTRY.values()):
                assert hasattr(cls, method), (cls.__name__, method)
    assert set(NDARRAY_FLUENT) == set(MXNET["ndarray_fluent"])
    assert set(SYMBOL_FLUENT) == set(MXNET["symbol_fluent"])


def test_context_manager_sets_the_default_context_per_thread():
    assert mx.current_context() == mx.cpu(0)
    with mx.cpu(1) as c:
        assert c == mx.cpu(1) and mx.current_context() == mx.cpu(1)
        assert nd.ones(2).context == mx.cpu(1) and nd.array([1]).context == mx.cpu(1)
        seen = []
        t = threading.Thread(target=lambda: seen.append(mx.current_context()))
        t.start()
        t.join()
        assert seen == [mx.cpu(0)]  # another thread keeps its own default
        with mx.cpu(2):
            assert nd.zeros(1).context == mx.cpu(2)
        assert mx.current_context() == mx.cpu(1)
    assert nd.zeros(1).context == mx.cpu(0)


def test_dlpack_both_ways_shares_memory():
    a = nd.zeros((2, 3))
    b = nd.from_dlpack(nd.to_dlpack_for_write(a))
    b[:] = 7
    np.testing.assert_array_equal(a.asnumpy(), np.full((2, 3), 7, np.float32))
    src = np.arange(4.0)
    c = nd.from_dlpack(src)  # any __dlpack__ producer
    assert c.dtype == np.float64
    c[:] = 1
    np.testing.assert_array_equal(src, np.ones(4))
    np.testing.assert_array_equal(np.from_dlpack(a), a.asnumpy())  # NDArray as a producer
    nd.waitall()  # nothing pending on the CPU: returns with the data as written
    r = nd.from_dlpack(nd.to_dlpack_for_read(a))  # a classic capsule: a copy
    np.testing.assert_array_equal(r.asnumpy(), a.asnumpy())


def test_from_numpy_shares_or_copies():
    n = np.arange(3, dtype=np.int32)
    z = nd.from_numpy(n)
    z[:] = 5
    assert n.tolist() == [5, 5, 5] and z.dtype == np.int32
    strided = np.arange(6.0)[::2]
    c = nd.from_numpy(strided)
    assert c.asnumpy().tolist() == [0.0, 2.0, 4.0] and c.dtype == np.float64


def test_slice_assign_and_scalar():
    a = nd.zeros((2, 3))
    assert a.slice_assign(nd.ones((1, 2)), (0, 1), (1, 3), (None, None)) is a
    a.slice_assign_scalar(5.0, (1, 0), (2, 2), ())
    np.testing.assert_array_equal(a.asnumpy(), [[0, 1, 1], [5, 5, 0]])  # as MXNet 1.9.1 gives
    assert a.writable


def test_array_defaults_to_float32_for_numpy_sources():
    assert nd.array(np.ones(2, np.float64)).dtype == np.float32
    assert nd.array(np.ones(2, np.int64)).dtype == np.float32
    assert nd.array(np.ones(2, np.float64), dtype="float64").dtype == np.float64
    assert nd.array(nd.ones(2, dtype="float16")).dtype == np.float16


def test_positional_parameters_follow_mxnet_argument_order():
    """``nd.sum(x, 1)``, ``nd.FullyConnected(x, w, b, 4)``, ``sym.FullyConnected(x, None, None,
    5)``: positional values after the arrays are named by MXNet 1.9.1's generated signatures
    (nnsym/ir/mxnet_signatures.json); None means an input not given."""
    x = nd.array(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(nd.sum(x, 1).asnumpy(), [3, 12])
    np.testing.assert_array_equal(nd.sum(x, 0, True).asnumpy(), [[3, 5, 7]])
    y = nd.FullyConnected(x, nd.ones((4, 3)), nd.zeros(4), 4)
    np.testing.assert_array_equal(y.asnumpy(), np.tile([[3], [12]], (1, 4)))
    np.testing.assert_array_equal(nd.contrib.quadratic(nd.ones(2), 1.0, 2.0, 3.0).asnumpy(),
                                  [6, 6])
    s = mx.sym.FullyConnected(mx.sym.var("x"), None, None, 5, name="fc")
    assert s.list_arguments() == ["x", "fc_weight", "fc_bias"]
    assert s.infer_shape(x=(2, 3))[1] == [(2, 5)]
    with pytest.raises(TypeError, match="at most 4 positional"):
        nd.sum(x, 0, False, False, 3)
    with pytest.raises(TypeError, match="multiple values"):
        nd.sum(x, 1, axis=0)


def test_ndarray_only_methods_raise_on_symbols_and_broadcast_like():
    from nnsym.symbol.symbol import NotImplementedForSymbol

    s = mx.sym.var("x")
    for call in (s.asnumpy, s.asscalar, s.wait_to_read, s.detach, s.backward,
                 lambda: s.as_in_context(mx.cpu())):
        with pytest.raises(NotImplementedForSymbol, match="only available in NDArray"):
            call()
    x = nd.array([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(x.broadcast_like(nd.zeros((2, 3))).asnumpy(),
                                  [[1, 2, 3], [1, 2, 3]])


def test_method_coverage_against_mxnet():
    """Every public NDArray and Symbol method of MXNet 1.9.1 but autograd's, the numpy
    interface's and the raw handle (104 of 111 and 114 of 117)."""
    nd_missing = set(MXNET["ndarray_methods"]) - set(dir(nd.NDArray))
    sym_missing = set(MXNET["symbol_methods"]) - set(dir(mx.sym.Symbol))
    out_of_scope = {"as_nd_ndarray", "as_np_ndarray", "handle", "attach_grad", "grad",
                    "backward", "detach"}
    assert nd_missing <= out_of_scope, nd_missing
    assert sym_missing <= out_of_scope, sym_missing
    for name in ("split_v2", "debug_str", "gradient", "optimize_for", "get_backend_symbol"):
        assert callable(getattr(mx.sym.Symbol, name)), name
    assert callable(nd.NDArray.split_v2) and callable(nd.split_v2) and callable(mx.sym.split_v2)
