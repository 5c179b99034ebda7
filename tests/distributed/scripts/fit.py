"""Run under ``mpiexec -n N``: ``fit.py MODEL OUT.npz`` trains MODEL ('mlp' or 'sparse') with
Module.fit(kvstore='dist_sync') on this rank's part of the data; every rank checks that its
parameters equal rank 0's, and rank 0 writes them to OUT.npz."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import fit, part_iter

from nnsym import kvstore

model, out = sys.argv[1], sys.argv[2]
kv = kvstore.create("dist_sync")
params = fit(model, part_iter(model, kv.num_workers, kv.rank), "dist_sync")  # as users write it
ref = {k: np.zeros_like(v) for k, v in params.items()}
for k in sorted(params):
    buf = params[k].copy() if kv.rank == 0 else ref[k]
    kv._wait([kv._comm.Ibcast(buf, root=0)], "the check")
    np.testing.assert_array_equal(params[k], buf, err_msg=f"rank {kv.rank}: {k}")
if kv.rank == 0:
    np.savez(out, **params)
print("OK", kv.rank, flush=True)
