"""Box utilities: contrib.box_iou, box_nms (non-maximum suppression), box_encode, box_decode
and bipartite_matching. Boxes are "corner" [xmin, ymin, xmax, ymax] or "center"
[x, y, width, height]; sorting is stable (equal scores keep their input order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node, no_gradient
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")
FORMATS = ("center", "corner")


def check_float(op: str, dt: np.dtype) -> str:
    if dt.name not in FLOAT_DTYPES:
        raise NoKernelError(f"{op} has dense kernels for {FLOAT_DTYPES}, not {dt.name}")
    return str(dt.name)


def same_type(p: object, ins: list, outs: list) -> tuple[list, list]:
    """Every input and output has one float dtype."""
    t = next((x for x in (*ins, *outs) if x is not None), None)
    return [t] * len(ins), [t] * len(outs)


def comp(dt: np.dtype) -> Any:
    """The compute type (a numpy scalar type): float16 computes in float32."""
    return np.float32 if dt == np.float16 else dt.type


# ---------------------------------------------------------------- box geometry (numpy)


def _overlap(a0: np.ndarray, a2: np.ndarray, b0: np.ndarray, b2: np.ndarray,
             center: bool) -> np.ndarray:
    if center:
        a0, a2 = a0 - a2 / 2, a0 + a2 / 2
        b0, b2 = b0 - b2 / 2, b0 + b2 / 2
    w = np.minimum(a2, b2) - np.maximum(a0, b0)
    with np.errstate(invalid="ignore"):
        return np.where(w > 0, w, 0).astype(w.dtype)


def _area(b: np.ndarray, center: bool) -> np.ndarray:
    w = b[..., 2] if center else b[..., 2] - b[..., 0]
    h = b[..., 3] if center else b[..., 3] - b[..., 1]
    with np.errstate(invalid="ignore"):
        return np.where((w < 0) | (h < 0), 0, w * h).astype(w.dtype)


def iou_matrix(a: np.ndarray, b: np.ndarray, center: bool) -> np.ndarray:
    """IoU of every box of a (L, 4) with every box of b (R, 4); 0 where they do not overlap."""
    a, b = a[:, None, :], b[None, :, :]
    i = _overlap(a[..., 0], a[..., 2], b[..., 0], b[..., 2], center) * _overlap(
        a[..., 1], a[..., 3], b[..., 1], b[..., 3], center)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = _area(a, center) + _area(b, center) - i
        return np.where(i > 0, i / np.where(i > 0, u, 1), 0).astype(i.dtype)


def _convert(box: np.ndarray, src: str, dst: str) -> np.ndarray:
    if src == dst:
        return box
    x0, y0, x1, y1 = box[..., 0], box[..., 1], box[..., 2], box[..., 3]
    if src == "corner":
        return np.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], axis=-1)
    return np.stack([x0 - x1 / 2, y0 - y1 / 2, x0 + x1 / 2, y0 + y1 / 2], axis=-1)


# ---------------------------------------------------------------- box_iou


@dataclass(frozen=True, kw_only=True)
class BoxIouParams(Params):
    format: str = field(default="corner", choices=FORMATS, doc="Box encoding of both inputs.")


def _last4(name: str, s: tuple | None) -> None:
    if s is not None and (len(s) < 1 or (s[-1] is not None and s[-1] != 4)):
        raise RuleError(f"{name} has shape {shape_str(s)}; its last axis must hold 4 coordinates")


def box_iou_shape(p: BoxIouParams, ins: list, outs: list) -> tuple[list, list]:
    lhs, rhs = ins
    _last4("lhs", lhs)
    _last4("rhs", rhs)
    if lhs is None or rhs is None:
        return list(ins), list(outs)
    return [lhs, rhs], [(*lhs[:-1], *rhs[:-1])]


def box_iou_reference(p: BoxIouParams, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    ct = comp(lhs.dtype)
    out = iou_matrix(lhs.reshape(-1, 4).astype(ct), rhs.reshape(-1, 4).astype(ct),
                     p.format == "center")
    return out.reshape(*lhs.shape[:-1], *rhs.shape[:-1]).astype(lhs.dtype)


def box_iou_lowering(call: KernelCall) -> Lowered:
    dt = check_float("box_iou", call.in_dtypes[0])
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("detection/box_iou.c.j2", dtype=dt, req=call.req,
                           center=call.params.format == "center")
    ia = (size(call.in_shapes[0]) // 4, size(call.in_shapes[1]) // 4)
    return Lowered((Launch(spec, ia),))


BOX_IOU = register(OpDef(
    name="_contrib_box_iou",
    params=BoxIouParams,
    inputs=("lhs", "rhs"),
    infer_shape=box_iou_shape,
    infer_type=same_type,
    reference=box_iou_reference,
    kernels={DENSE: Kernel(box_iou_lowering)},
    # NOTE: MXNet defines the gradient as zero (MakeZeroGradNodes); finite differences differ.
    grad=no_gradient,
    differentiable=False,
    doc="Intersection over union of every lhs box with every rhs box.",
    examples=(
        Example(((3, 4), (5, 4))),
        Example(((2, 3, 4), (4, 4)), {"format": "center"}, dtype="float64", low=0.0),
    ),
    bad_params=({"format": "xywh"}, {"fmt": "corner"}),
))


# ---------------------------------------------------------------- box_nms


@dataclass(frozen=True, kw_only=True)
class BoxNmsParams(Params):
    overlap_thresh: float = field(default=0.5, doc="Suppress a box whose IoU with a kept one "
                                  "is above this.")
    valid_thresh: float = field(default=0.0, doc="Only boxes scoring above this take part.")
    topk: int = field(default=-1, doc="Only the topk best boxes take part (-1: all; 0: the "
                      "input passes through unchanged).")
    coord_start: int = field(default=2, lower=0, doc="Index of the first of 4 coordinates.")
    score_index: int = field(default=1, lower=0, doc="Index of the score.")
    id_index: int = field(default=-1, lower=-1, doc="Index of the class id (-1: none).")
    background_id: int = field(default=-1, doc="Class id left out (with id_index).")
    force_suppress: bool = field(default=False, doc="Suppress across classes too.")
    in_format: str = field(default="corner", choices=FORMATS, doc="Input box encoding.")
    out_format: str = field(default="corner", choices=FORMATS, doc="Output box encoding.")

    def __post_init__(self) -> None:
        cs = self.coord_start
        for name in ("score_index", "id_index"):
            v = getattr(self, name)
            if cs <= v < cs + 4:
                raise ValueError(f"{name}={v} falls among the coordinates "
                                 f"[{cs}, {cs + 4}) (coord_start={cs})")


def box_nms_shape(p: BoxNmsParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0] if ins[0] is not None else outs[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 2:
        raise RuleError(f"data has shape {shape_str(data)}; box_nms needs (..., N, K)")
    k = data[-1]
    need = max(p.coord_start + 4, p.score_index + 1, p.id_index + 1)
    if k is not None and k < need:
        raise RuleError(f"data has {k} values per box; coord_start={p.coord_start}, "
                        f"score_index={p.score_index}, id_index={p.id_index} need {need}")
    return [data], [data, data[:-1]]


def nms_batch(p: BoxNmsParams, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One batch item (N, K) in the compute type: the output rows and the record (the input
    row of each output row, -1 for filler)."""
    n = x.shape[0]
    if p.topk == 0:
        return x.copy(), np.arange(n, dtype=x.dtype)
    score = x[:, p.score_index]
    with np.errstate(invalid="ignore"):
        valid = score > x.dtype.type(p.valid_thresh)
    if p.id_index >= 0:
        valid &= x[:, p.id_index] != x.dtype.type(p.background_id)
    order = np.flatnonzero(valid)
    order = order[np.argsort(-score[order], kind="stable")]
    if p.topk > 0:
        order = order[: p.topk]
    center = p.in_format == "center"
    boxes = x[order, p.coord_start:p.coord_start + 4]
    iou = iou_matrix(boxes, boxes, center)
    alive = np.ones(len(order), bool)
    for i in range(len(order)):
        if not alive[i]:
            continue
        later = np.arange(len(order)) > i
        same = (np.ones(len(order), bool) if p.force_suppress or p.id_index < 0
                else x[order, p.id_index] == x[order[i], p.id_index])
        alive &= ~(later & same & (iou[i] > x.dtype.type(p.overlap_thresh)))
    kept = order[alive]
    out = np.full_like(x, -1)
    rec = np.full(n, -1, x.dtype)
    out[: len(kept)] = x[kept]
    cs = p.coord_start
    out[: len(kept), cs:cs + 4] = _convert(x[kept, cs:cs + 4], p.in_format, p.out_format)
    rec[: len(kept)] = kept
    return out, rec


def box_nms_reference(p: BoxNmsParams, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ct = comp(data.dtype)
    n, k = data.shape[-2:]
    flat = data.reshape(-1, n, k).astype(ct)
    pairs = [nms_batch(p, b) for b in flat]
    out = np.stack([o for o, _ in pairs]) if pairs else np.zeros((0, n, k), ct)
    rec = np.stack([r for _, r in pairs]) if pairs else np.zeros((0, n), ct)
    return (out.reshape(data.shape).astype(data.dtype),
            rec.reshape(data.shape[:-1]).astype(data.dtype))


def box_nms_lowering(call: KernelCall) -> Lowered:
    dt = check_float("box_nms", call.in_dtypes[0])
    shape = call.in_shapes[0]
    if size(shape) == 0:
        return Lowered()
    p: BoxNmsParams = call.params
    n, k = shape[-2:]
    b = size(shape) // (n * k)
    spec = KernelSpec.make("detection/box_nms.c.j2", dtype=dt)
    ia = (b, n, k, p.coord_start, p.score_index, p.id_index, p.background_id, p.topk,
          int(p.force_suppress), int(p.in_format == "center"), int(p.out_format == "center"))
    fa = (float(p.overlap_thresh), float(p.valid_thresh))
    return Lowered((Launch(spec, ia, fa, workspace=3 * b * n * 8),))


def box_nms_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, record, dx]: each kept row's gradient goes back to its input row."""
    shape = call.in_shapes[0]
    if size(shape) == 0:
        return Lowered()
    n, k = shape[-2:]
    spec = KernelSpec.make("detection/box_nms_backward.c.j2",
                           dtype=check_float("box_nms", call.in_dtypes[0]), req=call.out_req(0))
    return Lowered((Launch(spec, (size(shape) // (n * k), n, k)),))


BACKWARD_BOX_NMS = register(OpDef(
    name="_backward_contrib_box_nms",
    params=BoxNmsParams,
    inputs=("ograd", "record"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
    infer_type=same_type,
    kernels={DENSE: Kernel(box_nms_backward_lowering)},
    differentiable=False,
    doc="Gradient of box_nms: each output row's gradient to the input row it came from.",
))


def box_nms_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(BACKWARD_BOX_NMS, node, [g, Entry(node, 1)]), 0)]


BOX_NMS = register(OpDef(
    name="_contrib_box_nms",
    aliases=("_contrib_box_non_maximum_suppression",),
    params=BoxNmsParams,
    outputs=("output0", "output1"),
    num_visible_outputs=1,
    infer_shape=box_nms_shape,
    infer_type=same_type,
    reference=box_nms_reference,
    kernels={DENSE: Kernel(box_nms_lowering)},
    grad=box_nms_grad,
    doc="Non-maximum suppression: kept boxes first by descending score, then rows of -1.",
    examples=(
        Example(((10, 6),), {"overlap_thresh": 0.1}, low=0.0),
        Example(((2, 8, 6),), {"id_index": 0, "valid_thresh": 0.2, "topk": 5,
                               "overlap_thresh": 0.05}, ints={}, low=0.0, dtype="float64"),
        Example(((2, 1, 6, 5),), {"coord_start": 0, "score_index": 4, "in_format": "center",
                                  "out_format": "center", "force_suppress": True}, low=0.0),
        # NOTE: an example with in_format != out_format would fail the finite-difference table:
        # MXNet's gradient passes each kept row back unconverted (tests/detection covers it).
        Example(((7, 6),), {"overlap_thresh": 0.2, "valid_thresh": 1.0, "topk": 100}, low=0.0),
        Example(((3, 6),), {"topk": 0}),
    ),
    bad_params=({"in_format": "xyxy"}, {"coord_start": 1, "score_index": 2},
                {"id_index": -2}, {"thresh": 0.5}),
))


# ---------------------------------------------------------------- box_encode / box_decode


def box_encode_shape(p: object, ins: list, outs: list) -> tuple[list, list]:
    samples, matches, anchors, refs, means, stds = ins
    bn = samples or matches or (anchors[:2] if anchors is not None else None)
    for name, s in (("samples", samples), ("matches", matches)):
        if s is not None and len(s) != 2:
            raise RuleError(f"{name} has shape {shape_str(s)}; it must be (B, N)")
    for name, s in (("anchors", anchors), ("refs", refs)):
        if s is not None and (len(s) != 3 or s[2] != 4):
            raise RuleError(f"{name} has shape {shape_str(s)}; it must be (B, ., 4)")
    for name, s in (("means", means), ("stds", stds)):
        if s is not None and tuple(s) != (4,):
            raise RuleError(f"{name} has shape {shape_str(s)}; it must be (4,)")
    if bn is None:
        return list(ins), list(outs)
    if (samples is not None and samples != bn) or (matches is not None and matches != bn) or (
            anchors is not None and tuple(anchors[:2]) != tuple(bn)):
        raise RuleError(f"samples {shape_str(samples)}, matches {shape_str(matches)} and "
                        f"anchors {shape_str(anchors)} must agree on (B, N)")
    if refs is not None and refs[0] != bn[0]:
        raise RuleError(f"refs has shape {shape_str(refs)}; its batch must be {bn[0]}")
    out = (*bn, 4)
    return [bn, bn, out, refs, (4,), (4,)], [out, out]


def box_encode_reference(p: object, samples: np.ndarray, matches: np.ndarray,
                         anchors: np.ndarray, refs: np.ndarray, means: np.ndarray,
                         stds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ct = comp(samples.dtype)
    s, m = samples.astype(ct), matches.astype(ct)
    a, r = anchors.astype(ct), refs.astype(ct)
    mu, sd = means.astype(ct), stds.astype(ct)
    nref = refs.shape[1]
    ok = (s > ct(0.5)) & (m >= 0) & (m < nref)
    idx = np.where(ok, m, 0).astype(np.int64)
    g = np.take_along_axis(r, idx[..., None], axis=1) if nref else np.zeros_like(a)
    aw, ah = a[..., 2] - a[..., 0], a[..., 3] - a[..., 1]
    ax, ay = a[..., 0] + aw / 2, a[..., 1] + ah / 2
    gw, gh = g[..., 2] - g[..., 0], g[..., 3] - g[..., 1]
    gx, gy = g[..., 0] + gw / 2, g[..., 1] + gh / 2
    with np.errstate(all="ignore"):
        t = np.stack([((gx - ax) / aw - mu[0]) / sd[0], ((gy - ay) / ah - mu[1]) / sd[1],
                      (np.log(gw / aw) - mu[2]) / sd[2], (np.log(gh / ah) - mu[3]) / sd[3]],
                     axis=-1)
    t = np.where(ok[..., None], t, 0)
    mask = np.broadcast_to(ok[..., None], t.shape).astype(ct)
    return t.astype(samples.dtype), mask.astype(samples.dtype)


def box_encode_lowering(call: KernelCall) -> Lowered:
    dt = check_float("box_encode", call.in_dtypes[0])
    b, n = call.in_shapes[0]
    if b * n == 0:
        return Lowered()
    spec = KernelSpec.make("detection/box_encode.c.j2", dtype=dt)
    return Lowered((Launch(spec, (b, n, call.in_shapes[3][1])),))


BOX_ENCODE = register(OpDef(
    name="_contrib_box_encode",
    inputs=("samples", "matches", "anchors", "refs", "means", "stds"),
    outputs=("output0", "output1"),
    infer_shape=box_encode_shape,
    infer_type=same_type,
    reference=box_encode_reference,
    kernels={DENSE: Kernel(box_encode_lowering)},
    grad=no_gradient,  # NOTE: zero in MXNet too
    differentiable=False,
    doc="Regression targets of positive samples against their matched reference boxes, and "
        "their masks.",
    examples=(
        Example(((2, 5), (2, 5), (2, 5, 4), (2, 3, 4), (4,), (4,)),
                ints={0: (-1, 2), 1: (0, 3)}, low=0.5),
        Example(((1, 4), (1, 4), (1, 4, 4), (1, 2, 4), (4,), (4,)),
                ints={0: (-1, 2), 1: (-1, 4)}, low=0.5, dtype="float64"),
    ),
))


@dataclass(frozen=True, kw_only=True)
class BoxDecodeParams(Params):
    std0: float = field(default=1.0, doc="Scale of the 1st offset.")
    std1: float = field(default=1.0, doc="Scale of the 2nd offset.")
    std2: float = field(default=1.0, doc="Scale of the 3rd offset.")
    std3: float = field(default=1.0, doc="Scale of the 4th offset.")
    clip: float = field(default=-1.0, doc="If above 0, the size offsets are clipped to it.")
    format: str = field(default="center", choices=FORMATS, doc="Anchor encoding.")


def box_decode_shape(p: BoxDecodeParams, ins: list, outs: list) -> tuple[list, list]:
    data, anchors = ins
    data = data if data is not None else outs[0]
    if data is not None and (len(data) != 3 or data[2] != 4):
        raise RuleError(f"data has shape {shape_str(data)}; it must be (B, N, 4)")
    if anchors is not None and (len(anchors) != 3 or anchors[0] != 1 or anchors[2] != 4):
        raise RuleError(f"anchors has shape {shape_str(anchors)}; it must be (1, N, 4)")
    if data is not None and anchors is not None and data[1] != anchors[1]:
        raise RuleError(f"data {shape_str(data)} and anchors {shape_str(anchors)} differ in N")
    return [data, anchors], [data]


def box_decode_reference(p: BoxDecodeParams, data: np.ndarray,
                         anchors: np.ndarray) -> np.ndarray:
    ct = comp(data.dtype)
    d, a = data.astype(ct), anchors.astype(ct)
    if p.format == "corner":
        aw, ah = a[..., 2] - a[..., 0], a[..., 3] - a[..., 1]
        ax, ay = a[..., 0] + aw / 2, a[..., 1] + ah / 2
    else:
        ax, ay, aw, ah = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    ox = d[..., 0] * ct(p.std0) * aw + ax
    oy = d[..., 1] * ct(p.std1) * ah + ay
    dw, dh = d[..., 2] * ct(p.std2), d[..., 3] * ct(p.std3)
    if p.clip > 0:
        dw, dh = np.minimum(dw, ct(p.clip)), np.minimum(dh, ct(p.clip))
    with np.errstate(over="ignore"):
        ow, oh = np.exp(dw) * aw / 2, np.exp(dh) * ah / 2
    return np.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=-1).astype(data.dtype)


def box_decode_lowering(call: KernelCall) -> Lowered:
    dt = check_float("box_decode", call.in_dtypes[0])
    b, n, _ = call.in_shapes[0]
    if b * n == 0:
        return Lowered()
    p: BoxDecodeParams = call.params
    spec = KernelSpec.make("detection/box_decode.c.j2", dtype=dt, req=call.req,
                           center=p.format == "center")
    fa = (float(p.std0), float(p.std1), float(p.std2), float(p.std3), float(p.clip))
    return Lowered((Launch(spec, (b, n), fa),))


BOX_DECODE = register(OpDef(
    name="_contrib_box_decode",
    params=BoxDecodeParams,
    inputs=("data", "anchors"),
    infer_shape=box_decode_shape,
    infer_type=same_type,
    reference=box_decode_reference,
    kernels={DENSE: Kernel(box_decode_lowering)},
    grad=no_gradient,  # NOTE: zero in MXNet too
    differentiable=False,
    doc="Boxes (corner) from predicted offsets against anchors.",
    examples=(
        Example(((2, 5, 4), (1, 5, 4))),
        Example(((1, 3, 4), (1, 3, 4)), {"std0": 0.1, "std1": 0.1, "std2": 0.2, "std3": 0.2,
                                         "clip": 0.5, "format": "corner"}, dtype="float64"),
    ),
    bad_params=({"format": "xywh"}, {"std4": 1.0}),
))


# ---------------------------------------------------------------- bipartite_matching


@dataclass(frozen=True, kw_only=True)
class BipartiteMatchingParams(Params):
    is_ascend: bool = field(default=False, doc="Lower scores match first.")
    threshold: float = field(doc="Scores must be above it (below it with is_ascend).")
    topk: int = field(default=-1, doc="At most this many matches (<= 0: no limit).")


def bipartite_matching_shape(p: BipartiteMatchingParams, ins: list,
                             outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 2:
        raise RuleError(f"data has shape {shape_str(data)}; it must be (..., N, M)")
    return [data], [data[:-1], (*data[:-2], data[-1])]


def bipartite_matching_reference(p: BipartiteMatchingParams,
                                 data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ct = comp(data.dtype)
    n, m = data.shape[-2:]
    flat = data.reshape(-1, n * m).astype(ct)
    rows = np.full((flat.shape[0], n), -1, data.dtype)
    cols = np.full((flat.shape[0], m), -1, data.dtype)
    thr = ct(p.threshold)
    for b, x in enumerate(flat):
        order = np.flatnonzero(~np.isnan(x))
        order = order[np.argsort(x[order] if p.is_ascend else -x[order], kind="stable")]
        count = 0
        for k in order:
            if not (x[k] < thr if p.is_ascend else x[k] > thr):
                break
            r, c = divmod(int(k), m)
            if rows[b, r] == -1 and cols[b, c] == -1:
                rows[b, r], cols[b, c] = c, r
                count += 1
                if 0 < p.topk <= count:
                    break
    return rows.reshape(data.shape[:-1]), cols.reshape(*data.shape[:-2], m)


def bipartite_matching_lowering(call: KernelCall) -> Lowered:
    dt = check_float("bipartite_matching", call.in_dtypes[0])
    shape = call.in_shapes[0]
    n, m = shape[-2:]
    b = size(shape[:-2])
    if b == 0 or (n == 0 and m == 0):
        return Lowered()
    p: BipartiteMatchingParams = call.params
    spec = KernelSpec.make("detection/bipartite_matching.c.j2", dtype=dt)
    return Lowered((Launch(spec, (b, n, m, p.topk, int(p.is_ascend)), (float(p.threshold),),
                           workspace=2 * b * n * m * 8),))


BIPARTITE_MATCHING = register(OpDef(
    name="_contrib_bipartite_matching",
    params=BipartiteMatchingParams,
    outputs=("output0", "output1"),
    infer_shape=bipartite_matching_shape,
    infer_type=same_type,
    reference=bipartite_matching_reference,
    kernels={DENSE: Kernel(bipartite_matching_lowering)},
    grad=no_gradient,  # NOTE: zero in MXNet too
    differentiable=False,
    doc="Greedy bipartite matching by score: each row's matched column and each column's "
        "matched row (-1: none).",
    examples=(
        Example(((4, 3),), {"threshold": 0.1}),
        Example(((2, 3, 5),), {"threshold": 0.5, "is_ascend": True, "topk": 2},
                dtype="float64"),
    ),
    bad_params=({}, {"threshold": 0.5, "ascend": True}),
))
