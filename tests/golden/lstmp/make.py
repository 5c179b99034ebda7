"""MXNet 1.9.1's LSTM-with-projection (RNN(mode='lstm', projection_size=P)) forward outputs,
for tests/ops/test_rnn_projection.py. MXNet's CPU build runs LSTMP in inference only (training
raises "No training support for LSTM with projection on CPU currently"), so there are no
gradients here. Run: ~/mxref/bin/python tests/golden/lstmp/make.py tests/golden/lstmp"""

import json
import sys
from pathlib import Path

import mxnet as mx
import numpy as np

# id: (T, N, I, H, P, layers, bidirectional, dtype)
CASES = {
    "uni": (3, 2, 3, 4, 2, 1, False, "float32"),
    "deep_bi": (4, 2, 3, 4, 3, 2, True, "float32"),
    "bi_f64": (3, 3, 2, 3, 2, 1, True, "float64"),
    "three_layers": (2, 2, 2, 3, 2, 3, False, "float32"),
}


def main(out: Path) -> None:
    rng = np.random.default_rng(7)
    arrays, meta = {}, {}
    for cid, (t, n, i, h, p, layers, bi, dt) in CASES.items():
        kw = dict(state_size=h, projection_size=p, num_layers=layers, bidirectional=bi,
                  mode="lstm", state_outputs=True)
        s = mx.sym.RNN(mx.sym.var("data"), mx.sym.var("parameters"), mx.sym.var("state"),
                       mx.sym.var("state_cell"), **kw)
        shapes = s.infer_shape(data=(t, n, i))[0]
        ins = [rng.uniform(-0.6, 0.6, sh).astype(dt) for sh in shapes]
        outs = mx.nd.RNN(*[mx.nd.array(a, dtype=dt) for a in ins], **kw)
        for k, a in enumerate(ins):
            arrays[f"{cid}/in{k}"] = a
        for k, o in enumerate(outs):
            arrays[f"{cid}/out{k}"] = o.asnumpy()
        meta[cid] = kw
    np.savez_compressed(out / "lstmp.npz", **arrays)
    (out / "cases.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
