"""CUDA code generation for the elementwise families: which variants exist, what they render to,
the files ``nnsym codegen`` writes."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from nnsym.cuda import source as cusrc
from nnsym.devtools.cuda import cli as cgcli
from nnsym.devtools.cuda import codegen as cg
from nnsym.ir.spec import CTYPES, KernelSpec
from nnsym.ops.elemwise.broadcast import BROADCAST
from nnsym.ops.elemwise.elemwise import BINARY, SCALAR_OPS, UNARY, kernel_expr


@pytest.fixture(scope="module")
def variants():
    return [v for v in cg.all_variants() if v.family in cg.ELEMWISE]


def test_every_family_and_operator_is_enumerated(variants):
    fams = Counter(v.family for v in variants)
    assert set(fams) == {"unary", "binary", "backward"}
    ops = {v.op for v in variants}
    for row in UNARY:
        assert row.name in ops
        if row.grad not in ("0", "g"):
            assert f"_backward_{row.name}" in ops
    for row in SCALAR_OPS:
        assert row.name in ops
    for name in ("clip", "_contrib_quadratic", "_backward_clip", "_backward_Activation",
                 "_backward_LeakyReLU", "_backward_LinearRegressionOutput"):
        assert name in ops
    for brow in BINARY:
        assert brow.name in ops
    for bc in BROADCAST:
        assert bc.name in ops


def test_every_dtype_req_and_inner_mode(variants):
    per_op = Counter((v.op, v.in_dtype, v.req) for v in variants if v.op == "sigmoid")
    assert len(per_op) == len(CTYPES) * 2
    modes = {(v.ctx["nd"], v.ctx["inner"]) for v in variants if v.op == "broadcast_add"}
    assert {(nd, m) for nd in (1, 2, 3) for m in ("vv", "vs", "sv")} <= modes
    # integer data with a non-integer scalar computes into float64
    assert any(v.in_dtype == "int32" and v.out_dtype == "float64"
               for v in variants if v.op == "_plus_scalar")
    # parameter-chosen expressions are told apart by the parameter's value
    names = {v.name for v in variants if v.op == "_backward_Activation"}
    assert "nnk_backward_Activation_softrelu_float32_write" in names


def test_names_are_unique_identifiers(variants):
    names = [v.name for v in variants]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"nnk_[A-Za-z0-9_]+", n) for n in names)
    assert names == sorted(names)
    # descriptions hold registry identifiers only (no comment terminators, no quotes)
    assert all(re.fullmatch(r"[A-Za-z0-9_ ,()>\-]+", v.describe()) for v in variants)


def test_expressions_come_from_the_operator_tables(variants):
    """Both targets render the spec's expression, which the operator's lowering chose (the
    integer division guard included): nothing else supplies expression text."""
    by_op = {row.name: row.expr for row in UNARY}
    for v in variants:
        if v.op in by_op:
            assert v.expr == kernel_expr(v.op, by_op[v.op], np.dtype(v.out_dtype))
        c, cu = cg.render_kernel(v, "c"), cg.render_kernel(v, "cuda")
        assert v.expr in c and v.expr in cu, v.name
    guarded = [v for v in variants if v.op == "elemwise_div" and v.out_dtype == "int32"]
    assert guarded and all("== 0 ? 0" in v.expr for v in guarded)


def test_cuda_kernels_take_the_c_kernels_arrays(variants):
    """Every CUDA kernel has the C kernel's signature (p, ia, fa; in device memory there)."""
    for v in cg.unique_specs(variants):
        text = cg.render_kernel(v, "cuda")
        assert text.startswith(f'extern "C" __global__ void {v.name}(void *const *p, '
                               "const int64_t *ia, const double *fa)"), v.name


def test_float16_is_half_computed_in_float(variants):
    v = next(v for v in variants if v.name == "nnk_sigmoid_float16_add")
    text = cg.render_kernel(v, "cuda")
    assert "const __half *in = (const __half *)p[0];" in text
    assert "typedef float T;" in text and "nnsym_f2h(" in text and "nnsym_h2f(in[i])" in text
    assert "_Float16" not in text


def test_unknown_target_and_spec_safety():
    with pytest.raises(ValueError):
        cg.prologue("opencl")
    with pytest.raises(ValueError):
        KernelSpec.make("elemwise/elemwise_unary.c.j2", expr='x); system("x"); (x')
    with pytest.raises(ValueError):
        KernelSpec.make("elemwise/elemwise_unary.c.j2", expr="x /* */")


def test_write_sources_one_kernel_per_file(tmp_path, variants):
    for target, suffix in (("c", ".c"), ("cuda", ".cu")):
        paths = cgcli.write_sources(target, tmp_path / target, op="sigmoid")
        want = [v for v in variants if v.op == "sigmoid"]
        assert [p.name for p in paths] == [v.name + suffix for v in want]
        for p, v in zip(paths, want):
            text = p.read_text()
            assert text.startswith(f"/* nnsym {target} kernel {v.name}: operator sigmoid, ")
            assert text.count(f"void {v.name}(") == 1
    # an alias selects its operator
    assert len(cgcli.write_sources("cuda", tmp_path / "alias", op="_Plus")) == len(
        cg.variants("elemwise_add"))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_written_c_files_compile_on_their_own(tmp_path):
    paths = cgcli.write_sources("c", tmp_path, op="_rdiv_scalar")
    r = subprocess.run(["gcc", "-fsyntax-only", "-std=gnu11", *map(str, paths)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[:2000]


def test_cli_main(tmp_path, capsys):
    assert cgcli.cli_main(["--target", "cuda", "--out", str(tmp_path), "--op", "relu"]) == 0
    assert "wrote 18 cuda kernels" in capsys.readouterr().out
    assert len(list(tmp_path.glob("*.cu"))) == 18
    assert cgcli.cli_main(["--target", "c", "--out", str(tmp_path / "x"), "--op", "nope"]) == 2
    # Reshape is a view of its input: no kernel at all
    assert cgcli.cli_main(["--target", "c", "--out", str(tmp_path / "y"), "--op", "Reshape"]) == 1
    with pytest.raises(SystemExit):
        cgcli.cli_main(["--target", "opencl", "--out", str(tmp_path)])


def _kernel_templates() -> list[Path]:
    """Every C template that defines kernels (shared macro files and headers excluded)."""
    return sorted(p for p in OPS.rglob("*.c.j2") if p.name not in MACRO_FILES)


OPS = Path(cusrc.__file__).resolve().parent.parent / "ops"
# macros and shared helpers, included by kernel templates (no kernel of their own)
MACRO_FILES = {"shape_store.c.j2", "elemwise_helpers.c.j2"}


def test_every_kernel_template_has_a_cuda_twin():
    """Every C kernel template but the host-side structure checks, which run before data
    reaches any kernel (on the host for either device)."""
    from nnsym.ops.common.sparse import HOST_ONLY_TEMPLATES

    host = {t.split("/")[-1] for t in HOST_ONLY_TEMPLATES}
    missing = [str(p) for p in _kernel_templates()
               if p.name not in host
               and not p.with_name(p.name[: -len(".c.j2")] + ".cu.j2").is_file()]
    assert not missing, missing


def test_codegen_writes_a_file_per_family_and_storage_type(tmp_path):
    """`nnsym codegen --target cuda` writes every variant: at least one file of every dense
    family (default storage) and of every sparse template (csr and row_sparse kernels)."""
    from nnsym.devtools.cuda import sparse

    paths = cgcli.write_sources("cuda", tmp_path)
    names = {p.stem for p in paths}
    assert all(p.suffix == ".cu" for p in paths)
    dense = cg.all_variants()
    assert {v.name for v in dense} <= names
    fams = {v.family for v in dense}
    from nnsym.ops.common.sparse import HOST_ONLY_TEMPLATES

    host = {Path(t).name[: -len(".c.j2")] for t in HOST_ONLY_TEMPLATES}
    stems = {p.name[: -len(".c.j2")] for p in _kernel_templates()} - host
    sparse_stems = {Path(t).name[: -len(".c.j2")] for t in sparse.TEMPLATES}
    assert sparse_stems <= stems
    short = {"elemwise_unary": "unary", "elemwise_binary": "binary",
             "elemwise_backward": "backward"}
    assert {short.get(s, s) for s in stems - sparse_stems} <= fams
    sp = sparse.all_kernels()
    assert {k.stem for k in sp} <= names
    assert {k.family for k in sp} == sparse_stems
    assert any("_csr_" in k.stem for k in sp) and any("_rsp_" in k.stem for k in sp)
