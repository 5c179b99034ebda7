"""``nnsym.nd.<op>`` functions, generated from the registry (same names as ``nnsym.sym``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.errors import CompositionError
from nnsym.ir.fluent import split_positional
from nnsym.ir.namespace import op_docstring
from nnsym.ir.opdef import DENSE, OpDef
from nnsym.ndarray import fastcall
from nnsym.ndarray.ndarray import NDArray, invoke
from nnsym.runtime.imperative import _CHAR_ARR, _freeze, _from_buffer, get_call


def make_function(op: OpDef, func_name: str) -> Any:
    fast: dict[Any, Any] = {}  # (params, input shapes/dtypes) -> (compiled call, n visible)
    wrapped: Any = None  # the FastOp around fn (fn itself without the C fast path)
    compiler.RESET_HOOKS.append(fast.clear)  # decided for the old backend

    def fn(*args: NDArray, out: Any = None, name: str | None = None, **kwargs: Any) -> Any:
        if out is None:
            # Fast path: arrays positionally, plain parameter values; one dict lookup.
            try:
                hit = fast.get(_key(args, kwargs))
            except (AttributeError, TypeError):
                hit = None
            if hit is not None:
                call, n_vis, out_specs = hit
                if not kwargs and name is None and n_vis == 1 and wrapped is not fn:
                    # the C table lacked this signature (evicted): register it again
                    fastcall.register(wrapped, call, [a._data.shape for a in args],
                                      [a._data.dtype for a in args])
                bufs = []
                for a in args:
                    b = a._buf
                    if b is None:
                        b = a._buf = _from_buffer(_CHAR_ARR, a._data, False)
                    bufs.append(b)
                outs = []
                for shp, dt in out_specs:
                    o = np.empty(shp, dt)
                    outs.append(o)
                    bufs.append(_from_buffer(_CHAR_ARR, o, True))
                call.launch(bufs)
                ctx = args[0]._ctx if args else None
                if n_vis == 1:
                    return NDArray(outs[0], ctx, bufs[len(args)])
                return [NDArray(o, ctx, bufs[len(args) + i]) for i, o in enumerate(outs[:n_vis])]
        if any(not isinstance(a, NDArray) for a in args):  # MXNet's positional parameters
            pos, kwargs = split_positional((func_name, op.name), args, kwargs,
                                           lambda v: isinstance(v, NDArray))
            args = tuple(pos)
        arrays = {k: v for k, v in kwargs.items() if isinstance(v, NDArray)}
        params = {k: v for k, v in kwargs.items() if not isinstance(v, NDArray)}
        inputs = list(args)
        if op.key_var_num_args and op.key_var_num_args not in params:
            params[op.key_var_num_args] = len(inputs)
        if arrays:
            p, _ = op.parse_params(params)
            names = op.input_names(p)
            slots: list[NDArray | None] = inputs + [None] * (len(names) - len(inputs))
            for k, v in arrays.items():
                if k not in names:
                    raise CompositionError(f"{op.name}: unknown input {k!r}; inputs: {names}")
                slots[names.index(k)] = v
            if any(s is None for s in slots):
                missing = [n for n, s in zip(names, slots) if s is None]
                raise CompositionError(f"{op.name}: missing input array(s) {missing}")
            inputs = [s for s in slots if s is not None]
        res = invoke(op, inputs, params, out=out)
        # the fast path is the dense kernel: not for results the storage rules made sparse
        if out is None and not arrays and DENSE in op.kernels and all(
                type(a) is NDArray for a in args) and all(
                type(r) is NDArray for r in res):
            try:
                key = _key(args, kwargs)
                datas = [a._data for a in args]
                call = _compiled(op, params, datas)
                if call.lowered is not None and not call.views:
                    fast[key] = (call, len(res), call.out_specs)
                    if not kwargs and len(res) == 1:
                        if wrapped is fn:  # the first compiled call: load the fast path now
                            fastcall.module()
                        fastcall.register(wrapped, call, [d.shape for d in datas],
                                          [d.dtype for d in datas])
            except TypeError:
                pass  # unhashable parameter values: no fast path for this call
        return res[0] if len(res) == 1 else res

    fn.__name__ = fn.__qualname__ = func_name
    fn.__module__ = "nnsym.ndarray"
    fn.__doc__ = op_docstring(op, func_name).replace("Symbol", "NDArray")
    def upgrade(fast: Any) -> None:
        nonlocal wrapped
        wrapped = fast

    wrapped = fastcall.wrap(fn, upgrade)
    return wrapped


def _key(args: tuple[NDArray, ...], kwargs: dict[str, Any]) -> Any:
    """The fast-path cache key: parameter items and every input's shape and dtype."""
    if len(args) == 1:
        d = args[0]._data
        return (d.shape, d.dtype, *kwargs.items()) if kwargs else (d.shape, d.dtype)
    if len(args) == 2:
        d, e = args[0]._data, args[1]._data
        key = (d.shape, d.dtype, e.shape, e.dtype)
        return (*key, *kwargs.items()) if kwargs else key
    return (*[(a._data.shape, a._data.dtype) for a in args], *kwargs.items())


def _compiled(op: OpDef, params: dict[str, Any], datas: list[Any]) -> Any:
    return get_call(op, _freeze(params), tuple(d.shape for d in datas),
                    tuple(d.dtype for d in datas))
