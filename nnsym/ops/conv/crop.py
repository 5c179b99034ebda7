"""Crop: cut a (h, w) window out of 4-D NCHW data, sized by h_w or by a second input."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.ops.common.lowering import c_strides, strided_lowering
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class CropParams(Params):
    num_args: int = field(lower=1, upper=2, doc="1: crop to h_w; 2: crop to the second input.")
    offset: tuple[int, ...] = field(default=(0, 0), lower=0, doc="Window corner (y, x).")
    h_w: tuple[int, ...] = field(default=(0, 0), lower=0, doc="Window size (h, w).")
    center_crop: bool = field(default=False, doc="Centre the window (ignores offset).")

    def __post_init__(self) -> None:
        for name, t in (("offset", self.offset), ("h_w", self.h_w)):
            if len(t) != 2:
                raise ValueError(f"{name}={t} must have two entries (y, x)")


def crop_inputs(p: CropParams) -> tuple[str, ...]:
    return ("data", "crop_like") if p.num_args == 2 else ("data",)


def _window(p: CropParams, data: tuple[int, ...], hw: tuple[int, int]) -> tuple[int, int]:
    """The window's top-left corner; RuleError when it does not fit."""
    h, w = hw
    H, W = data[2], data[3]
    if h > H or w > W:
        raise RuleError(f"crop size {(h, w)} exceeds data {shape_str(data)}")
    if p.center_crop:
        return (H - h) // 2, (W - w) // 2
    oy, ox = p.offset
    if oy > H - h or ox > W - w:
        raise RuleError(
            f"offset={p.offset} leaves no room for a {(h, w)} window in data {shape_str(data)}"
        )
    return oy, ox


def crop_shape(p: CropParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != 4:
        raise RuleError(f"data has shape {shape_str(data)}; Crop needs 4-D (N, C, y, x) data")
    if p.num_args == 2:
        like = ins[1]
        if like is None or None in like[2:4]:
            return list(ins), list(outs)
        if len(like) != 4:
            raise RuleError(f"crop_like has shape {shape_str(like)}; it must be 4-D")
        hw = (like[2], like[3])
    else:
        hw = (p.h_w[0], p.h_w[1])
    if None not in data[2:]:
        _window(p, data, hw)
    return list(ins), [(data[0], data[1], *hw)]


def crop_reference(p: CropParams, data: np.ndarray, crop_like: np.ndarray | None = None):
    hw = crop_like.shape[2:4] if crop_like is not None else p.h_w
    oy, ox = _window(p, data.shape, (hw[0], hw[1]))
    return data[:, :, oy : oy + hw[0], ox : ox + hw[1]].copy()


def crop_lowering(call: KernelCall) -> Lowered:
    data, out = call.in_shapes[0], call.out_shapes[0]
    oy, ox = _window(call.params, data, (out[2], out[3]))
    st = c_strides(data)
    low = strided_lowering(call, out, st, oy * st[2] + ox * st[3])
    n = len(call.in_shapes)  # crop_like is read for its shape only
    return Lowered(tuple(replace(la, args=(0, n)) for la in low.launches))


def crop_backward_lowering(call: KernelCall) -> Lowered:
    g, data = call.in_shapes[0], call.in_shapes[1]
    if size(data) == 0:
        return Lowered()
    oy, ox = _window(call.params, data, (g[2], g[3]))
    spec = KernelSpec.make(
        "conv/crop_backward.c.j2", dtype=call.out_dtypes[0].name, req=call.out_req(0)
    )
    ia = (data[0] * data[1], data[2], data[3], g[2], g[3], oy, ox)
    return Lowered((Launch(spec, ia, args=(0, 2)),))


BACKWARD_CROP = register(
    OpDef(
        name="_backward_Crop",
        params=CropParams,
        inputs=("ograd", "data"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
        ignore_inputs=(1,),
        kernels={DENSE: Kernel(crop_backward_lowering)},
        differentiable=False,
        doc="Gradient of Crop: the output gradient placed back in a zero data gradient.",
    )
)


def crop_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """The data gets the output gradient in its window; crop_like (shape only) gets none."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_CROP, node, [g, node.inputs[0]])
    return [Entry(b, 0), *([None] * (len(node.inputs) - 1))]


CROP = register(
    OpDef(
        name="Crop",
        params=CropParams,
        inputs=crop_inputs,
        key_var_num_args="num_args",
        infer_shape=crop_shape,
        infer_type=same_dtype,
        ignore_inputs=lambda p: (1,) if p.num_args == 2 else (),
        reference=crop_reference,
        kernels={DENSE: Kernel(crop_lowering)},
        grad=crop_grad,
        doc="Crops 4-D data to h_w or to the spatial size of a second input.",
        examples=(
            Example(((2, 3, 5, 6),), {"num_args": 1, "h_w": (2, 3), "offset": (1, 2)}),
            Example(((2, 3, 5, 6),), {"num_args": 1, "h_w": (2, 2), "center_crop": True}),
            Example(((2, 1, 5, 6), (1, 4, 3, 4)), {"num_args": 2, "center_crop": True}),
            Example(((1, 2, 4, 4), (3, 1, 2, 3)), {"num_args": 2, "offset": (2, 1)},
                    dtype="float64"),
        ),
        bad_params=(
            {},
            {"num_args": 3},
            {"num_args": 1, "h_w": (2,)},
            {"num_args": 1, "offset": (-1, 0)},
        ),
    )
)
