"""Run under ``mpiexec -n 2``: the dist_sync store's operations against numpy on every rank.
Prints ``OK <rank>`` when every check passed."""

import os
import sys

import numpy as np

import nnsym as mx
from nnsym import kvstore
from nnsym.optimizer import SGD

os.environ.setdefault("NNSYM_KVSTORE_BUCKET_BYTES", "4096")  # 2 small keys fused, 1 large
kv = kvstore.create("dist_sync")
r, n = kv.rank, kv.num_workers
assert n == 2, n
assert kv.type == "dist_sync"

# init: rank 0's value wins everywhere
kv.init(["a", "b", "big"], [mx.nd.ones((2, 3)) * (r + 1), mx.nd.ones((4,)) * (r + 5),
                            mx.nd.ones((64, 32)) * (r + 1)])
out = mx.nd.zeros((2, 3))
kv.pull("a", out=out)
np.testing.assert_array_equal(out.asnumpy(), np.ones((2, 3)))

# dense push: summed over local values and ranks; the big key is reduced in place
rng = np.random.default_rng(r)
ga = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2)]
gbig = np.random.default_rng(10 + r).standard_normal((64, 32)).astype(np.float32)
big = mx.nd.array(gbig)
kv.push(["a", "b", "big"], [[mx.nd.array(g) for g in ga], mx.nd.ones((4,)) * (r + 1), big])
rngs = [np.random.default_rng(q) for q in range(n)]
want_a = sum(rg.standard_normal((2, 3)).astype(np.float32)
             + rg.standard_normal((2, 3)).astype(np.float32) for rg in rngs)
want_big = sum(np.random.default_rng(10 + q).standard_normal((64, 32)).astype(np.float32)
               for q in range(n))
kv.pull("a", out=out)
np.testing.assert_allclose(out.asnumpy(), want_a, rtol=1e-6)
ob = mx.nd.zeros((4,))
kv.pull("b", out=ob)
np.testing.assert_array_equal(ob.asnumpy(), np.full(4, 3.0))
obig = mx.nd.zeros((64, 32))
kv.pull("big", out=obig)
np.testing.assert_allclose(obig.asnumpy(), want_big, rtol=1e-6)
np.testing.assert_allclose(big.asnumpy(), want_big, rtol=1e-6)  # in place: the sum is there
assert kv.stats["bytes"] >= 64 * 32 * 4

# row_sparse push: rows gathered from both ranks, duplicates summed; row_sparse_pull
shape = (10, 3)
kv.init("emb", mx.nd.sparse.zeros("row_sparse", shape))
rows = [[1, 4], [4, 7]][r]
vals = np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * r
kv.push("emb", mx.nd.sparse.row_sparse_array((vals, rows), shape=shape))
want = np.zeros(shape, np.float32)
for q in range(n):
    np.add.at(want, [[1, 4], [4, 7]][q], np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * q)
o = mx.nd.sparse.zeros("row_sparse", shape)
kv.row_sparse_pull("emb", out=o, row_ids=mx.nd.array([7, 4, 2]))
assert o.indices.asnumpy().tolist() == [2, 4, 7], o.indices.asnumpy()
np.testing.assert_array_equal(o.data.asnumpy(), want[[2, 4, 7]])

# optimizer on the store: the same SGD step on every rank from the summed gradient
kv2 = kvstore.create("dist_device_sync")
kv2.set_optimizer(SGD(learning_rate=0.5))
kv2.init(0, mx.nd.ones((3,)))
kv2.push(0, mx.nd.ones((3,)) * (r + 1))
w = mx.nd.zeros((3,))
kv2.pull(0, out=w)
np.testing.assert_allclose(w.asnumpy(), 1 - 0.5 * 3.0, rtol=1e-6)

# 2bit compression: each rank sends its quantised gradient (residual kept), the sum arrives
kv3 = kvstore.create("dist_sync")
kv3.set_gradient_compression({"type": "2bit", "threshold": 0.5})
kv3.init("c", mx.nd.zeros((5,)))
g = np.array([[0.6, -0.7, 0.2, 0.3, 0.0], [0.5, 0.1, -0.4, 0.3, -2.0]][r], np.float32)
kv3.push("c", mx.nd.array(g))
oc = mx.nd.zeros((5,))
kv3.pull("c", out=oc)
np.testing.assert_array_equal(oc.asnumpy(), [1.0, -0.5, 0.0, 0.0, -0.5])
kv3.push("c", mx.nd.array(g))  # residuals: r0 [.1,-.2,.2,.3,0] r1 [0,.1,-.4,.3,-1.5]
kv3.pull("c", out=oc)  # r0 + g0 = [.7,-.9,.4,.6,0] -> [.5,-.5,0,.5,0]; r1 + g1 -> [.5,0,-.5,.5,-.5]
np.testing.assert_array_equal(oc.asnumpy(), [1.0, -0.5, -0.5, 1.0, -0.5])

# mismatches across ranks are found at init and named
for bad_key, bad_val, msg in [("m", mx.nd.zeros((2, 2 + r)), "shape"),
                              (f"k{r}", mx.nd.zeros((2,)), "different keys")]:
    try:
        kv.init(bad_key, bad_val)
    except kvstore.DistMismatchError as e:
        assert msg in str(e) and "rank 1" in str(e), str(e)
    else:
        raise AssertionError("mismatch not detected")
try:
    kv2.set_optimizer(SGD(learning_rate=0.1 * (r + 1)))
except kvstore.DistMismatchError as e:
    assert "learning_rate" in str(e) or "lr" in str(e), str(e)
else:
    raise AssertionError("optimizer mismatch not detected")

kv.barrier()
print("OK", r, flush=True)
sys.exit(0)
