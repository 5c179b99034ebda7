"""The executor's and NDArray's edges: non-contiguous inputs, huge shapes, Reshape's element
count, backward before forward, misspelled grad_req names, wrong arguments (each an NNSymError
naming what is wrong, never a raw numpy/cffi error or a silent wrong value)."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym

# ---------------------------------------------------------------------------------------------
# Item 2: arrays that are not one C-ordered block are copied where they enter


STRIDED = [
    pytest.param(lambda b: b[::-1], id="reversed"),
    pytest.param(lambda b: b[::2], id="step-2"),
    pytest.param(lambda b: b.reshape(4, 6).T, id="transposed"),
    pytest.param(lambda b: b.reshape(4, 6)[:, 1:4], id="column-slice"),
    pytest.param(lambda b: b.astype(">f4"), id="big-endian"),
]


def _base() -> np.ndarray:
    return np.arange(24, dtype=np.float32) - 7.5


@pytest.mark.parametrize("view", STRIDED)
def test_ndarray_of_a_strided_view_holds_the_views_values(view):
    v = view(_base())
    a = nd.NDArray(v)
    assert a._data.flags.c_contiguous and a._data.dtype.isnative
    np.testing.assert_array_equal(a.asnumpy(), v)
    # imperative calls (the Python path and the C fast path) read the right values
    for _ in range(3):
        np.testing.assert_array_equal(nd.relu(a).asnumpy(), np.maximum(v, 0))
    np.testing.assert_array_equal((a * 2.0).asnumpy(), v * 2.0)


@pytest.mark.parametrize("view", STRIDED)
def test_bound_graph_reads_a_strided_view_correctly(view):
    v = view(_base())
    x = sym.Variable("x")
    exe = (sym.exp(x) * 2.0).bind(None, {"x": nd.NDArray(v)}, grad_req="null")
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), np.exp(v) * 2.0, rtol=1e-6)
    # forward(**kwargs) with strided numpy and NDArray values
    w = view(_base() * 0.5)
    np.testing.assert_allclose(exe.forward(x=w)[0].asnumpy(), np.exp(w) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(exe.forward(x=nd.NDArray(w))[0].asnumpy(), np.exp(w) * 2.0,
                               rtol=1e-6)


def test_read_only_array_is_copied_so_kernels_can_write():
    v = _base()
    v.flags.writeable = False
    a = nd.NDArray(v)
    a[:] = 1.0
    np.testing.assert_array_equal(a.asnumpy(), np.ones(24, np.float32))
    np.testing.assert_array_equal(v, _base())  # the caller's array is untouched


def test_copies_and_assignment_from_strided_views():
    v = _base()[::-3]
    dst = nd.zeros(v.shape)
    nd.NDArray(v).copyto(dst)
    np.testing.assert_array_equal(dst.asnumpy(), v)
    dst[:] = v[::-1]
    np.testing.assert_array_equal(dst.asnumpy(), v[::-1])
    np.testing.assert_array_equal(nd.array(v).asnumpy(), v)


def test_backward_with_strided_head_and_arguments():
    x = sym.Variable("x")
    base = np.linspace(-1, 1, 24, dtype=np.float32)
    v = base.reshape(4, 6).T  # (6, 4), not C-contiguous
    exe = sym.tanh(x).bind(None, {"x": nd.NDArray(v)}, args_grad={"x": nd.zeros(v.shape)})
    exe.forward(is_train=True)
    head = (base[::-1] * 3.0).reshape(4, 6).T
    exe.backward(nd.NDArray(head))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), head * (1 - np.tanh(v) ** 2),
                               rtol=1e-5, atol=1e-6)
