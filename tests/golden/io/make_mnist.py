"""Run in the MXNet 1.9.1 venv: ``~/mxref/bin/python tests/golden/io/make_mnist.py``.

Writes mnist.json: MNISTIter's batches over two epochs for small idx files whose contents are a
formula (``images[i].ravel()[j] = (i * H * W + j) % 256``, ``labels[i] = i % 10``), which the
test writes again itself.
"""

import json
import pathlib
import struct
import tempfile

import mxnet as mx
import numpy as np

OUT = pathlib.Path(__file__).with_name("mnist.json")
N, H, W = 11, 4, 5


def write_idx(path, arr, magic):
    with pathlib.Path(path).open("wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape))
        f.write(arr.astype(np.uint8).tobytes())


CASES = [dict(batch_size=3, shuffle=False), dict(batch_size=3, shuffle=False, flat=True),
         dict(batch_size=4, shuffle=True, seed=3), dict(batch_size=2, shuffle=True, seed=0),
         dict(batch_size=12, shuffle=False), dict(batch_size=11, shuffle=False)]
CASES += [dict(batch_size=1, shuffle=False, num_parts=p, part_index=k)
          for p, k in ((2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (4, 3))]

with tempfile.TemporaryDirectory() as tmp:
    img, lab = f"{tmp}/img", f"{tmp}/lab"
    write_idx(img, (np.arange(N * H * W) % 256).reshape(N, H, W), 0x803)
    write_idx(lab, np.arange(N) % 10, 0x801)
    res = []
    for kw in CASES:
        try:
            it = mx.io.MNISTIter(image=img, label=lab, silent=True, **kw)
        except StopIteration:  # MXDataIter reads a first batch; there is none
            res.append({"kwargs": kw, "error": "no batch"})
            continue
        case = {"kwargs": kw, "provide_data": [list(d.shape) for d in it.provide_data],
                "provide_label": [list(d.shape) for d in it.provide_label], "epochs": []}
        for _ in range(2):
            case["epochs"].append([{"data": b.data[0].asnumpy().tolist(),
                                    "label": b.label[0].asnumpy().tolist(), "pad": b.pad,
                                    "index": [int(i) for i in b.index]} for b in it])
            it.reset()
        res.append(case)
    # the shuffle order on more examples (labels i % 250 name the examples)
    write_idx(img, np.zeros((250, 2, 2)), 0x803)
    write_idx(lab, np.arange(250), 0x801)
    perms = {}
    for seed in (0, 9):
        it = mx.io.MNISTIter(image=img, label=lab, batch_size=10, shuffle=True, seed=seed,
                             silent=True)
        perms[seed] = [int(x) for b in it for x in b.label[0].asnumpy()]
OUT.write_text(json.dumps({"cases": res, "perms250": perms}))
print("wrote", OUT)
