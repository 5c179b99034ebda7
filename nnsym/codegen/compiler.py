"""Build kernels: one translation unit and one compiler call per build, loaded through cffi's
ABI mode (plain C, no Python.h: about 3x faster to compile than API mode).

Flags: ``-O3 -fno-math-errno -ffp-contract=off`` (no FMA contraction, so results agree with
numpy bit for bit where the math allows), explicit ISA flags from /proc/cpuinfo instead of
``-march=native`` (written into the cache key), vector math through glibc's libmvec declared in
the prologue, never ``-ffast-math`` (it breaks NaN semantics and sets FTZ for the process).

The compiler is ``$CC`` split like a shell word list (``ccache gcc``, ``gcc -m64``), else the one
Python was built with (``sysconfig``'s ``CC``), else ``cc``, else ``gcc``. A ``CC`` that is not
found or fails a tiny test compile is not used: one :class:`CompilerWarning` names it and says
what runs instead (the default compiler, or the numpy backend where there is none); the choice
is logged once at INFO on ``nnsym.codegen`` (which default, where CC is unset). Nothing is
compiled or written at import; the C runtime (``runtime/runlib.c``) is built on first use.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import importlib.util
import json
import logging
import operator
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cffi

from nnsym.codegen.cache import (
    CacheUnavailableError,
    build_cached,
    cache_key,
    cache_root,
    file_sha256,
    prune_failed,
)
from nnsym.codegen.render import render_unit, signature
from nnsym.errors import NNSymError, ThreadCountError, warn
from nnsym.ir.spec import KernelSpec

log = logging.getLogger("nnsym.codegen")

FFI = cffi.FFI()
_LOCK = threading.RLock()
_CFFI_LOCK = threading.Lock()  # cffi's cdef/dlopen state, taken by the per-chunk builders
_FUNCS: dict[str, Any] = {}  # kernel name -> cffi function
_LIBS: dict[str, Any] = {}  # cache key -> loaded library (kept alive)
STATS = {"compiles": 0, "disk_hits": 0, "compile_seconds": 0.0}


class CompileError(NNSymError):
    """The C compiler rejected generated source; carries its message and the kept source."""


class NoCompilerError(NNSymError):
    """No C compiler is available (nnsym then runs numpy references)."""


class CompilerWarning(UserWarning):
    """``CC`` names a compiler that cannot be used; the message says what runs instead."""


def compiler() -> str | None:
    """The compiler command as one shell string (``ccache gcc``), or None where there is none."""
    cmd = compiler_command()
    return shlex.join(cmd) if cmd else None


@functools.lru_cache(maxsize=1)
def compiler_command() -> tuple[str, ...] | None:
    """The compiler command as an argument list (see the module docstring for the choice)."""
    env = os.environ.get("CC", "").strip()
    if not env:
        chosen = _find_default()
        if chosen is None:
            log.info("nnsym: CC is not set and none of %s is on PATH", _default_names())
            return None
        log.info("nnsym: CC is not set; using %s: %s (the first found of %s)", chosen[0],
                 shlex.join(chosen[1]), _default_names())
        return chosen[1]
    found = _cc_from_env(env)
    if isinstance(found, tuple):
        log.info("nnsym: the C compiler is CC=%r: %s", env, shlex.join(found))
        return found
    default = _default_compiler()
    if default is not None and _test_compile(default) is not None:
        default = None
    instead = (f"using {shlex.join(default)} instead" if default else
               "no other C compiler works either, so operators run their numpy reference "
               "implementations (slow)")
    warn(f"nnsym: CC={env!r} cannot be used as the C compiler ({found}); {instead}",
              CompilerWarning)
    return default


def _cc_from_env(env: str) -> tuple[str, ...] | str:
    """The command ``CC`` names, or why it cannot be used."""
    try:
        argv = shlex.split(env)
    except ValueError as e:
        return f"cannot be split into words: {e}"
    if not argv:
        return "no command in it"
    path = shutil.which(argv[0])
    if path is None:
        return f"{argv[0]!r} not found"
    cmd = (path, *argv[1:])
    problem = _test_compile(cmd)
    return cmd if problem is None else problem


def _default_candidates() -> list[tuple[str, list[str]]]:
    """(label, argv) of the defaults in order: the compiler Python was built with
    (``sysconfig``'s ``CC``), ``cc``, ``gcc``."""
    built_with = sysconfig.get_config_var("CC") or ""
    try:
        argv = shlex.split(built_with)
    except ValueError:
        argv = []
    out = [(f"sysconfig's CC {built_with.strip()!r}", argv)] if argv else []
    for name in ("cc", "gcc"):
        if [name] != argv:
            out.append((name, [name]))
    return out


def _default_names() -> str:
    """The default candidates for a message: ``sysconfig's CC 'gcc -pthread', cc, gcc``."""
    return ", ".join(label for label, _ in _default_candidates())


def _default_compiler() -> tuple[str, ...] | None:
    """The first of ``_default_candidates()`` found on PATH (the binary's real path)."""
    found = _find_default()
    return found[1] if found else None


def _find_default() -> tuple[str, tuple[str, ...]] | None:
    for label, argv in _default_candidates():
        path = shutil.which(argv[0])
        if path is not None:
            return label, (os.path.realpath(path), *argv[1:])
    return None


def _test_compile(cmd: Sequence[str]) -> str | None:
    """Why ``cmd`` cannot build a tiny shared library (None: it can). Runs in the system's
    temporary directory, never the kernel cache; where that cannot be made, trusts ``cmd``."""
    try:
        tmp = tempfile.TemporaryDirectory(prefix="nnsym-cc-")
    except OSError:
        return None
    with tmp as d:
        src = Path(d) / "probe.c"
        try:
            src.write_text("int nnsym_probe(void) { return 0; }\n")
        except OSError:
            return None
        try:
            r = subprocess.run([*cmd, "-fPIC", "-shared", str(src), "-o", str(Path(d) / "p.so")],
                               capture_output=True, text=True, check=False, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"test compile failed: {e}"
        if r.returncode != 0:
            err = (r.stderr or r.stdout).strip().splitlines()
            return f"test compile failed with exit {r.returncode}" + (f": {err[0]}" if err else "")
    return None


@functools.lru_cache(maxsize=1)
def compiler_id() -> str:
    cmd = compiler_command()
    if cmd is None:
        raise NoCompilerError("no C compiler found (set CC or install gcc)")
    ver = subprocess.run([*cmd, "--version"], capture_output=True, text=True,
                         check=False).stdout
    mach = subprocess.run([*cmd, "-dumpmachine"], capture_output=True, text=True, check=False)
    return f"{shlex.join(cmd)}|{ver.splitlines()[0] if ver else '?'}|{mach.stdout.strip()}"


@functools.lru_cache(maxsize=1)
def isa_flags() -> tuple[str, ...]:
    """Explicit ISA flags for what this CPU has (never -march=native: it is not in the key)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return ()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ()
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    out = []
    for f, opt in (("avx2", "-mavx2"), ("fma", "-mfma"), ("f16c", "-mf16c")):
        if f in flags:
            out.append(opt)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def vector_math() -> tuple[str, ...]:
    """libm functions glibc's libmvec has vector variants of (by glibc version)."""
    try:
        ver = os.confstr("CS_GNU_LIBC_VERSION") or ""
        major, minor = (int(x) for x in ver.split()[1].split(".")[:2])
    except (ValueError, IndexError, OSError):
        return ()
    if not isa_flags():
        return ()
    base: tuple[str, ...] = ("sin", "cos", "exp", "log", "pow")
    if (major, minor) >= (2, 35):
        base += ("tanh", "expm1", "log1p", "sinh", "cosh", "atan", "exp2", "log2", "log10")
    return base


def sanitize_flags() -> list[str]:
    """``NNSYM_SANITIZE=address`` builds every kernel with AddressSanitizer (a testing aid: the
    process must preload the ASan runtime, ``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``).
    The flags are part of the cache key, so sanitized builds never mix with normal ones."""
    want = os.environ.get("NNSYM_SANITIZE", "").strip().lower()
    if not want:
        return []
    if want != "address":
        raise NNSymError(f"NNSYM_SANITIZE must be 'address' or empty, not {want!r}")
    return ["-fsanitize=address", "-fno-omit-frame-pointer"]


def flags() -> list[str]:
    f = ["-O3", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd",
         "-fno-strict-aliasing", "-std=gnu11", *isa_flags(), *sanitize_flags()]
    return f


def link_flags() -> list[str]:
    return (["-lmvec", "-lm"] if vector_math() else ["-lm"]) + sanitize_flags()


def _cython_blas() -> Any:
    """scipy's ``cython_blas`` module. Importing it the usual way imports all of scipy.linalg
    (~130 ms); its extension file loads on its own in ~8 ms, so that is tried first."""
    try:
        spec = importlib.util.find_spec("scipy")
        if spec is not None and spec.origin is not None:
            found = sorted((Path(spec.origin).parent / "linalg").glob("cython_blas.*"))
            found = [p for p in found if p.suffix in (".so", ".pyd")]
            if found:
                s = importlib.util.spec_from_file_location("scipy.linalg.cython_blas", found[0])
                if s is not None and s.loader is not None:
                    mod = importlib.util.module_from_spec(s)
                    s.loader.exec_module(mod)
                    if "sgemm" in getattr(mod, "__pyx_capi__", {}):
                        return mod
    except (ImportError, OSError, AttributeError):
        pass
    try:
        # Kept local on purpose: scipy.linalg costs ~130 ms at import and is only the fallback
        # (``import nnsym`` imports no scipy at all).
        from scipy.linalg import cython_blas  # noqa: PLC0415, RUF100
    except ImportError as e:
        raise NNSymError(
            f"nnsym needs scipy for BLAS (dot, FullyConnected, Convolution): {e}"
        ) from None
    return cython_blas


@dataclass(frozen=True)
class Blas:
    """The BLAS the kernels call: Fortran-ABI function addresses and their integer type."""

    origin: str  # "numpy" (numpy's bundled OpenBLAS) or "scipy" (cython_blas)
    int_type: str  # the C type of the integer arguments: "int64_t" (ILP64) or "int"
    sgemm: int
    dgemm: int
    sgemv: int
    dgemv: int

    @property
    def pointers(self) -> tuple[int, int, int, int]:
        return self.sgemm, self.dgemm, self.sgemv, self.dgemv


def _scipy_blas() -> Blas:
    global _BLAS_MODULE
    _BLAS_MODULE = _cython_blas()  # kept referenced while its function pointers are in use
    caps = _BLAS_MODULE.__pyx_capi__
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype = ctypes.c_void_p
    get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ptrs = []
    for n in ("sgemm", "dgemm", "sgemv", "dgemv"):
        cap = caps[n]
        ptrs.append(int(get_ptr(cap, get_name(cap))))
    return Blas("scipy", "int", *ptrs)


# Symbol spellings of numpy's bundled OpenBLAS across releases: (config function, name pattern
# of the Fortran routines, integer type).
_NUMPY_BLAS_NAMES = (
    ("scipy_openblas_get_config64_", "scipy_{}_64_", "int64_t"),
    ("openblas_get_config64_", "{}_64_", "int64_t"),
    ("scipy_openblas_get_config", "scipy_{}_", "int"),
    ("openblas_get_config", "{}_", "int"),
)


def _numpy_blas() -> Blas | None:
    """numpy's own OpenBLAS, the library its wheels bundle (``numpy.libs``), already loaded by
    numpy. Measured faster than scipy's copy on the MLP's products (a newer OpenBLAS release
    in current wheels); None where it cannot be found or its symbols are not recognised.

    Where numpy has no ``numpy.libs`` (a conda or distribution numpy linked to a system
    OpenBLAS), threadpoolctl names the OpenBLAS libraries loaded in the process. It is not the
    first choice: its first ``threadpool_info()`` scans every loaded library (5-13 ms measured
    against 0.3-0.5 ms for the ``numpy.libs`` glob) and it does not say which library is numpy's
    or whether it is ILP64 (``openblas_get_config`` does)."""
    for path in _bundled_openblas() or _loaded_openblas():
        found = _openblas_at(path)
        if found is not None:
            return found
    return None


def _bundled_openblas() -> list[Path]:
    """The OpenBLAS files of numpy's wheel (``site-packages/numpy.libs``)."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return []
    libs = Path(spec.origin).parent.parent / "numpy.libs"
    return sorted(libs.glob("*openblas*.so*")) if libs.is_dir() else []


def _loaded_openblas() -> list[Path]:
    """The OpenBLAS libraries loaded in this process as threadpoolctl finds them, less scipy's
    bundled copy (``scipy.libs``: that one is reached through ``cython_blas``)."""
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError:
        return []
    paths = [Path(p["filepath"]) for p in threadpool_info()
             if p.get("internal_api") == "openblas" and p.get("filepath")]
    return [p for p in paths if p.parent.name != "scipy.libs"]


def _openblas_at(path: Path) -> Blas | None:
    """The sgemm/dgemm/sgemv/dgemv of the OpenBLAS at ``path`` (any of its symbol spellings)."""
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return None
    for config, pattern, int_type in _NUMPY_BLAS_NAMES:
        if not hasattr(lib, config):
            continue
        get_config = getattr(lib, config)
        get_config.restype = ctypes.c_char_p
        text = (get_config() or b"").decode("ascii", "replace")
        if ("USE64BITINT" in text) != (int_type == "int64_t"):
            continue
        try:
            ptrs = [ctypes.cast(getattr(lib, pattern.format(n)), ctypes.c_void_p).value
                    for n in ("sgemm", "dgemm", "sgemv", "dgemv")]
        except AttributeError:
            continue
        if all(ptrs):
            _NUMPY_BLAS_LIBS.append(lib)  # kept loaded while its pointers are in use
            return Blas("numpy", int_type, *(int(p) for p in ptrs if p))
    return None


_BLAS_MODULE: Any = None
_NUMPY_BLAS_LIBS: list[Any] = []
_BLAS: Blas | None = None


def blas() -> Blas:
    """The BLAS the kernels call. ``NNSYM_BLAS=numpy`` or ``scipy`` picks one; by default
    numpy's bundled OpenBLAS where it is found, else scipy's cython_blas."""
    global _BLAS
    if _BLAS is None:
        want = os.environ.get("NNSYM_BLAS", "auto").strip().lower() or "auto"
        if want not in ("auto", "numpy", "scipy"):
            raise NNSymError(f"NNSYM_BLAS must be auto, numpy or scipy, not {want!r}")
        found = _numpy_blas() if want != "scipy" else None
        if found is None and want == "numpy":
            raise NNSymError("NNSYM_BLAS=numpy but numpy's bundled OpenBLAS was not found")
        _BLAS = found if found is not None else _scipy_blas()
    return _BLAS


# Above this many new kernels a build is split into one translation unit per core, compiled
# concurrently (each gcc call has ~70 ms of fixed cost; a 1000-kernel unit takes ~25 s alone).
PARALLEL_THRESHOLD = 64


def functions(specs: Sequence[KernelSpec]) -> list[Any]:
    """The compiled function of every spec; builds the missing ones (one compiler call per
    build, or one per core for large builds)."""
    with _LOCK:
        missing: dict[str, KernelSpec] = {}
        for s in specs:
            if s.name not in _FUNCS:
                missing.setdefault(s.name, s)
        todo = sorted(missing.values(), key=lambda s: s.name)
        if len(todo) > PARALLEL_THRESHOLD:
            n = max(1, min(os.cpu_count() or 1, 8))
            chunks = [todo[i::n] for i in range(n)]
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                list(pool.map(_load, chunks))
        elif todo:
            _load(todo)
        return [_FUNCS[s.name] for s in specs]


SET_BLAS_CDEF = "void nnsym_set_blas(void *s, void *d, void *sv, void *dv, void *par, void *thr);"


def _load(specs: list[KernelSpec]) -> None:
    specs = sorted(specs, key=lambda s: s.name)
    vm = vector_math()
    source = render_unit(specs, vm, blas().int_type)
    cdef = "\n".join([signature(s.name) for s in specs] + [SET_BLAS_CDEF])
    fl, lf = flags(), link_flags()
    key = library_key(source, fl, lf, cdef=cdef)
    if key in _LIBS:
        lib = _LIBS[key]
    else:
        entry = build_library(key, source, fl, lf, cdef=cdef)
        rt = runtime()
        with _CFFI_LOCK:
            FFI.cdef(cdef, override=True)
            try:
                lib = FFI.dlopen(str(entry / "lib.so"))
            except OSError as e:
                raise CompileError(f"cannot load compiled kernels {entry}: {e}") from None
            lib.nnsym_set_blas(*(FFI.cast("void *", ptr) for ptr in blas().pointers),
                               FFI.cast("void *", rt.nnsym_parallel),
                               FFI.cast("void *", rt.nnsym_get_threads))
            _LIBS[key] = lib
    with _CFFI_LOCK:
        for spec in specs:
            _FUNCS[spec.name] = getattr(lib, spec.name)


RUNTIME_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "runlib.c"
RUNTIME_CDEF = """\
typedef void (*nnsym_kernel_t)(void *const *, const int64_t *, const double *);
void nnsym_run_list(int64_t n, nnsym_kernel_t *f, void *const **p, const int64_t **ia,
                    const double **fa);
void nnsym_parallel(void (*fn)(void *, int64_t, int64_t), void *ctx, int64_t nparts);
int nnsym_set_threads(int n);
int nnsym_get_threads(void);
"""


_RUNTIME: Any = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> Any:
    """The C runtime (``runtime/runlib.c``): ``nnsym_run_list``, which runs a list of prebound
    kernel calls in one foreign call (the GIL released once for all of them), and the worker
    pool the kernels share (``nnsym_parallel``), sized by :func:`set_num_threads`. Built (or
    found in the cache) on first use, once even when threads race for it."""
    rt = _RUNTIME
    if rt is None:
        with _RUNTIME_LOCK:
            rt = _RUNTIME if _RUNTIME is not None else _build_runtime()
    return rt


def _build_runtime() -> Any:
    global _RUNTIME
    source = RUNTIME_SOURCE.read_text()
    fl = ["-O2", "-fPIC", "-shared", "-std=gnu11", "-pthread"]
    key = library_key(source, fl, ["-pthread"], cdef=RUNTIME_CDEF)
    entry = build_library(key, source, fl, ["-pthread"], cdef=RUNTIME_CDEF)
    with _CFFI_LOCK:
        FFI.cdef(RUNTIME_CDEF, override=True)
        lib = FFI.dlopen(str(entry / "lib.so"))
        _LIBS[key] = lib
    lib.nnsym_set_threads(default_num_threads())
    _RUNTIME = lib
    return lib


def runner() -> Any:
    """``nnsym_run_list`` of :func:`runtime`."""
    return runtime().nnsym_run_list


def default_num_threads() -> int:
    """``NNSYM_NUM_THREADS`` when set, else the CPUs this process may run on."""
    env = os.environ.get("NNSYM_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ThreadCountError(f"NNSYM_NUM_THREADS must be a positive integer, not {env!r}")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_threads(n: int) -> int:
    """Threads nnsym's worker pool may use (the calling thread included; 1 runs everything
    serially; large matrix-vector products, fused elementwise kernels and the other split
    kernels use them). Returns the number set. ``nnsym.runtime.threads.set_num_threads`` sets the
    BLAS's threads too."""
    try:
        count = operator.index(n)
    except TypeError:
        count = 0
    if isinstance(n, bool) or count < 1:
        raise ThreadCountError(f"set_num_threads needs a positive integer, not {n!r}")
    return int(runtime().nnsym_set_threads(count))


def get_num_threads() -> int:
    return int(runtime().nnsym_get_threads())


def library_key(source: str, fl: list[str], lf: list[str], **meta: Any) -> str:
    """The cache key of a shared library: everything that shapes the binary."""
    return cache_key(format=1, source=source, compiler=compiler_id(), flags=fl, link=lf,
                     machine=platform.machine(), **meta)


def build_library(key: str, source: str, fl: list[str], lf: list[str], **meta: Any) -> Path:
    """The cache entry (a directory holding ``lib.so``) for ``key``, compiling ``source`` with
    one compiler call on a miss; counts compiles and disk hits in ``STATS``."""
    built = False

    def build(tmp: Path) -> None:
        nonlocal built
        built = True
        _compile(tmp, source, key, fl, lf, meta)

    t0 = time.perf_counter()
    entry = build_cached(key, build)
    with _CFFI_LOCK:
        if built:
            STATS["compiles"] += 1
            STATS["compile_seconds"] += time.perf_counter() - t0
        else:
            STATS["disk_hits"] += 1
    return entry


def _compile(tmp: Path, source: str, key: str, fl: list[str], lf: list[str],
             meta: dict[str, Any]) -> None:
    cc = compiler_command()
    if cc is None:
        raise NoCompilerError("no C compiler found (set CC or install gcc)")
    src = tmp / "kernels.c"
    src.write_text(source)
    out = tmp / "lib.so"
    cmd = [*cc, *fl, str(src), "-o", str(out), *lf]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise CompileError(f"cannot run the C compiler ({e}); command: {shlex.join(cmd)}"
                           ) from None
    if r.returncode != 0:
        root = tmp.parent.parent.parent  # <root>/<FORMAT>/<key[:2]>/<tmp>
        kept = root / "failed" / f"{key[:16]}.c"
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(source)
            where = f"source kept at {kept}"
            prune_failed(root)
        except OSError as e:
            where = f"source not kept ({e})"
        raise CompileError(
            f"C compiler failed (exit {r.returncode}); {where}\n"
            f"command: {shlex.join(cmd)}\n{r.stderr.strip()[:4000]}"
        )
    (tmp / "meta.json").write_text(json.dumps(
        {"key": key, "sha256": file_sha256(out), "flags": fl, "link": lf,
         "compiler": compiler_id(), **meta}, indent=1))


_BACKEND: str | None = None


def backend() -> str:
    """``c`` (default wherever a compiler exists) or ``numpy`` (``NNSYM_BACKEND=numpy``, or no
    compiler). Read once per process; ``reset_backend()`` re-reads the environment."""
    global _BACKEND
    if _BACKEND is None:
        _BACKEND = _choose_backend()
    return _BACKEND


# Called by reset_backend(): caches of decisions made for the old backend drop them.
RESET_HOOKS: list[Any] = []


def reset_backend() -> None:
    global _BACKEND
    _BACKEND = None
    for hook in RESET_HOOKS:
        hook()


def _choose_backend() -> str:
    forced = os.environ.get("NNSYM_BACKEND", "").lower()
    if forced == "numpy":
        return "numpy"
    if forced not in ("", "c"):
        raise NNSymError(f"NNSYM_BACKEND={forced!r}: expected 'c' or 'numpy'")
    if compiler() is None:
        _warn_no_compiler()
        return "numpy"
    try:
        cache_root()
    except CacheUnavailableError as e:
        _warn_no_cache(str(e))
        return "numpy"
    return "c"


@functools.cache
def _warn_no_cache(why: str) -> None:
    warn(f"nnsym: {why}; operators run their numpy reference implementations (slow)",
              CompilerWarning)


@functools.lru_cache(maxsize=1)
def _warn_no_compiler() -> None:
    env = os.environ.get("CC", "").strip()
    tried = f"CC={env!r}, then {_default_names()}" if env else f"CC is not set; {_default_names()}"
    warn(
        f"nnsym: no C compiler found (tried {tried}); operators run their numpy reference "
        "implementations (slow). Install gcc or set CC to get generated kernels.",
        RuntimeWarning,
    )
