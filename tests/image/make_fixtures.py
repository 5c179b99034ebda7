"""Writes resize_mxnet.npz: MXNet 1.9.1's image resize (OpenCV 3.4.2 inside) on small seeded
images, for test_image_ops.py, and contrib_mxnet.npz: BilinearResize2D in every mode and
AdaptiveAvgPooling2D, forward and gradient, for test_resize2d.py. Run in the reference venv
from the repository root: ``~/mxref/bin/python tests/image/make_fixtures.py``. Never imported
by the tests."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import mxnet as mx
import numpy as np

CASES = [  # (image shape, dtype, size, keep_ratio, interp)
    ((4, 5, 3), "uint8", (7, 3), False, 1),
    ((6, 6, 1), "uint8", (2, 9), False, 1),
    ((5, 7, 3), "uint8", (11, 8), False, 1),
    ((5, 7, 3), "uint8", (4,), True, 0),
    ((6, 4, 2), "uint8", (9, 5), False, 2),
    ((4, 5, 3), "float32", (7, 3), False, 1),
    ((7, 3, 2), "float32", (2, 10), False, 1),
    ((4, 5, 3), "float32", (9, 6), False, 2),
    ((5, 4, 1), "float32", (3,), False, 0),
    ((2, 5, 4, 3), "float32", (3, 6), False, 1),
    ((4, 6, 2), "float64", (5, 5), False, 1),
    ((6, 9, 3), "float32", (3, 2), False, 3),  # area, integer factors
    ((7, 10, 2), "float32", (4, 3), False, 3),  # area, fractional boxes
    ((4, 5, 1), "float32", (9, 7), False, 3),  # area upscaling (bilinear-like)
    ((6, 4, 3), "float32", (7, 3), False, 3),  # area, one axis up: bilinear-like
    ((7, 10, 3), "uint8", (4, 3), False, 3),
    ((5, 4, 2), "float32", (7, 3), False, 4),  # Lanczos
    ((6, 6, 3), "uint8", (9, 4), False, 4),
    ((4, 5, 3), "float64", (3, 8), False, 4),
]


def main() -> None:
    out = {}
    rng = np.random.RandomState(7)
    for k, (shape, dt, size, keep, interp) in enumerate(CASES):
        x = rng.randint(0, 256, shape).astype(dt)
        y = mx.nd.image.resize(mx.nd.array(x, dtype=dt), size=size, keep_ratio=keep,
                               interp=interp).asnumpy()
        out[f"{k}/in"], out[f"{k}/out"] = x, y
        out[f"{k}/params"] = np.array([str(size), str(keep), str(interp)])
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/image")
    np.savez_compressed(folder / "resize_mxnet.npz", **out)
    # one process per case: MXNet 1.9.1 corrupts its heap over several backward calls here
    merged = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(len(CONTRIB)):
            part = Path(tmp) / f"{k}.npz"
            subprocess.run([sys.executable, __file__, "--case", str(k), str(part)], check=True)
            merged.update(dict(np.load(part)))
    np.savez_compressed(folder / "contrib_mxnet.npz", **merged)


CONTRIB = [  # (operator, data shape, like shape or None, params)
    ("BilinearResize2D", (2, 2, 3, 4), None, {"height": 5, "width": 7}),
    ("BilinearResize2D", (1, 3, 6, 5), None, {"height": 4, "width": 3, "align_corners": False}),
    ("BilinearResize2D", (1, 1, 5, 4), None, {"scale_height": 1.7, "scale_width": 0.5}),
    ("BilinearResize2D", (1, 2, 7, 6), None, {"mode": "odd_scale", "scale_height": 0.5,
                                              "scale_width": 1.5}),
    ("BilinearResize2D", (2, 1, 3, 5), (1, 1, 8, 2), {"mode": "like"}),
    ("BilinearResize2D", (1, 1, 7, 6), None, {"mode": "to_even_down"}),
    ("BilinearResize2D", (1, 1, 7, 6), None, {"mode": "to_even_up", "align_corners": False}),
    ("BilinearResize2D", (1, 1, 7, 6), None, {"mode": "to_odd_down"}),
    ("BilinearResize2D", (1, 1, 7, 6), None, {"mode": "to_odd_up"}),
    ("AdaptiveAvgPooling2D", (2, 2, 7, 5), None, {"output_size": (3, 2)}),
    ("AdaptiveAvgPooling2D", (1, 1, 4, 6), None, {"output_size": 4}),
    ("AdaptiveAvgPooling2D", (1, 2, 3, 3), None, {}),
]


def contrib(k: int) -> dict:
    out = {}
    rng = np.random.RandomState(3 + k)
    op, shape, like, params = CONTRIB[k]
    out[f"{k}/case"] = np.array(json.dumps([op, params]))
    x = mx.nd.array(rng.uniform(-1, 1, shape))
    if like:  # forward only: MXNet 1.9.1's like-mode backward corrupts its heap
        extra = mx.nd.array(rng.uniform(-1, 1, like))
        y = getattr(mx.nd.contrib, op)(x, extra, **params)
        out[f"{k}/in"], out[f"{k}/out"], out[f"{k}/like"] = (
            x.asnumpy(), y.asnumpy(), extra.asnumpy())
        return out
    x.attach_grad()
    with mx.autograd.record():
        y = getattr(mx.nd.contrib, op)(x, **params)
    head = mx.nd.array(rng.uniform(-1, 1, y.shape))
    y.backward(head)
    out[f"{k}/in"], out[f"{k}/out"] = x.asnumpy(), y.asnumpy()
    out[f"{k}/head"], out[f"{k}/grad"] = head.asnumpy(), x.grad.asnumpy()
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--case":
        np.savez(sys.argv[3], **contrib(int(sys.argv[2])))
    else:
        main()
