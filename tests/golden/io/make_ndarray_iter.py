"""Run in the MXNet 1.9.1 venv: ``~/mxref/bin/python tests/golden/io/make_ndarray_iter.py``.

Writes ndarray_iter.json: NDArrayIter's batches (data, label values) and pads over two epochs
for each last_batch_handle, several (num_data, batch_size) pairs, unshuffled and seeded-shuffled.
"""

import json
import pathlib

import mxnet as mx
import numpy as np

OUT = pathlib.Path(__file__).with_name("ndarray_iter.json")


def epochs(it, n=2):
    """The batches of n epochs; an epoch where MXNet raised ends with {"error": ...}."""
    out = []
    for _ in range(n):
        ep = []
        try:
            for b in it:
                ep.append({"data": [d.asnumpy().tolist() for d in b.data],
                           "label": [lb.asnumpy().tolist() for lb in b.label],
                           "pad": b.pad})
        except mx.MXNetError as e:
            ep.append({"error": str(e).splitlines()[-1]})
            out.append(ep)
            return out
        out.append(ep)
        it.reset()
    return out


cases = []
for n, bs in [(10, 3), (7, 7), (5, 2), (2, 7), (3, 4), (9, 3)]:
    for handle in ["pad", "discard", "roll_over"]:
        for shuffle in [False, True]:
            np.random.seed(7)  # noqa: NPY002  (NDArrayIter shuffles with the global RNG)
            data = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
            label = np.arange(n, dtype=np.float32) + 100
            it = mx.io.NDArrayIter(data, label, batch_size=bs, shuffle=shuffle,
                                   last_batch_handle=handle)
            cases.append({"n": n, "batch_size": bs, "handle": handle, "shuffle": shuffle,
                          "seed": 7, "epochs": epochs(it, 3)})
# several named sources (dict, sorted by name) and no label
np.random.seed(0)  # noqa: NPY002
it = mx.io.NDArrayIter({"b": np.arange(8).reshape(4, 2), "a": np.arange(4) * 10.0},
                       None, batch_size=3, last_batch_handle="roll_over")
multi = {"provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name] for d in it.provide_data],
         "provide_label": [list(d) for d in it.provide_label], "epochs": epochs(it, 3)}
it = mx.io.NDArrayIter([np.zeros((4, 1)), np.ones((4, 1)), np.ones((4, 1))],
                       [np.zeros(4)], batch_size=2)
names = {"data": [d.name for d in it.provide_data], "label": [d.name for d in it.provide_label]}
OUT.write_text(json.dumps({"cases": cases, "multi": multi, "names": names}))
print("wrote", OUT, len(cases), "cases")
