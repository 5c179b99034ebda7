"""Spatial transformer operators: GridGenerator, BilinearSampler and SpatialTransformer
(an affine grid sampled bilinearly), with their gradients."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


def _float(call: KernelCall, what: str) -> str:
    dt = str(call.out_dtypes[0].name)
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"{what} has dense kernels for {FLOAT_DTYPES}, not {dt}")
    return dt


def _same_type(n_in: int, n_out: int):  # type: ignore[no-untyped-def]
    def rule(p: object, ins: list, outs: list) -> tuple[list, list]:
        t = next((v for v in (*ins, *outs) if v is not None), None)
        return [t] * n_in, [t] * n_out

    return rule


# ---------------------------------------------------------------------------------------------
# GridGenerator


@dataclass(frozen=True, kw_only=True)
class GridGeneratorParams(Params):
    transform_type: str = field(
        choices=("affine", "warp"),
        doc="affine: data is (N, 6) 2x3 matrices; warp: data is an (N, 2, H, W) flow field.",
    )
    target_shape: tuple[int, ...] = field(
        default=(0, 0), lower=0, doc="Output grid (H, W) of the affine transform."
    )

    def __post_init__(self) -> None:
        if len(self.target_shape) != 2:
            raise ValueError(f"target_shape={self.target_shape} must be (H, W)")


def grid_generator_shape(p: GridGeneratorParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if p.transform_type == "affine":
        h, w = p.target_shape
        if h < 1 or w < 1:
            raise RuleError(f"affine GridGenerator needs a target_shape, not {p.target_shape}")
        try:
            data = merge_shape(data, (None, 6))
        except RuleError:
            raise RuleError(f"data has shape {shape_str(data)}; affine needs (N, 6)") from None
        out = outs[0] if data is None else (data[0], 2, h, w)
        if data is None and out is not None:
            data = (out[0], 6)
        return [data], [out]
    try:
        data = merge_shape(merge_shape(data, outs[0]), (None, 2, None, None))
    except RuleError:
        raise RuleError(f"data has shape {shape_str(data)}; warp needs (N, 2, H, W)") from None
    return [data], [data]


def _unit_grid(h: int, w: int, dt: type) -> tuple[np.ndarray, np.ndarray]:
    """x and y of the (h, w) target grid in [-1, 1], computed as the kernels do."""
    one, two = dt(1), dt(2)
    xs = -one + np.arange(w).astype(dt) * (two / dt(w - 1)) if w > 1 else np.full(w, -one)
    ys = -one + np.arange(h).astype(dt) * (two / dt(h - 1)) if h > 1 else np.full(h, -one)
    return np.broadcast_to(xs, (h, w)), np.broadcast_to(ys[:, None], (h, w))


def _ct(dtype: np.dtype) -> type:
    return np.float32 if dtype == np.float16 else dtype.type


def grid_generator_reference(p: GridGeneratorParams, data: np.ndarray) -> np.ndarray:
    ct = _ct(data.dtype)
    d: np.ndarray = data.astype(ct)
    if p.transform_type == "affine":
        x, y = _unit_grid(p.target_shape[0], p.target_shape[1], ct)
        t = d.reshape(-1, 2, 3)
        out = t[:, :, 0, None, None] * x + t[:, :, 1, None, None] * y + t[:, :, 2, None, None]
    else:
        h, w = data.shape[2:]
        out = np.empty_like(d)
        out[:, 0] = (d[:, 0] + np.arange(w, dtype=ct)) / ct((w - 1) / 2) - 1
        out[:, 1] = (d[:, 1] + np.arange(h, dtype=ct)[:, None]) / ct((h - 1) / 2) - 1
    return np.asarray(out, dtype=data.dtype)


def _grid_launch(call: KernelCall, mode: str, grid: tuple[int, ...], req: str) -> Launch:
    spec = KernelSpec.make(
        "conv/grid_generator.c.j2", dtype=_float(call, "GridGenerator"), mode=mode, req=req
    )
    return Launch(spec, (grid[0], grid[2], grid[3]))


def grid_generator_lowering(call: KernelCall) -> Lowered:
    out = call.out_shapes[0]
    if size(out) == 0:
        return Lowered()
    return Lowered((_grid_launch(call, call.params.transform_type, out, call.req),))


def grid_generator_backward_lowering(call: KernelCall) -> Lowered:
    g = call.in_shapes[0]
    if size(g) == 0:
        return Lowered()
    mode = call.params.transform_type + "_backward"
    return Lowered((_grid_launch(call, mode, g, call.out_req(0)),))


def _grid_backward_shape(p: GridGeneratorParams, ins: list, outs: list) -> tuple[list, list]:
    g = ins[0]
    if g is None:
        return list(ins), list(outs)
    return [g], [(g[0], 6) if p.transform_type == "affine" else g]


BACKWARD_GRID_GENERATOR = register(
    OpDef(
        name="_backward_GridGenerator",
        params=GridGeneratorParams,
        inputs=("ograd",),
        outputs=("data_grad",),
        infer_shape=_grid_backward_shape,
        infer_type=_same_type(1, 1),
        kernels={DENSE: Kernel(grid_generator_backward_lowering)},
        differentiable=False,
        doc="Gradient of GridGenerator.",
    )
)


def grid_generator_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(BACKWARD_GRID_GENERATOR, node, [g]), 0)]


GRID_GENERATOR = register(
    OpDef(
        name="GridGenerator",
        params=GridGeneratorParams,
        inputs=("data",),
        infer_shape=grid_generator_shape,
        infer_type=_same_type(1, 1),
        reference=grid_generator_reference,
        kernels={DENSE: Kernel(grid_generator_lowering)},
        grad=grid_generator_grad,
        doc="Sampling grids in [-1, 1] from affine matrices or from a flow field (warp).",
        examples=(
            Example(((2, 6),), {"transform_type": "affine", "target_shape": (3, 4)}),
            Example(((2, 2, 3, 5),), {"transform_type": "warp"}),
            Example(((1, 6),), {"transform_type": "affine", "target_shape": (5, 2)},
                    dtype="float64"),
        ),
        bad_params=(
            {},
            {"transform_type": "projective"},
            {"transform_type": "affine", "target_shape": (3,)},
        ),
    )
)


# ---------------------------------------------------------------------------------------------
# BilinearSampler


@dataclass(frozen=True, kw_only=True)
class BilinearSamplerParams(Params):
    cudnn_off: bool | None = field(default=None, doc="Do not use cuDNN (no effect in nnsym).")


def bilinear_sampler_shape(p: object, ins: list, outs: list) -> tuple[list, list]:
    data, grid = ins
    for name, s in (("data", data), ("grid", grid)):
        if s is not None and len(s) != 4:
            raise RuleError(f"{name} has shape {shape_str(s)}; it must be 4-D")
    try:
        grid = merge_shape(grid, (None, 2, None, None))
    except RuleError:
        raise RuleError(f"grid has shape {shape_str(grid)}; it must be (N, 2, H, W)") from None
    if data is None or grid is None:
        return [data, grid], list(outs)
    if None not in (data[0], grid[0]) and data[0] != grid[0]:
        raise RuleError(f"data {shape_str(data)} and grid {shape_str(grid)} differ in batch size")
    return [data, grid], [(data[0], data[1], grid[2], grid[3])]


def bilinear_reference(data: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Bilinear sampling with zero outside the data, in the data's compute type."""
    ct = _ct(data.dtype)
    n, c, h, w = data.shape
    d: np.ndarray = data.astype(ct)
    g: np.ndarray = grid.astype(ct)
    xr = (g[:, 0] + ct(1)) * ct(w - 1) / ct(2)
    yr = (g[:, 1] + ct(1)) * ct(h - 1) / ct(2)
    x0, y0 = np.floor(xr).astype(np.int64), np.floor(yr).astype(np.int64)
    wx, wy = ct(1) - (xr - x0.astype(ct)), ct(1) - (yr - y0.astype(ct))
    out = np.zeros((n, c, *grid.shape[2:]), ct)
    bi = np.arange(n)[:, None, None]
    for dy, dx, wgt in ((0, 0, wy * wx), (0, 1, wy * (1 - wx)), (1, 0, (1 - wy) * wx),
                        (1, 1, (1 - wy) * (1 - wx))):
        yy, xx = y0 + dy, x0 + dx
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        v = d[bi, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]  # (n, ho, wo, c)
        out += np.moveaxis(np.where(inside[..., None], v, 0) * wgt[..., None], -1, 1)
    return out.astype(data.dtype)


def _sampler_launches(call: KernelCall, data: tuple[int, ...], grid: tuple[int, ...],
                      template: str, args: tuple[int, ...] | None, **lit: str) -> Launch:
    spec = KernelSpec.make(template, dtype=_float(call, "BilinearSampler"), **lit)
    return Launch(spec, (*data, grid[2], grid[3]), args=args)


def bilinear_sampler_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    data, grid = call.in_shapes
    return Lowered((_sampler_launches(call, data, grid, "conv/bilinear_sampler.c.j2", None,
                                      req=call.req),))


def bilinear_sampler_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data, grid, ddata, dgrid]."""
    _, data, grid = call.in_shapes
    if size(data) == 0 or size(grid) == 0:
        return Lowered()
    return Lowered((_sampler_launches(call, data, grid, "conv/bilinear_sampler_backward.c.j2",
                                      None, req_d=call.out_req(0), req_g=call.out_req(1)),))


BACKWARD_BILINEAR_SAMPLER = register(
    OpDef(
        name="_backward_BilinearSampler",
        params=BilinearSamplerParams,
        inputs=("ograd", "data", "grid"),
        outputs=("data_grad", "grid_grad"),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2]]),
        infer_type=_same_type(3, 2),
        kernels={DENSE: Kernel(bilinear_sampler_backward_lowering)},
        differentiable=False,
        doc="Gradient of BilinearSampler, to the data and to the grid.",
    )
)


def bilinear_sampler_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_BILINEAR_SAMPLER, node, [g, *node.inputs])
    return [Entry(b, 0), Entry(b, 1)]


# The grids stay inside [-1.2, 1.2]: a few samples fall outside the data (zeros).
BILINEAR_SAMPLER = register(
    OpDef(
        name="BilinearSampler",
        params=BilinearSamplerParams,
        inputs=("data", "grid"),
        infer_shape=bilinear_sampler_shape,
        infer_type=_same_type(2, 1),
        reference=lambda p, data, grid: bilinear_reference(data, grid),
        kernels={DENSE: Kernel(bilinear_sampler_lowering)},
        grad=bilinear_sampler_grad,
        doc="Samples data bilinearly at the grid's normalised (x, y) points; zero outside.",
        examples=(
            Example(((2, 3, 4, 5), (2, 2, 3, 3)), low=-1.2, high=1.2),
            Example(((1, 2, 5, 4), (1, 2, 2, 6)), low=-1.2, high=1.2, dtype="float64"),
        ),
        bad_params=({"cudnn_off": "x"}, {"cudnn": True}),
    )
)


# ---------------------------------------------------------------------------------------------
# SpatialTransformer


@dataclass(frozen=True, kw_only=True)
class SpatialTransformerParams(Params):
    target_shape: tuple[int, ...] = field(
        default=(0, 0), lower=0, doc="Output (H, W); required (the (0, 0) default is refused)."
    )
    transform_type: str = field(choices=("affine",), doc="The transform: affine (loc is 2x3).")
    sampler_type: str = field(choices=("bilinear",), doc="The sampler: bilinear.")
    cudnn_off: bool | None = field(default=None, doc="Do not use cuDNN (no effect in nnsym).")

    def __post_init__(self) -> None:
        if len(self.target_shape) != 2:
            raise ValueError(f"target_shape={self.target_shape} must be (H, W)")


def _target(p: SpatialTransformerParams) -> tuple[int, int]:
    h, w = p.target_shape
    if h < 1 or w < 1:
        raise RuleError(f"SpatialTransformer needs a target_shape, not {p.target_shape}")
    return h, w


def spatial_transformer_shape(p: SpatialTransformerParams, ins: list,
                              outs: list) -> tuple[list, list]:
    data, loc = ins
    if data is not None and len(data) != 4:
        raise RuleError(f"data has shape {shape_str(data)}; it must be (N, C, H, W)")
    try:
        loc = merge_shape(loc, (None, 6))
    except RuleError:
        raise RuleError(f"loc has shape {shape_str(loc)}; affine needs (N, 6)") from None
    if data is None:
        return [data, loc], list(outs)
    h, w = _target(p)
    return [data, (data[0], 6)], [(data[0], data[1], h, w), (data[0], 2, h, w)]


def spatial_transformer_reference(p: SpatialTransformerParams, data: np.ndarray,
                                  loc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gp = GridGeneratorParams(transform_type="affine", target_shape=_target(p))
    grid = grid_generator_reference(gp, loc)
    return bilinear_reference(data, grid), grid


def spatial_transformer_lowering(call: KernelCall) -> Lowered:
    """p = [data, loc, output, grid]: the grid (a hidden output), then the sampling."""
    out, grid = call.out_shapes
    if size(out) == 0:
        return Lowered()
    data = call.in_shapes[0]
    g = _grid_launch(call, "affine", grid, "write")
    s = _sampler_launches(call, data, grid, "conv/bilinear_sampler.c.j2", (0, 3, 2),
                          req=call.out_req(0))
    return Lowered((Launch(g.spec, g.ia, args=(1, 3)), s))


def spatial_transformer_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Through the sampler to data and grid, then through the affine grid to loc."""
    g = ograds[0]
    assert g is not None
    p: SpatialTransformerParams = node.params
    bp = BACKWARD_BILINEAR_SAMPLER.parse_params({})[0]
    b = backward_node(BACKWARD_BILINEAR_SAMPLER, node, [g, node.inputs[0], Entry(node, 1)],
                      params=bp, suffix="_backward_sampler")
    gp = BACKWARD_GRID_GENERATOR.parse_params(
        {"transform_type": "affine", "target_shape": p.target_shape}
    )[0]
    bg = backward_node(BACKWARD_GRID_GENERATOR, node, [Entry(b, 1)], params=gp,
                       suffix="_backward_grid")
    return [Entry(b, 0), Entry(bg, 0)]


SPATIAL_TRANSFORMER = register(
    OpDef(
        name="SpatialTransformer",
        params=SpatialTransformerParams,
        inputs=("data", "loc"),
        outputs=("output", "grid"),
        num_visible_outputs=1,
        infer_shape=spatial_transformer_shape,
        infer_type=_same_type(2, 2),
        reference=spatial_transformer_reference,
        kernels={DENSE: Kernel(spatial_transformer_lowering)},
        grad=spatial_transformer_grad,
        doc="Samples data bilinearly on an affine grid given by loc (N, 6).",
        examples=(
            Example(((2, 3, 5, 6), (2, 6)),
                    {"transform_type": "affine", "sampler_type": "bilinear",
                     "target_shape": (4, 3)}, low=-0.7, high=0.7),
            Example(((1, 2, 4, 4), (1, 6)),
                    {"transform_type": "affine", "sampler_type": "bilinear",
                     "target_shape": (3, 5)},
                    low=-0.7, high=0.7, dtype="float64"),
        ),
        bad_params=(
            {"transform_type": "affine"},
            {"transform_type": "warp", "sampler_type": "bilinear"},
            {"transform_type": "affine", "sampler_type": "nearest"},
        ),
    )
)
