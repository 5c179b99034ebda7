"""Translation units of a build: the split is deterministic and balanced, a unit's key follows
its templates, and a warm process finds its libraries (split or not) without rendering."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nnsym.codegen import compiler, render
from nnsym.ir.spec import KernelSpec

TEMPLATES = ("conv/conv_forward.c.j2", "elemwise/fused.c.j2", "nn/batch_norm.c.j2",
             "dot/dot_gemm.c.j2")


def _specs(n: int) -> list[KernelSpec]:
    return [KernelSpec.make(TEMPLATES[i % len(TEMPLATES)], k=i) for i in range(n)]


def test_units_partition_balanced_and_deterministic():
    specs = _specs(22)
    weight = {s.name: render.template_info(s.template)[1] for s in specs}
    got = compiler.units(specs, 2)
    shuffled = list(specs)
    random.Random(1).shuffle(shuffled)
    assert compiler.units(shuffled, 2) == got
    assert sorted(s.name for u in got for s in u) == sorted(s.name for s in specs)
    assert all([s.name for s in u] == sorted(s.name for s in u) for u in got)
    loads = [sum(weight[s.name] for s in u) for u in got]
    assert len(got) == 2 and max(loads) - min(loads) <= max(weight.values())
    assert compiler.units(specs, 1) == [sorted(specs, key=lambda s: s.name)]
    assert compiler.split_count(specs[:1]) == 1
    assert 1 <= compiler.split_count(specs) <= min(os.cpu_count() or 1, compiler.MAX_UNITS)


def test_template_info_covers_imports():
    text = render.template_text("conv/conv_forward.c.j2")
    assert '"conv/conv_par.j2"' in text
    digest, size = render.template_info("conv/conv_forward.c.j2")
    assert size == len(text) + len(render.template_text("conv/conv_par.j2"))
    assert digest != render.template_info("conv/conv_par.j2")[0]


def test_unit_key_follows_template_digest(monkeypatch):
    if compiler.compiler() is None:
        pytest.skip("needs a C compiler")
    unit = _specs(3)
    args = (unit, ("exp",), "int", ["-O3"], ["-lm"])
    key = compiler.unit_key(*args)
    assert compiler.unit_key(*args) == key
    assert compiler.unit_key(unit[:2], *args[1:]) != key
    assert compiler.unit_key(unit, ("exp",), "int64_t", ["-O3"], ["-lm"]) != key
    monkeypatch.setattr(compiler, "template_digest", lambda name: (
        "0" * 64 if name == TEMPLATES[1] else render.template_digest(name)))
    assert compiler.unit_key(*args) != key


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from nnsym import cpu, nd, sym
    from nnsym.codegen import compiler
    split, forbid = sys.argv[1] == "split", sys.argv[2] == "forbid"
    compiler.UNIT_WEIGHT = 1
    compiler._cores_free = lambda: split
    if forbid:
        def no_render(*a, **k):
            raise AssertionError("rendered a unit")
        compiler.render_unit = no_render
    x, w = sym.Variable("x"), sym.Variable("w")
    f = sym.FullyConnected(x, w, num_hidden=5, no_bias=True)
    y = sym.tanh(f) * 2.0 + f * 0.5
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    wv = rng.standard_normal((5, 3)).astype(np.float32)
    exe = y.simple_bind(cpu(), grad_req="write", x=xv.shape, w=wv.shape)
    exe.arg_dict["x"][:] = xv
    exe.arg_dict["w"][:] = wv
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward(nd.ones((4, 5)))
    t = np.tanh(xv @ wv.T)
    gw = ((1 - t * t) * 2.0 + 0.5).T @ xv
    ok = bool(np.allclose(out, t * 2.0 + (xv @ wv.T) * 0.5, rtol=1e-5, atol=1e-5)
              and np.allclose(exe.grad_dict["w"].asnumpy(), gw, rtol=1e-4, atol=1e-5))
    print(json.dumps({"ok": ok, "compiles": compiler.STATS["compiles"],
                      "libs": len(compiler._LIBS)}))
    """
)


def _run(cache_dir: Path, split: str, forbid: str) -> dict:
    env = {**os.environ, "NNSYM_CACHE_DIR": str(cache_dir)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, split, forbid], capture_output=True,
                       text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(compiler.compiler() is None, reason="needs a C compiler")
def test_warm_process_renders_nothing_either_split(tmp_path):
    split_cold = _run(tmp_path / "a", "split", "render")
    serial_warm = _run(tmp_path / "a", "serial", "forbid")  # finds the split form
    serial_cold = _run(tmp_path / "b", "serial", "render")
    split_warm = _run(tmp_path / "b", "split", "forbid")  # finds the one-unit form
    assert all(r["ok"] for r in (split_cold, serial_warm, serial_cold, split_warm))
    assert split_cold["compiles"] > serial_cold["compiles"] > 0
    assert split_cold["libs"] > serial_cold["libs"]
    assert serial_warm["compiles"] == split_warm["compiles"] == 0
    assert serial_warm["libs"] == split_cold["libs"] and split_warm["libs"] == serial_cold["libs"]


def test_template_info_refuses_computed_references(monkeypatch):
    """A name computed at render time would be missing from the cache key."""
    texts = {"t_computed.j2": "{% include inner_name %}\n{% import 'x.j2' as x %}",
             "x.j2": "int x;"}
    monkeypatch.setattr(render, "template_text", texts.__getitem__)
    with pytest.raises(render.TemplateReferenceError, match=r"t_computed\.j2"):
        render.template_info("t_computed.j2")
    assert render.template_info("x.j2")[1] == len("int x;")
