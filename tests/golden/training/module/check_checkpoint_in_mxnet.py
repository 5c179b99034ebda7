"""Step 2 (run in the MXNet 1.9.1 reference venv): ``~/mxref/bin/python
tests/golden/training/module/check_checkpoint_in_mxnet.py DIR`` loads the checkpoint nnsym's
Module.fit wrote with ``mx.mod.Module.load(DIR/m, 2)``, predicts, and compares with nnsym's
predictions. Exit status 0 when they agree within 1e-5."""

import sys

import mxnet as mx
import numpy as np

d = sys.argv[1]
x = np.load(d + "/x.npy")
mod = mx.mod.Module.load(d + "/m", 2, label_names=None)
mod.bind(data_shapes=[("data", (16, 6))], for_training=False)
p = mod.predict(mx.io.NDArrayIter(x, batch_size=16)).asnumpy()
diff = float(np.abs(p - np.load(d + "/pred.npy")).max())
print("MXNet loaded nnsym's checkpoint; largest difference from nnsym's predictions:", diff)
sys.exit(0 if diff < 1e-5 else 1)
