"""Faster R-CNN's region proposal operators: contrib.Proposal (one image) and
contrib.MultiProposal (a batch): anchors at every feature-map cell, decoded by the predicted
deltas, clipped to the image, small boxes scored -1, the best rpn_pre_nms_top_n by score,
non-maximum suppression, and rpn_post_nms_top_n rows per image (repeating the kept ones when
fewer survive)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.detection.box import check_float, comp, same_type
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class ProposalParams(Params):
    rpn_pre_nms_top_n: int = field(default=6000, doc="Boxes kept by score before NMS "
                                   "(<= 0: all).")
    rpn_post_nms_top_n: int = field(default=300, lower=1, doc="Rows per image after NMS.")
    threshold: float = field(default=0.7, doc="NMS suppresses an IoU above this.")
    rpn_min_size: int = field(default=16, doc="Boxes narrower or lower than this (times the "
                              "image scale) are scored -1.")
    scales: tuple[float, ...] = field(default=(4.0, 8.0, 16.0, 32.0), doc="Anchor scales.")
    ratios: tuple[float, ...] = field(default=(0.5, 1.0, 2.0), doc="Anchor aspect ratios.")
    feature_stride: int = field(default=16, lower=1, doc="Image pixels per feature-map cell.")
    output_score: bool = field(default=False, doc="Also output the scores.")
    iou_loss: bool = field(default=False, doc="Deltas are corner offsets (IoU loss).")

    def __post_init__(self) -> None:
        if not self.scales or not self.ratios:
            raise ValueError("scales and ratios must not be empty")
        if any(not r > 0 for r in self.ratios):
            raise ValueError(f"ratios {self.ratios} must be above 0")


def base_anchors(p: ProposalParams) -> np.ndarray:
    """(ratios x scales, 4) anchors around cell (0, 0), in float32 as MXNet: per ratio a box of
    the stride's area, rounded, then scaled."""
    f = np.float32
    w = h = f(p.feature_stride)
    xc = yc = f(0.5) * (w - f(1))
    out = []
    for r in p.ratios:
        size_ratio = np.floor(w * h / f(r))
        nw = np.floor(np.sqrt(size_ratio) + f(0.5))
        nh = np.floor(nw * f(r) + f(0.5))
        for s in p.scales:
            sw, sh = nw * f(s), nh * f(s)
            out.append([xc - f(0.5) * (sw - f(1)), yc - f(0.5) * (sh - f(1)),
                        xc + f(0.5) * (sw - f(1)), yc + f(0.5) * (sh - f(1))])
    return np.array(out, f)


def _shape_rule(batched: bool) -> Any:
    def rule(p: ProposalParams, ins: list, outs: list) -> tuple[list, list]:
        cls, bbox, info = ins
        a = len(p.scales) * len(p.ratios)
        if cls is not None and (len(cls) != 4 or cls[1] != 2 * a):
            raise RuleError(f"cls_prob has shape {shape_str(cls)}; it must be (B, 2 * {a} "
                            "anchors, H, W)")
        if cls is None:
            return list(ins), list(outs)
        b, _, h, w = cls
        if not batched and b != 1:
            raise RuleError(f"cls_prob has batch {b}; Proposal takes one image "
                            "(MultiProposal takes a batch)")
        if bbox is not None and tuple(bbox) != (b, 4 * a, h, w):
            raise RuleError(f"bbox_pred has shape {shape_str(bbox)}; it must be "
                            f"{shape_str((b, 4 * a, h, w))}")
        if info is not None and tuple(info) != (b, 3):
            raise RuleError(f"im_info has shape {shape_str(info)}; it must be ({b}, 3): "
                            "[height, width, scale]")
        n = b * p.rpn_post_nms_top_n
        return [cls, (b, 4 * a, h, w), (b, 3)], [(n, 5), (n, 1)]
    return rule


def _real(v: Any, n: int) -> int:
    """int(v) as MXNet truncates it, bounded to [0, n] (NaN: 0)."""
    return (n if v >= n else int(v)) if v > 0 else 0


def _one_image(p: ProposalParams, scores: np.ndarray, deltas: np.ndarray, info: np.ndarray,
               ct: Any) -> tuple[np.ndarray, np.ndarray]:
    """scores (A, H, W) foreground, deltas (4A, H, W), info [height, width, scale]."""
    anchors = base_anchors(p).astype(ct)
    a_n, h_n, w_n = scores.shape
    stride = ct(p.feature_stride)
    im_h, im_w, scale = info
    real_h, real_w = _real(im_h / stride, h_n), _real(im_w / stride, w_n)
    one, half = ct(1), ct(0.5)
    boxes = np.zeros((h_n, w_n, a_n, 5), ct)
    for h in range(h_n):
        for w in range(w_n):
            for a in range(a_n):
                x1, y1, x2, y2 = anchors[a] + np.array([w, h, w, h], ct) * stride
                dx, dy, dw, dh = deltas[a * 4:a * 4 + 4, h, w]
                with np.errstate(all="ignore"):
                    if p.iou_loss:
                        px1, py1, px2, py2 = x1 + dx, y1 + dy, x2 + dw, y2 + dh
                    else:
                        bw, bh = x2 - x1 + one, y2 - y1 + one
                        cx, cy = x1 + half * (bw - one), y1 + half * (bh - one)
                        pcx, pcy = dx * bw + cx, dy * bh + cy
                        pw, ph = np.exp(dw) * bw, np.exp(dh) * bh
                        px1, py1 = pcx - half * (pw - one), pcy - half * (ph - one)
                        px2, py2 = pcx + half * (pw - one), pcy + half * (ph - one)
                box = [max(min(px1, im_w - one), ct(0)), max(min(py1, im_h - one), ct(0)),
                       max(min(px2, im_w - one), ct(0)), max(min(py2, im_h - one), ct(0))]
                score = scores[a, h, w] if h < real_h and w < real_w else ct(-1)
                boxes[h, w, a] = [*box, score]
    boxes = boxes.reshape(-1, 5)
    min_size = ct(p.rpn_min_size) * scale
    small = ((boxes[:, 2] - boxes[:, 0] + one) < min_size) | (
        (boxes[:, 3] - boxes[:, 1] + one) < min_size)
    boxes[small, :2] -= min_size / ct(2)
    boxes[small, 2:4] += min_size / ct(2)
    boxes[small, 4] = -1
    order = np.argsort(-boxes[:, 4], kind="stable")
    pre = p.rpn_pre_nms_top_n if p.rpn_pre_nms_top_n > 0 else len(boxes)
    ordered = boxes[order[:min(pre, len(boxes))]]
    area = (ordered[:, 2] - ordered[:, 0] + one) * (ordered[:, 3] - ordered[:, 1] + one)
    keep: list[int] = []
    supp = np.zeros(len(ordered), bool)
    for i in range(len(ordered)):
        if supp[i]:
            continue
        keep.append(i)
        if len(keep) == p.rpn_post_nms_top_n:
            break
        for j in range(i + 1, len(ordered)):
            if supp[j]:
                continue
            xx1, yy1 = max(ordered[i, 0], ordered[j, 0]), max(ordered[i, 1], ordered[j, 1])
            xx2, yy2 = min(ordered[i, 2], ordered[j, 2]), min(ordered[i, 3], ordered[j, 3])
            iw, ih = max(ct(0), xx2 - xx1 + one), max(ct(0), yy2 - yy1 + one)
            inter = iw * ih
            with np.errstate(all="ignore"):
                ovr = inter / (area[i] + area[j] - inter)
            if ovr > ct(p.threshold):
                supp[j] = True
    rows = [keep[i % len(keep)] for i in range(p.rpn_post_nms_top_n)]
    return ordered[rows, :4], ordered[rows, 4:5]


def proposal_reference(p: ProposalParams, cls_prob: np.ndarray, bbox_pred: np.ndarray,
                       im_info: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ct = comp(cls_prob.dtype)
    a_n = cls_prob.shape[1] // 2
    outs, scores = [], []
    for b in range(cls_prob.shape[0]):
        box, score = _one_image(p, cls_prob[b, a_n:].astype(ct), bbox_pred[b].astype(ct),
                                im_info[b].astype(ct), ct)
        outs.append(np.concatenate([np.full((len(box), 1), b, ct), box], axis=1))
        scores.append(score)
    dt = cls_prob.dtype
    return np.concatenate(outs).astype(dt), np.concatenate(scores).astype(dt)


def proposal_lowering(call: KernelCall) -> Lowered:
    dt = check_float("Proposal", call.in_dtypes[0])
    b, a2, h, w = call.in_shapes[0]
    if b == 0:
        return Lowered()
    p: ProposalParams = call.params
    count = h * w * (a2 // 2)
    spec = KernelSpec.make("detection/proposal.c.j2", dtype=dt, iou_loss=bool(p.iou_loss))
    ia = (b, a2 // 2, h, w, p.rpn_pre_nms_top_n, p.rpn_post_nms_top_n, p.feature_stride)
    fa = (float(p.threshold), float(p.rpn_min_size), *base_anchors(p).ravel().tolist())
    return Lowered((Launch(spec, ia, fa, workspace=b * 15 * count * 8),))


def _proposal_op(name: str, batched: bool, examples: tuple[Example, ...]) -> OpDef:
    return register(OpDef(
        name=name,
        params=ProposalParams,
        inputs=("cls_prob", "bbox_pred", "im_info"),
        outputs=("output", "score"),
        num_visible_outputs=lambda p: 2 if p.output_score else 1,
        infer_shape=_shape_rule(batched),
        infer_type=same_type,
        reference=proposal_reference,
        kernels={DENSE: Kernel(proposal_lowering)},
        grad=no_gradient,  # NOTE: zero in MXNet too
        differentiable=False,
        doc="Region proposals [batch, x1, y1, x2, y2] from RPN scores and box deltas"
            + (" for a batch of images." if batched else " for one image."),
        examples=examples,
        bad_params=({"scales": ()}, {"rpn_post_nms_top_n": 0}, {"feature_stride": 0},
                    {"scale": (8.0,)}),
    ))


# The examples' images (im_info drawn as the integer 64: 64 x 64 pixels) cover the feature
# map exactly and rpn_min_size is 0, so no score is -1 and none ties (MXNet's CPU sort is not
# stable: ties may order differently there; MXNet refuses a feature map smaller than the image).
PROPOSAL = _proposal_op("_contrib_Proposal", False, (
    Example(((1, 12, 4, 4), (1, 24, 4, 4), (1, 3)),
            {"scales": (2.0, 4.0), "ratios": (0.5, 1.0, 2.0), "rpn_pre_nms_top_n": 40,
             "rpn_post_nms_top_n": 12, "rpn_min_size": 0, "output_score": True},
            low=0.0, high=0.3, ints={2: (64, 65)}),
))
MULTI_PROPOSAL = _proposal_op("_contrib_MultiProposal", True, (
    Example(((2, 4, 4, 4), (2, 8, 4, 4), (2, 3)),
            {"scales": (1.0, 2.0), "ratios": (1.0,), "rpn_pre_nms_top_n": -1,
             "rpn_post_nms_top_n": 6, "rpn_min_size": 0, "threshold": 0.5,
             "output_score": True, "iou_loss": True},
            low=0.0, high=0.3, ints={2: (64, 65)}),
    Example(((2, 4, 4, 4), (2, 8, 4, 4), (2, 3)),
            {"scales": (2.0, 3.0), "ratios": (2.0,), "rpn_post_nms_top_n": 40,
             "rpn_min_size": 0, "threshold": 0.3},
            low=0.0, high=0.3, ints={2: (64, 65)}),
))
