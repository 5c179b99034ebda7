"""Step 1 of the cross-check that Module.fit's checkpoints load in MXNet 1.9.1 (run with
nnsym): ``python tests/golden/training/module/make_nnsym_checkpoint.py DIR`` fits a small
FC + BatchNorm + FC net for 2 epochs with ``do_checkpoint(DIR/m)`` and saves its predictions
(DIR/pred.npy) and inputs (DIR/x.npy). Step 2: check_checkpoint_in_mxnet.py."""

import sys
from pathlib import Path

import numpy as np

import nnsym as mx

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 6)).astype(np.float32)
y = rng.integers(0, 3, 64).astype(np.float32)
d = mx.sym.Variable("data")
h = mx.sym.BatchNorm(mx.sym.FullyConnected(d, num_hidden=8, name="fc1"), name="bn")
net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Activation(h, act_type="relu"),
                                                 num_hidden=3, name="fc2"), name="softmax")
mod = mx.mod.Module(net)
mod.fit(mx.io.NDArrayIter(x, y, batch_size=16), num_epoch=2,
        epoch_end_callback=mx.callback.do_checkpoint(str(out / "m")))
np.save(out / "pred.npy", mod.predict(mx.io.NDArrayIter(x, y, batch_size=16)).asnumpy())
np.save(out / "x.npy", x)
print(f"wrote {out}/m-symbol.json, m-0001.params, m-0002.params")
