"""NDArray (dense): an n-dimensional array on a context, with MXNet's imperative API.

On the CPU an NDArray owns a C-contiguous numpy array; operators run the same generated
kernels as bound graphs (``nnsym.runtime.imperative``). Work is synchronous, so
``wait_to_read`` returns at once.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from nnsym.context import Context, cpu, current_context
from nnsym.cuda.runtime import NoCudaKernelError, backend, run_launches
from nnsym.errors import DTypeError, NNSymError, ShapeError
from nnsym.ir.opdef import DENSE, OpDef, PythonCompute, get_op
from nnsym.ir.spec import Lowered
from nnsym.ops.common.stype import infer_storage
from nnsym.passes.lower import lower
from nnsym.runtime.imperative import _freeze, get_call, infer_one
from nnsym.types import DispatchMode, SType, check_dims, dtype_of

_CPU = cpu()


if TYPE_CHECKING:  # the fluent methods (x.sum(1)) are added at import; their typed stub
    from nnsym.ndarray._fluent_methods import NDArrayFluent as _Fluent
else:
    _Fluent = object


class NDArray(_Fluent):
    """A dense array. Arithmetic with arrays broadcasts (``broadcast_*``), with scalars uses the
    ``_*_scalar`` operators, exactly as MXNet's NDArray does."""

    __slots__ = ("__weakref__", "_buf", "_ctx", "_data")
    __array_priority__ = 1000.0

    def __init__(self, data: np.ndarray, ctx: Context | None = None, buf: Any = None):
        # NOTE: _data is never rebound (writes go into it), so _buf, a cffi view of its memory
        # made on first use by a kernel, stays valid for the array's life.
        if isinstance(data, np.ndarray) and not _kernel_ready(data):
            # Kernels (imperative calls, bound graphs) read _data as one C-ordered block: a
            # strided view (base[::-1], base[::2]), a misaligned, byte-swapped or read-only
            # array is copied here rather than read past its buffer.
            data = np.array(data, dtype=data.dtype.newbyteorder("="), order="C", copy=True)
        self._data = data
        self._ctx = ctx or _CPU
        self._buf = buf

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> type:
        return self._data.dtype.type  # type: ignore[no-any-return]

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        return int(self._data.ndim)

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def stype(self) -> str:
        return "default"

    @property
    def T(self) -> NDArray:
        return invoke("transpose", [self], {})[0]

    def asnumpy(self) -> np.ndarray:
        return np.array(self._data, copy=True)

    def asscalar(self) -> Any:
        if self.size != 1:
            raise ShapeError(f"asscalar needs an array of size 1, this one has shape {self.shape}")
        return self._data.reshape(()).item()

    def wait_to_read(self) -> None:
        """Computation is synchronous here; present for MXNet compatibility."""

    def wait_to_write(self) -> None:
        """Computation is synchronous here; present for MXNet compatibility."""

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self._data}\n<NDArray {shape} @{self._ctx}>"

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d NDArray")
        return self.shape[0]

    def __iter__(self) -> Iterator[NDArray]:
        """The sub-arrays along the first axis (MXNet iterates through ``self[i]``)."""
        return (self[i] for i in range(len(self)))

    # MXNet 1.x: hashable by identity although ``==`` is elementwise (``x in list`` compares
    # elementwise after the identity check, as MXNet does).
    def __hash__(self) -> int:
        return id(self) // 16

    def __bool__(self) -> bool:
        if self.size == 0:
            return False
        if self.size != 1:
            raise ValueError(
                "The truth value of an NDArray with multiple elements is ambiguous."
            )
        return bool(self._data.reshape(()).item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    # ------------------------------------------------------------------ copies and views
    def copy(self) -> NDArray:
        return NDArray(self._data.copy(), self._ctx)

    def copyto(self, other: NDArray | Context) -> NDArray:
        if isinstance(other, Context):
            if other.device_type == "gpu":
                return to_gpu(self._data, other)
            return NDArray(self._data.copy(), other)
        if not isinstance(other, NDArray):
            raise TypeError(f"copyto expects an NDArray or a Context, not {type(other).__name__}")
        if other is self:
            return other
        if other.shape != self.shape:
            raise ShapeError(
                f"copyto: shape mismatch, source {self.shape} and destination {other.shape}"
            )
        if other.context.device_type == "gpu":
            to_gpu(self.asnumpy(), other.context).copyto(other)
            return other
        if type(other) is not NDArray:  # a sparse destination keeps its storage type
            _sparse().assign(other, self)
            return other
        other._data[...] = self._data.astype(other._data.dtype, copy=False)
        return other

    def as_in_context(self, ctx: Context) -> NDArray:
        return self if ctx == self._ctx else self.copyto(ctx)

    # ------------------------------------------------------------------ MXNet's extra methods
    def broadcast_like(self, other: NDArray, lhs_axes: Any = None,
                       rhs_axes: Any = None) -> NDArray:
        """This array broadcast to ``other``'s shape (MXNet's ``broadcast_like``)."""
        params = {k: v for k, v in (("lhs_axes", lhs_axes), ("rhs_axes", rhs_axes))
                  if v is not None}
        return invoke("broadcast_like", [self, other], params)[0]

    @property
    def writable(self) -> bool:
        """Whether the array can be written (always, as MXNet's NDArrays)."""
        return True

    def slice_assign(self, rhs: Any, begin: Sequence[Any], end: Sequence[Any],
                     step: Sequence[Any]) -> NDArray:
        """``self[begin:end:step] = rhs`` in place (per axis; None for the default), as
        MXNet's ``_slice_assign``; returns self."""
        self[_slices(self.shape, begin, end, step)] = rhs
        return self

    def slice_assign_scalar(self, value: float, begin: Sequence[Any], end: Sequence[Any],
                            step: Sequence[Any]) -> NDArray:
        """``self[begin:end:step] = value`` in place; returns self."""
        self[_slices(self.shape, begin, end, step)] = float(value)
        return self

    def to_dlpack_for_read(self) -> Any:
        """A DLPack capsule sharing this array's memory (a classic ``dltensor`` capsule, which
        every DLPack consumer reads)."""
        return self._data.__dlpack__()

    def to_dlpack_for_write(self) -> Any:
        """A DLPack capsule sharing this array's memory that consumers may write (a DLPack 1.0
        ``dltensor_versioned`` capsule: classic capsules carry no write permission, and numpy
        imports them read-only)."""
        return self._data.__dlpack__(max_version=(1, 0))

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._data.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._data.__dlpack_device__()  # type: ignore[no-any-return]

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        dt = dtype_of(dtype)
        if not copy and dt == self._data.dtype:
            return self
        return invoke("Cast", [self], {"dtype": dt.name})[0]

    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if "shape" in kwargs:
            shape = tuple(kwargs.pop("shape"))
        return invoke("Reshape", [self], {"shape": tuple(shape), **kwargs})[0]

    def tostype(self, stype: str) -> NDArray:
        """This array in storage type ``stype`` (a copy, or self for ``default``)."""
        if stype == "default":
            return self
        return _sparse().cast_storage(self, stype)

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> NDArray:
        key = _index_key(key)
        v = self._data[key]
        if isinstance(v, np.ndarray) and np.shares_memory(v, self._data) and v.flags.c_contiguous:
            return NDArray(v, self._ctx)  # a view, as MXNet's first-axis slices are
        return NDArray(np.array(v, copy=True).reshape(np.shape(v) or (1,)) if np.ndim(v) == 0
                       else np.ascontiguousarray(v), self._ctx)

    def __setitem__(self, key: Any, value: Any) -> None:
        key = _index_key(key)
        if isinstance(value, NDArray):
            value = value._data if value.stype == "default" else value.asnumpy()
        elif not isinstance(value, (numbers.Number, np.ndarray, np.generic, list, tuple)):
            raise TypeError(f"cannot assign a {type(value).__name__} to an NDArray")
        try:
            self._data[key] = value
        except ValueError as e:
            raise ShapeError(f"cannot assign to NDArray of shape {self.shape}: {e}") from None

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, other: Any, array_op: str, scalar_op: str, reverse_op: str | None = None,
                reflected: bool = False) -> NDArray:
        if isinstance(other, NDArray):
            lhs, rhs = (other, self) if reflected else (self, other)
            if lhs.shape == rhs.shape and array_op in _SAME_SHAPE:
                return invoke(_SAME_SHAPE[array_op], [lhs, rhs], {})[0]
            return invoke(array_op, [lhs, rhs], {})[0]
        if isinstance(other, (numbers.Number, np.generic)) and not isinstance(other, bool):
            name = reverse_op if reflected and reverse_op else scalar_op
            return invoke(name, [self], {"scalar": float(other),  # type: ignore[arg-type]
                                         "is_int": isinstance(other, numbers.Integral)})[0]
        if isinstance(other, np.ndarray):
            return self._binary(array(other, dtype=other.dtype), array_op, scalar_op,
                                reverse_op, reflected)
        return NotImplemented  # type: ignore[no-any-return]

    def __add__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_add", "_plus_scalar")

    def __radd__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_add", "_plus_scalar", reflected=True)

    def __sub__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_sub", "_minus_scalar")

    def __rsub__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_sub", "_minus_scalar", "_rminus_scalar", True)

    def __mul__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_mul", "_mul_scalar")

    def __rmul__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_mul", "_mul_scalar", reflected=True)

    def __truediv__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_div", "_div_scalar")

    def __rtruediv__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_div", "_div_scalar", "_rdiv_scalar", True)

    def __pow__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_power", "_power_scalar")

    def __rpow__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_power", "_power_scalar", "_rpower_scalar", True)

    def __mod__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_mod", "_mod_scalar")

    def __rmod__(self, o: Any) -> NDArray:
        return self._binary(o, "broadcast_mod", "_mod_scalar", "_rmod_scalar", True)

    # Comparisons (MXNet's equal/not_equal/...: broadcast_<op> for two arrays, _<op>_scalar
    # for a number; a number on the left reaches the mirrored method, 2 < x -> x > 2). The
    # result is 1/0 in the input's dtype. Other operand types raise TypeError, as in MXNet.
    def _compare(self, other: Any, name: str) -> NDArray:
        if isinstance(other, bool):
            other = int(other)
        res = self._binary(other, f"broadcast_{name}", f"_{name}_scalar")
        if res is NotImplemented:
            raise TypeError(f"type {type(other)} not supported")
        return res

    def __eq__(self, o: Any) -> NDArray:  # type: ignore[override]
        return self._compare(o, "equal")

    def __ne__(self, o: Any) -> NDArray:  # type: ignore[override]
        return self._compare(o, "not_equal")

    def __gt__(self, o: Any) -> NDArray:
        return self._compare(o, "greater")

    def __ge__(self, o: Any) -> NDArray:
        return self._compare(o, "greater_equal")

    def __lt__(self, o: Any) -> NDArray:
        return self._compare(o, "lesser")

    def __le__(self, o: Any) -> NDArray:
        return self._compare(o, "lesser_equal")

    def __neg__(self) -> NDArray:
        return invoke("_mul_scalar", [self], {"scalar": -1.0, "is_int": False})[0]

    def __abs__(self) -> NDArray:
        return invoke("abs", [self], {})[0]

    def __iadd__(self, o: Any) -> NDArray:
        return self._inplace(self + o)

    def __isub__(self, o: Any) -> NDArray:
        return self._inplace(self - o)

    def __imul__(self, o: Any) -> NDArray:
        return self._inplace(self * o)

    def __itruediv__(self, o: Any) -> NDArray:
        return self._inplace(self / o)

    def __imod__(self, o: Any) -> NDArray:
        return self._inplace(self % o)

    def _inplace(self, result: NDArray) -> NDArray:
        if result.shape != self.shape:
            raise ShapeError(f"in-place result shape {result.shape} != {self.shape}")
        self._data[...] = result._data.astype(self._data.dtype, copy=False)
        return self


def _kernel_ready(a: np.ndarray) -> bool:
    """``a`` can be handed to a generated kernel as it is: one C-ordered, aligned, writable
    block in native byte order."""
    f = a.flags
    return bool(f.c_contiguous and f.aligned and f.writeable and a.dtype.isnative)


_SAME_SHAPE = {
    "broadcast_add": "elemwise_add",
    "broadcast_sub": "elemwise_sub",
    "broadcast_mul": "elemwise_mul",
    "broadcast_div": "elemwise_div",
}


# ---------------------------------------------------------------------------------------------
# The sparse storage types: their classes subclass NDArray (``nnsym.ndarray.sparse``), so this
# module cannot import them; ``nnsym.ndarray.sparse_ops`` installs these entry points when it
# is imported (``nnsym.ndarray`` imports it).


class SparseSupport(Protocol):
    def assign(self, dst: NDArray, src: NDArray) -> None: ...

    def cast_storage(self, a: NDArray, stype: str) -> NDArray: ...

    def array(self, source: Any, ctx: Context | None, dtype: Any) -> NDArray: ...

    def zeros(self, stype: str, shape: Any, ctx: Context | None, dtype: Any) -> NDArray: ...

    def invoke(self, op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
               out: Any) -> list[NDArray]: ...


_SPARSE: list[SparseSupport] = []


def install_sparse(support: SparseSupport) -> None:
    _SPARSE[:] = [support]


def _sparse() -> SparseSupport:
    if not _SPARSE:
        raise NNSymError("sparse storage is not loaded: import nnsym.ndarray")
    return _SPARSE[0]


def _slices(shape: tuple[int, ...], begin: Sequence[Any], end: Sequence[Any],
            step: Sequence[Any]) -> tuple[slice, ...]:
    """MXNet's (begin, end, step) per leading axis as a tuple of slices."""
    if len(begin) != len(end) or len(begin) > len(shape) or (step and len(step) != len(begin)):
        raise ShapeError(f"slice: begin {tuple(begin)}, end {tuple(end)} and step "
                         f"{tuple(step)} do not fit shape {shape}")
    steps = list(step) if step else [None] * len(begin)
    return tuple(slice(b, e, s) for b, e, s in zip(begin, end, steps))


def _index_key(key: Any) -> Any:
    if isinstance(key, NDArray):
        raise NNSymError("advanced indexing with an NDArray is not supported; use basic slices")
    return key


# ---------------------------------------------------------------------------------------------
# Creation


def array(source: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """An NDArray from an NDArray, a numpy array or a (nested) sequence. The default dtype is
    the source's for an NDArray and float32 for anything else, numpy arrays of any dtype
    included (as in MXNet 1.x: ``nd.array(np.arange(3))`` is float32)."""
    if type(source) is not NDArray and (isinstance(source, NDArray) or
                                        type(source).__module__.startswith("scipy.sparse")):
        return _sparse().array(source, ctx, dtype)
    if isinstance(source, NDArray):
        src = source.asnumpy() if source.context.device_type == "gpu" else source._data
        dt = dtype_of(dtype) if dtype is not None else src.dtype
    elif isinstance(source, np.ndarray):
        src = source
        dt = dtype_of(dtype) if dtype is not None else np.dtype(np.float32)
    else:
        dt = dtype_of(dtype) if dtype is not None else np.dtype(np.float32)
        try:
            src = np.asarray(source, dtype=dt)
        except (TypeError, ValueError) as e:
            raise DTypeError(f"cannot make an NDArray from {type(source).__name__}: {e}") from None
    data = np.array(src, dtype=dt, copy=True, order="C")
    return _on(data, ctx)


def _shape_arg(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        t = tuple(int(d) for d in shape)
    except (TypeError, ValueError) as e:
        raise ShapeError(f"invalid shape {shape!r}: {e}") from None
    if any(d < 0 for d in t):
        raise ShapeError(f"negative dimension in shape {t}")
    check_dims(t)
    return t


def allocate(make: Any, shape: tuple[int, ...], dtype: np.dtype, *args: Any) -> np.ndarray:
    """``make(shape, *args, dtype)`` (np.zeros, np.empty, np.full...), with numpy's failure to
    allocate (MemoryError, or "array is too big") as a ShapeError giving the byte size."""
    try:
        return make(shape, *args, dtype)  # type: ignore[no-any-return]
    except (MemoryError, ValueError) as e:
        if isinstance(e, ValueError) and "too big" not in str(e) and "maximum" not in str(e):
            raise
        n = 1
        for d in shape:
            n *= d
        raise ShapeError(f"cannot allocate an array of shape {shape} {dtype.name}: "
                         f"{n * dtype.itemsize} bytes ({e})") from None


def _on(data: np.ndarray, ctx: Context | None) -> NDArray:
    """A new array holding ``data`` on ``ctx`` (by default the current context, ``with ctx:``;
    uploaded where it is a gpu)."""
    if ctx is None:
        ctx = current_context()
    if ctx.device_type == "gpu":
        return to_gpu(data, ctx)
    return NDArray(data, ctx)


def empty(shape: Any, ctx: Context | None = None, dtype: Any = "float32") -> NDArray:
    return _on(allocate(np.empty, _shape_arg(shape), dtype_of(dtype)), ctx)


def zeros(shape: Any, ctx: Context | None = None, dtype: Any = "float32", **kw: Any) -> NDArray:
    stype = kw.get("stype") or "default"
    if stype != "default":
        return _sparse().zeros(stype, shape, ctx, dtype)
    return _on(allocate(np.zeros, _shape_arg(shape), dtype_of(dtype)), ctx)


def ones(shape: Any, ctx: Context | None = None, dtype: Any = "float32") -> NDArray:
    return _on(allocate(np.ones, _shape_arg(shape), dtype_of(dtype)), ctx)


def full(shape: Any, val: Any, ctx: Context | None = None, dtype: Any = "float32") -> NDArray:
    return _on(allocate(np.full, _shape_arg(shape), dtype_of(dtype), val), ctx)


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1,
           ctx: Context | None = None, dtype: Any = "float32") -> NDArray:
    a = np.arange(start, stop, step, dtype=np.float64)
    if repeat > 1:
        a = np.repeat(a, repeat)
    return _on(np.ascontiguousarray(a.astype(dtype_of(dtype))), ctx)


# ---------------------------------------------------------------------------------------------
# Operators


def invoke(op: OpDef | str, inputs: Sequence[NDArray], params: dict[str, Any],
           out: NDArray | Sequence[NDArray] | None = None, *,
           storage_rules: bool = True) -> list[NDArray]:
    """Run an operator on NDArrays; returns its visible outputs. Sparse inputs or outputs go
    through storage-type dispatch (``storage_rules=False``: the dense kernel, for callers that
    have dispatched already)."""
    if isinstance(op, str):
        op = get_op(op)
    if op.python is not None:
        return _invoke_python(op, inputs, params, out)
    if op.value_shaped:
        return _invoke_value_shaped(op, inputs, params, out)
    if any(isinstance(a, NDArray) and a._ctx.device_type == "gpu" for a in inputs):
        return invoke_gpu(op, inputs, params, out)
    if storage_rules and (any(type(a) is not NDArray for a in inputs) or (
            out is not None and any(type(t) is not NDArray
                                    for t in ([out] if isinstance(out, NDArray) else out)))
            or (op.stype_rules and _sparse_from_dense(op, params, len(inputs)))):
        if all(isinstance(a, NDArray) for a in inputs):
            return _sparse().invoke(op, inputs, params, out)
    datas = []
    for i, a in enumerate(inputs):
        if not isinstance(a, NDArray):
            raise TypeError(f"{op.name}: input {i} is a {type(a).__name__}, not an NDArray")
        datas.append(a._data)
    call = get_call(op, _freeze(params), tuple(d.shape for d in datas),
                    tuple(d.dtype for d in datas))
    targets = None
    if out is not None:
        targets = [out] if isinstance(out, NDArray) else list(out)
        if not all(isinstance(t, NDArray) for t in targets):
            raise TypeError(f"{op.name}: out= takes NDArrays")
        if _writes_directly(op, call, datas, targets):
            call.run(datas, [t._data for t in targets])
            return targets
    outs = [np.empty(s, t) for s, t in zip(call.out_shapes, call.out_dtypes)]
    views = call.lowered.views if call.lowered is not None else {}
    if views:
        for oi, ii in views.items():
            outs[oi] = datas[ii].reshape(call.out_shapes[oi])
        call.run(datas, [o for i, o in enumerate(outs) if i not in views])
    else:
        call.run(datas, outs)
    n_vis = op.num_visible(call.params)
    ctx = inputs[0]._ctx if inputs else cpu()
    results = [NDArray(o, ctx) for o in outs[:n_vis]]
    if targets is not None:
        if len(targets) != len(results):
            raise ShapeError(f"{op.name}: {len(results)} outputs but {len(targets)} given in out=")
        for t, r in zip(targets, results):
            r.copyto(t)
        return targets
    return results


def _invoke_python(op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
                   out: NDArray | Sequence[NDArray] | None) -> list[NDArray]:
    """An operator that is Python code (a custom operator): shapes, dtypes and the storage
    decision from the passes, fresh outputs, then the decided Python compute with 'write'."""
    for i, a in enumerate(inputs):
        if not isinstance(a, NDArray):
            raise TypeError(f"{op.name}: input {i} is a {type(a).__name__}, not an NDArray")
        if a._ctx.device_type != "cpu":
            raise NNSymError(f"{op.name}: operators written in Python run on the cpu only; "
                             f"input {i} is on {a._ctx} (copy it with as_in_context(mx.cpu()))")
    p, _ = op.parse_params(params)
    if len(inputs) != op.num_inputs(p):
        raise ShapeError(f"{op.name}: {len(inputs)} inputs given, it takes {op.num_inputs(p)}: "
                         f"{list(op.input_names(p))}")
    shapes = [tuple(a.shape) for a in inputs]
    dtypes = [np.dtype(a.dtype) for a in inputs]
    out_s, out_t = infer_one(op, p, shapes, dtypes, op.name)
    dec = infer_storage(op, p, tuple(SType.parse(a.stype) for a in inputs))
    kern = dec.kernel
    if not isinstance(kern, PythonCompute) or kern.uses_forward_state:
        raise NNSymError(f"{op.name}: cannot be called on its own (it runs inside a graph)")
    ctx = inputs[0]._ctx if inputs else current_context()
    outs: list[NDArray] = []
    for st, shp, dt in zip(dec.outs, out_s, out_t):
        if st == SType.DEFAULT:
            outs.append(NDArray(np.zeros(tuple(shp), dt), ctx))
        else:
            outs.append(_sparse().zeros(st.label, tuple(shp), ctx, dt))
    state = kern.create_state(op.name, p, ctx, shapes, dtypes)
    kern.run(op.name, p, state, False, ["write"] * len(outs), list(inputs), outs)
    results = outs[: op.num_visible(p)]
    if out is not None:
        targets = [out] if isinstance(out, NDArray) else list(out)
        if len(targets) != len(results):
            raise ShapeError(f"{op.name}: {len(results)} outputs but {len(targets)} given in out=")
        for t, r in zip(targets, results):
            r.copyto(t)
        return targets
    return results


def _invoke_value_shaped(op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
                         out: NDArray | Sequence[NDArray] | None) -> list[NDArray]:
    """A value-shaped operator (``OpDef.value_shaped``) runs its host storage kernel; gpu
    inputs are copied to the host and the dense results back to their device."""
    gpu = next((a._ctx for a in inputs if isinstance(a, NDArray)
                and a._ctx.device_type == "gpu"), None)
    if gpu is None:
        return _sparse().invoke(op, inputs, params, out)
    host = [a.as_in_context(_CPU) if isinstance(a, GPUNDArray) else a for a in inputs]
    results = [r.as_in_context(gpu) if r.stype == "default" else r
               for r in _sparse().invoke(op, host, params, None)]
    if out is None:
        return results
    targets = [out] if isinstance(out, NDArray) else list(out)
    if len(targets) != len(results):
        raise ShapeError(f"{op.name}: {len(results)} outputs but {len(targets)} given in out=")
    for tgt, r in zip(targets, results):
        r.copyto(tgt)
    return targets


def _sparse_from_dense(op: OpDef, params: dict[str, Any], n_in: int) -> bool:
    """Whether the storage rules give dense inputs anything but the dense kernel (a sparse
    output: Embedding's sparse_grad, cast_storage to csr)."""
    if not any(all(s in (None, SType.DEFAULT) for s in r.ins) for r in op.stype_rules):
        return False
    p, _ = op.parse_params(params)
    dec = infer_storage(op, p, (SType.DEFAULT,) * n_in)
    return dec.dispatch != DispatchMode.FCOMPUTE or any(s != SType.DEFAULT for s in dec.outs)


def _writes_directly(op: OpDef, call: Any, datas: list[np.ndarray],
                     targets: list[NDArray]) -> bool:
    """``out=`` arrays can take the kernel's outputs as they are: every output is given, with
    its shape and dtype, C-contiguous and writable, and none overlaps an input unless it is that
    input exactly and the operator allows that pair in place."""
    if len(targets) != len(call.out_shapes) or call.views:
        return False
    for oi, t in enumerate(targets):
        d = t._data
        if (d.shape != tuple(call.out_shapes[oi]) or d.dtype != call.out_dtypes[oi]
                or not d.flags.c_contiguous or not d.flags.writeable):
            return False
        for ii, x in enumerate(datas):
            if np.may_share_memory(d, x) and not (
                (ii, oi) in op.inplace and x.shape == d.shape
                and x.__array_interface__["data"][0] == d.__array_interface__["data"][0]
            ):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# Arrays on ``nnsym.gpu(i)``: device memory (a ``cupy.ndarray``, or emulated device memory under
# ``NNSYM_CUDA=emulate``) and operators run as the CUDA twins of their C kernels.
#
# An operator call on gpu arrays goes through the same lowering as on the CPU (shape and dtype
# inference, the dense kernel's launches with their ``ia``/``fa``), then launches the CUDA
# kernels of those launches (``nnsym.cuda.runtime``). Inputs must all be on the same gpu; dense
# storage only. ``copyto``/``as_in_context`` move arrays between the CPU and gpus.


class ContextError(NNSymError, ValueError):
    """Arrays of one operator call live on different devices."""


class GPUNDArray(NDArray):
    """A dense array in device memory (``_data``: the backend's device array)."""

    __slots__ = ()

    @property
    def stype(self) -> str:
        return "default"

    def asnumpy(self) -> np.ndarray:
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
        if self.size == 0:
            return False
        if self.size != 1:
            raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")
        return bool(self.asscalar())

    def copy(self) -> NDArray:
        return self.copyto(self._ctx)

    def copyto(self, other: NDArray | Context) -> NDArray:
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
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return invoke("Reshape", [self], {"shape": tuple(shape), **kwargs})[0]

    def __getitem__(self, key: Any) -> NDArray:
        raise NNSymError("indexing a gpu NDArray is not supported yet; use slice/take "
                         "operators or copy it to the cpu (as_in_context(nnsym.cpu()))")

    def __setitem__(self, key: Any, value: Any) -> None:
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
    if DENSE not in op.kernels:
        raise NoCudaKernelError(f"operator {op.name} has no generated kernel, so it cannot "
                                "run on a gpu context")
    low = lower(op, params, shapes, dtypes, out_s, out_t, ["write"] * len(out_s)).lowered
    res = ([tuple(s) for s in out_s], [np.dtype(t) for t in out_t], low,
           op.num_visible(params))
    with _LOCK:
        _LOWERED[key] = res
    return res


def invoke_gpu(op: OpDef, inputs: Sequence[NDArray], params: dict[str, Any],
               out: NDArray | Sequence[NDArray] | None = None,
               ctx: Context | None = None) -> list[NDArray]:
    """Run ``op`` on gpu arrays: the CPU lowering's launches as CUDA kernels (on ``ctx``, default
    gpu(0), for an operator without inputs such as a sampler)."""
    for i, a in enumerate(inputs):
        if not isinstance(a, NDArray):
            raise TypeError(f"{op.name}: input {i} is a {type(a).__name__}, not an NDArray")
    ctxs = {a._ctx for a in inputs}
    if len(ctxs) > 1 or any(not isinstance(a, GPUNDArray) for a in inputs):
        raise ContextError(
            f"operator {op.name}: inputs are on different devices "
            f"({', '.join(str(a._ctx) for a in inputs)}); move them with as_in_context first")
    ctx = next(iter(ctxs)) if ctxs else (ctx or Context("gpu", 0))
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
