"""NDArrays on ``nnsym.gpu(i)``: device memory (a ``cupy.ndarray``, or emulated device memory
under ``NNSYM_CUDA=emulate``) and operators run as the CUDA twins of their C kernels.

An operator call on gpu arrays goes through the same lowering as on the CPU (shape and dtype
inference, the dense kernel's launches with their ``ia``/``fa``), then launches the CUDA
kernels of those launches (``nnsym.cuda.runtime``). Inputs must all be on the same gpu; dense
storage only. ``copyto``/``as_in_context`` move arrays between the CPU and gpus.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.context import Context, cpu
from nnsym.errors import NNSymError, ShapeError
from nnsym.ir.opdef import DENSE, OpDef
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ndarray.ndarray import NDArray
from nnsym.runtime.imperative import _freeze, infer_one


class ContextError(NNSymError, ValueError):
    """Arrays of one operator call live on different devices."""


class GPUNDArray(NDArray):
    """A dense array in device memory (``_data``: the backend's device array)."""

    __slots__ = ()

    @property
    def stype(self) -> str:
        return "default"

    def asnumpy(self) -> np.ndarray:
        from nnsym.cuda.runtime import backend

        be = backend()
        with be.scope(self._ctx.device_id):
            return be.to_host(self._data)

    def asscalar(self) -> Any:
        if self.size != 1:
            raise ShapeError(f"asscalar needs an array of size 1, this one has shape {self.shape}")
        return self.asnumpy().reshape(()).item()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self.asnumpy()}\n<NDArray {shape} @{self._ctx}>"

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")
        return bool(self.asscalar())

    def copy(self) -> NDArray:
        return self.copyto(self._ctx)

    def copyto(self, other: NDArray | Context) -> NDArray:
        from nnsym.cuda.runtime import backend

        be = backend()
        if isinstance(other, Context):
            if other.device_type == "gpu":
                with be.scope(other.device_id):
                    if other == self._ctx:
                        dst = be.empty(self.shape, np.dtype(self.dtype))
                        be.copy_into(dst, self._data)
                        return GPUNDArray(dst, other)
                    return GPUNDArray(be.from_host(self.asnumpy()), other)
            return NDArray(self.asnumpy(), other)
        if not isinstance(other, NDArray):
            raise TypeError(f"copyto expects an NDArray or a Context, not {type(other).__name__}")
        if other is self:
            return other
        if other.shape != self.shape:
            raise ShapeError(
                f"copyto: shape mismatch, source {self.shape} and destination {other.shape}")
        if isinstance(other, GPUNDArray):
            if other._ctx == self._ctx:
                with be.scope(self._ctx.device_id):
                    be.copy_into(other._data, self._data)
            else:
                with be.scope(other._ctx.device_id):
                    be.copy_into(other._data, be.from_host(self.asnumpy()))
            return other
        if other.stype != "default":
            raise ContextError(f"copyto: a gpu array cannot be copied into a {other.stype} "
                               "array; copy it to the cpu first")
        other._data[...] = self.asnumpy().astype(other._data.dtype, copy=False)
        return other

    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        from nnsym.ndarray.ndarray import invoke

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return invoke("Reshape", [self], {"shape": tuple(shape), **kwargs})[0]

    def __getitem__(self, key: Any) -> NDArray:
        raise NNSymError("indexing a gpu NDArray is not supported yet; use slice/take "
                         "operators or copy it to the cpu (as_in_context(nnsym.cpu()))")

    def __setitem__(self, key: Any, value: Any) -> None:
        from nnsym.cuda.runtime import backend

        if key == slice(None) or key is Ellipsis:
            src = value if isinstance(value, NDArray) else None
            if src is None:
                full = np.broadcast_to(np.asarray(value, dtype=np.dtype(self.dtype)),
                                       self.shape)
                src = to_gpu(np.ascontiguousarray(full), self._ctx)
            if not isinstance(src, GPUNDArray) or src._ctx != self._ctx:
                src = src.as_in_context(self._ctx)
            if src.shape != self.shape:
                raise ShapeError(f"cannot assign shape {src.shape} to a gpu array of shape "
                                 f"{self.shape}")
            be = backend()
            with be.scope(self._ctx.device_id):
                be.copy_into(self._data, src._data)
            return
        raise NNSymError("only whole-array assignment (a[:] = ...) is supported on gpu arrays")


def to_gpu(data: np.ndarray, ctx: Context) -> GPUNDArray:
    """Upload a host array to ``ctx``."""
    from nnsym.cuda.runtime import backend

    be = backend()
    with be.scope(ctx.device_id):
        return GPUNDArray(be.from_host(np.ascontiguousarray(data)), ctx)


_LOWERED: dict[Any, tuple[list[tuple[int, ...]], list[np.dtype], Lowered, int]] = {}
_LOCK = threading.Lock()


def _plan(op: OpDef, raw: tuple[tuple[str, Any], ...], shapes: tuple[tuple[int, ...], ...],
          dtypes: tuple[np.dtype, ...]) -> tuple[list[tuple[int, ...]], list[np.dtype],
                                                  Lowered, int]:
    key = (op.name, raw, shapes, dtypes)
    hit = _LOWERED.get(key)
    if hit is not None:
        return hit
    params, _ = op.parse_params(dict(raw))
    out_s, out_t = infer_one(op, params, shapes, dtypes, "gpu")
    kernel = op.kernels.get(DENSE)
    if kernel is None:
        from nnsym.cuda.runtime import NoCudaKernelError

        raise NoCudaKernelError(f"operator {op.name} has no generated kernel, so it cannot "
                                "run on a gpu context")
    low = kernel.lower(KernelCall(params, shapes, dtypes, tuple(tuple(s) for s in out_s),
                                  tuple(np.dtype(t) for t in out_t)))
    res = ([tuple(s) for s in out_s], [np.dtype(t) for t in out_t], low,
           op.num_visible(params))
    with _LOCK:
        _LOWERED[key] = res
    return res


def invoke_gpu(op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
               out: NDArray | Sequence[NDArray] | None = None) -> list[NDArray]:
    """Run ``op`` on gpu arrays: the CPU lowering's launches as CUDA kernels."""
    from nnsym.cuda.runtime import backend, run_launches

    for i, a in enumerate(inputs):
        if not isinstance(a, NDArray):
            raise TypeError(f"{op.name}: input {i} is a {type(a).__name__}, not an NDArray")
    ctxs = {a._ctx for a in inputs}
    if len(ctxs) > 1 or any(not isinstance(a, GPUNDArray) for a in inputs):
        raise ContextError(
            f"operator {op.name}: inputs are on different devices "
            f"({', '.join(str(a._ctx) for a in inputs)}); move them with as_in_context first")
    ctx = next(iter(ctxs)) if ctxs else Context("gpu", 0)
    shapes = tuple(a.shape for a in inputs)
    dtypes = tuple(np.dtype(a.dtype) for a in inputs)
    out_s, out_t, low, n_vis = _plan(op, _freeze(params), shapes, dtypes)
    be = backend()
    with be.scope(ctx.device_id):
        datas = [a._data for a in inputs]
        outs: list[Any] = []
        for k, (s, t) in enumerate(zip(out_s, out_t)):
            if k in low.views:
                outs.append(datas[low.views[k]].reshape(s))
            else:
                outs.append(be.empty(s, t))
        work = max([int(np.prod(s, dtype=np.int64)) for s in out_s] + [1])
        if low.launches:
            run_launches(low.launches, datas + [o for k, o in enumerate(outs)
                                                if k not in low.views], work, be)
    results: list[NDArray] = [GPUNDArray(o, ctx) for o in outs[:n_vis]]
    if out is not None:
        targets: list[NDArray] = [out] if isinstance(out, NDArray) else list(out)
        if len(targets) != len(results):
            raise ShapeError(f"{op.name}: {len(results)} outputs but {len(targets)} given in out=")
        for tgt, r in zip(targets, results):
            r.copyto(tgt)
        return targets
    return results


__all__ = ["ContextError", "GPUNDArray", "cpu", "invoke_gpu", "to_gpu"]
