"""MXNet 1.9.1's Proposal / MultiProposal outputs on seeded random inputs, written for
tests/detection/test_proposal.py (run in the reference venv):
``~/mxref/bin/python tests/detection/golden/make_proposal.py tests/detection/golden``."""

import json
import sys
from pathlib import Path

import mxnet as mx
import numpy as np

CASES = [  # name, batch, scales, ratios, H, W, im_info, params (multi: MultiProposal at B=1)
    ("a", 1, (2, 4), (0.5, 1, 2), 5, 6, [[80, 96, 1]],
     {"rpn_pre_nms_top_n": 50, "rpn_post_nms_top_n": 20, "threshold": 0.7,
      "rpn_min_size": 4}),
    ("b", 1, (8,), (1,), 4, 4, [[40, 50, 1.5]],
     {"rpn_pre_nms_top_n": 10, "rpn_post_nms_top_n": 12, "threshold": 0.5,
      "rpn_min_size": 16}),
    ("c", 2, (1, 2), (0.5, 2), 3, 4, [[48, 64, 1], [30, 40, 0.5]],
     {"rpn_pre_nms_top_n": -1, "rpn_post_nms_top_n": 8, "threshold": 0.6, "rpn_min_size": 2}),
    ("d", 1, (2, 4), (0.5, 1), 4, 5, [[64, 80, 1]],
     {"rpn_pre_nms_top_n": 30, "rpn_post_nms_top_n": 10, "threshold": 0.7, "rpn_min_size": 4,
      "iou_loss": True}),
    ("e", 1, (2,), (1,), 3, 3, [[20, 24, 1]],
     {"rpn_pre_nms_top_n": 5, "rpn_post_nms_top_n": 6, "threshold": 0.3, "rpn_min_size": 1,
      "feature_stride": 8, "multi": True}),
]


def main(outdir: str) -> None:
    rng = np.random.RandomState(0)
    arrays = {}
    meta = {}
    for name, b, scales, ratios, h, w, im, kw in CASES:
        kw = dict(kw)
        multi = kw.pop("multi", False) or b > 1
        a = len(scales) * len(ratios)
        cls = rng.rand(b, 2 * a, h, w).astype(np.float32)
        bbox = (rng.randn(b, 4 * a, h, w) * 0.3).astype(np.float32)
        info = np.array(im, np.float32)
        params = {"scales": list(scales), "ratios": list(ratios), **kw}
        f = mx.nd.contrib.MultiProposal if multi else mx.nd.contrib.Proposal
        out, score = f(mx.nd.array(cls), mx.nd.array(bbox), mx.nd.array(info),
                       output_score=True, **params)
        arrays.update({f"{name}/cls": cls, f"{name}/bbox": bbox, f"{name}/info": info,
                       f"{name}/out": out.asnumpy(), f"{name}/score": score.asnumpy()})
        meta[name] = {"multi": multi, "params": params}
    np.savez(Path(outdir) / "proposal_mxnet.npz", **arrays)
    (Path(outdir) / "proposal_mxnet.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
