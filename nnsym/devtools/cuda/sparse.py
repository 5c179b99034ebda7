"""CUDA twins of the sparse (csr / row_sparse) kernels of ``nnsym/sparse``.

Each C template under ``nnsym/sparse/templates`` that holds kernels has a CUDA twin beside it
(``cast_storage.cu.j2``, ``dot_csr.cu.j2``, ``elemwise_sparse.cu.j2``, ``optim_update.cu.j2``,
``reduce_sparse.cu.j2``). A C template renders a whole library of host functions (thread-pool
parts, count + prefix + fill); its twin renders ONE ``__global__`` kernel per rendering, picked
by the context key ``kernel`` (the rest of the context is the C template's: ``dtype``, ``comp``,
``expr``, ``acc``; the optimizer twin adds ``opt`` and ``grad``). Every kernel has nnsym's packed
signature ``extern "C" __global__ void NAME(void *const *p, const int64_t *ia, const double *fa)``;
the ``p``/``ia``/``fa`` layout of each kernel and the launch sequence of the multi-step
operations (count kernel -> exclusive prefix sum by the host runtime, e.g. ``cupy.cumsum`` ->
fill kernel) are documented in the template's header comment.

This module enumerates every variant (:func:`all_kernels`: each template x the dtypes, index
kernels, expressions, optimizer ops and gradient kinds the C side renders it with), renders
them (:func:`kernels`: ``(stem, source)`` for ``target`` ``"cuda"`` or ``"c"``), compiles them
with nvcc (:func:`nvcc_check`, cached like :func:`nnsym.devtools.cuda.codegen.nvcc_check`)
and builds the host shim (:func:`build_shim`: the CUDA source compiled as C++ on the CPU by
:mod:`nnsym.devtools.cuda.shim`'s header and launcher).

Target ``"c"``: a kernel's C counterpart is the C library its template renders with the same
context (``common.c.j2`` + the template), headed by a comment naming the C function that computes
the same thing (``SparseKernel.c_function``). Kernels without a one-to-one C function (the count /
flag / rank steps whose C code is fused with a serial prefix sum or merge: ``*_count``,
``*_flag``, ``*_mark``, ``*_ids``, ``compact``, ``col_pos``, ``mark_cols``) have no ``"c"``
entry.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnsym import fileio
from nnsym.codegen.cache import cache_key, cache_root
from nnsym.codegen.render import template_env
from nnsym.cuda import source as src
from nnsym.devtools.cuda import codegen as cg
from nnsym.devtools.cuda import shim
from nnsym.ir.spec import comptype
from nnsym.ops.elemwise.elemwise import BINARY_BY_NAME, kernel_expr
from nnsym.ops.optim import kernels as optim_kernels
from nnsym.runtime import native

# The sparse kernel templates (family paths under nnsym/ops) that hold kernels.
TEMPLATES = ("common/cast_storage.c.j2", "elemwise/elemwise_sparse.c.j2",
             "common/reduce_sparse.c.j2", "dot/dot_csr.c.j2", "optim/optim_update.c.j2")
ENV = template_env([src.OPS_DIR, src.TEMPLATE_DIR])
ENV.globals.update(cutype=src.cuda_ctype, ctype=src.cuda_ctype, load=src.load, store=src.store)

# The dtypes of the C side (nnsym/ops/common/sparse.py, dot.py, optim.py).
ELEM_DTYPES = ("float16", "float32", "float64", "int32", "int64")
FLOAT_DTYPES = ("float32", "float64")
# The binary operators the sparse merges serve (nnsym/ndarray/sparse_ops.py) and their
# operator-table names; the expression is the operator's own (integer division guarded).
BINARY_OPS = {"add": "elemwise_add", "sub": "elemwise_sub", "mul": "elemwise_mul",
              "div": "elemwise_div"}
OPTIMIZERS = ("sgd", "sgd_mom", "adam", "adagrad", "group_adagrad", *optim_kernels.EXT_OPS)
# Gradient kinds: dense, row_sparse lazy (only its rows), row_sparse standard (every row).
GRADS = ("dense", "lazy", "std")

# (kernel, C function or None) per template; index kernels (no dtype) separately.
CAST_KERNELS = (("dense_csr_count", None), ("dense_csr_fill", "nse_dense_csr_fill"),
                ("dense_rsp_flag", None), ("gather_rows", "nse_gather_rows"),
                ("csr_dense", "nse_csr_dense"), ("rsp_dense", "nse_rsp_dense"))
CAST_INDEX_KERNELS = ("compact", "retain_flag")
ELEM_KERNELS = (("csr_bin_fill", "nse_csr_bin_fill"), ("rsp_bin_fill", None),
                ("rsp_rsp_dense", "nse_rsp_rsp_dense"), ("rsp_dns_dense", "nse_rsp_dns_dense"),
                ("rsp_dns_rsp", "nse_rsp_dns_rsp"), ("csr_dns_dense", "nse_csr_dns_dense"),
                ("csr_dns_csr", "nse_csr_dns_csr"))
ELEM_INDEX_KERNELS = ("csr_bin_count", "rsp_bin_mark", "rsp_bin_ids")
REDUCE_KERNELS = (("csr_sum_rows", "nse_csr_sum_rows"), ("csr_sum_cols", "nse_csr_sum_cols"),
                  ("rsp_sqsum_rows", "nse_rsp_sqsum_rows"),
                  ("rsp_sqsum_cols", "nse_rsp_sqsum_cols"), ("addn_fill", "nse_addn_fill"))
REDUCE_INDEX_KERNELS = ("addn_mark", "addn_ids")
DOT_KERNELS = (("csr_dense", "nnsym_spdot_csr_dense_{S}"),
               ("csr_t_dense", "nnsym_spdot_csr_t_dense_{S}"),
               ("rsp_to_dense", "nnsym_spdot_rsp_to_dense_{S}"),
               ("dense_csr", "nnsym_spdot_dense_csr_{S}"))
DOT_INDEX_KERNELS = ("mark_cols", "col_pos")


@dataclass(frozen=True)
class SparseKernel:
    """One CUDA kernel variant: its stem (a unique C identifier, also the kernel's name), the C
    template it twins, the kernel it renders and the context (the C template's + ``kernel``)."""
    stem: str
    template: str                      # the C template, e.g. "common/cast_storage.c.j2"
    kernel: str
    ctx: tuple[tuple[str, Any], ...]   # the C template's context (sorted items)
    c_function: str | None
    description: str
    cuda_ctx: tuple[tuple[str, Any], ...] = ()  # extra CUDA-only context (optimizer op)

    @property
    def family(self) -> str:
        return Path(self.template).name[: -len(".c.j2")]

    @property
    def cuda_template(self) -> str:
        return src.cuda_twin(self.template)

    @property
    def context(self) -> dict[str, Any]:
        return dict(self.ctx)

    def render_cuda(self) -> str:
        return ENV.get_template(self.cuda_template).render(
            name=self.stem, kernel=self.kernel, **self.context, **dict(self.cuda_ctx))

    def header(self, target: str) -> str:
        if target == "c":
            return (f"/* nnsym c kernel {self.stem}: {self.description}; the C function "
                    f"{self.c_function} of this library */\n")
        return f"/* nnsym cuda kernel {self.stem}: {self.description} */\n"

    def render_c(self) -> str:
        """The C library this kernel's C function lives in (common.c.j2 + the template)."""
        return native.render(self.template, **self.context)


def _k(stem: str, template: str, kernel: str, ctx: dict[str, Any], cfn: str | None,
       desc: str, **cuda_ctx: Any) -> SparseKernel:
    return SparseKernel(stem, template, kernel, tuple(sorted(ctx.items())), cfn, desc,
                        tuple(sorted(cuda_ctx.items())))


def binary_exprs(dtype: str) -> dict[str, str]:
    """The scalar expression of each sparse binary operator for a dtype (short name -> expr)."""
    return {short: kernel_expr(op, BINARY_BY_NAME[op].expr, np.dtype(dtype))
            for short, op in BINARY_OPS.items()}


def all_kernels() -> list[SparseKernel]:
    """Every sparse CUDA kernel variant, sorted by stem."""
    out: list[SparseKernel] = []
    cast, elem, red, dot, opt = TEMPLATES
    for kern in CAST_INDEX_KERNELS:
        out.append(_k(f"nnsp_cast_{kern}", cast, kern, {}, None, f"cast_storage {kern}, int64"))
    for kern in ELEM_INDEX_KERNELS:
        out.append(_k(f"nnsp_elem_{kern}", elem, kern, {}, None,
                      f"elemwise_sparse {kern}, int64"))
    for kern in REDUCE_INDEX_KERNELS:
        out.append(_k(f"nnsp_reduce_{kern}", red, kern, {}, None,
                      f"reduce_sparse {kern}, int64"))
    for kern in DOT_INDEX_KERNELS:
        out.append(_k(f"nnsp_dot_{kern}", dot, kern, {}, None, f"dot_csr {kern}, int64"))
    for dt in ELEM_DTYPES:
        base = {"dtype": dt, "comp": comptype(dt)}
        for kern, cfn in CAST_KERNELS:
            out.append(_k(f"nnsp_cast_{kern}_{dt}", cast, kern, base, cfn,
                          f"cast_storage {kern}, dtype {dt}"))
        for short, expr in binary_exprs(dt).items():
            for kern, cfn in ELEM_KERNELS:
                out.append(_k(f"nnsp_elem_{kern}_{short}_{dt}", elem, kern,
                              {**base, "expr": expr}, cfn,
                              f"elemwise_sparse {kern}, {BINARY_OPS[short]}, dtype {dt}"))
        acc = "double" if np.dtype(dt).kind == "f" else "int64_t"
        for kern, cfn in REDUCE_KERNELS:
            out.append(_k(f"nnsp_reduce_{kern}_{dt}", red, kern, {**base, "acc": acc}, cfn,
                          f"reduce_sparse {kern}, dtype {dt}"))
    for dt in FLOAT_DTYPES:
        for kern, cfn in DOT_KERNELS:
            out.append(_k(f"nnsp_dot_{kern}_{dt}", dot, kern, {"dtype": dt},
                          cfn.format(S=dt), f"dot_csr {kern}, dtype {dt}"))
        for o in OPTIMIZERS:
            for g in GRADS:
                if o in ("adagrad", "group_adagrad") and g == "std":
                    continue  # adagrad's row_sparse update is lazy only
                if g == "lazy" and o in optim_kernels.EXT_OPS and o != "ftrl":
                    continue  # of the other optimizers only ftrl updates lazily
                out.append(_k(f"nnsp_optim_{o}_{g}_{dt}", opt, "update", {"dtype": dt},
                              f"nnsym_spopt_update_{dt}",
                              f"optim_update {o}, {g} gradient, dtype {dt}", opt=o, grad=g))
    out.sort(key=lambda k: k.stem)
    return out


def kernels(target: str) -> list[tuple[str, str]]:
    """``(file stem, self-contained source)`` of every sparse kernel. ``"cuda"``: a comment
    naming the kernel, the CUDA prologue and the kernel. ``"c"``: for the kernels with a
    one-to-one C function, a comment naming it and the C library it lives in."""
    if target == "cuda":
        pro = src.cuda_prologue()
        return [(k.stem, "\n".join([k.header("cuda"), pro, k.render_cuda()]))
                for k in all_kernels()]
    if target == "c":
        return [(k.stem, k.header("c") + k.render_c()) for k in all_kernels()
                if k.c_function is not None]
    raise ValueError(f"target must be one of {cg.TARGETS}, not {target!r}")


def render_unit(ks: Sequence[SparseKernel]) -> str:
    """Several CUDA kernels in one translation unit (one prologue)."""
    parts = [src.cuda_prologue()]
    for k in ks:
        parts.append(k.header("cuda"))
        parts.append(k.render_cuda())
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# nvcc compile check


def nvcc_check(ks: Sequence[SparseKernel], archs: Sequence[str] = cg.ARCHS, mode: str = "ptx",
               chunk: int = 64, jobs: int | None = None,
               cache_dir: Path | None = None) -> list[cg.CheckResult]:
    """Compile the kernels with nvcc (``nnsym.cuda.source.nvcc_compile``: NVCC_FLAGS, warnings
    are errors), ``chunk`` per translation unit, for every arch; successful units are remembered
    under the cache directory like :func:`nnsym.devtools.cuda.codegen.nvcc_check`."""
    if src.nvcc() is None:
        raise FileNotFoundError("nvcc is not on PATH")
    todo = sorted(ks, key=lambda k: k.stem)
    units = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
    root = (cache_dir or cache_root()) / cg.CHECK_FORMAT
    version = cg.nvcc_version()

    def run(unit: list[SparseKernel], arch: str) -> cg.CheckResult:
        source = render_unit(unit)
        names = tuple(k.stem for k in unit)
        key = cache_key(kind="nvcc-check", source=source, nvcc=version, arch=arch, mode=mode,
                        flags=list(src.NVCC_FLAGS))
        marker = root / key[:2] / f"{key}.ok"
        if marker.is_file():
            return cg.CheckResult(arch, names, True, True, 0.0)
        t0 = time.perf_counter()
        ok, log = src.nvcc_compile(source, arch, mode)
        dt = time.perf_counter() - t0
        if not ok:
            return cg.CheckResult(arch, names, False, False, dt, log)
        marker.parent.mkdir(parents=True, exist_ok=True)
        fileio.write_text(marker, f"{version}\n{arch} {mode} {len(names)} kernels {dt:.2f} s\n")
        return cg.CheckResult(arch, names, True, False, dt)

    n = jobs or max(1, min(os.cpu_count() or 1, 8))
    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(run, u, a) for u in units for a in archs]
        return [f.result() for f in futures]


# ---------------------------------------------------------------------------------------------
# Host shim


def shim_source(ks: Sequence[SparseKernel]) -> str:
    """The shim translation unit: shim header, CUDA prologue, kernels, launcher, one
    ``NAME__host`` entry point per kernel."""
    return shim.unit_source([(k.stem, k.header("cuda") + k.render_cuda()) for k in ks])


class SparseShim(shim.ShimLibrary):
    """A loaded shim library of sparse kernels; ``run`` accepts None for NULL pointers."""

    def run(self, name: str, ptrs: Sequence[np.ndarray | None], ia: Sequence[int],
            fa: Sequence[float] = (), grid: int = 3, block: int = 64) -> None:
        ffi = self.ffi
        p = ffi.new("void *[]", [ffi.NULL if a is None else ffi.cast("void *", a.ctypes.data)
                                 for a in ptrs] or [ffi.NULL])
        iarr = ffi.new("int64_t[]", [int(x) for x in ia] or [0])
        farr = ffi.new("double[]", [float(x) for x in fa] or [0.0])
        self.launch_raw(name, p, iarr, farr, grid, block)


def build_shim(ks: Sequence[SparseKernel]) -> SparseShim:
    """Compile (or find in the disk cache) and load the host shim of some sparse kernels."""
    names = [k.stem for k in ks]
    threaded = [k.stem for k in ks if shim.needs_threads(k.render_cuda())]
    ffi, lib = shim.load_source(shim_source(ks), names, "cuda-sparse-host-shim")
    return SparseShim(ffi, lib, names, threaded)
