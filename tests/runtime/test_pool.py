"""The C runtime's worker pool (runtime/runlib.c) and the choice of BLAS library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from nnsym import nd
from nnsym.codegen import compiler


def _big_product(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((1, 1000)).astype(np.float32)
    w = rng.standard_normal((300, 1000)).astype(np.float32)
    got = nd.dot(nd.array(a), nd.array(w), transpose_b=True).asnumpy()
    return got, (a.astype(np.float64) @ w.astype(np.float64).T)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_pool_works_in_a_forked_child():
    """A child forked after the pool started has none of its workers: it must start its own
    instead of waiting forever for the parent's (OpenMP's fork hazard)."""
    before = compiler.get_num_threads()
    compiler.set_num_threads(2)
    try:
        got, want = _big_product(1)  # the parent's workers now exist
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        r, w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pid = os.fork()
        if pid == 0:  # the child: compute, report, leave without running pytest's teardown
            code = 1
            try:
                g, e = _big_product(2)
                ok = bool(np.allclose(g, e, rtol=1e-4, atol=1e-3))
                os.write(w, json.dumps({"ok": ok}).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            report = f.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, report
        assert json.loads(report) == {"ok": True}
    finally:
        compiler.set_num_threads(before)


SNIPPET = """
import json, numpy as np
from nnsym import nd
from nnsym.codegen import compiler
rng = np.random.default_rng(3)
a = rng.standard_normal((70, 50)); b = rng.standard_normal((50, 40))
got = nd.dot(nd.array(a.astype(np.float32)), nd.array(b.astype(np.float32))).asnumpy()
print(json.dumps({"origin": compiler.blas().origin, "int": compiler.blas().int_type,
                  "err": float(np.abs(got - a @ b).max())}))
"""


@pytest.mark.parametrize("choice", ["scipy", "auto"])
def test_either_blas_gives_the_same_products(choice):
    env = dict(os.environ, NNSYM_BLAS=choice)
    out = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if choice == "scipy":
        assert (res["origin"], res["int"]) == ("scipy", "int")
    assert res["err"] < 1e-4


def test_bad_blas_choice_is_refused(monkeypatch):
    monkeypatch.setenv("NNSYM_BLAS", "mkl")
    monkeypatch.setattr(compiler, "_BLAS", None)
    with pytest.raises(compiler.NNSymError, match="NNSYM_BLAS"):
        compiler.blas()


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("NNSYM_NUM_THREADS", "3")
    assert compiler.default_num_threads() == 3
    monkeypatch.setenv("NNSYM_NUM_THREADS", "many")
    with pytest.raises(compiler.NNSymError, match="NNSYM_NUM_THREADS"):
        compiler.default_num_threads()


def test_openblas_found_through_threadpoolctl_where_numpy_has_no_bundled_copy(monkeypatch):
    """A numpy without numpy.libs (conda, distributions): threadpoolctl's list of loaded
    libraries finds the same OpenBLAS functions the numpy.libs lookup finds."""
    pytest.importorskip("threadpoolctl")
    if not compiler._bundled_openblas():
        pytest.skip("this numpy bundles no OpenBLAS to compare with")
    direct = compiler._numpy_blas()
    assert direct is not None and direct.origin == "numpy"
    compiler._cython_blas()  # scipy's own OpenBLAS is loaded too, and is not taken for numpy's
    monkeypatch.setattr(compiler, "_bundled_openblas", list)
    via_threadpoolctl = compiler._numpy_blas()
    assert via_threadpoolctl == direct  # same int type, same function addresses
    monkeypatch.setattr(compiler, "_loaded_openblas", list)
    assert compiler._numpy_blas() is None  # and then blas() falls back to scipy's cython_blas


BLAS_POOL_SNIPPET = r"""
import json, os, threading
import numpy as np
from nnsym.codegen import compiler
rt = compiler.runtime()
if not compiler.blas().set_threads_callback:
    print(json.dumps({"skip": "this OpenBLAS has no threads callback"})); raise SystemExit
def counts():
    c = compiler.FFI.new("int64_t[2]"); rt.nnsym_blas_counts(c); return list(c)
rng = np.random.default_rng(0)
cases = [(rng.standard_normal((512, 1152)).astype(np.float32),
          rng.standard_normal((1152, 64)).astype(np.float32)),
         (rng.standard_normal((300, 400)), rng.standard_normal((400, 500))),
         (rng.standard_normal((64, 147)).astype(np.float32),
          rng.standard_normal((147, 4096)).astype(np.float32))]
assert compiler.blas_on_pool(False) is False
want = [a @ b for a, b in cases]
res = {"on": compiler.blas_on_pool(True)}
c0 = counts()
res["same"] = all(np.array_equal(a @ b, w) for (a, b), w in zip(cases, want))
c1 = counts()
res["pooled"] = c1[0] - c0[0]
# several Python threads at once (numpy drops the GIL): one holds the pool, the others' jobs
# run on threads made for the call
errs = []
def hammer(k):
    for i in range(20):
        a, b = cases[(i + k) % len(cases)]
        if not np.array_equal(a @ b, want[(i + k) % len(cases)]):
            errs.append(k)
ts = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
res["threads_same"] = not errs
# fewer pool threads than BLAS threads: threads made for the call
compiler.set_num_threads(1)
c2 = counts()
res["one_same"] = all(np.array_equal(a @ b, w) for (a, b), w in zip(cases, want))
res["spawned"] = counts()[1] - c2[1]
compiler.set_num_threads(2)
# a forked child: no workers of the parent's; it starts its own
pid = os.fork()
if pid == 0:
    ok = all(np.array_equal(a @ b, w) for (a, b), w in zip(cases, want))
    os._exit(0 if ok else 3)
res["child"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(res))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_blas_products_on_the_pool():
    """numpy's OpenBLAS runs its threaded products' jobs on nnsym's pool (one job per pool
    thread, all at once): the same bits as OpenBLAS's own threads, from several Python threads
    at once, with fewer pool threads than BLAS threads, and in a forked child. In a
    subprocess: the callback is the library's, and a deadlock must fail by timeout."""
    env = dict(os.environ, NNSYM_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", BLAS_POOL_SNIPPET], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    assert res == {"on": True, "same": True, "pooled": res["pooled"], "threads_same": True,
                   "one_same": True, "spawned": res["spawned"], "child": 0}
    assert res["pooled"] >= len(("f32", "f64", "stem"))  # each case's product was threaded
    assert res["spawned"] >= 1
