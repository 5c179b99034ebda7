"""The emulated GPU device (``NNSYM_CUDA=emulate``, or ``use_backend("emulate")``): device
arrays are host numpy arrays and kernels run through the host shim (``nnsym.devtools.cuda.shim``:
the same ``.cu`` text compiled as C++ with CUDA's names emulated). It runs the whole GPU path
(context checks, copies, launches with p/ia/fa arrays, grid sizes) on a machine without a GPU;
tests use it. Importing this module registers it with ``nnsym.cuda.runtime``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.cuda.runtime import (
    Backend,
    CudaUnavailableError,
    grid_for,
    register_backend,
)
from nnsym.devtools.cuda import shim
from nnsym.devtools.cuda.codegen import Variant
from nnsym.ir.spec import KernelSpec

EMU_BLOCK, EMU_MAX_GRID = 64, 2  # the emulator runs every thread: keep launches small


class EmulatedBackend(Backend):
    """No device: host memory and the host shim (see the module docstring)."""

    name = "emulate"
    block = EMU_BLOCK
    max_grid = EMU_MAX_GRID

    def __init__(self) -> None:
        super().__init__()
        if shim.cxx() is None:
            raise CudaUnavailableError("the CUDA emulator needs a C++ compiler (g++)")

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return _EmuArray(np.empty(shape, dtype))

    def from_host(self, a: np.ndarray) -> Any:
        return _EmuArray(np.array(a, copy=True, order="C"))

    def to_host(self, d: Any) -> np.ndarray:
        return np.array(d.host, copy=True)

    def ptr(self, d: Any) -> int:
        return int(d.host.ctypes.data)

    def is_array(self, d: Any) -> bool:
        return isinstance(d, _EmuArray)

    def copy_into(self, dst: Any, src: Any) -> None:
        dst.host[...] = src.host.astype(dst.host.dtype, copy=False)

    def view(self, pool: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        n = int(np.prod(shape, dtype=np.int64))
        return _EmuArray(np.frombuffer(pool.host, dtype, n).reshape(shape))

    def _load_functions(self, specs: list[KernelSpec]) -> dict[str, Any]:
        lib = shim.build([Variant("", "", s, (), (), (), (), 0, s.name) for s in specs])
        return {s.name: (lib, s.name) for s in specs}

    def xp(self) -> Any:
        return np

    def array_at(self, ptr: int, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes == 0:
            return np.empty(shape, dt)
        raw = (ctypes.c_char * nbytes).from_address(int(ptr))
        return np.frombuffer(memoryview(raw), dt).reshape(shape)

    def _launch(self, fn: Any, ptrs: Sequence[int], ia: Sequence[int], fa: Sequence[float],
                work: int) -> None:
        lib, name = fn
        ffi = lib.ffi
        p = ffi.new("void *[]", [ffi.cast("void *", x) for x in ptrs] or [ffi.NULL])
        i = ffi.new("int64_t[]", [int(x) for x in ia] or [0])
        f = ffi.new("double[]", [float(x) for x in fa] or [0.0])
        lib.launch_raw(name, p, i, f, grid_for(work, self.block, self.max_grid), self.block)


class _EmuArray:
    """Emulated device memory: a host array only the GPU code path touches."""

    __slots__ = ("host",)

    def __init__(self, host: np.ndarray):
        self.host = host

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.host.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.host.dtype

    @property
    def size(self) -> int:
        return int(self.host.size)

    @property
    def ndim(self) -> int:
        return int(self.host.ndim)

    def reshape(self, shape: tuple[int, ...]) -> _EmuArray:
        return _EmuArray(self.host.reshape(shape))


register_backend("emulate", EmulatedBackend)
