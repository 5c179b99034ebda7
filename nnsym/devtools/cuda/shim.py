"""Run CUDA kernel source on the CPU: the host shim.

The ``.cu`` text of the kernels is compiled *unchanged* as C++ with g++, after a header that
defines the CUDA names the kernels use: ``__global__``/``__device__`` away,
``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` as thread-local structs, ``__half`` as a
struct wrapping ``_Float16`` with round-to-nearest-even conversions (what ``cuda_fp16.h``'s
constructors, ``__float2half_rn``, ``__double2half`` and ``__ll2half_rn`` do),
``__shared__`` as ``static`` (blocks run one after another), ``__syncthreads`` and the warp
shuffles as real barriers, atomics as compare-and-swap loops. Each kernel gets a C-ABI launcher
``<name>__host(p, ia, fa, grid, block, threads)`` that runs the kernel over a ``grid`` x
``block`` launch with the C kernel's own ``p``/``ia``/``fa`` arrays (the CUDA kernels take
exactly those), so grid-stride loops and bounds checks run as on a device. Kernels that
synchronise run a block's threads as fibers (``ucontext``) that switch at every barrier; the
others run them one after another.

This checks the kernels' indexing, expressions, dtypes, conversions, write modes and
reductions against the C kernels (bit for bit where the family computes each element in C's
order). It does not check CUDA's math library (libdevice differs from glibc by a few ulp in
transcendental functions), float16 NaN payloads, warp-synchronous code without ``__shfl``/
``__syncthreads`` (the shim's threads do not run in lock step), races (fibers switch only at
barriers) or timing.

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
from nnsym.codegen.compiler import isa_flags
from nnsym.cuda.source import cuda_prologue
from nnsym.devtools.cuda.codegen import Variant, header, render_kernel
from nnsym.errors import NNSymError

SHIM_HEADER = r"""/* nnsym host shim: CUDA kernel source compiled as C++ on the CPU. */
#define NNSYM_HOST_SHIM 1
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <mutex>
#include <type_traits>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
/* Blocks run one after another, so a function-scope static is one block's shared memory. */
#define __shared__ static
#define warpSize 32
struct nnsym_dim3 { unsigned x, y, z; };
static thread_local nnsym_dim3 threadIdx, blockIdx, blockDim, gridDim;
/* __half: _Float16 storage; every conversion rounds to nearest even, as cuda_fp16.h's (the
   constructors from float, double and the integers, __float2half_rn, __double2half...). */
struct __half {
    _Float16 v;
    __half() = default;
    template <typename X, typename = typename std::enable_if<std::is_arithmetic<X>::value>::type>
    __half(X x) : v((_Float16)x) {}
    operator float() const { return (float)v; }
};
static inline float __half2float(__half h) { return (float)h.v; }
static inline __half nnsym_mkhalf(_Float16 v) { __half h; h.v = v; return h; }
static inline __half __float2half_rn(float v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __float2half(float v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __double2half(double v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __int2half_rn(int v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __uint2half_rn(unsigned int v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __ll2half_rn(long long v) { return nnsym_mkhalf((_Float16)v); }
static inline __half __ull2half_rn(unsigned long long v) { return nnsym_mkhalf((_Float16)v); }

/* The threads of a block run as fibers (ucontext) on one OS thread, blocks one after another:
   __syncthreads and the warp shuffles switch between them for real, cheaply and
   deterministically. A barrier counts the fibers still running the kernel: one that has
   returned no longer holds the others up (as on a device). */
namespace nnsym_shim {
typedef void (*Kernel)(void *const *, const int64_t *, const double *);
struct Team {
    unsigned n = 0, cur = 0, live = 0, warp_live[32] = {};
    unsigned block_count = 0, warp_count[32] = {};
    long block_gen = 0, warp_gen[32] = {};
    ucontext_t main;
    std::vector<ucontext_t> ctx;
    std::vector<char> done;
    Kernel kernel = nullptr;
    void *const *p = nullptr;
    const int64_t *ia = nullptr;
    const double *fa = nullptr;
    uint64_t exchange[1024];
};
static Team *team = nullptr;
static inline void yield_fiber() { swapcontext(&team->ctx[team->cur], &team->main); }
static inline void sync_block()
{
    if (!team) return;
    const long g = team->block_gen;
    if (++team->block_count >= team->live) { team->block_count = 0; ++team->block_gen; return; }
    while (team->block_gen == g) yield_fiber();
}
static inline void sync_warp(unsigned w)
{
    const long g = team->warp_gen[w];
    if (++team->warp_count[w] >= team->warp_live[w]) {
        team->warp_count[w] = 0;
        ++team->warp_gen[w];
        return;
    }
    while (team->warp_gen[w] == g) yield_fiber();
}
template <typename T> static inline T shfl_from(T v, int src_lane, bool keep)
{
    /* every live lane of the warp publishes its value, then reads its source lane's */
    static_assert(sizeof(T) <= 8, "shuffled values are at most 8 bytes");
    if (!team) return v;
    const unsigned t = threadIdx.x, w = t >> 5;
    memcpy(&team->exchange[t], &v, sizeof(T));
    sync_warp(w);
    T r = v;
    if (!keep) memcpy(&r, &team->exchange[(w << 5) + (unsigned)src_lane], sizeof(T));
    sync_warp(w);
    return r;
}
}  // namespace nnsym_shim
#define __syncthreads() nnsym_shim::sync_block()
#define __syncwarp(...) ((void)0)
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
template <typename T> static inline T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32)
{
    const int lane = (int)(threadIdx.x & 31u), base = lane & ~(width - 1);
    const bool keep = (lane - base) + (int)d >= width;
    return nnsym_shim::shfl_from(v, keep ? lane : lane + (int)d, keep);
}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32)
{
    const int lane = (int)(threadIdx.x & 31u), base = lane & ~(width - 1);
    const bool keep = (lane - base) < (int)d;
    return nnsym_shim::shfl_from(v, keep ? lane : lane - (int)d, keep);
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int m, int width = 32)
{
    const int lane = (int)(threadIdx.x & 31u), base = lane & ~(width - 1);
    const int src = lane ^ m;
    const bool keep = src < base || src >= base + width;
    return nnsym_shim::shfl_from(v, keep ? lane : src, keep);
}
template <typename T> static inline T __shfl_sync(unsigned, T v, int src, int width = 32)
{
    const int lane = (int)(threadIdx.x & 31u), base = lane & ~(width - 1);
    return nnsym_shim::shfl_from(v, base + (src & (width - 1)), false);
}
/* Atomics: compare-and-swap loops over the value's bits (integers use the builtins). */
template <typename T> static inline T nnsym_atomic_update(T *addr, T v, int op)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- and 8-byte values");
    typedef typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type U;
    U *ua = (U *)addr;
    U old = __atomic_load_n(ua, __ATOMIC_SEQ_CST), nw;
    T o, n;
    do {
        memcpy(&o, &old, sizeof(T));
        n = op == 0 ? (T)(o + v) : op == 1 ? (o > v ? o : v) : op == 2 ? (o < v ? o : v) : v;
        memcpy(&nw, &n, sizeof(T));
    } while (!__atomic_compare_exchange_n(ua, &old, nw, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    return o;
}
template <typename T> static inline T atomicAdd(T *a, T v) { return nnsym_atomic_update(a, v, 0); }
template <typename T> static inline T atomicMax(T *a, T v) { return nnsym_atomic_update(a, v, 1); }
template <typename T> static inline T atomicMin(T *a, T v) { return nnsym_atomic_update(a, v, 2); }
template <typename T> static inline T atomicExch(T *a, T v) { return nnsym_atomic_update(a, v, 3); }
template <typename T> static inline T atomicCAS(T *a, T cmp, T v)
{
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
template <typename T> static inline T __ldg(const T *p) { return *p; }
"""

SHIM_LAUNCHER = r"""
/* Launch a kernel over a grid x block (one dimension each). `threads`: 0 runs every thread of
   a block one after another (kernels without __syncthreads or shuffles); 1 runs a block's
   threads as fibers that synchronise for real, blocks one after another. */
namespace nnsym_shim {
static std::mutex launch_lock;  /* one launch at a time: statics are the shared memory */
static void fiber_entry()
{
    Team *tm = team;
    tm->kernel(tm->p, tm->ia, tm->fa);
    tm->done[tm->cur] = 1;  /* returns to tm->main through uc_link */
}
static void release_if_complete(Team *tm, unsigned w)
{
    if (tm->block_count > 0 && tm->block_count >= tm->live) {
        tm->block_count = 0;
        ++tm->block_gen;
    }
    if (tm->warp_count[w] > 0 && tm->warp_count[w] >= tm->warp_live[w]) {
        tm->warp_count[w] = 0;
        ++tm->warp_gen[w];
    }
}
static void launch(Kernel kernel, void *const *p, const int64_t *ia, const double *fa,
                   unsigned grid, unsigned block, int threads)
{
    std::lock_guard<std::mutex> guard(launch_lock);
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    if (!threads) {
        for (unsigned b = 0; b < grid; ++b)
            for (unsigned t = 0; t < block; ++t) {
                blockIdx = {b, 0, 0};
                threadIdx = {t, 0, 0};
                kernel(p, ia, fa);
            }
        return;
    }
    const size_t stack_bytes = 256 * 1024;
    Team *tm = new Team();
    tm->n = block;
    tm->kernel = kernel; tm->p = p; tm->ia = ia; tm->fa = fa;
    tm->ctx.resize(block);
    tm->done.assign(block, 0);
    std::vector<char> stacks((size_t)block * stack_bytes);
    team = tm;
    const unsigned nwarps = (block + 31) / 32;
    for (unsigned b = 0; b < grid; ++b) {
        blockIdx = {b, 0, 0};
        tm->live = block;
        tm->block_count = 0;
        for (unsigned w = 0; w < nwarps; ++w) {
            tm->warp_live[w] = w + 1 < nwarps ? 32 : block - 32 * w;
            tm->warp_count[w] = 0;
        }
        for (unsigned t = 0; t < block; ++t) {
            getcontext(&tm->ctx[t]);
            tm->ctx[t].uc_stack.ss_sp = &stacks[(size_t)t * stack_bytes];
            tm->ctx[t].uc_stack.ss_size = stack_bytes;
            tm->ctx[t].uc_link = &tm->main;
            makecontext(&tm->ctx[t], fiber_entry, 0);
            tm->done[t] = 0;
        }
        while (tm->live > 0) {
            for (unsigned t = 0; t < block; ++t) {
                if (tm->done[t]) continue;
                tm->cur = t;
                threadIdx = {t, 0, 0};
                swapcontext(&tm->main, &tm->ctx[t]);
                if (tm->done[t]) {
                    --tm->live;
                    --tm->warp_live[t >> 5];
                    release_if_complete(tm, t >> 5);
                }
            }
        }
    }
    team = nullptr;
    delete tm;
}
}  // namespace nnsym_shim
"""

FLAGS = ("-O1", "-fPIC", "-shared", "-pthread", "-std=gnu++17", "-fno-math-errno",
         "-ffp-contract=off", "-fno-strict-aliasing", "-w")

LAUNCH_CDEF = ("void {name}__host(void *const *p, const int64_t *ia, const double *fa, "
               "unsigned grid, unsigned block, int threads);")
# Words in a kernel's source that mean it synchronises: CUDA's barriers and shuffles, and the
# prologue's helpers built on them.
SYNC_WORDS = ("__syncthreads", "__shfl", "nnsym_block_reduce", "nnsym_warp_reduce",
              "nnsym_tiled_gemm")


def needs_threads(source: str) -> bool:
    """Whether a kernel's source synchronises (its threads must run concurrently)."""
    return any(w in source for w in SYNC_WORDS)


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
    return [*FLAGS, *isa_flags()]


def shim_source(vs: Sequence[Variant], extra: str = "") -> str:
    """The shim translation unit of some variants: header, the CUDA prologue and kernels
    exactly as the CUDA build renders them, ``extra`` (more C++), one launcher per kernel."""
    return unit_source([(v.name, header(v, "cuda") + render_kernel(v, "cuda")) for v in vs],
                       extra)


def unit_source(kernels: Sequence[tuple[str, str]], extra: str = "") -> str:
    """A shim translation unit: the header, the CUDA prologue, every ``(name, kernel text)``,
    ``extra`` (more C++), the launcher, and one ``NAME__host`` entry point per kernel."""
    parts = [SHIM_HEADER, cuda_prologue(), *(text for _, text in kernels), extra, SHIM_LAUNCHER]
    for name, _ in kernels:
        parts.append(f'extern "C" void {name}__host(void *const *p, const int64_t *ia, '
                     f"const double *fa, unsigned grid, unsigned block, int threads)\n"
                     f"{{ nnsym_shim::launch({name}, p, ia, fa, grid, block, threads); }}")
    return "\n".join(parts) + "\n"


_FFI_LOCK = threading.Lock()
_LIBS: dict[str, tuple[Any, Any]] = {}


class ShimLibrary:
    """A loaded shim library: ``launch(name, ptrs, ia, fa)`` runs one kernel on the CPU."""

    def __init__(self, ffi: Any, lib: Any, names: Sequence[str],
                 threaded: Sequence[str] = ()):
        self.ffi, self.lib = ffi, lib
        self.names = tuple(names)
        self.threaded = frozenset(threaded)

    def launch(self, name: str, ptrs: Sequence[Any], ia: Sequence[int], fa: Sequence[float],
               grid: int = 3, block: int = 32) -> None:
        """``ptrs``: numpy arrays (C-contiguous, dtypes as the kernel's), inputs then output."""
        ffi = self.ffi
        p = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in ptrs] or [0])
        iarr = ffi.new("int64_t[]", [int(x) for x in ia] or [0])
        farr = ffi.new("double[]", [float(x) for x in fa] or [0.0])
        self.launch_raw(name, p, iarr, farr, grid, block)

    def launch_raw(self, name: str, p: Any, ia: Any, fa: Any, grid: int, block: int) -> None:
        """Launch with cffi pointers (or integer addresses) for p, ia and fa."""
        if block % 32 and name in self.threaded:
            raise ShimError(f"kernel {name} synchronises: its block size must be a multiple "
                            f"of 32, not {block}")
        getattr(self.lib, name + "__host")(p, ia, fa, grid, block,
                                           1 if name in self.threaded else 0)


def build(vs: Sequence[Variant], extra: str = "", extra_cdef: str = "") -> ShimLibrary:
    """Compile (or find in the cache) and load the shim of some variants."""
    threaded = [v.name for v in vs if needs_threads(render_kernel(v, "cuda"))]
    ffi, lib = load_source(shim_source(vs, extra), [v.name for v in vs], "cuda-host-shim",
                           extra_cdef)
    return ShimLibrary(ffi, lib, [v.name for v in vs], threaded)


def load_source(source: str, names: Sequence[str], kind: str,
                extra_cdef: str = "") -> tuple[Any, Any]:
    """Compile (or find in the disk cache) a shim translation unit whose kernels ``names``
    have launchers (``NAME__host``); returns cffi's (ffi, lib)."""
    cc = cxx()
    if cc is None:
        raise ShimError("no C++ compiler found (set CXX or install g++)")
    fl = flags()
    cdef = "\n".join([LAUNCH_CDEF.format(name=n) for n in names] + [extra_cdef])
    key = cache_key(format=3, kind=kind, source=source, compiler=cxx_id(), flags=fl, cdef=cdef)
    with _FFI_LOCK:
        if key in _LIBS:
            return _LIBS[key]

    def compile_into(tmp: Path) -> None:
        src = tmp / "shim.cpp"
        src.write_text(source)
        out = tmp / "lib.so"
        cmd = [cc, *fl, str(src), "-o", str(out), "-lm", "-lpthread"]
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
    return ffi, lib
