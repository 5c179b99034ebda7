"""im2col and col2im: sliding windows of an image as columns (N, C * prod(kernel), windows),
and the columns summed back into an image. Each is the other's gradient."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class Im2colParams(Params):
    kernel: tuple[int, ...] = field(doc="Window size (1 to 3 spatial axes).")
    stride: tuple[int, ...] = field(default=(), doc="Window step per axis (default 1).")
    dilate: tuple[int, ...] = field(default=(), doc="Window dilation per axis (default 1).")
    pad: tuple[int, ...] = field(default=(), doc="Zero padding per axis (default 0).")


@dataclass(frozen=True, kw_only=True)
class Col2imParams(Im2colParams):
    output_size: tuple[int, ...] = field(doc="Spatial shape of the image.")


def _geometry(p: Any) -> tuple[tuple[int, ...], ...]:
    s = len(p.kernel)
    if not 1 <= s <= 3:
        raise RuleError(f"kernel {p.kernel} must have 1 to 3 axes")
    stride = p.stride or (1,) * s
    dilate = p.dilate or (1,) * s
    pad = p.pad or (0,) * s
    for what, v in (("stride", stride), ("dilate", dilate), ("pad", pad)):
        if len(v) != s:
            raise RuleError(f"{what} {v} must have {s} axes like kernel {p.kernel}")
    if min(p.kernel) < 1 or min(stride) < 1 or min(dilate) < 1 or min(pad) < 0:
        raise RuleError("kernel, stride and dilate must be positive and pad non-negative")
    return p.kernel, stride, dilate, pad


def _windows(p: Any, img: tuple) -> tuple[int, ...]:
    ker, st, di, pd = _geometry(p)
    out = []
    for i, k, s, d, q in zip(img, ker, st, di, pd, strict=True):
        n = (i + 2 * q - d * (k - 1) - 1) // s + 1
        if n < 1:
            raise RuleError(f"the window {ker} does not fit the image {shape_str(img)}")
        out.append(n)
    return tuple(out)


def im2col_shape(p: Im2colParams, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is None or any(x is None for x in d):
        return list(ins), list(outs)
    if len(d) != 2 + len(p.kernel):
        raise RuleError(f"data {shape_str(d)} must have 2 + {len(p.kernel)} axes")
    k = size(p.kernel)
    return [d], [(d[0], d[1] * k, size(_windows(p, tuple(d[2:]))))]


def col2im_shape(p: Col2imParams, ins: list, outs: list) -> tuple[list, list]:
    d = ins[0]
    if d is None or any(x is None for x in d):
        return list(ins), list(outs)
    if len(p.output_size) != len(p.kernel):
        raise RuleError(f"output_size {p.output_size} must have {len(p.kernel)} axes")
    k, nwin = size(p.kernel), size(_windows(p, p.output_size))
    if len(d) != 3 or d[1] % k or d[2] != nwin:
        raise RuleError(f"data {shape_str(d)} must be (N, C * {k}, {nwin})")
    return [d], [(d[0], d[1] // k, *p.output_size)]


def _launch(call: KernelCall, kind: str, img: tuple, n: int, c: int) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    ker, st, di, pd = _geometry(call.params)
    win = _windows(call.params, img)
    spec = KernelSpec.make("conv/im2col.c.j2", dtype=call.out_dtypes[0].name, kind=kind,
                           req=call.out_req(0))
    ia = (n, c, len(ker), size(ker), size(win), *img, *win, *ker, *st, *di, *pd)
    args = (0, 2) if len(call.in_shapes) == 2 else None
    return Lowered((Launch(spec, ia, args=args),))


def _im2col_lower(call: KernelCall) -> Lowered:
    d = call.in_shapes[0]
    return _launch(call, "im2col", tuple(d[2:]), d[0], d[1])


def _col2im_lower(call: KernelCall) -> Lowered:
    o = call.out_shapes[0]
    return _launch(call, "col2im", tuple(o[2:]), o[0], o[1])


def _windows_of(p: Any, x: np.ndarray, img: tuple) -> tuple[np.ndarray, list[np.ndarray]]:
    """(padded image, per window offset the index arrays), numpy."""
    _, st, _, pd = _geometry(p)
    win = _windows(p, img)
    xp = np.pad(x, [(0, 0), (0, 0), *[(q, q) for q in pd]])
    return xp, [np.arange(w) * s for w, s in zip(win, st, strict=True)]


def im2col_reference(p: Im2colParams, x: np.ndarray) -> Any:
    ker, _, di, _ = _geometry(p)
    xp, starts = _windows_of(p, x, x.shape[2:])
    cols = []
    for kd in np.ndindex(*ker):
        idx = np.ix_(*[s + k * d for s, k, d in zip(starts, kd, di, strict=True)])
        key = (slice(None), slice(None), *idx)
        cols.append(xp[key].reshape(x.shape[0], x.shape[1], -1))
    return np.stack(cols, axis=2).reshape(x.shape[0], -1, cols[0].shape[-1])


def col2im_reference(p: Col2imParams, col: np.ndarray) -> Any:
    ker, st, di, pd = _geometry(p)
    img = p.output_size
    n, ck, _ = col.shape
    c = ck // size(ker)
    win = _windows(p, img)
    acc = np.zeros((n, c, *[i + 2 * q for i, q in zip(img, pd, strict=True)]), np.float64)
    cols = col.astype(np.float64).reshape(n, c, size(ker), *win)
    starts = [np.arange(w) * s for w, s in zip(win, st, strict=True)]
    for j, kd in enumerate(np.ndindex(*ker)):
        idx = np.ix_(*[s + k * d for s, k, d in zip(starts, kd, di, strict=True)])
        key = (slice(None), slice(None), *idx)
        np.add.at(acc, key, cols[:, :, j])
    inner = tuple(slice(q, q + i) for i, q in zip(img, pd, strict=True))
    key = (slice(None), slice(None), *inner)
    return acc[key].astype(col.dtype)


BACKWARD_IM2COL = register(OpDef(
    name="_backward_im2col",
    params=Im2colParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[1]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(_col2im_lower)},
    differentiable=False,
    doc="Gradient of im2col: col2im of the output gradient.",
))

BACKWARD_COL2IM = register(OpDef(
    name="_backward_col2im",
    params=Col2imParams,
    inputs=("ograd", "data"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[1]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(lambda call: _launch(
        call, "im2col", tuple(call.in_shapes[0][2:]), call.in_shapes[0][0],
        call.in_shapes[0][1]))},
    differentiable=False,
    doc="Gradient of col2im: im2col of the output gradient.",
))

IM2COL = register(OpDef(
    name="im2col",
    params=Im2colParams,
    infer_shape=im2col_shape,
    infer_type=same_dtype,
    reference=im2col_reference,
    kernels={DENSE: Kernel(_im2col_lower)},
    grad=node_gradient(BACKWARD_IM2COL, lambda n: n.inputs[:1]),
    doc="Sliding windows of an image as columns: (N, C * prod(kernel), windows).",
    examples=(
        Example(((2, 2, 3, 4),), {"kernel": (2, 2), "stride": (1, 2), "pad": (1, 0)}),
        Example(((1, 2, 7),), {"kernel": (3,), "dilate": (2,)}, dtype="float64"),
        Example(((1, 1, 3, 3, 3),), {"kernel": (2, 2, 2)}),
    ),
    bad_params=({}, {"kernel": "x"}),
))

COL2IM = register(OpDef(
    name="col2im",
    params=Col2imParams,
    infer_shape=col2im_shape,
    infer_type=same_dtype,
    reference=col2im_reference,
    kernels={DENSE: Kernel(_col2im_lower)},
    grad=node_gradient(BACKWARD_COL2IM, lambda n: n.inputs[:1]),
    doc="Columns of sliding windows summed back into an image (the adjoint of im2col).",
    examples=(
        Example(((2, 8, 8),), {"output_size": (3, 4), "kernel": (2, 2), "stride": (1, 2),
                               "pad": (1, 0)}),
        Example(((1, 6, 3),), {"output_size": (7,), "kernel": (3,), "dilate": (2,)},
                dtype="float64"),
    ),
    bad_params=({"kernel": (2, 2)},),
))
