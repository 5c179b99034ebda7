"""Device implementations of kernel templates through a vendor library: the GEMMs of ``dot``,
``batch_dot`` and FullyConnected, and the convolutions (im2col + GEMM), run through cuBLAS on a
real GPU (cupy's ``matmul``) instead of the generated tiled kernels.

A family registers, for one C template, a chooser that takes the launch's ``KernelSpec`` and
returns a :data:`DeviceFn` (or None where the spec is left to the generated CUDA twin). The GPU
runtime (``nnsym.cuda.runtime``) asks here when it loads a node's kernels; everything the
function needs is the C kernel's own ``p``/``ia``/``fa``, so the lowering decides exactly as on
the CPU, and the generated CUDA kernels stay the reference these are checked against
(``tests/cuda``). A DeviceFn is written against an array module ``xp`` (cupy on a device,
numpy on the emulated one) and ``at(ptr, dtype, shape)``, which views device memory as an
``xp`` array. It binds a launch: it makes its views once and returns the function that runs it,
so a bound graph's steps cost only the library calls. ``NNSYM_CUDA_VENDOR=0`` turns all of
them off (the generated kernels run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.ir.spec import KernelSpec

# (xp, at, spec, ptrs, ia, fa) -> run; ``at(ptr, dtype, shape)`` views device memory.
ArrayAt = Callable[[int, np.dtype, tuple[int, ...]], Any]
Run = Callable[[], None]
DeviceFn = Callable[[Any, ArrayAt, KernelSpec, Sequence[int], Sequence[int], Sequence[float]],
                    Run]
Chooser = Callable[[KernelSpec], DeviceFn | None]

_CHOOSERS: dict[str, Chooser] = {}


def register_device(template: str) -> Callable[[Chooser], Chooser]:
    """Decorator: ``chooser(spec)`` gives the device function for launches of ``template``
    (a path relative to ``nnsym/ops``, as in ``KernelSpec.template``), or None."""
    def deco(chooser: Chooser) -> Chooser:
        _CHOOSERS[template] = chooser
        return chooser
    return deco


def device_function(spec: KernelSpec) -> DeviceFn | None:
    """The vendor-library implementation of a launch, or None (the generated kernel runs)."""
    chooser = _CHOOSERS.get(spec.template)
    return None if chooser is None else chooser(spec)


def templates() -> list[str]:
    """Templates with a device implementation (docs, tests)."""
    return sorted(_CHOOSERS)


def store(xp: Any, out: Any, value: Any, req: str) -> None:
    """Write ``value`` into ``out`` by write mode (``null``: nothing)."""
    if req == "null":
        return
    if req == "add":
        out += value.astype(out.dtype, copy=False)
    else:
        out[...] = value
