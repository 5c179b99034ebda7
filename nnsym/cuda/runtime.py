"""The GPU runtime: device memory, kernel modules and launches for ``nnsym.gpu(i)`` arrays.

Backends implement the same small interface (:class:`Backend`) and are chosen by name
(``NNSYM_CUDA``, or :func:`use_backend`) among those registered (:func:`register_backend`):
* ``cupy`` (the ``cuda`` extra, imported lazily: the CPU path never needs it): device arrays are
  ``cupy.ndarray``; kernels are the CUDA twins of the operators' C templates
  (``nnsym.cuda.source``), compiled once per set of kernels (nvcc to a cubin when nvcc is on
  PATH, else NVRTC) and loaded through ``cupy.RawModule``; modules are memoised per source.
* ``emulate`` (dev tooling: registered by importing ``nnsym.devtools.cuda``): device arrays are
  host numpy arrays and kernels run through the host shim (``nnsym.devtools.cuda.shim``: the
  same ``.cu`` text compiled as C++ with CUDA's names emulated). It runs the whole GPU path
  (context checks, copies, launches with p/ia/fa arrays, grid sizes) on a machine without a
  GPU; tests use it.

A launch passes the C kernel's own ``p``/``ia``/``fa`` arrays, copied to device memory (see
``nnsym/cuda/templates/prologue.cu.j2``). Kernel choice, shapes and dtypes come from the
operator's lowering, exactly as on the CPU.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnsym.codegen.cache import cache_root
from nnsym.cuda.source import (
    DEVICE_FLAGS,
    cuda_prologue,
    cuda_twin,
    has_twin,
    nvcc,
    nvcc_compile,
    render_spec,
)
from nnsym.errors import NNSymError
from nnsym.ir.spec import KernelSpec, Launch
from nnsym.ops.common.device import DeviceFn, device_function
from nnsym.ops.common.rng import next_seed

BLOCK = 256
MAX_GRID = 65535


class CudaUnavailableError(NNSymError):
    """No usable CUDA backend: cupy is not installed, or no device is visible."""


class NoCudaKernelError(NNSymError):
    """An operator's lowering uses a kernel family with no CUDA twin."""


_BACKEND: Backend | None = None
_LOCK = threading.Lock()
# Backend factories by name; ``cupy`` is registered below, others by whoever provides them
# (the emulated device: ``nnsym.devtools.cuda``).
_FACTORIES: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make a backend selectable by ``name`` (``NNSYM_CUDA=name``, :func:`use_backend`);
    ``factory()`` builds it, raising :class:`CudaUnavailableError` where it cannot run."""
    with _LOCK:
        _FACTORIES[name] = factory


def backend() -> Backend:
    """The active backend: ``NNSYM_CUDA`` or a :func:`use_backend` choice, else cupy."""
    global _BACKEND
    with _LOCK:
        if _BACKEND is None:
            want = os.environ.get("NNSYM_CUDA", "cupy").strip().lower() or "cupy"
            _BACKEND = _make(want)
        return _BACKEND


def use_backend(name: str) -> Backend:
    """Select a registered backend (``cupy``, or ``emulate`` once ``nnsym.devtools.cuda`` is
    imported); returns the backend."""
    global _BACKEND
    with _LOCK:
        _BACKEND = _make(name)
        return _BACKEND


def _make(name: str) -> Backend:
    factory = _FACTORIES.get(name)
    if factory is None:
        known = " or ".join(sorted(_FACTORIES))
        raise NNSymError(f"NNSYM_CUDA must be {known}, not {name!r} (the emulated device, "
                         "'emulate', is registered by importing nnsym.devtools.cuda)")
    return factory()


def cupy_module() -> Any:
    """``cupy``, imported on first use, with a clear error where it cannot be."""
    try:
        import cupy  # type: ignore[import-not-found]  # noqa: PLC0415  (optional: nnsym[cuda])
    except ImportError as e:
        raise CudaUnavailableError(
            "gpu contexts need cupy: install the CUDA extra (pip install 'nnsym[cuda]' and a "
            "cupy wheel matching your CUDA, e.g. cupy-cuda12x); "
            f"importing cupy failed: {e}") from None
    return cupy


def kernel_source(specs: Sequence[KernelSpec]) -> str:
    """One CUDA translation unit: the prologue and the twin of every spec (named by the spec)."""
    require_twins(specs)
    parts = [cuda_prologue()]
    for spec in sorted(set(specs), key=lambda s: s.name):
        parts.append(render_spec(spec))
    return "\n".join(parts)


def require_twins(specs: Sequence[KernelSpec]) -> None:
    """NoCudaKernelError unless every spec's C template has a CUDA twin."""
    for spec in specs:
        if not has_twin(spec.template):
            raise NoCudaKernelError(
                f"kernel template {spec.template} has no CUDA twin "
                f"({cuda_twin(spec.template)}): this operator cannot run on a gpu context")


def grid_for(work: int, block: int, max_grid: int) -> int:
    """Blocks for ``work`` elements (the kernels loop grid-stride, so any count is correct)."""
    return max(1, min(max_grid, -(-max(int(work), 1) // block)))


def vendor_enabled() -> bool:
    """Whether launches with a vendor-library implementation use it (``NNSYM_CUDA_VENDOR``,
    default on; ``0`` runs the generated CUDA kernels everywhere)."""
    return os.environ.get("NNSYM_CUDA_VENDOR", "1").strip() != "0"


class VendorKernel:
    """A launch run through a vendor library (cuBLAS through cupy) instead of a CUDA kernel."""

    __slots__ = ("fn", "spec")

    def __init__(self, fn: DeviceFn, spec: KernelSpec) -> None:
        self.fn, self.spec = fn, spec


class Backend:
    """Device memory and kernel launches of one backend."""
    name = ""
    block = BLOCK
    max_grid = MAX_GRID

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        raise NotImplementedError

    def from_host(self, a: np.ndarray) -> Any:
        raise NotImplementedError

    def to_host(self, d: Any) -> np.ndarray:
        raise NotImplementedError

    def ptr(self, d: Any) -> int:
        raise NotImplementedError

    def __init__(self) -> None:
        self._functions: dict[tuple[Any, ...], dict[str, Any]] = {}

    def functions(self, specs: Sequence[KernelSpec]) -> dict[str, Any]:
        """The loaded kernel of every spec, by spec name; memoised per set of specs, so a
        repeated operator call renders and hashes nothing. Specs with a vendor-library
        implementation (``nnsym.ops.common.device``: cuBLAS GEMMs and convolutions) get a
        :class:`VendorKernel` unless ``NNSYM_CUDA_VENDOR=0``; the rest their CUDA twin."""
        vendor = vendor_enabled()
        key = (vendor, *sorted({s.name for s in specs}))
        hit = self._functions.get(key)
        if hit is None:
            require_twins(specs)
            hit = {}
            rest = []
            for s in sorted(set(specs), key=lambda s: s.name):
                fn = device_function(s) if vendor else None
                if fn is None:
                    rest.append(s)
                else:
                    hit[s.name] = VendorKernel(fn, s)
            if rest:
                hit.update(self._load_functions(rest))
            self._functions[key] = hit
        return hit

    # Vendor kernels: an array module and views of device memory (see nnsym.ops.common.device)
    def xp(self) -> Any:
        raise NotImplementedError

    def array_at(self, ptr: int, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def _bind_vendor(self, fn: VendorKernel, ptrs: Sequence[int], ia: Sequence[int],
                     fa: Sequence[float]) -> Callable[[], None]:
        return fn.fn(self.xp(), self.array_at, fn.spec, ptrs, ia, fa)

    def _load_functions(self, specs: list[KernelSpec]) -> dict[str, Any]:
        raise NotImplementedError

    def launch(self, fn: Any, ptrs: Sequence[int], ia: Sequence[int], fa: Sequence[float],
               work: int) -> None:
        """Run one loaded kernel (``functions``) on the C kernel's p/ia/fa; a vendor kernel
        runs through its library."""
        if isinstance(fn, VendorKernel):
            self._bind_vendor(fn, ptrs, ia, fa)()
        else:
            self._launch(fn, ptrs, ia, fa, work)

    def _launch(self, fn: Any, ptrs: Sequence[int], ia: Sequence[int], fa: Sequence[float],
                work: int) -> None:
        raise NotImplementedError

    def is_array(self, d: Any) -> bool:
        raise NotImplementedError

    def prepare(self, fn: Any, ptrs: Sequence[int], ia: Sequence[int], fa: Sequence[float],
                work: int) -> Any:
        """A launch bound once (a graph executor's): ``run()`` launches it, ``run(fa)`` with
        new scalar arguments (Dropout's fresh seed)."""
        if isinstance(fn, VendorKernel):  # views made once; a vendor kernel takes no seed
            run = self._bind_vendor(fn, list(ptrs), list(ia), list(fa))

            class BoundVendor:
                def run(_self, new_fa: Sequence[float] | None = None) -> None:
                    run()

            return BoundVendor()
        return self._prepare(fn, list(ptrs), list(ia), list(fa), work)

    def _prepare(self, fn: Any, ptrs: list[int], ia: list[int], fa: list[float],
                 work: int) -> Any:
        class Bound:
            def run(_self, new_fa: Sequence[float] | None = None) -> None:
                self._launch(fn, ptrs, ia, fa if new_fa is None else new_fa, work)

        return Bound()

    def view(self, pool: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        """An array of ``shape`` and ``dtype`` over the start of a byte buffer."""
        raise NotImplementedError

    def copy_into(self, dst: Any, src: Any) -> None:
        """Device to device copy (same shape; dtype converted as numpy's astype)."""
        raise NotImplementedError

    def scope(self, device_id: int) -> Any:
        """A context manager making ``device_id`` current (allocations and launches)."""
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        """Wait for queued work (the emulator runs synchronously)."""


class CupyBackend(Backend):
    """Real devices through cupy."""
    name = "cupy"

    def __init__(self) -> None:
        super().__init__()
        self.cp = cupy_module()
        try:
            count = self.cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # cupy raises its own CUDARuntimeError types
            raise CudaUnavailableError(f"cupy found no usable CUDA device: {e}") from None
        if count < 1:
            raise CudaUnavailableError("cupy found no CUDA device")
        self._modules: dict[str, Any] = {}

    def scope(self, device_id: int) -> Any:
        return self.cp.cuda.Device(device_id)

    def copy_into(self, dst: Any, src: Any) -> None:
        dst[...] = src.astype(dst.dtype, copy=False)

    def view(self, pool: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return pool[:n].view(dtype).reshape(shape)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.cp.empty(shape, dtype)

    def from_host(self, a: np.ndarray) -> Any:
        return self.cp.asarray(np.ascontiguousarray(a))

    def to_host(self, d: Any) -> np.ndarray:
        return np.asarray(d.get())

    def ptr(self, d: Any) -> int:
        return int(d.data.ptr)

    def is_array(self, d: Any) -> bool:
        return isinstance(d, self.cp.ndarray)

    def _load_functions(self, specs: list[KernelSpec]) -> dict[str, Any]:
        source = kernel_source(specs)
        key = hashlib.sha256(source.encode()).hexdigest()
        mod = self._modules.get(key)
        if mod is None:
            mod = self._load(source, key)
            self._modules[key] = mod
        return {s.name: mod.get_function(s.name) for s in specs}

    def _load(self, source: str, key: str) -> Any:
        """nvcc to a cubin for this device's arch (kept in nnsym's cache directory) when nvcc
        is on PATH, else NVRTC."""
        arch = f"sm_{self.cp.cuda.Device().compute_capability}"  # cupy gives e.g. "80"
        if nvcc() is not None:
            return self.cp.RawModule(path=str(cubin(source, arch)))
        opts = ("-std=c++17", *DEVICE_FLAGS)
        return self.cp.RawModule(code=source, options=opts)

    def _device_args(self, ptrs: Sequence[int], ia: Sequence[int],
                     fa: Sequence[float]) -> tuple[Any, Any, Any]:
        """The C kernel's p, ia and fa arrays, copied to device memory."""
        cp = self.cp
        return (cp.asarray(np.asarray(list(ptrs) or [0], np.uint64)),
                cp.asarray(np.asarray(list(ia) or [0], np.int64)),
                cp.asarray(np.asarray(list(fa) or [0.0], np.float64)))

    def _launch(self, fn: Any, ptrs: Sequence[int], ia: Sequence[int], fa: Sequence[float],
                work: int) -> None:
        grid = grid_for(work, self.block, self.max_grid)
        fn((grid,), (self.block,), self._device_args(ptrs, ia, fa))

    def _prepare(self, fn: Any, ptrs: list[int], ia: list[int], fa: list[float],
                 work: int) -> Any:
        """p, ia and fa copied to the device once; a new fa (a fresh seed) is copied in place."""
        p, i, f = self._device_args(ptrs, ia, fa)
        grid = grid_for(work, self.block, self.max_grid)
        block = self.block

        class Bound:
            def run(_self, new_fa: Sequence[float] | None = None) -> None:
                if new_fa is not None:
                    f.set(np.asarray(list(new_fa) or [0.0], np.float64))
                fn((grid,), (block,), (p, i, f))

        return Bound()

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def xp(self) -> Any:
        return self.cp

    def array_at(self, ptr: int, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        cp = self.cp
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes == 0:
            return cp.empty(shape, dt)
        mem = cp.cuda.UnownedMemory(int(ptr), nbytes, None)
        return cp.ndarray(shape, dt, cp.cuda.MemoryPointer(mem, 0))


register_backend("cupy", CupyBackend)


# ---------------------------------------------------------------------------------------------
# Running lowered launches


def run_launches(launches: Sequence[Launch], ptrs: Sequence[Any], work: int,
                 be: Backend | None = None) -> None:
    """Run a node's launches with its device arrays (inputs, then outputs); workspaces are
    allocated per launch; Dropout's seed slot takes a fresh seed."""
    be = be or backend()
    fns = be.functions([ln.spec for ln in launches])
    for ln in launches:
        mine = list(ptrs) if ln.args is None else [ptrs[k] for k in ln.args]
        addrs = [be.ptr(a) for a in mine]
        keep = []
        if ln.workspace:
            ws = be.empty((int(ln.workspace),), np.dtype(np.uint8))
            keep.append(ws)
            addrs.append(be.ptr(ws))
        fa = list(ln.fa)
        if ln.seed_slot is not None:
            fa[ln.seed_slot] = float(next_seed())
        be.launch(fns[ln.spec.name], addrs, ln.ia, fa, work)
        del keep


def cubin(source: str, arch: str) -> Path:
    """The cubin of a CUDA translation unit for ``arch`` (e.g. ``sm_90``), built by nvcc once
    and kept in nnsym's cache directory under the source's digest (a cubin built on another
    machine by the same nvcc, copied into the cache, is used as is). Needs no device."""
    key = hashlib.sha256(source.encode()).hexdigest()
    out = cache_root() / "cuda-cubin" / key[:2] / f"{key}-{arch}.cubin"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}")
        ok, log = nvcc_compile(source, arch, "cubin", tmp)
        if not ok:
            tmp.unlink(missing_ok=True)
            raise NNSymError(f"nvcc failed on the CUDA kernels:\n{log}")
        tmp.replace(out)  # atomic: a racing process sees no half-written cubin
    return out


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Whether a real CUDA device can be used (cupy importable and a device visible)."""
    try:
        CupyBackend()
    except NNSymError:
        return False
    return True
