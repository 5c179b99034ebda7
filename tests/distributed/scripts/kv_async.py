"""Run under ``mpiexec -n 3``: 'dist_async' with 2 workers and a server rank. Pushes are applied
as they arrive, without waiting for the other worker. Prints ``OK <rank> <weight sum>`` on
each worker."""

import sys
from pathlib import Path

import numpy as np

import nnsym as mx
from nnsym import kvstore
from nnsym.optimizer import SGD

sys.path.insert(0, str(Path(__file__).resolve().parent))

kv = kvstore.create("dist_async")  # on the server rank this serves, then exits
r = kv.rank
assert kv.num_workers == 2 and kv.type == "dist_async", (kv.num_workers, kv.type)
kv.set_optimizer(SGD(learning_rate=1.0))
kv.init("w", mx.nd.ones((3,)) * (r + 1))  # worker 0's value wins
kv.init("emb", mx.nd.ones((6, 2)).tostype("row_sparse"))  # SGD needs every row stored
w = mx.nd.zeros((3,))
kv.pull("w", out=w)
np.testing.assert_array_equal(w.asnumpy(), [1, 1, 1])
kv.barrier()
if r == 0:  # worker 1 waits at the barrier below: the push is applied at once, alone
    kv.push("w", mx.nd.array([1.0, 2.0, 3.0]))
    kv.pull("w", out=w)
    np.testing.assert_array_equal(w.asnumpy(), [0, -1, -2])
kv.barrier()
if r == 1:
    kv.push("w", [mx.nd.ones((3,)), mx.nd.ones((3,))])  # local values summed first
    kv.push("emb", mx.nd.sparse.row_sparse_array((np.ones((2, 2), np.float32), [1, 4]),
                                                 shape=(6, 2)))
kv.barrier()
kv.pull("w", out=w)
np.testing.assert_array_equal(w.asnumpy(), [-2, -3, -4])
o = mx.nd.sparse.zeros("row_sparse", (6, 2))
kv.row_sparse_pull("emb", out=o, row_ids=mx.nd.array([4, 0, 4]))
assert o.indices.asnumpy().tolist() == [0, 4]
np.testing.assert_array_equal(o.data.asnumpy(), [[1, 1], [0, 0]])
try:
    kv.init("bad", mx.nd.zeros((2 + r,)))
except kvstore.DistMismatchError as e:
    assert "shape" in str(e), str(e)
else:
    raise AssertionError("mismatch not detected")

# Module.fit(kvstore='dist_async') on each worker's part runs; after a barrier both workers
# pull the same trained weights from the server (one store, one server per job)
from models import mlp_data, mlp_init, mlp_symbol  # noqa: E402

from nnsym import io as mio  # noqa: E402
from nnsym import module as mmod  # noqa: E402

assert kvstore.create("dist_async") is kv
x, y = mlp_data()
mod = mmod.Module(mlp_symbol())
init = mlp_init()
mod.fit(mio.NDArrayIter(x, y, batch_size=8, num_parts=2, part_index=r),
        arg_params={k: v.copy() for k, v in init.items()}, num_epoch=2, kvstore="dist_async",
        optimizer_params=(("learning_rate", 0.1),))
kv.barrier()
final = mx.nd.zeros(init["fc1_weight"].shape)
kv.pull("fc1_weight", out=final)
assert np.abs(final.asnumpy() - init["fc1_weight"].asnumpy()).max() > 1e-3
print(f"OK {r} {final.asnumpy().sum():.6f}", flush=True)
