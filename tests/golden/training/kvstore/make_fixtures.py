"""Makes kvstore.npz with MXNet 1.9.1 (run in the reference venv, never imported by tests):

    ~/mxref/bin/python tests/golden/training/kvstore/make_fixtures.py

Every input (gradients, weights, row ids) is stored next to the pulled results.
"""

from __future__ import annotations

from pathlib import Path

import mxnet as mx
import numpy as np

OUT = Path(__file__).with_name("kvstore.npz")
rng = np.random.RandomState(0)
fx: dict[str, np.ndarray] = {}


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def rsp(data, ids, shape):
    return mx.nd.sparse.row_sparse_array((data, ids), shape=shape)


# 1. push/pull sums: three pushes of two values each, then one list push with a repeated key
kv = mx.kv.create("local")
fx["sum_init"] = f32(4, 3)
kv.init(7, mx.nd.array(fx["sum_init"]))
kv.init(8, mx.nd.zeros((2,)))
for step in range(3):
    vals = [f32(4, 3), f32(4, 3)]
    fx[f"sum_push{step}_a"], fx[f"sum_push{step}_b"] = vals
    kv.push(7, [mx.nd.array(v) for v in vals])
    out = [mx.nd.zeros((4, 3)), mx.nd.zeros((4, 3))]
    kv.pull(7, out=out)
    fx[f"sum_pull{step}"] = out[1].asnumpy()
fx["sum_dup_a"], fx["sum_dup_b"], fx["sum_dup_c"] = f32(2), f32(2), f32(4, 3)
kv.push([8, 7, 8], [mx.nd.array(fx["sum_dup_a"]), mx.nd.array(fx["sum_dup_c"]),
                    mx.nd.array(fx["sum_dup_b"])])
o8, o7 = mx.nd.zeros((2,)), mx.nd.zeros((4, 3))
kv.pull([8, 7], out=[o8, o7])
fx["sum_dup_pull8"], fx["sum_dup_pull7"] = o8.asnumpy(), o7.asnumpy()

# 2. row_sparse_pull from a row_sparse value, unsorted ids with repeats, before and after a
# push of two row_sparse gradients
shape = (8, 2)
fx["rsp_data"], fx["rsp_ids"] = f32(3, 2), np.array([1, 4, 6], np.int64)
kv = mx.kv.create("local")
kv.init("emb", rsp(fx["rsp_data"], fx["rsp_ids"], shape))
fx["rsp_req"] = np.array([6, 0, 4, 6, 3], np.int64)
for tag in ("before", "after"):
    if tag == "after":
        fx["rsp_g1_data"], fx["rsp_g1_ids"] = f32(2, 2), np.array([0, 6], np.int64)
        fx["rsp_g2_data"], fx["rsp_g2_ids"] = f32(2, 2), np.array([3, 6], np.int64)
        kv.push("emb", [rsp(fx["rsp_g1_data"], fx["rsp_g1_ids"], shape),
                        rsp(fx["rsp_g2_data"], fx["rsp_g2_ids"], shape)])
    out = mx.nd.sparse.zeros("row_sparse", shape)
    kv.row_sparse_pull("emb", out=out, row_ids=mx.nd.array(fx["rsp_req"], dtype="int64"))
    fx[f"rsp_{tag}_indices"] = out.indices.asnumpy()
    fx[f"rsp_{tag}_data"] = out.data.asnumpy()

# 3. 2bit compression on a 'device' store: two sources, five pushes, residuals carried
kv = mx.kv.create("device")
kv.set_gradient_compression({"type": "2bit", "threshold": 0.3})
kv.init(0, mx.nd.zeros((5, 4)))
for step in range(5):
    vals = [f32(5, 4) * 0.4, f32(5, 4) * 0.4]
    fx[f"gc_push{step}_a"], fx[f"gc_push{step}_b"] = vals
    kv.push(0, [mx.nd.array(v) for v in vals])
    out = mx.nd.zeros((5, 4))
    kv.pull(0, out=out)
    fx[f"gc_pull{step}"] = out.asnumpy()

# 4. set_optimizer: SGD with momentum and weight decay on a dense weight (two sources per
# push) and, lazily, on a row_sparse weight with row_sparse gradients
kv = mx.kv.create("local")
kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
fx["opt_w"] = f32(3, 4)
kv.init(0, mx.nd.array(fx["opt_w"]))
fx["opt_rsp_w"] = f32(6, 2)
kv.init(1, rsp(fx["opt_rsp_w"], np.arange(6), (6, 2)))
for step in range(3):
    vals = [f32(3, 4), f32(3, 4)]
    fx[f"opt_push{step}_a"], fx[f"opt_push{step}_b"] = vals
    ids = np.sort(rng.choice(6, 2, replace=False)).astype(np.int64)
    fx[f"opt_rsp_g{step}_data"], fx[f"opt_rsp_g{step}_ids"] = f32(2, 2), ids
    kv.push([0, 1], [[mx.nd.array(v) for v in vals],
                     rsp(fx[f"opt_rsp_g{step}_data"], ids, (6, 2))])
    out = mx.nd.zeros((3, 4))
    kv.pull(0, out=out)
    fx[f"opt_pull{step}"] = out.asnumpy()
    o = mx.nd.sparse.zeros("row_sparse", (6, 2))
    kv.row_sparse_pull(1, out=o, row_ids=mx.nd.arange(6, dtype="int64"))
    fx[f"opt_rsp_pull{step}"] = o.asnumpy()

np.savez_compressed(OUT, **fx)
print(f"wrote {OUT} ({len(fx)} arrays)")
