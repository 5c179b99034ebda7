"""MXNet 1.9.1's fluent methods: ``x.sum(1)`` is ``nd.sum(x, 1)``. Per method, the operator it
calls and that operator's positional argument names in MXNet's generated function (the first
is the array itself), which is how MXNet maps positional arguments; read from MXNet 1.9.1's
``NDArray`` and ``Symbol`` classes and ``inspect.signature`` of its operator functions
(tests/golden/api/mxnet-methods.json holds the raw data)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

NDARRAY_FLUENT: dict[str, tuple[str, tuple[str, ...]]] = {
    "abs": ("abs", ("data",)),
    "arccos": ("arccos", ("data",)),
    "arccosh": ("arccosh", ("data",)),
    "arcsin": ("arcsin", ("data",)),
    "arcsinh": ("arcsinh", ("data",)),
    "arctan": ("arctan", ("data",)),
    "arctanh": ("arctanh", ("data",)),
    "argmax": ("argmax", ("data", "axis", "keepdims")),
    "argmax_channel": ("argmax_channel", ("data",)),
    "argmin": ("argmin", ("data", "axis", "keepdims")),
    "argsort": ("argsort", ("data", "axis", "is_ascend", "dtype")),
    "broadcast_axes": ("broadcast_axes", ("data", "axis", "size")),
    "broadcast_to": ("broadcast_to", ("data", "shape")),
    "cbrt": ("cbrt", ("data",)),
    "ceil": ("ceil", ("data",)),
    "clip": ("clip", ("data", "a_min", "a_max")),
    "cos": ("cos", ("data",)),
    "cosh": ("cosh", ("data",)),
    "degrees": ("degrees", ("data",)),
    "depth_to_space": ("depth_to_space", ("data", "block_size")),
    "diag": ("diag", ("data", "k", "axis1", "axis2")),
    "exp": ("exp", ("data",)),
    "expand_dims": ("expand_dims", ("data", "axis")),
    "expm1": ("expm1", ("data",)),
    "fix": ("fix", ("data",)),
    "flatten": ("flatten", ("data",)),
    "flip": ("flip", ("data", "axis")),
    "floor": ("floor", ("data",)),
    "log": ("log", ("data",)),
    "log10": ("log10", ("data",)),
    "log1p": ("log1p", ("data",)),
    "log2": ("log2", ("data",)),
    "log_softmax": ("log_softmax", ("data", "axis", "temperature", "dtype", "use_length")),
    "max": ("max", ("data", "axis", "keepdims", "exclude")),
    "mean": ("mean", ("data", "axis", "keepdims", "exclude")),
    "min": ("min", ("data", "axis", "keepdims", "exclude")),
    "nanprod": ("nanprod", ("data", "axis", "keepdims", "exclude")),
    "nansum": ("nansum", ("data", "axis", "keepdims", "exclude")),
    "norm": ("norm", ("data", "ord", "axis", "out_dtype", "keepdims")),
    "one_hot": ("one_hot", ("indices", "depth", "on_value", "off_value", "dtype")),
    "ones_like": ("ones_like", ("data",)),
    "pad": ("pad", ("data", "mode", "pad_width", "constant_value")),
    "pick": ("pick", ("data", "index", "axis", "keepdims", "mode")),
    "prod": ("prod", ("data", "axis", "keepdims", "exclude")),
    "radians": ("radians", ("data",)),
    "rcbrt": ("rcbrt", ("data",)),
    "reciprocal": ("reciprocal", ("data",)),
    "relu": ("relu", ("data",)),
    "repeat": ("repeat", ("data", "repeats", "axis")),
    "reshape_like": (
        "reshape_like",
        ("lhs", "rhs", "lhs_begin", "lhs_end", "rhs_begin", "rhs_end"),
    ),
    "rint": ("rint", ("data",)),
    "round": ("round", ("data",)),
    "rsqrt": ("rsqrt", ("data",)),
    "shape_array": ("shape_array", ("data",)),
    "sigmoid": ("sigmoid", ("data",)),
    "sign": ("sign", ("data",)),
    "sin": ("sin", ("data",)),
    "sinh": ("sinh", ("data",)),
    "size_array": ("size_array", ("data",)),
    "slice": ("slice", ("data", "begin", "end", "step")),
    "slice_axis": ("slice_axis", ("data", "axis", "begin", "end")),
    "slice_like": ("slice_like", ("data", "shape_like", "axes")),
    "softmax": ("softmax", ("data", "length", "axis", "temperature", "dtype", "use_length")),
    "softmin": ("softmin", ("data", "axis", "temperature", "dtype", "use_length")),
    "sort": ("sort", ("data", "axis", "is_ascend")),
    "space_to_depth": ("space_to_depth", ("data", "block_size")),
    "split": ("split", ("data", "num_outputs", "axis", "squeeze_axis")),
    "sqrt": ("sqrt", ("data",)),
    "square": ("square", ("data",)),
    "squeeze": ("squeeze", ("data", "axis")),
    "sum": ("sum", ("data", "axis", "keepdims", "exclude")),
    "swapaxes": ("swapaxes", ("data", "dim1", "dim2")),
    "take": ("take", ("a", "indices", "axis", "mode")),
    "tan": ("tan", ("data",)),
    "tanh": ("tanh", ("data",)),
    "tile": ("tile", ("data", "reps")),
    "topk": ("topk", ("data", "axis", "k", "ret_typ", "is_ascend", "dtype")),
    "tostype": ("cast_storage", ("data", "stype")),
    "transpose": ("transpose", ("data", "axes")),
    "trunc": ("trunc", ("data",)),
    "zeros_like": ("zeros_like", ("data",)),
}

# Symbol's: the same but tostype, plus three Symbol defines by MXNet's fluent pattern
SYMBOL_FLUENT: dict[str, tuple[str, tuple[str, ...]]] = {
    **{k: v for k, v in NDARRAY_FLUENT.items() if k != "tostype"},
    "astype": ("cast", ("data", "dtype", "attr")),
    "broadcast_like": ("broadcast_like", ("lhs", "rhs", "lhs_axes", "rhs_axes", "attr")),
    "reshape": ("reshape", ("data", "shape", "reverse", "target_shape", "keep_highest", "attr")),
}


def fluent_kwargs(method: str, names: tuple[str, ...], args: tuple[object, ...],
                  kwargs: dict[str, object]) -> dict[str, object]:
    """``kwargs`` with the positional ``args`` of ``x.method(*args)`` named as MXNet names them
    (``names[0]`` is the array itself)."""
    if len(args) > len(names) - 1:
        raise TypeError(f"{method}() takes at most {len(names) - 1} positional arguments "
                        f"({', '.join(names[1:])}), {len(args)} given")
    out = dict(kwargs)
    for n, v in zip(names[1:], args):
        if n in out:
            raise TypeError(f"{method}() got multiple values for argument {n!r}")
        out[n] = v
    return out


def install(cls: type, table: dict[str, tuple[str, tuple[str, ...]]], functions: dict[str, object],
            namespace: object) -> list[str]:
    """Adds to ``cls`` each fluent method of ``table`` whose operator is registered (a function
    in ``functions``) and which ``cls`` does not define itself; the method calls the operator's
    function as ``namespace`` holds it at call time. Returns the methods added."""
    added = []
    for method, (op_name, names) in table.items():
        if op_name not in functions or method in vars(cls) or any(
                method in vars(b) for b in cls.__mro__[1:] if b is not object):
            continue

        def fluent(self: object, *args: object, _m: str = method, _op: str = op_name,
                   _names: tuple[str, ...] = names, **kwargs: object) -> object:
            fn = getattr(namespace, _op)
            return fn(self, **fluent_kwargs(_m, _names, args, kwargs))

        fluent.__name__ = fluent.__qualname__ = method
        fluent.__doc__ = f"``{method}(...)`` is ``{op_name}(self, ...)`` (MXNet's fluent method)."
        setattr(cls, method, fluent)
        added.append(method)
    return added


@functools.lru_cache(maxsize=1)
def _mxnet_signatures() -> dict[str, dict[str, list[str]]]:
    """Per MXNet 1.9.1 operator name: ``args``, the positional-or-keyword arguments of its
    generated Python function (inputs, then parameters, in MXNet's order; ``out``/``name`` left
    out), and ``inputs``, those that are inputs (default None rather than ``_Null``), as
    ``inspect.signature`` gives them in the reference build (``mxnet_signatures.json``)."""
    data: dict[str, dict[str, list[str]]] = json.loads(
        Path(__file__).with_name("mxnet_signatures.json").read_text())
    return data


def split_positional(names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any],
                     is_array: Callable[[Any], bool]) -> tuple[list[Any], dict[str, Any]]:
    """``op(*args, **kwargs)`` with positional parameters (``nd.one_hot(x, 4)``), named by
    MXNet's argument order for the first of ``names`` (operator name, then canonical name) that
    MXNet has: positional inputs stay positional (a None input is "not given", and the inputs
    after it are passed by name), parameters become keywords. TypeError where MXNet has no
    such signature or too many values are given."""
    entry = next((_mxnet_signatures()[n] for n in names if n in _mxnet_signatures()), None)
    if entry is None:
        if all(is_array(a) or a is None for a in args):
            return [a for a in args if a is not None], dict(kwargs)
        return list(args), dict(kwargs)  # the caller's own error for a non-array input
    sig, inputs = entry["args"], set(entry["inputs"])
    pos: list[Any] = []
    kw = dict(kwargs)
    gap = False
    for i, a in enumerate(args):
        if i >= len(sig):
            if all(n in inputs for n in sig):  # variable inputs (add_n, Concat)
                pos.append(a)
                continue
            raise TypeError(f"{names[0]}() takes at most {len(sig)} positional arguments "
                            f"({', '.join(sig)}), {len(args)} given")
        n = sig[i]
        if n in kw:
            raise TypeError(f"{names[0]}() got multiple values for argument {n!r}")
        if a is None:  # "not given", as MXNet: an input left to a new variable, a default
            gap = gap or n in inputs
        elif n in inputs and not gap:
            pos.append(a)  # the caller checks it is an array
        else:
            kw[n] = a
    return pos, kw
