"""Build kernels: one translation unit and one compiler call per unit (a build is one unit, or
several on an idle machine), called through cffi's ABI mode (plain C, no Python.h: about 3x
faster to compile than API mode): the dynamic loader's addresses cast to the one kernel type.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cffi

from nnsym.codegen.cache import (
    CacheUnavailableError,
    build_cached,
    cache_key,
    cache_root,
    entry_dir,
    file_sha256,
    prune_failed,
    verify,
)
from nnsym.codegen.render import (
    render_unit,
    renderer_digest,
    template_digest,
    template_info,
)
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
    # openblas_set_threads_callback_function (OpenBLAS 0.3.27+), 0 where the BLAS has none
    set_threads_callback: int = 0

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
            cb = getattr(lib, config.replace("get_config", "set_threads_callback_function"),
                         None)
            cb_ptr = ctypes.cast(cb, ctypes.c_void_p).value if cb is not None else 0
            sg, dg, sv, dv = (int(p or 0) for p in ptrs)
            return Blas("numpy", int_type, sg, dg, sv, dv, int(cb_ptr or 0))
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


# A large build can be split into units, one compiler call each, compiled concurrently: one unit
# per core (at most MAX_UNITS), each of at least UNIT_WEIGHT characters of template (about
# 0.1-0.25 s of gcc -O3 time; each gcc call also costs ~40-70 ms of fixed work). The weights
# come from the templates' text, known before anything is rendered, so a set of kernels splits
# the same way in every process on the machine and each unit's key is looked up unrendered.
# Splitting only pays where cores are idle: on a loaded machine (the kernel's autogroup
# scheduling gives a session one share however many processes it runs) two units took as long
# as one or longer (its extra prologue and process), so a build is split only while the load
# average leaves a core free; lookups try both forms.
UNIT_WEIGHT = 20_000
MAX_UNITS = 8


def functions(specs: Sequence[KernelSpec], split: bool | None = None) -> list[Any]:
    """The compiled function of every spec; builds the missing ones (one compiler call per
    unit; a large build on an idle machine is split into units compiled concurrently).
    ``split``: build a large set split (True) or as one unit (False) whatever the load (the
    test session's precompile splits, so that processes racing on it share the same units)."""
    with _LOCK:
        names = [s.name for s in specs]
        missing: dict[str, KernelSpec] = {}
        for n, s in zip(names, specs):
            if n not in _FUNCS:
                missing.setdefault(n, s)
        if missing:
            _load_set([missing[n] for n in sorted(missing)], split)
        return [_FUNCS[n] for n in names]


def _weight(spec: KernelSpec) -> int:
    return template_info(spec.template)[1]


def split_count(specs: Sequence[KernelSpec]) -> int:
    """How many units ``specs`` split into when split (1: too small to split)."""
    total = sum(_weight(s) for s in specs)
    return max(1, min(os.cpu_count() or 1, MAX_UNITS, len(specs), total // UNIT_WEIGHT))


def units(specs: Sequence[KernelSpec], n: int) -> list[list[KernelSpec]]:
    """``specs`` in ``n`` translation units of about equal template weight (largest first, each
    to the lightest unit), each unit sorted by name; deterministic for a set of specs."""
    if n <= 1:
        return [sorted(specs, key=lambda s: s.name)]
    out: list[list[KernelSpec]] = [[] for _ in range(n)]
    loads = [0] * n
    for s in sorted(specs, key=lambda s: (-_weight(s), s.name)):
        i = min(range(n), key=lambda k: (loads[k], k))
        out[i].append(s)
        loads[i] += _weight(s)
    return [sorted(u, key=lambda s: s.name) for u in out if u]


def _cores_free() -> bool:
    """The 1-minute load average leaves at least half a core idle."""
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1) - 0.5
    except OSError:
        return False


def unit_key(specs: Sequence[KernelSpec], vm: Sequence[str], blas_int: str, fl: list[str],
             lf: list[str]) -> str:
    """The cache key of one unit, computed without rendering it: the specs (their names hash
    template and context), the digests of their templates (with everything they import), of
    the prologue and of the renderer, and what the compiler sees besides the source."""
    return cache_key(format=2, kernels=[[s.name, template_digest(s.template)] for s in specs],
                     prologue=template_digest(PROLOGUE), renderer=renderer_digest(),
                     vector_math=list(vm), blas_int=blas_int, compiler=compiler_id(), flags=fl,
                     link=lf, machine=platform.machine())


PROLOGUE = "prologue.c.j2"


def _cached_entry(key: str) -> Path | None:
    """The verified cache entry of ``key`` in the cache in use, or None (a miss)."""
    final = entry_dir(key)
    return final if final.is_dir() and verify(final, key) else None


def _load_set(specs: list[KernelSpec], split: bool | None = None) -> None:
    """Load ``specs``: as split units where every unit is this process's or on disk, else as one
    unit where that is, else build (split where cores are free) what is missing."""
    vm, bint, fl, lf = vector_math(), blas().int_type, flags(), link_flags()
    n = split_count(specs)
    forms = [[(u, unit_key(u, vm, bint, fl, lf)) for u in units(specs, k)]
             for k in dict.fromkeys((n, 1))]
    found: list[dict[str, Path]] = []
    for form in forms:
        hits = {key: e for key, e in ((key, _cached_entry(key)) for _, key in form
                                      if key not in _LIBS) if e is not None}
        if all(key in _LIBS or key in hits for _, key in form):
            _load_units(form, hits, vm, bint, fl, lf)
            return
        found.append(hits)
    pick = 0 if (_cores_free() if split is None else split) else len(forms) - 1
    _load_units(forms[pick], found[pick], vm, bint, fl, lf)


def _load_units(keyed: list[tuple[list[KernelSpec], str]], entries: dict[str, Path],
                vm: Sequence[str], bint: str, fl: list[str], lf: list[str]) -> None:
    """Load every unit: from this process's libraries, the disk entries found (``entries``), or
    rendered and compiled. Several builds (and the C runtime, when it is not loaded yet) compile
    concurrently; the next unit renders while earlier ones compile."""
    entries = dict(entries)
    with _CFFI_LOCK:
        STATS["disk_hits"] += len(entries)
    builds = [(u, key) for u, key in keyed if key not in _LIBS and key not in entries]
    need_runtime = _RUNTIME is None
    if len(builds) > 1 or (builds and need_runtime):
        with concurrent.futures.ThreadPoolExecutor(len(builds) + need_runtime) as pool:
            futures: list[concurrent.futures.Future[Any]] = []
            if need_runtime:
                futures.append(pool.submit(runtime))
            built: list[tuple[str, concurrent.futures.Future[Any]]] = []
            for u, key in sorted(builds, key=lambda b: -sum(_weight(s) for s in b[0])):
                source = render_unit(u, vm, bint)
                f = pool.submit(build_library, key, source, fl, lf,
                                kernels=[s.name for s in u])
                futures.append(f)
                built.append((key, f))
            concurrent.futures.wait(futures)
            for f in futures:
                f.result()  # the first error, once every compiler call has finished
            entries.update((key, f.result()) for key, f in built)
    for u, key in keyed:
        lib = _LIBS.get(key)
        if lib is None:
            entry = entries.get(key)
            if entry is None:
                entry = build_library(key, functools.partial(render_unit, u, vm, bint), fl, lf,
                                      kernels=[s.name for s in u])
            lib = _open(key, entry, u)
        with _CFFI_LOCK:
            for spec in u:
                _FUNCS[spec.name] = lib.kernels[spec.name]


SET_BLAS_T = "void (*)(void *, void *, void *, void *, void *, void *, void *, void *)"
# nnsym_set_blas as a cffi declaration (for libraries loaded through a cdef, e.g. the CUDA
# checks' scalar-libm builds of the kernels)
SET_BLAS_CDEF = ("void nnsym_set_blas(void *s, void *d, void *sv, void *dv, void *par, void *thr, "
                 "void *sk32, void *sk64);")


class _Unit:
    """A loaded unit: its kernels as cffi function pointers of the one kernel type, at the
    addresses the dynamic loader gives (no cffi cdef to parse per unit), and the loader's
    handle, kept alive."""

    def __init__(self, path: Path, names: Sequence[str]) -> None:
        self.handle = ctypes.CDLL(str(path))
        self.kernels = {n: FFI.cast("nnsym_kernel_t", self.address(n)) for n in names}

    def address(self, name: str) -> int:
        return int(ctypes.cast(getattr(self.handle, name), ctypes.c_void_p).value or 0)


def runtime_pointers(rt: Any) -> tuple[Any, ...]:
    """The runtime's functions every kernel library is handed after the BLAS's (nnsym_set_blas):
    the pool, its thread count, the few-row products."""
    return (rt.nnsym_parallel, rt.nnsym_get_threads, rt.nnsym_skinny_f32, rt.nnsym_skinny_f64)


def _open(key: str, entry: Path, specs: list[KernelSpec]) -> _Unit:
    """dlopen a unit's library and hand it the BLAS and the runtime's pool."""
    rt = runtime()  # also declares nnsym_kernel_t
    with _CFFI_LOCK:
        try:
            lib = _Unit(entry / "lib.so", [s.name for s in specs] + ["nnsym_set_blas"])
        except (OSError, AttributeError) as e:
            raise CompileError(f"cannot load compiled kernels {entry}: {e}") from None
        set_blas = FFI.cast(SET_BLAS_T, lib.address("nnsym_set_blas"))
        set_blas(*(FFI.cast("void *", ptr) for ptr in blas().pointers),
                 *(FFI.cast("void *", p) for p in runtime_pointers(rt)))
        _LIBS[key] = lib
    return lib


RUNTIME_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "runlib.c"
RUNTIME_CDEF = """\
typedef void (*nnsym_kernel_t)(void *const *, const int64_t *, const double *);
void nnsym_run_list(int64_t n, nnsym_kernel_t *f, void *const **p, const int64_t **ia,
                    const double **fa);
void nnsym_run_list_timed(int64_t n, nnsym_kernel_t *f, void *const **p, const int64_t **ia,
                          const double **fa, int64_t *ns);
void nnsym_parallel(void (*fn)(void *, int64_t, int64_t), void *ctx, int64_t nparts);
int nnsym_set_threads(int n);
int nnsym_get_threads(void);
void nnsym_blas_threads(int sync, void (*dojob)(int, void *, int), int numjobs, size_t elsize,
                        void *jobs, int data);
void nnsym_blas_counts(int64_t *out);
void nnsym_skinny_f32(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb,
                      int64_t k, float alpha, float beta, float *c, int64_t ldc, int64_t n);
void nnsym_skinny_f64(const double *a, int64_t lda, int64_t m, const double *b, int64_t ldb,
                      int64_t k, double alpha, double beta, double *c, int64_t ldc, int64_t n);
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
    fl = ["-O2", "-fPIC", "-shared", "-std=gnu11", "-pthread", *isa_flags()]
    key = library_key(source, fl, ["-pthread"], cdef=RUNTIME_CDEF)
    entry = build_library(key, source, fl, ["-pthread"], cdef=RUNTIME_CDEF)
    with _CFFI_LOCK:
        FFI.cdef(RUNTIME_CDEF, override=True)
        lib = FFI.dlopen(str(entry / "lib.so"))
        _LIBS[key] = lib
    lib.nnsym_set_threads(default_num_threads())
    _RUNTIME = lib
    blas_on_pool(os.environ.get("NNSYM_BLAS_THREADS", "pool").strip().lower() != "openblas")
    return lib


def blas_on_pool(on: bool = True) -> bool:
    """Run the BLAS's threaded products on nnsym's worker pool (``on``) or on the BLAS's own
    threads; True when the pool now runs them. Only numpy's OpenBLAS 0.3.27 or later can hand
    its jobs over (``openblas_set_threads_callback_function``); the setting is the library's,
    so numpy's own products in this process follow it too. ``NNSYM_BLAS_THREADS=openblas``
    keeps OpenBLAS's threads from the start. See docs/threads.md."""
    b = blas()
    if not b.set_threads_callback:
        return False
    lib = runtime()
    setter = FFI.cast("void (*)(void *)", b.set_threads_callback)
    setter(FFI.cast("void *", FFI.addressof(lib, "nnsym_blas_threads")) if on else FFI.NULL)
    return on


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


def build_library(key: str, source: str | Callable[[], str], fl: list[str], lf: list[str],
                  **meta: Any) -> Path:
    """The cache entry (a directory holding ``lib.so``) for ``key``, compiling ``source`` (or
    what it returns, called only on a miss) with one compiler call on a miss; counts compiles
    and disk hits in ``STATS``."""
    built = False

    def build(tmp: Path) -> None:
        nonlocal built
        built = True
        _compile(tmp, source if isinstance(source, str) else source(), key, fl, lf, meta)

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
