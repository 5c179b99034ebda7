"""Pad (alias pad): constant, edge or reflect padding of a 4-D or 5-D input.

As in MXNet 1.9.1 only the spatial axes (from the third on) may be padded, and reflection
padding must be shorter than the padded axis. The kernel is ``shape_pad.c.j2``: a gather per
output element; the gradient of constant padding is the slice of the output gradient at the
input's place (the shared strided copy), that of edge and reflect padding a gather of every
output gradient element read from each input element.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.lowering import c_strides, strided_lowering
from nnsym.ops.shape.helpers import Dims, _merge, _shape_only_backward, _with_data
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class PadParams(Params):
    mode: str = field(
        choices=("constant", "edge", "reflect"),
        doc='Padding type to use. "constant" pads with `constant_value` "edge" pads using the '
        'edge values of the input array "reflect" pads by reflecting values with respect to the '
        "edges.",
    )
    pad_width: tuple[int, ...] = field(
        lower=0,
        doc="Widths of the padding regions applied to the edges of each axis. It is a tuple of "
        "integer padding widths for each axis of the format ``(before_1, after_1, ... , "
        "before_N, after_N)``. It should be of length ``2*N`` where ``N`` is the number of "
        "dimensions of the array.This is equivalent to pad_width in numpy.pad, but flattened.",
    )
    constant_value: float = field(
        default=0.0, doc='The value used for padding when `mode` is "constant".'
    )


def _check(p: PadParams, nd: int) -> None:
    if nd not in (4, 5):
        raise RuleError(f"Pad supports only 4-D or 5-D inputs, got {nd} dimensions")
    if len(p.pad_width) != 2 * nd:
        raise RuleError(
            f"pad_width {p.pad_width} has {len(p.pad_width)} entries; a {nd}-D input needs "
            f"{2 * nd} (before and after each axis)"
        )
    if any(p.pad_width[:4]):
        raise RuleError(
            f"pad_width {p.pad_width}: the first two axes cannot be padded (only the spatial ones)"
        )


def pad_shape(p: PadParams, ins: list, outs: list) -> tuple[list, list]:
    d, o = ins[0], outs[0]
    if d is None and o is None:
        return list(ins), list(outs)
    nd = len(d) if d is not None else len(o)
    _check(p, nd)
    pw = p.pad_width
    if o is not None:
        if len(o) != nd:
            raise RuleError(f"input {shape_str(d)} and output {shape_str(o)} differ in rank")
        back: Dims = []
        for k, x in enumerate(o):
            w = pw[2 * k] + pw[2 * k + 1]
            if x is not None and x < w:
                raise RuleError(f"output {shape_str(o)} is smaller than the padding {pw}")
            back.append(None if x is None else x - w)
        d = _merge(d, tuple(back), "the input and the output without its padding")
    assert d is not None
    for k, x in enumerate(d):
        before, after = pw[2 * k], pw[2 * k + 1]
        if x is None or not (before or after) or p.mode == "constant":
            continue
        if x == 0:
            raise RuleError(f"{p.mode} padding of {shape_str(d)}: axis {k} is empty")
        if p.mode == "reflect" and (before >= x or after >= x):
            raise RuleError(
                f"reflect padding ({before}, {after}) of axis {k} of {shape_str(d)} must be "
                f"smaller than its size {x}"
            )
    out = tuple(
        None if x is None else x + pw[2 * k] + pw[2 * k + 1] for k, x in enumerate(d)
    )
    return [d], [out]


def _pad_ia(p: PadParams, shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape, *(p.pad_width[2 * k] for k in range(len(shape))), *out)


def pad_lowering(call: KernelCall) -> Lowered:
    shape, out = call.in_shapes[0], call.out_shapes[0]
    if size(out) == 0:
        return Lowered()
    p = call.params
    spec = KernelSpec.make("shape/shape_pad.c.j2", kind="forward", nd=len(shape), mode=p.mode,
                           dtype=call.out_dtypes[0].name, req=call.req)
    return Lowered((Launch(spec, _pad_ia(p, shape, out), (float(p.constant_value),)),))


def pad_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data (shape only), dx]: constant padding takes the output gradient at the
    input's place; edge and reflect padding also add what the padding read from the input."""
    g, shape = call.in_shapes
    p = call.params
    if size(shape) == 0:
        return Lowered()
    if p.mode == "constant":
        st = c_strides(g)
        off = sum(p.pad_width[2 * k] * st[k] for k in range(len(g)))
        low = strided_lowering(call, shape, st, off)
    else:
        spec = KernelSpec.make("shape/shape_pad.c.j2", kind="backward", nd=len(shape),
                               mode=p.mode, dtype=call.out_dtypes[0].name, req=call.req)
        low = Lowered((Launch(spec, _pad_ia(p, shape, g)),))
    return Lowered(tuple(dataclasses.replace(ln, args=(0, 2)) for ln in low.launches))


def pad_reference(p: PadParams, data: np.ndarray) -> np.ndarray:
    pairs = [(p.pad_width[2 * k], p.pad_width[2 * k + 1]) for k in range(data.ndim)]
    if p.mode == "constant":
        value = np.array(p.constant_value).astype(data.dtype)
        return np.pad(data, pairs, mode="constant", constant_values=value)
    if p.mode == "edge":
        return np.pad(data, pairs, mode="edge")
    return np.pad(data, pairs, mode="reflect")


BACKWARD_PAD = _shape_only_backward(
    "Pad", PadParams, pad_backward_lowering,
    "Gradient of Pad: the output gradient at the input's place, plus (edge, reflect) the "
    "padding's gradient added onto the elements it copied.")

PAD = register(
    OpDef(
        name="Pad",
        aliases=("pad",),
        params=PadParams,
        infer_shape=pad_shape,
        infer_type=same_dtype,
        reference=pad_reference,
        kernels={DENSE: Kernel(pad_lowering)},
        grad=_with_data(BACKWARD_PAD),
        doc="Pads the spatial axes (the third on) of a 4-D or 5-D input with a constant, the "
        "edge values or their reflection.",
        examples=(
            Example(((1, 2, 3, 4),), {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 3, 1)}),
            Example(((2, 1, 3, 4),), {"mode": "constant", "pad_width": (0, 0, 0, 0, 0, 1, 2, 0),
                                      "constant_value": 1.5}, dtype="float64"),
            Example(((1, 2, 3, 4),), {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 1, 1, 1),
                                      "constant_value": -3}, dtype="int32"),
            Example(((1, 2, 3, 4),), {"mode": "edge", "pad_width": (0, 0, 0, 0, 2, 1, 3, 4)}),
            Example(((1, 2, 1, 3),), {"mode": "edge", "pad_width": (0, 0, 0, 0, 2, 1, 0, 2)},
                    dtype="float64"),
            Example(((1, 2, 3, 4),), {"mode": "reflect", "pad_width": (0, 0, 0, 0, 2, 1, 3, 2)}),
            Example(((2, 1, 3, 4, 5),), {"mode": "reflect",
                                         "pad_width": (0, 0, 0, 0, 1, 2, 0, 3, 4, 1)},
                    dtype="float64"),
            Example(((1, 1, 2, 3, 2),), {"mode": "edge",
                                         "pad_width": (0, 0, 0, 0, 1, 1, 2, 0, 0, 1)},
                    dtype="int32"),
        ),
        bad_params=(
            {"pad_width": (0, 0, 0, 0, 1, 1, 1, 1)},
            {"mode": "wrap", "pad_width": (0, 0, 0, 0, 1, 1, 1, 1)},
            {"mode": "edge"},
            {"mode": "edge", "pad_width": (0, 0, 0, 0, -1, 1, 1, 1)},
        ),
    )
)
