"""Run CUDA kernel source on the CPU: the host shim.

The ``.cu`` text of the elementwise kernels is compiled *unchanged* as C++ with g++, after a
header that defines the CUDA names the kernels use: ``__global__``/``__device__`` away,
``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` as thread-local structs, ``__half`` as a
struct wrapping ``_Float16`` with round-to-nearest-even conversions (what ``cuda_fp16.h``'s
``__float2half_rn``, ``__double2half`` and ``__ll2half_rn`` do). Each kernel gets a C-ABI
launcher ``<name>__host(p, ia, fa, grid, block)`` that spreads the C kernel's ``p``/``ia``/``fa``
arrays into the kernel's typed arguments (pointers, then integers, then doubles: the CUDA
kernels' argument convention) and runs every thread of a ``grid`` x ``block`` launch in turn,
so grid-stride loops and bounds checks run as on a device.

This checks the kernels' indexing, expressions, dtypes, conversions and write modes against
the C kernels bit for bit. It does not check CUDA's math library (libdevice differs from glibc
by a few ulp in transcendental functions), float16 NaN payloads, or anything that needs
``__syncthreads``/shared memory (no kernel here uses them).

Libraries are cached on disk like the C kernels (``nnsym.codegen.cache``), keyed by the source,
the C++ compiler's identity and the flags.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cffi

from nnsym.codegen.cache import build_cached, cache_key, file_sha256
from nnsym.cuda.codegen import Variant, cuda_prologue, header, render_kernel
from nnsym.errors import NNSymError

SHIM_HEADER = r"""/* nnsym host shim: CUDA kernel source compiled as C++ on the CPU. */
#define NNSYM_HOST_SHIM 1
#include <math.h>
#include <stdint.h>
#include <tuple>
#include <type_traits>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
struct nnsym_dim3 { unsigned x, y, z; };
static thread_local nnsym_dim3 threadIdx, blockIdx, blockDim, gridDim;
/* __half: _Float16 storage; conversions round to nearest even (as cuda_fp16.h's _rn ones). */
struct __half { _Float16 v; };
static inline float __half2float(__half h) { return (float)h.v; }
static inline __half nnsym_mkhalf(_Float16 v) { __half h; h.v = v; return h; }
static inline __half __float2half_rn(float v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __double2half(double v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __int2half_rn(int v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __uint2half_rn(unsigned int v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __ll2half_rn(long long v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __ull2half_rn(unsigned long long v) { return nnsym_mkhalf((_Float16)v); }
"""

SHIM_LAUNCHER = r"""
/* Launch: the C kernel's (p, ia, fa) spread into the kernel's typed arguments in order
   (pointers from p, integers from ia, floating-point values from fa), then every thread of a
   grid x block launch, one after another. */
namespace nnsym_shim {
struct Args {
    void *const *p; const int64_t *ia; const double *fa;
    int np, ni, nf;
};
template <typename T> T take(Args &s)
{
    if constexpr (std::is_pointer<T>::value) return (T)s.p[s.np++];
    else if constexpr (std::is_integral<T>::value) return (T)s.ia[s.ni++];
    else return (T)s.fa[s.nf++];
}
template <typename... A>
void launch(void (*kernel)(A...), void *const *p, const int64_t *ia, const double *fa,
            unsigned grid, unsigned block)
{
    Args s{p, ia, fa, 0, 0, 0};
    std::tuple<A...> args{take<A>(s)...};  /* braced: evaluated left to right */
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; ++b)
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            std::apply(kernel, args);
        }
}
}  // namespace nnsym_shim
"""

FLAGS = ("-O1", "-fPIC", "-shared", "-std=gnu++17", "-fno-math-errno", "-ffp-contract=off",
         "-fno-strict-aliasing", "-w")

LAUNCH_CDEF = ("void {name}__host(void *const *p, const int64_t *ia, const double *fa, "
               "unsigned grid, unsigned block);")


class ShimError(NNSymError):
    """The host C++ compiler rejected the shim source, or none is available."""


@functools.lru_cache(maxsize=1)
def cxx() -> str | None:
    """The C++ compiler (``CXX``, else g++)."""
    name = os.environ.get("CXX") or "g++"
    path = shutil.which(name) or shutil.which("g++")
    return os.path.realpath(path) if path else None


@functools.lru_cache(maxsize=1)
def cxx_id() -> str:
    cc = cxx()
    if cc is None:
        raise ShimError("no C++ compiler found (set CXX or install g++)")
    ver = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout
    mach = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True, check=False)
    return f"{cc}|{ver.splitlines()[0] if ver else '?'}|{mach.stdout.strip()}"


def flags() -> list[str]:
    """Shim flags: no FMA contraction and no fast-math, as the C kernels; the same ISA flags
    (float16 conversions round the same either way)."""
    from nnsym.codegen.compiler import isa_flags

    return [*FLAGS, *isa_flags()]


def shim_source(vs: Sequence[Variant], extra: str = "") -> str:
    """The shim translation unit of some variants: header, the CUDA prologue and kernels
    exactly as the CUDA build renders them, ``extra`` (more C++), one launcher per kernel."""
    parts = [SHIM_HEADER, cuda_prologue()]
    for v in vs:
        parts.append(header(v, "cuda"))
        parts.append(render_kernel(v, "cuda"))
    parts.append(extra)
    parts.append(SHIM_LAUNCHER)
    for v in vs:
        parts.append(f'extern "C" void {v.name}__host(void *const *p, const int64_t *ia, '
                     f"const double *fa, unsigned grid, unsigned block)\n"
                     f"{{ nnsym_shim::launch({v.name}, p, ia, fa, grid, block); }}")
    return "\n".join(parts) + "\n"


_FFI_LOCK = threading.Lock()
_LIBS: dict[str, tuple[Any, Any]] = {}


class ShimLibrary:
    """A loaded shim library: ``launch(name, ptrs, ia, fa)`` runs one kernel on the CPU."""

    def __init__(self, ffi: Any, lib: Any, names: Sequence[str]):
        self.ffi, self.lib = ffi, lib
        self.names = tuple(names)

    def launch(self, name: str, ptrs: Sequence[Any], ia: Sequence[int], fa: Sequence[float],
               grid: int = 3, block: int = 32) -> None:
        """``ptrs``: numpy arrays (C-contiguous, dtypes as the kernel's), inputs then output."""
        ffi = self.ffi
        p = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in ptrs] or [0])
        iarr = ffi.new("int64_t[]", [int(x) for x in ia] or [0])
        farr = ffi.new("double[]", [float(x) for x in fa] or [0.0])
        getattr(self.lib, name + "__host")(p, iarr, farr, grid, block)


def build(vs: Sequence[Variant], extra: str = "", extra_cdef: str = "") -> ShimLibrary:
    """Compile (or find in the cache) and load the shim of some variants."""
    cc = cxx()
    if cc is None:
        raise ShimError("no C++ compiler found (set CXX or install g++)")
    source = shim_source(vs, extra)
    fl = flags()
    cdef = "\n".join([LAUNCH_CDEF.format(name=v.name) for v in vs] + [extra_cdef])
    key = cache_key(format=1, kind="cuda-host-shim", source=source, compiler=cxx_id(),
                    flags=fl, cdef=cdef)
    with _FFI_LOCK:
        if key in _LIBS:
            ffi, lib = _LIBS[key]
            return ShimLibrary(ffi, lib, [v.name for v in vs])

    def compile_into(tmp: Path) -> None:
        src = tmp / "shim.cpp"
        src.write_text(source)
        out = tmp / "lib.so"
        cmd = [cc, *fl, str(src), "-o", str(out), "-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise ShimError(f"host shim compile failed (exit {r.returncode}); "
                            f"command: {' '.join(cmd)}\n{r.stderr.strip()[:4000]}")
        (tmp / "meta.json").write_text(json.dumps(
            {"key": key, "sha256": file_sha256(out), "flags": fl, "compiler": cxx_id(),
             "cdef": cdef}, indent=1))

    entry = build_cached(key, compile_into)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    lib = ffi.dlopen(str(entry / "lib.so"))
    with _FFI_LOCK:
        _LIBS[key] = (ffi, lib)
    return ShimLibrary(ffi, lib, [v.name for v in vs])
