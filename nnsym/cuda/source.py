"""CUDA source of kernel specs, and its nvcc build: what the GPU runtime needs to launch a
kernel on a device.

For a C template ``nnsym/ops/X.c.j2`` the CUDA twin is ``nnsym/ops/X.cu.j2`` beside it; it
renders the *same* kernel spec (scalar expressions, the integer division guard, dtypes, write
mode, structural literals all come from the operator's own lowering), and takes the C kernel's
own arguments, ``(void *const *p, const int64_t *ia, const double *fa)``, in device memory. So
the C and the CUDA kernel of a variant compute the same arithmetic on the same run-time values.

The verification tooling (variant enumeration over the registry, nvcc checks, the host shim,
``nnsym codegen``) lives in ``nnsym.devtools.cuda``, above this module.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from nnsym.codegen.render import template_env
from nnsym.ir.spec import CTYPES, KernelSpec

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
OPS_DIR = Path(__file__).resolve().parent.parent / "ops"


def cuda_twin(c_template: str) -> str:
    """The CUDA template beside a C template (``conv/pool.c.j2`` -> ``conv/pool.cu.j2``)."""
    assert c_template.endswith(".c.j2"), c_template
    return c_template[: -len(".c.j2")] + ".cu.j2"


@functools.cache
def has_twin(c_template: str) -> bool:
    return c_template.endswith(".c.j2") and (OPS_DIR / cuda_twin(c_template)).is_file()


# <tgmath.h> functions given float/double/integer dispatch in the CUDA prologue.
UNARY_MATH: tuple[str, ...] = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "erf", "erfc", "tgamma", "lgamma", "floor", "ceil", "round", "trunc", "rint",
    "nearbyint", "fabs",
)
BINARY_MATH: tuple[str, ...] = (
    "pow", "atan2", "fmod", "hypot", "copysign", "fdim", "fmax", "fmin", "remainder",
)


def cuda_ctype(dt: Any) -> str:
    """Storage type of a dtype in CUDA source (float16 is ``__half``)."""
    name = np.dtype(dt).name
    return "__half" if name == "float16" else CTYPES[name][0]


def load(dt: Any, text: str) -> str:
    """A storage element read as a value (float16 widens exactly to float)."""
    return f"nnsym_h2f({text})" if np.dtype(dt).name == "float16" else text


def store(dt: Any, text: str) -> str:
    """A value converted to storage, as C's cast does (float16 rounds once, from its type)."""
    if np.dtype(dt).name == "float16":
        return f"nnsym_f2h({text})"
    return f"({cuda_ctype(dt)})({text})"


CUDA_ENV = template_env([OPS_DIR, TEMPLATE_DIR])
# ``ctype`` is the CUDA storage type here (float16: __half, which converts to and from float,
# double and the integers with the same rounding as C's _Float16 casts), so a CUDA twin can
# spell its pointer types as its C template does.
CUDA_ENV.globals.update(cutype=cuda_ctype, ctype=cuda_ctype, load=load, store=store)


def cuda_prologue() -> str:
    return CUDA_ENV.get_template("prologue.cu.j2").render(
        unary_math=list(UNARY_MATH), binary_math=list(BINARY_MATH))


def render_spec(spec: KernelSpec, name: str | None = None) -> str:
    """The CUDA twin of a spec's C kernel, named ``name`` (default the spec's own name)."""
    return CUDA_ENV.get_template(cuda_twin(spec.template)).render(
        name=name or spec.name, **spec.context())


# ---------------------------------------------------------------------------------------------
# nvcc

# Device code flags of the CUDA kernels: no FMA contraction (the C kernels' -ffp-contract=off),
# IEEE division and square root and no flush to zero (nvcc's defaults, spelled out).
DEVICE_FLAGS = ("-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false")
# Warnings are errors, except "pointless comparison of unsigned integer with zero / with a
# negative constant" (#186, #514): the operators' generic expressions (abs, sign, the integer
# division guard's `== -1`) compare that way in every dtype, unsigned included; and "declared
# but never referenced" / "set but never used" (#177, #550): a template reads its parameters
# from ia/fa up front, and an expression need not use them all.
NVCC_FLAGS = ("-std=c++17", *DEVICE_FLAGS, "-Werror", "all-warnings",
              "-diag-suppress", "177,186,514,550")
# The PTX compile check runs nvcc's front end and NVVM without optimisation: every language,
# type and code generation error still fails it, in a fifth of the time of -O3 (measured: 256
# kernels, 0.9 s instead of 5.1 s). ``--cubin`` (the slow test, and the runtime) optimises.
PTX_CHECK_FLAGS = ("-Xcicc", "-O0")


@functools.lru_cache(maxsize=1)
def nvcc() -> str | None:
    path = shutil.which("nvcc")
    return os.path.realpath(path) if path else None


def nvcc_compile(source: str, arch: str, mode: str = "ptx",
                 out: Path | None = None) -> tuple[bool, str]:
    """Compile CUDA source with nvcc (``--ptx`` (unoptimised: PTX_CHECK_FLAGS) or ``--cubin``
    for ``arch``, NVCC_FLAGS);
    returns (success, the command and nvcc's messages). ``out``: where to keep the result."""
    cc = nvcc()
    if cc is None:
        raise FileNotFoundError("nvcc is not on PATH")
    with tempfile.TemporaryDirectory(prefix="nnsym-nvcc-") as tmp:
        src = Path(tmp) / "unit.cu"
        src.write_text(source)
        target = out or Path(tmp) / f"unit.{mode}"
        fast = PTX_CHECK_FLAGS if mode == "ptx" else ()
        cmd = [cc, f"--{mode}", f"-arch={arch}", *NVCC_FLAGS, *fast, str(src), "-o",
               str(target)]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return r.returncode == 0, f"{' '.join(cmd)}\n{(r.stdout + r.stderr).strip()[:8000]}"
