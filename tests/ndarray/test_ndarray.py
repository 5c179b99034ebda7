"""NDArray: creation, properties, copies, indexing, arithmetic against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym
from nnsym import nd
from nnsym.errors import ShapeError


def test_creation_and_properties():
    a = nd.array([[1, 2], [3, 4]])
    assert a.shape == (2, 2) and a.dtype == np.float32 and a.size == 4 and a.ndim == 2
    assert a.context == nnsym.cpu() and a.stype == "default"
    # numpy sources give float32 unless dtype= says otherwise, as MXNet 1.9.1 (checked there:
    # float64, int64, int32 and float16 sources all give float32); NDArray sources keep theirs
    assert nd.array(np.arange(3, dtype=np.int64)).dtype == np.float32
    assert nd.array(np.ones(2, np.float64)).dtype == np.float32
    assert nd.array(np.ones(2, np.float64), dtype="float64").dtype == np.float64
    assert nd.array(nd.ones(2, dtype="int32")).dtype == np.int32
    assert nd.array([1, 2], dtype="float16").dtype == np.float16
    assert nd.zeros((2, 3)).asnumpy().sum() == 0 and nd.ones(4).asnumpy().sum() == 4
    assert nd.full((2,), 7, dtype="int32").asnumpy().tolist() == [7, 7]
    assert nd.empty((0, 3)).shape == (0, 3)
    assert "<NDArray 2x2 @cpu(0)>" in repr(a)


def test_asnumpy_is_a_copy_and_setitem_writes():
    a = nd.zeros((2, 3))
    a.asnumpy()[0, 0] = 5
    assert a.asnumpy()[0, 0] == 0
    a[:] = 3
    a[1] = nd.array([1, 2, 3])
    a[0, 1:] = np.array([8, 9])
    np.testing.assert_array_equal(a.asnumpy(), [[3, 8, 9], [1, 2, 3]])
    with pytest.raises(ShapeError):
        a[:] = np.ones((4, 4))


def test_first_axis_slice_is_a_view_like_mxnet():
    a = nd.array(np.arange(12).reshape(3, 4))
    v = a[1:3]
    v[:] = 0
    assert a.asnumpy()[1:].sum() == 0
    assert a[1].shape == (4,) and a[:, 1].shape == (3,)


def test_copy_copyto_astype():
    a = nd.array([1.5, -2.5])
    b = a.copy()
    b[:] = 0
    assert a.asnumpy().tolist() == [1.5, -2.5]
    c = nd.zeros((2,), dtype="float64")
    a.copyto(c)
    assert c.asnumpy().tolist() == [1.5, -2.5] and c.dtype == np.float64
    assert a.copyto(nnsym.cpu()).asnumpy().tolist() == [1.5, -2.5]
    assert a.astype("int32").asnumpy().tolist() == [1, -2]
    with pytest.raises(ShapeError):
        a.copyto(nd.zeros((3,)))


@pytest.mark.parametrize(
    ("fn", "ref"),
    [
        (lambda x, y: x + y, np.add),
        (lambda x, y: x - y, np.subtract),
        (lambda x, y: x * y, np.multiply),
        (lambda x, y: x / y, np.divide),
        (lambda x, y: x**y, np.power),
    ],
)
def test_arithmetic_matches_numpy(fn, ref):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    y = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
    row = rng.uniform(0.5, 2, (1, 4)).astype(np.float32)
    X, Y, R = nd.array(x), nd.array(y), nd.array(row)
    np.testing.assert_allclose(fn(X, Y).asnumpy(), ref(x, y), rtol=1e-6)
    np.testing.assert_allclose(fn(X, R).asnumpy(), ref(x, row), rtol=1e-6)
    np.testing.assert_allclose(fn(X, 2.0).asnumpy(), ref(x, np.float32(2.0)), rtol=1e-6)
    np.testing.assert_allclose(fn(2.0, X).asnumpy(), ref(np.float32(2.0), x), rtol=1e-6)


def test_unary_and_inplace_operators():
    x = nd.array([1.0, -2.0])
    assert (-x).asnumpy().tolist() == [-1.0, 2.0]
    assert abs(x).asnumpy().tolist() == [1.0, 2.0]
    x += 1
    x *= nd.array([2.0, 3.0])
    assert x.asnumpy().tolist() == [4.0, -3.0]


def test_operator_functions_with_out_and_keywords():
    x = nd.array([[1.0, 2.0], [3.0, 4.0]])
    out = nd.zeros((2, 2))
    r = nd.exp(x, out=out)
    assert r is out
    np.testing.assert_allclose(out.asnumpy(), np.exp(x.asnumpy()), rtol=1e-6)
    np.testing.assert_allclose(nd.exp(data=x).asnumpy(), np.exp(x.asnumpy()), rtol=1e-6)
    with pytest.raises(TypeError):
        nd.exp([1.0, 2.0])


def test_out_is_written_in_place_or_through_a_copy_where_inputs_overlap(monkeypatch):
    from nnsym.runtime.imperative import CompiledCall

    runs = []
    real_run = CompiledCall.run

    def spy(self, inputs, outputs, req="write"):
        runs.append([o.__array_interface__["data"][0] for o in outputs])
        return real_run(self, inputs, outputs, req)

    monkeypatch.setattr(CompiledCall, "run", spy)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    x, out = nd.array(a), nd.zeros((4, 4))
    addr = out._data.__array_interface__["data"][0]
    nd.tanh(x, out=out)
    assert runs[-1] == [addr]  # the kernel wrote into out's memory
    np.testing.assert_allclose(out.asnumpy(), np.tanh(a), rtol=1e-6)
    # relu allows its input in place: out=x runs in place and is right
    nd.relu(x, out=x)
    np.testing.assert_array_equal(x.asnumpy(), np.maximum(a, 0))
    # dot does not: out=one of its inputs goes through a temporary and is still right
    p, q = rng.standard_normal((4, 4)).astype(np.float32), rng.standard_normal((4, 4))
    pa, qa = nd.array(p), nd.array(q.astype(np.float32))
    nd.dot(pa, qa, out=pa)
    assert runs[-1] != [pa._data.__array_interface__["data"][0]]
    np.testing.assert_allclose(pa.asnumpy(), p @ q.astype(np.float32), rtol=1e-5, atol=1e-6)
    # another dtype: computed, then cast into out
    o64 = nd.zeros((4, 4), dtype="float64")
    nd.tanh(x, out=o64)
    np.testing.assert_allclose(o64.asnumpy(), np.tanh(np.maximum(a, 0)), rtol=1e-6)


def test_reshape_returns_a_view():
    x = nd.array(np.arange(6, dtype=np.float32))
    y = x.reshape((2, 3))
    assert y.shape == (2, 3)
    y[:] = 1
    assert x.asnumpy().sum() == 6
