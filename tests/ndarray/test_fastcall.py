"""The C fast path of ``nnsym.nd.<op>``: repeat calls run the registered kernel without Python,
give the same results as the first call and numpy, fall back to Python for anything else,
release the GIL on large arrays and leak nothing."""

from __future__ import annotations

import gc
import sys
import threading
import time

import numpy as np
import pytest

from nnsym import nd
from nnsym.codegen import compiler
from nnsym.ndarray import fastcall
from nnsym.testing import as_nd

pytestmark = pytest.mark.skipif(fastcall.module() is None, reason="no C fast path here")

UNARY = [("tanh", np.tanh), ("exp", np.exp), ("relu", lambda x: np.maximum(x, 0)),
         ("negative", np.negative), ("square", np.square)]


@pytest.mark.parametrize(("name", "ref"), UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_repeat_calls_run_the_registered_kernel_and_match_numpy(name, ref, dtype):
    fn = getattr(nd, name)
    fn.clear()
    rtol = 1e-6 if dtype == "float32" else 1e-15
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5)).astype(dtype)
    first = fn(as_nd(x))
    assert fn.count() == 1  # registered by the first (Python) call
    for _ in range(3):
        y = rng.standard_normal((3, 5)).astype(dtype)
        got = fn(as_nd(y))
        assert isinstance(got, nd.NDArray) and got.shape == (3, 5) and got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.asnumpy(), ref(y), rtol=rtol)
    np.testing.assert_allclose(first.asnumpy(), ref(x), rtol=rtol)


def test_other_signatures_go_to_python_and_are_registered_in_turn():
    nd.elemwise_add.clear()
    a, b = np.arange(6, dtype=np.float32), np.ones(6, np.float32)
    np.testing.assert_array_equal(nd.elemwise_add(as_nd(a), as_nd(b)).asnumpy(), a + b)
    # another shape, another dtype, more signatures than the table holds: all correct
    for n in range(1, 12):
        for dt in ("float32", "int32"):
            p, q = np.arange(n).astype(dt), np.full(n, 3).astype(dt)
            for _ in range(2):
                got = nd.elemwise_add(as_nd(p), as_nd(q)).asnumpy()
                assert got.dtype == np.dtype(dt)
                np.testing.assert_array_equal(got, p + q)
    assert 1 <= nd.elemwise_add.count() <= 8


def test_keywords_views_and_bad_arguments_take_the_python_path():
    x = nd.array(np.array([[1.0, -2.0], [3.0, -4.0]], np.float32))
    nd.relu(x)
    # a row of a 2-d array is a view with an offset: the kernel sees the right memory
    np.testing.assert_array_equal(nd.relu(x[1]).asnumpy(), [3.0, 0.0])
    out = nd.zeros((2, 2))
    assert nd.relu(x, out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), [[1.0, 0.0], [3.0, 0.0]])
    with pytest.raises(TypeError):
        nd.relu(np.ones(2, np.float32))  # a numpy array, not an NDArray


def test_results_are_fresh_arrays_on_the_inputs_context():
    x = nd.array(np.ones(4, np.float32))
    nd.exp(x)
    y = nd.exp(x)
    z = nd.exp(x)
    assert y.context == x.context
    assert not np.shares_memory(y.asnumpy(), z.asnumpy())
    y[:] = 0
    np.testing.assert_allclose(z.asnumpy(), np.e, rtol=1e-6)
    np.testing.assert_array_equal((y + z).asnumpy(), z.asnumpy())  # usable by later ops


def test_no_reference_leaks():
    x = nd.array(np.ones(8, np.float32))
    nd.sigmoid(x)
    data = x._data
    before = sys.getrefcount(data)
    for _ in range(1000):
        nd.sigmoid(x)
    gc.collect()
    assert sys.getrefcount(data) == before
    objs = len(gc.get_objects())
    for _ in range(1000):
        nd.sigmoid(x)
    gc.collect()
    assert len(gc.get_objects()) - objs < 50


def test_backend_reset_forgets_registered_kernels(monkeypatch):
    x = nd.array(np.ones(3, np.float32))
    nd.log1p.clear()
    nd.log1p(x)
    assert nd.log1p.count() == 1
    monkeypatch.setenv("NNSYM_BACKEND", "numpy")
    compiler.reset_backend()
    try:
        assert nd.log1p.count() == 0
        np.testing.assert_allclose(nd.log1p(x).asnumpy(), np.log1p(1.0), rtol=1e-6)
    finally:
        monkeypatch.delenv("NNSYM_BACKEND")
        compiler.reset_backend()


def test_large_kernels_release_the_gil():
    x = nd.array(np.random.default_rng(0).standard_normal(1 << 23).astype(np.float64))
    nd.tanh(x)  # compile and register; later calls take the C fast path
    stamps: list[float] = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    t = threading.Thread(target=ticker)
    t.start()
    windows = []
    try:
        time.sleep(0.01)
        for _ in range(3):
            t0 = time.perf_counter()
            nd.tanh(x)
            windows.append((t0, time.perf_counter()))
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    # Holding the GIL, the kernel would keep the ticker out from the moment it starts (at most
    # one switch interval after t0) to its end (the ticker runs for one switch interval after
    # it, before t1 is read): no stamp could fall inside the middle of the window.
    inside = [sum(t0 + 0.004 < s < t1 - 0.004 for s in stamps) for t0, t1 in windows]
    assert max(inside) > 100, (inside, [t1 - t0 for t0, t1 in windows])
