"""Exchange with other array libraries, and MXNet's engine calls: ``nd.waitall``, DLPack in
both directions (``to_dlpack_for_read``/``_for_write``, ``from_dlpack``: any producer of
``__dlpack__`` or a DLPack capsule), ``from_numpy`` (zero-copy where asked and possible)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.cuda import runtime as cuda_runtime
from nnsym.errors import DTypeError
from nnsym.ndarray.ndarray import NDArray, _kernel_ready, array

# DLPack device type codes (dlpack.h): kDLCPU = 1.
_DL_CPU = 1


def waitall() -> None:
    """Waits for all pending work: kernels here run synchronously on the CPU; where a CUDA
    device is in use, its current stream is synchronised."""
    if cuda_runtime.available():
        cuda_runtime.cupy_module().cuda.get_current_stream().synchronize()


def to_dlpack_for_read(data: NDArray) -> Any:
    """A DLPack capsule sharing ``data``'s memory."""
    return data.to_dlpack_for_read()


def to_dlpack_for_write(data: NDArray) -> Any:
    """A DLPack capsule sharing ``data``'s memory, for the consumer to write."""
    return data.to_dlpack_for_write()


class _Capsule:
    """A bare DLPack capsule as a ``__dlpack__`` producer (numpy takes only producers)."""

    def __init__(self, capsule: Any):
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CPU, 0)


def from_dlpack(dlpack: Any) -> NDArray:
    """An NDArray sharing the memory of a DLPack capsule or of any object with ``__dlpack__``
    (a torch tensor, a numpy array, ...) on the CPU: the NDArray writes into that memory. A
    classic (unversioned) capsule grants no write access, so its data is copied; capsules from
    ``to_dlpack_for_write`` and producers share."""
    src = dlpack if hasattr(dlpack, "__dlpack__") else _Capsule(dlpack)
    try:
        view = np.from_dlpack(src)
    except (TypeError, ValueError, BufferError, RuntimeError) as e:
        raise DTypeError(f"from_dlpack: cannot read {type(dlpack).__name__}: {e}") from None
    if not view.flags.writeable:
        view = np.array(view, copy=True)
    return NDArray(view)


def from_numpy(ndarray: np.ndarray, zero_copy: bool = True) -> NDArray:
    """An NDArray of a numpy array: sharing its memory where ``zero_copy`` and the array is one
    writable C-ordered block (as MXNet requires for zero copy), else a copy in its dtype."""
    if not isinstance(ndarray, np.ndarray):
        raise DTypeError(f"from_numpy takes a numpy array, not {type(ndarray).__name__}")
    if zero_copy and _kernel_ready(ndarray):
        return NDArray(ndarray)
    return array(ndarray, dtype=ndarray.dtype)
