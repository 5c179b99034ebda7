"""SSD's MultiBox operators: contrib.MultiBoxPrior (anchor boxes over a feature map) and
contrib.MultiBoxDetection (decoded, thresholded, sorted and suppressed detections)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.detection.box import check_float, comp, same_type
from nnsym.types import shape_str

# ---------------------------------------------------------------- MultiBoxPrior


@dataclass(frozen=True, kw_only=True)
class MultiBoxPriorParams(Params):
    sizes: tuple[float, ...] = field(default=(1.0,), doc="Anchor sizes (of the input's height).")
    ratios: tuple[float, ...] = field(default=(1.0,), doc="Anchor aspect ratios (width/height).")
    clip: bool = field(default=False, doc="Clip the anchors to [0, 1].")
    steps: tuple[float, ...] = field(default=(-1.0, -1.0),
                                     doc="Anchor step (y, x); -1: 1 / the feature map's size.")
    offsets: tuple[float, ...] = field(default=(0.5, 0.5), doc="Anchor center offsets (y, x).")

    def __post_init__(self) -> None:
        if not self.sizes or not self.ratios:
            raise ValueError("sizes and ratios must not be empty")
        if any(not s > 0 for s in self.sizes) or any(not r > 0 for r in self.ratios):
            raise ValueError(f"sizes {self.sizes} and ratios {self.ratios} must be above 0")
        if len(self.steps) != 2 or len(self.offsets) != 2:
            raise ValueError(f"steps {self.steps} and offsets {self.offsets} must be (y, x)")


def num_anchors(p: MultiBoxPriorParams) -> int:
    return len(p.sizes) + len(p.ratios) - 1


def multibox_prior_shape(p: MultiBoxPriorParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) < 4:
        raise RuleError(f"data has shape {shape_str(data)}; MultiBoxPrior needs (N, C, H, W)")
    return [data], [(1, data[-2] * data[-1] * num_anchors(p), 4)]


def _steps(p: MultiBoxPriorParams, h: int, w: int) -> tuple[float, float]:
    f = np.float32
    sy = f(p.steps[0]) if p.steps[0] > 0 else f(1) / f(h)
    sx = f(p.steps[1]) if p.steps[1] > 0 else f(1) / f(w)
    return float(sy), float(sx)


def multibox_prior_reference(p: MultiBoxPriorParams, data: np.ndarray) -> np.ndarray:
    """In float32 arithmetic, in MXNet's order: per cell (row-major), the sizes at ratio 1,
    then the other ratios at the first size."""
    f = np.float32
    h, w = data.shape[-2:]
    sy, sx = (f(v) for v in _steps(p, h, w))
    oy, ox = f(p.offsets[0]), f(p.offsets[1])
    fh, fw = f(h), f(w)
    half = []
    for s in p.sizes:
        half.append((f(s) * fh / fw / f(2), f(s) / f(2)))
    s0 = f(p.sizes[0])
    for r in p.ratios[1:]:
        q = f(math.sqrt(f(r)))
        half.append((s0 * fh / fw * q / f(2), s0 / q / f(2)))
    out = np.zeros((h, w, len(half), 4), f)
    cy = (np.arange(h, dtype=f) + oy) * sy
    cx = (np.arange(w, dtype=f) + ox) * sx
    for k, (hw, hh) in enumerate(half):
        out[:, :, k, 0] = cx[None, :] - hw
        out[:, :, k, 1] = cy[:, None] - hh
        out[:, :, k, 2] = cx[None, :] + hw
        out[:, :, k, 3] = cy[:, None] + hh
    if p.clip:
        out = np.clip(out, f(0), f(1))
    return out.reshape(1, -1, 4)


def multibox_prior_lowering(call: KernelCall) -> Lowered:
    p: MultiBoxPriorParams = call.params
    h, w = call.in_shapes[0][-2:]
    if h * w == 0:
        return Lowered()
    spec = KernelSpec.make("detection/multibox_prior.c.j2", clip=bool(p.clip))
    fa = (*_steps(p, h, w), *p.offsets, *p.sizes, *p.ratios)
    return Lowered((Launch(spec, (h, w, len(p.sizes), len(p.ratios)), fa, args=(1,)),))


MULTIBOX_PRIOR = register(OpDef(
    name="_contrib_MultiBoxPrior",
    params=MultiBoxPriorParams,
    infer_shape=multibox_prior_shape,
    infer_type=lambda p, ins, outs: (list(ins), [np.dtype(np.float32)]),
    ignore_inputs=(0,),
    reference=multibox_prior_reference,
    kernels={DENSE: Kernel(multibox_prior_lowering)},
    grad=no_gradient,  # NOTE: zero in MXNet too
    differentiable=False,
    doc="Anchor boxes (corner, relative to the image) for every cell of a feature map.",
    examples=(
        Example(((1, 2, 2, 3),), {"sizes": (0.5, 0.25), "ratios": (1.0, 2.0, 0.5)}),
        Example(((2, 1, 3, 2),), {"sizes": (0.7,), "clip": True, "steps": (0.3, 0.2),
                                  "offsets": (0.1, 0.4)}),
    ),
    bad_params=({"sizes": ()}, {"ratios": (0.0,)}, {"steps": (0.1,)}, {"size": (1.0,)}),
))

# ---------------------------------------------------------------- MultiBoxDetection


@dataclass(frozen=True, kw_only=True)
class MultiBoxDetectionParams(Params):
    clip: bool = field(default=True, doc="Clip the boxes to [0, 1].")
    threshold: float = field(default=0.01, doc="A detection's score must be at least this.")
    background_id: int = field(default=0, doc="Background class (accepted; class 0 is the "
                               "background, as in MXNet's CPU kernel).")
    nms_threshold: float = field(default=0.5, doc="Suppress at this IoU or above; outside "
                                 "(0, 1] neither sorting nor suppression runs.")
    force_suppress: bool = field(default=False, doc="Suppress across classes too.")
    variances: tuple[float, ...] = field(default=(0.1, 0.1, 0.2, 0.2),
                                         doc="Scales of the offsets (x, y, w, h).")
    nms_topk: int = field(default=-1, doc="Sort and keep the best nms_topk (-1: all).")

    def __post_init__(self) -> None:
        if len(self.variances) != 4:
            raise ValueError(f"variances {self.variances} must hold 4 values")


def multibox_detection_shape(p: MultiBoxDetectionParams, ins: list,
                             outs: list) -> tuple[list, list]:
    cls, loc, anchor = ins
    if cls is not None and len(cls) != 3:
        raise RuleError(f"cls_prob has shape {shape_str(cls)}; it must be (B, classes, A)")
    if loc is not None and len(loc) != 2:
        raise RuleError(f"loc_pred has shape {shape_str(loc)}; it must be (B, A * 4)")
    if anchor is not None and (len(anchor) != 3 or anchor[2] != 4):
        raise RuleError(f"anchor has shape {shape_str(anchor)}; it must be (1, A, 4)")
    if cls is None:
        return list(ins), list(outs)
    b, _, a = cls
    if (loc is not None and tuple(loc) != (b, a * 4)) or (
            anchor is not None and anchor[1] != a):
        raise RuleError(f"cls_prob {shape_str(cls)}, loc_pred {shape_str(loc)} and anchor "
                        f"{shape_str(anchor)} disagree on the batch or the {a} anchors")
    return [cls, (b, a * 4), anchor if anchor is not None else (1, a, 4)], [(b, a, 6)]


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    z = a.dtype.type(0)
    w = max(z, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(z, min(a[3], b[3]) - max(a[1], b[1]))
    i = w * h
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i
    return float(0 if not u > 0 else i / u)


def multibox_detection_reference(p: MultiBoxDetectionParams, cls_prob: np.ndarray,
                                 loc_pred: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    ct = comp(cls_prob.dtype)
    b_n, c_n, a_n = cls_prob.shape
    cls, loc = cls_prob.astype(ct), loc_pred.astype(ct).reshape(b_n, a_n, 4)
    anc = anchor.astype(ct).reshape(a_n, 4)
    vx, vy, vw, vh = (ct(v) for v in p.variances)
    out = np.full((b_n, a_n, 6), -1, ct)
    aw, ah = anc[:, 2] - anc[:, 0], anc[:, 3] - anc[:, 1]
    ax, ay = (anc[:, 0] + anc[:, 2]) / ct(2), (anc[:, 1] + anc[:, 3]) / ct(2)
    for b in range(b_n):
        rows = []
        for i in range(a_n):
            score, cid = ct(-1), 0
            for j in range(1, c_n):
                if cls[b, j, i] > score:
                    score, cid = cls[b, j, i], j
            if cid > 0 and score < ct(p.threshold):
                cid = 0
            if cid == 0:
                continue
            px, py, pw, ph = loc[b, i]
            ox, oy = px * vx * aw[i] + ax[i], py * vy * ah[i] + ay[i]
            with np.errstate(over="ignore"):
                ow, oh = np.exp(pw * vw) * aw[i] / ct(2), np.exp(ph * vh) * ah[i] / ct(2)
            box = np.array([ox - ow, oy - oh, ox + ow, oy + oh], ct)
            if p.clip:
                box = np.maximum(ct(0), np.minimum(ct(1), box))
            rows.append(np.array([cid - 1, score, *box], ct))
        nv = len(rows)
        if nv:
            out[b, :nv] = rows
        if nv < 1 or not 0 < p.nms_threshold <= 1:
            continue
        order = np.argsort(-out[b, :nv, 1], kind="stable")
        nkeep = nv if not 0 < p.nms_topk < nv else p.nms_topk
        temp = out[b, :nv].copy()
        out[b, :nkeep] = temp[order[:nkeep]]
        out[b, nkeep:nv, 0] = -1
        o = out[b]
        for i in range(nv):
            if o[i, 0] < 0:
                continue
            for j in range(i + 1, nv):
                if o[j, 0] < 0:
                    continue
                if (p.force_suppress or o[i, 0] == o[j, 0]) and \
                        _overlap(o[i, 2:], o[j, 2:]) >= p.nms_threshold:
                    o[j, 0] = -1
    return out.astype(cls_prob.dtype)


def multibox_detection_lowering(call: KernelCall) -> Lowered:
    dt = check_float("MultiBoxDetection", call.in_dtypes[0])
    b, c, a = call.in_shapes[0]
    if b * a == 0:
        return Lowered()
    p: MultiBoxDetectionParams = call.params
    spec = KernelSpec.make("detection/multibox_detection.c.j2", dtype=dt, clip=bool(p.clip))
    ia = (b, c, a, p.nms_topk, int(p.force_suppress))
    fa = (float(p.threshold), float(p.nms_threshold), *p.variances)
    ws = -(-b * a * 6 * np.dtype(dt).itemsize // 8) * 8 + b * a * 16
    return Lowered((Launch(spec, ia, fa, workspace=ws),))


MULTIBOX_DETECTION = register(OpDef(
    name="_contrib_MultiBoxDetection",
    params=MultiBoxDetectionParams,
    inputs=("cls_prob", "loc_pred", "anchor"),
    infer_shape=multibox_detection_shape,
    infer_type=same_type,
    reference=multibox_detection_reference,
    kernels={DENSE: Kernel(multibox_detection_lowering)},
    grad=no_gradient,  # NOTE: zero in MXNet too
    differentiable=False,
    doc="Detections [class, score, xmin, ymin, xmax, ymax] from class probabilities, box "
        "offsets and anchors, sorted and suppressed per class (rows of -1 after them).",
    examples=(
        Example(((2, 3, 6), (2, 24), (1, 6, 4)), low=0.0, high=1.0),
        Example(((1, 4, 8), (1, 32), (1, 8, 4)),
                {"nms_threshold": 0.1, "nms_topk": 3, "force_suppress": True,
                 "threshold": 0.3, "clip": False}, low=0.0, high=1.0),
    ),
    bad_params=({"variances": (0.1, 0.2)}, {"nms_thresh": 0.5}),
))

# ---------------------------------------------------------------- MultiBoxTarget


@dataclass(frozen=True, kw_only=True)
class MultiBoxTargetParams(Params):
    overlap_threshold: float = field(default=0.5, doc="An anchor whose IoU with a ground truth "
                                     "is above this is positive.")
    ignore_label: float = field(default=-1.0, doc="Class target of ignored anchors.")
    negative_mining_ratio: float = field(default=-1.0, doc="Negatives per positive (hardest "
                                         "first); -1: every other anchor is negative.")
    negative_mining_thresh: float = field(default=0.5, doc="Only anchors whose best IoU is "
                                          "below this may be mined as negatives.")
    minimum_negative_samples: int = field(default=0, doc="At least this many negatives.")
    variances: tuple[float, ...] = field(default=(0.1, 0.1, 0.2, 0.2),
                                         doc="Scales of the encoded offsets (x, y, w, h).")

    def __post_init__(self) -> None:
        if len(self.variances) != 4:
            raise ValueError(f"variances {self.variances} must hold 4 values")


def multibox_target_shape(p: MultiBoxTargetParams, ins: list, outs: list) -> tuple[list, list]:
    anchor, label, cls = ins
    if anchor is not None and (len(anchor) != 3 or anchor[2] != 4):
        raise RuleError(f"anchor has shape {shape_str(anchor)}; it must be (1, A, 4)")
    if label is not None and (len(label) != 3 or (label[2] is not None and label[2] < 5)):
        raise RuleError(f"label has shape {shape_str(label)}; it must be (B, L, >= 5): "
                        "[class, xmin, ymin, xmax, ymax, ...]")
    if cls is not None and len(cls) != 3:
        raise RuleError(f"cls_pred has shape {shape_str(cls)}; it must be (B, classes, A)")
    if anchor is None or label is None or cls is None:
        return list(ins), list(outs)
    a, b = anchor[1], label[0]
    if cls[0] != b or cls[2] != a:
        raise RuleError(f"anchor {shape_str(anchor)}, label {shape_str(label)} and cls_pred "
                        f"{shape_str(cls)} disagree on the batch or the {a} anchors")
    return list(ins), [(b, a * 4), (b, a * 4), (b, a)]


def _target_batch(p: MultiBoxTargetParams, anc: np.ndarray, lab: np.ndarray,
                  cls: np.ndarray, ct: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a_n = anc.shape[0]
    loc_t, mask = np.zeros((a_n, 4), ct), np.zeros((a_n, 4), ct)
    cls_t = np.full(a_n, ct(p.ignore_label), ct)
    g_n = 0
    while g_n < lab.shape[0] and not (-2 < lab[g_n, 0] <= -1):
        g_n += 1
    if g_n == 0:
        return loc_t, mask, cls_t
    ious = [[_box_iou(anc[j], lab[k, 1:5]) for k in range(g_n)] for j in range(a_n)]
    flags, match, maxm = [-1] * a_n, [-1] * a_n, [-1.0] * a_n
    used = [False] * g_n
    for _ in range(g_n):
        best, ba, bg = ct(1e-6), -1, -1
        for j in range(a_n):
            if flags[j] == 1:
                continue
            for k in range(g_n):
                if not used[k] and ious[j][k] > best:
                    best, ba, bg = ious[j][k], j, k
        if ba < 0:
            break
        flags[ba], used[bg], maxm[ba], match[ba] = 1, True, best, bg
    if p.overlap_threshold > 0:
        for j in range(a_n):
            if flags[j] == 1:
                continue
            for k in range(g_n):
                if ious[j][k] > maxm[j]:
                    maxm[j], match[j] = ious[j][k], k
            if maxm[j] > p.overlap_threshold:
                flags[j] = 1
    if p.negative_mining_ratio > 0:
        npos = flags.count(1)
        nneg = max(int(npos * p.negative_mining_ratio), p.minimum_negative_samples)
        nneg = min(nneg, a_n - npos) if npos > 0 else 0
        if nneg > 0:
            cands = [j for j in range(a_n) if flags[j] != 1 and cls.shape[0]
                     and maxm[j] < p.negative_mining_thresh]
            x = cls.astype(np.float64)
            e = np.exp(x - x.max(axis=0))
            prob = e[0] / e.sum(axis=0)
            cands.sort(key=lambda j: prob[j])
            for j in cands[:nneg]:
                flags[j] = 0
    else:
        flags = [f if f == 1 else 0 for f in flags]
    v = [ct(x) for x in p.variances]
    for j in range(a_n):
        if flags[j] == 0:
            cls_t[j] = 0
        elif flags[j] == 1:
            g = lab[match[j]]
            cls_t[j] = g[0] + ct(1)
            mask[j] = 1
            al, at, ar, ab = anc[j]
            aw, ah = ar - al, ab - at
            ax, ay = (al + ar) / ct(2), (at + ab) / ct(2)
            gw, gh = g[3] - g[1], g[4] - g[2]
            gx, gy = (g[1] + g[3]) / ct(2), (g[2] + g[4]) / ct(2)
            with np.errstate(all="ignore"):
                loc_t[j] = [(gx - ax) / aw / v[0], (gy - ay) / ah / v[1],
                            np.log(gw / aw) / v[2], np.log(gh / ah) / v[3]]
    return loc_t, mask, cls_t


def _box_iou(a: np.ndarray, b: np.ndarray) -> Any:
    z = a.dtype.type(0)
    w = max(z, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(z, min(a[3], b[3]) - max(a[1], b[1]))
    i = w * h
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i
    return a.dtype.type(0) if not u > 0 else i / u


def multibox_target_reference(p: MultiBoxTargetParams, anchor: np.ndarray, label: np.ndarray,
                              cls_pred: np.ndarray) -> tuple[np.ndarray, ...]:
    ct = comp(anchor.dtype)
    b_n, a_n = label.shape[0], anchor.shape[1]
    anc = anchor.astype(ct).reshape(a_n, 4)
    res = [_target_batch(p, anc, label[b].astype(ct), cls_pred[b].astype(ct), ct)
           for b in range(b_n)]
    dt = anchor.dtype
    if not res:
        return (np.zeros((0, a_n * 4), dt), np.zeros((0, a_n * 4), dt), np.zeros((0, a_n), dt))
    return (np.stack([r[0].reshape(-1) for r in res]).astype(dt),
            np.stack([r[1].reshape(-1) for r in res]).astype(dt),
            np.stack([r[2] for r in res]).astype(dt))


def multibox_target_lowering(call: KernelCall) -> Lowered:
    dt = check_float("MultiBoxTarget", call.in_dtypes[0])
    a = call.in_shapes[0][1]
    b, ln, w = call.in_shapes[1]
    c = call.in_shapes[2][1]
    if b * a == 0:
        return Lowered()
    p: MultiBoxTargetParams = call.params
    spec = KernelSpec.make("detection/multibox_target.c.j2", dtype=dt)
    ia = (b, a, ln, w, c, p.minimum_negative_samples)
    fa = (float(p.overlap_threshold), float(p.ignore_label), float(p.negative_mining_ratio),
          float(p.negative_mining_thresh), *p.variances)
    return Lowered((Launch(spec, ia, fa, workspace=b * (6 * a + ln) * 8),))


MULTIBOX_TARGET = register(OpDef(
    name="_contrib_MultiBoxTarget",
    params=MultiBoxTargetParams,
    inputs=("anchor", "label", "cls_pred"),
    outputs=("loc_target", "loc_mask", "cls_target"),
    infer_shape=multibox_target_shape,
    infer_type=same_type,
    reference=multibox_target_reference,
    kernels={DENSE: Kernel(multibox_target_lowering)},
    grad=no_gradient,  # NOTE: zero in MXNet too
    differentiable=False,
    doc="Training targets of SSD: each anchor matched to a ground truth (greedy bipartite, then "
        "by IoU), with encoded box offsets, their mask and the class target (0: negative).",
    examples=(
        Example(((1, 8, 4), (2, 3, 5), (2, 3, 8)), low=0.0, high=1.0),
        Example(((1, 10, 4), (2, 2, 6), (2, 4, 10)),
                {"overlap_threshold": 0.1, "negative_mining_ratio": 2.0,
                 "negative_mining_thresh": 0.3, "minimum_negative_samples": 1,
                 "ignore_label": -2.0, "variances": (0.2, 0.2, 0.5, 0.5)},
                low=0.0, high=1.0),
    ),
    bad_params=({"variances": (0.1,)}, {"overlap": 0.5}),
))
