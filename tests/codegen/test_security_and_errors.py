"""Generated source never contains user text; compiler failures are loud; no compiler means the
numpy references run, with one warning."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.codegen import compiler
from nnsym.codegen.render import render_spec
from nnsym.errors import NNSymError, OperatorParamError
from nnsym.ir.opdef import DENSE
from nnsym.ir.spec import KernelCall, KernelSpec
from nnsym.ops import get_op

HOSTILE = '"); system("rm -rf /"); /*'


def test_hostile_names_and_parameter_strings_never_reach_source():
    x = sym.Variable(HOSTILE)
    y = sym.Activation(x, act_type="tanh", name=HOSTILE + "_act")
    names = [n["name"] for n in json.loads(y.tojson())["nodes"]]
    assert names == [HOSTILE, HOSTILE + "_act"]  # kept in the JSON, as MXNet would keep them
    # ... and the node's kernel compiles and runs, with no trace of them in any generated source
    out = nd.Activation(nd.array(np.array([0.5, -1.0], np.float32)), act_type="tanh", name=HOSTILE)
    np.testing.assert_allclose(out.asnumpy(), np.tanh([0.5, -1.0]), rtol=1e-6)
    texts = []
    for p in compiler.cache_root().rglob("kernels.c"):
        try:
            texts.append(p.read_text())
        except FileNotFoundError:  # another test process's build directory, renamed meanwhile
            continue
    assert texts
    assert not [t for t in texts if "rm -rf" in t or "system(" in t]
    for bad in ("1); abort(); (1", "tanh\"); x(", "0x1p3; evil()"):
        with pytest.raises(OperatorParamError):
            sym.clip(x, a_min=bad, a_max=1.0)
        with pytest.raises(OperatorParamError):
            sym.Activation(x, act_type=bad)


def test_specs_accept_only_typed_literals():
    with pytest.raises(ValueError, match="not safe"):
        KernelSpec.make("elemwise/elemwise_unary.c.j2", expr='x); system("ls"', req="write")
    with pytest.raises(ValueError, match="not safe"):
        KernelSpec.make("elemwise/elemwise_unary.c.j2", expr="x /* c */", req="write")
    with pytest.raises(TypeError):
        KernelSpec.make("elemwise/elemwise_unary.c.j2", expr=object())


def test_lowered_source_comes_from_registered_expressions():
    op = get_op("_plus_scalar")
    params, _ = op.parse_params({"scalar": 1e300})
    f32 = np.dtype("float32")
    low = op.kernels[DENSE].lower(KernelCall(params, ((4,),), (f32,), ((4,),), (f32,)))
    src = "".join(render_spec(ln.spec) for ln in low.launches)
    assert "1e+300" not in src and "1e300" not in src  # a run-time value, not text


def test_compiler_failure_raises_with_message_and_kept_source():
    spec = KernelSpec.make("elemwise/elemwise_unary.c.j2", expr="x + + ", fparams=(),
                           in_dtype="float32",
                           out_dtype="float32", req="write")
    with pytest.raises(compiler.CompileError) as info:
        compiler.functions([spec])
    msg = str(info.value)
    assert "source kept at" in msg and "error" in msg
    kept = msg.split("source kept at ")[1].split()[0]
    assert "x + +" in Path(kept).read_text()


def test_without_a_compiler_the_numpy_references_run(monkeypatch):
    monkeypatch.setattr(compiler, "compiler", lambda: None)
    compiler.reset_backend()
    compiler._warn_no_compiler.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            x = nd.array([[0.5, -1.0]])
            y = nd.sigmoid(x * 3.0)
        assert any("no C compiler" in str(m.message) for m in w)
        np.testing.assert_allclose(y.asnumpy(), 1 / (1 + np.exp(-x.asnumpy() * 3.0)), rtol=1e-6)
    finally:
        monkeypatch.undo()
        compiler.reset_backend()


def test_forced_numpy_backend(monkeypatch):
    monkeypatch.setenv("NNSYM_BACKEND", "numpy")
    compiler.reset_backend()
    try:
        assert compiler.backend() == "numpy"
        np.testing.assert_allclose(nd.exp(nd.array([1.0])).asnumpy(), [np.e], rtol=1e-6)
    finally:
        monkeypatch.delenv("NNSYM_BACKEND")
        compiler.reset_backend()
    monkeypatch.setenv("NNSYM_BACKEND", "fortran")
    compiler.reset_backend()
    try:
        with pytest.raises(NNSymError, match="NNSYM_BACKEND"):
            compiler.backend()
    finally:
        monkeypatch.delenv("NNSYM_BACKEND")
        compiler.reset_backend()
