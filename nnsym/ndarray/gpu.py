"""NDArrays on ``nnsym.gpu(i)``: ``GPUNDArray`` (device memory: a ``cupy.ndarray``, or emulated
device memory under ``NNSYM_CUDA=emulate``), uploads and the operator calls that run the CUDA
twins of the C kernels. They live in ``nnsym.ndarray.ndarray`` beside ``NDArray`` (whose copies
and operator calls reach them); this module names them for callers.
"""

from __future__ import annotations

from nnsym.context import cpu
from nnsym.ndarray.ndarray import ContextError, GPUNDArray, invoke_gpu, to_gpu

__all__ = ["ContextError", "GPUNDArray", "cpu", "invoke_gpu", "to_gpu"]
