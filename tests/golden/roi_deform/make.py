"""Writes roi_deform.npz and cases.json: MXNet 1.9.1's forward outputs and gradients for the
ROI and deformable contrib operators in configurations the registry examples cannot express
(aligned ROIAlign, rotated rois at large angles, real-valued rois and offsets). Run in the MXNet
reference venv from this directory: ``~/mxref/bin/python make.py``."""

import json
import os

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

rs = np.random.RandomState(7)


def u(*shape, lo=-2.0, hi=2.0):
    return rs.uniform(lo, hi, shape)


ROIS = np.array([[0, 0.5, 0.7, 3.3, 4.1], [1, 1.2, 0.3, 4.9, 5.2], [1, 1, 1, 4, 4.5],
                 [0, -3, -2, 9, 8], [1, 2.2, 3.1, 2.9, 3.3]])
RROIS = np.array([[0, 2.5, 2.7, 3.3, 2.1, 30], [1, 3.2, 2.3, 2.9, 2.2, -45],
                  [1, 3, 3, 8, 9, 120], [0, 1, 1, 0.5, 0.5, 10], [1, 4.1, 2.2, 3.3, 1.7, 200]])

# name, operator, params, inputs (name -> array), inputs that take gradients
CASES = [
    ("roialign_aligned", "ROIAlign", {"pooled_size": (2, 3), "spatial_scale": 1.0,
                                      "aligned": True}, {"data": u(2, 3, 6, 7), "rois": ROIS},
     ["data"]),
    ("roialign_aligned_ps", "ROIAlign",
     {"pooled_size": (2, 2), "spatial_scale": 0.5, "aligned": True, "position_sensitive": True,
      "sample_ratio": 2}, {"data": u(2, 8, 6, 7), "rois": ROIS}, ["data"]),
    ("roialign_adaptive", "ROIAlign", {"pooled_size": (3, 2), "spatial_scale": 0.8},
     {"data": u(2, 2, 7, 6, lo=-1, hi=1), "rois": ROIS * 1.3}, ["data"]),
    ("rroialign_angles", "RROIAlign", {"pooled_size": (2, 3), "spatial_scale": 1.0},
     {"data": u(2, 3, 7, 8), "rois": RROIS}, []),
    ("rroialign_ratio", "RROIAlign",
     {"pooled_size": (3, 2), "spatial_scale": 0.75, "sampling_ratio": 3},
     {"data": u(2, 2, 6, 6, lo=-1, hi=1), "rois": RROIS}, []),
    ("psroi_real_rois", "PSROIPooling",
     {"spatial_scale": 0.7, "output_dim": 2, "pooled_size": 3},
     {"data": u(2, 18, 6, 7), "rois": ROIS}, ["data"]),
    ("dpsroi_trans", "DeformablePSROIPooling",
     {"spatial_scale": 0.7, "output_dim": 2, "group_size": 3, "pooled_size": 3,
      "sample_per_part": 2, "trans_std": 0.3},
     {"data": u(2, 18, 6, 7), "rois": ROIS, "trans": u(5, 4, 3, 3, lo=-1, hi=1)},
     ["data", "trans"]),
    ("dpsroi_parts", "DeformablePSROIPooling",
     {"spatial_scale": 0.9, "output_dim": 4, "group_size": 2, "pooled_size": 3,
      "part_size": 2, "sample_per_part": 3, "trans_std": 0.2},
     {"data": u(2, 16, 7, 6), "rois": ROIS, "trans": u(5, 4, 2, 2, lo=-1, hi=1)},
     ["data", "trans"]),
    ("dpsroi_no_trans", "DeformablePSROIPooling",
     {"spatial_scale": 0.9, "output_dim": 2, "group_size": 3, "pooled_size": 3,
      "sample_per_part": 3, "no_trans": True},
     {"data": u(2, 18, 6, 7), "rois": ROIS}, ["data"]),
    ("dconv_groups", "DeformableConvolution",
     {"kernel": (3, 3), "pad": (1, 1), "num_filter": 4, "num_group": 2,
      "num_deformable_group": 2},
     {"data": u(2, 4, 5, 6), "offset": u(2, 36, 5, 6, lo=-2.5, hi=2.5),
      "weight": u(4, 2, 3, 3, lo=-1, hi=1), "bias": u(4, lo=-1, hi=1)},
     ["data", "offset", "weight", "bias"]),
    ("dconv_stride_dilate", "DeformableConvolution",
     {"kernel": (2, 3), "stride": (2, 1), "dilate": (1, 2), "pad": (0, 2), "num_filter": 3,
      "no_bias": True},
     {"data": u(1, 3, 7, 5), "offset": u(1, 12, 3, 5, lo=-1.5, hi=1.5),
      "weight": u(3, 3, 2, 3, lo=-1, hi=1)}, ["data", "offset", "weight"]),
    # MXNet 1.9.1 computes ModulatedDeformableConvolution's gradient on GPUs only: forward here
    ("mdconv_groups", "ModulatedDeformableConvolution",
     {"kernel": (3, 3), "pad": (1, 1), "num_filter": 4, "num_group": 2,
      "num_deformable_group": 2},
     {"data": u(2, 4, 5, 6), "offset": u(2, 36, 5, 6, lo=-2.5, hi=2.5),
      "mask": u(2, 18, 5, 6, lo=0, hi=1), "weight": u(4, 2, 3, 3, lo=-1, hi=1),
      "bias": u(4, lo=-1, hi=1)}, []),
    ("mdconv_stride_dilate", "ModulatedDeformableConvolution",
     {"kernel": (2, 3), "stride": (2, 1), "dilate": (1, 2), "pad": (0, 2), "num_filter": 3,
      "no_bias": True},
     {"data": u(1, 3, 7, 5), "offset": u(1, 12, 3, 5, lo=-1.5, hi=1.5),
      "mask": u(1, 6, 3, 5, lo=0, hi=1), "weight": u(3, 3, 2, 3, lo=-1, hi=1)}, []),
]


def run(name, op, params, ins, wrt):
    dt = np.float32
    args = {k: mx.nd.array(v, dtype=dt) for k, v in ins.items()}
    grads = {k: mx.nd.zeros(v.shape, dtype=dt) for k, v in ins.items() if k in wrt}
    s = getattr(mx.sym.contrib, op)(*[mx.sym.var(k) for k in ins], **params)
    reqs = {k: ("write" if k in wrt else "null") for k in ins}
    exe = s.bind(mx.cpu(), args, args_grad=grads, grad_req=reqs)
    out = exe.forward(is_train=True)[0].asnumpy()
    res = {f"{name}/in_{k}": v.asnumpy() for k, v in args.items()}
    res[f"{name}/out"] = out
    if wrt:
        head = rs.standard_normal(out.shape).astype(dt)
        exe.backward([mx.nd.array(head)])
        res[f"{name}/head"] = head
        res.update({f"{name}/grad_{k}": grads[k].asnumpy() for k in wrt})
    return res


def main():
    res, meta = {}, []
    for name, op, params, ins, wrt in CASES:
        res.update(run(name, op, params, ins, wrt))
        meta.append({"name": name, "op": f"_contrib_{op}",
                     "params": {k: list(v) if isinstance(v, tuple) else v
                                for k, v in params.items()},
                     "inputs": list(ins), "grads": wrt})
    np.savez_compressed("roi_deform.npz", **res)
    with open("cases.json", "w") as f:
        json.dump({"mxnet": mx.__version__, "cases": meta}, f, indent=1)


if __name__ == "__main__":
    main()
