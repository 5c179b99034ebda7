#!/usr/bin/env python
"""Write nnsym/examples/mobilenet_v1_w025-expected.params: MXNet 1.9.1's inference output of
the shipped MobileNet checkpoint on a seeded input (docs/porting.md compares nnsym with it).

Run with the reference interpreter, from the repository root (deterministic: two runs give
byte-identical files; it imports nothing from nnsym):

    ~/mxref/bin/python tests/golden/modelzoo/make_porting_example.py

The part between the markers is docs/porting.md's MXNet block, as written there.
"""

import os
from pathlib import Path

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import mxnet as mx

if mx.__version__ != "1.9.1":
    raise SystemExit(f"run this with MXNet 1.9.1 (~/mxref/bin/python), not {mx.__version__}")

os.chdir(Path(__file__).resolve().parents[3] / "nnsym" / "examples")
# --- docs/porting.md
import mxnet as mx
import numpy as np

sym, arg_params, aux_params = mx.model.load_checkpoint("mobilenet_v1_w025", 0)
x = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 3, 32, 32)))
mod = mx.mod.Module(sym, data_names=["data"], label_names=None, context=mx.cpu())
mod.bind(data_shapes=[("data", x.shape)], for_training=False)
mod.set_params(arg_params, aux_params)
mod.forward(mx.io.DataBatch([x]), is_train=False)
out = mod.get_outputs()[0]
mx.nd.save("mobilenet_v1_w025-expected.params", {"data": x, "output": out})
# --- end
print("wrote", Path("mobilenet_v1_w025-expected.params").resolve())
