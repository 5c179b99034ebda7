"""Writes resize_mxnet.npz: MXNet 1.9.1's image resize (OpenCV 3.4.2 inside) on small seeded
images, for test_image_ops.py. Run in the reference venv from the repository root:
``~/mxref/bin/python tests/image/make_fixtures.py``. Never imported by the tests."""

import sys
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
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/image/resize_mxnet.npz")
    np.savez_compressed(path, **out)


if __name__ == "__main__":
    main()
