"""Run under ``mpiexec -disable-auto-cleanup -n 2``: ``kill.py STAMP`` trains the MLP with
Module.fit(kvstore='dist_sync'); rank 1 writes the time to STAMP and kills itself (SIGKILL)
after its third batch. Rank 0 must then fail with DistributedError within the timeout."""

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import mlp_data, mlp_init, mlp_symbol

from nnsym import io as mio
from nnsym import kvstore
from nnsym import module as mmod

rank = kvstore.create("dist_sync").rank


def die(p):
    if rank == 1 and p.nbatch == 2:
        Path(sys.argv[1]).write_text(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)


x, y = mlp_data()
mod = mmod.Module(mlp_symbol())
mod.fit(mio.NDArrayIter(x, y, batch_size=4, num_parts=2, part_index=rank),
        arg_params=mlp_init(), num_epoch=50, kvstore="dist_sync", batch_end_callback=die)
print("finished without noticing the dead rank", flush=True)
