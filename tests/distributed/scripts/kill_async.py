"""Run under ``mpiexec -disable-auto-cleanup -n 3``: 'dist_async' with 2 workers; worker 1
writes the time to STAMP (argv[1]) and kills itself after init. Worker 0 trains on; the
server must then end worker 0 and itself with an error within the timeout."""

import os
import signal
import sys
import time
from pathlib import Path

import nnsym as mx
from nnsym import kvstore
from nnsym.optimizer import SGD

kv = kvstore.create("dist_async")
kv.set_optimizer(SGD(learning_rate=1.0))
kv.init(0, mx.nd.ones((3,)))
if kv.rank == 1:
    Path(sys.argv[1]).write_text(repr(time.time()))
    os.kill(os.getpid(), signal.SIGKILL)
for _ in range(5):
    kv.push(0, mx.nd.ones((3,)))
print("worker 0 trained", flush=True)
