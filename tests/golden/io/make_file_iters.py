"""Run in the MXNet 1.9.1 venv: ``~/mxref/bin/python tests/golden/io/make_file_iters.py``.

Writes file_iters.json: for each CSVIter / LibSVMIter configuration over the small files in
files/, provide_data/provide_label and three epochs of batches (data as dense lists, label,
pad, index); an epoch in which MXNet raised ends with {"error": ...}. Paths are relative to
files/.
"""

import json
import os
import pathlib
import subprocess
import sys

import mxnet as mx
import numpy as np

HERE = pathlib.Path(__file__).parent
OUT = HERE / "file_iters.json"

CASES = []
for bs in (3, 4, 10, 12):
    for rb in (True, False):
        CASES.append(("CSVIter", dict(data_csv="d10.csv", data_shape=(3,), batch_size=bs,
                                      round_batch=rb)))
CASES += [
    ("CSVIter", dict(data_csv="d10.csv", data_shape=(1, 3), label_csv="l10.csv",
                     batch_size=4)),
    ("CSVIter", dict(data_csv="d10.csv", data_shape=(3,), label_csv="l10x2.csv",
                     label_shape=(2,), batch_size=4, dtype="int32")),
    ("CSVIter", dict(data_csv="d10.csv", data_shape=(3,), label_csv="l10.csv",
                     batch_size=3, round_batch=False, dtype="int64")),
    ("CSVIter", dict(data_csv="d3.csv", data_shape=(3,), batch_size=5)),
    ("CSVIter", dict(data_csv="d3.csv", data_shape=(3,), batch_size=5, round_batch=False)),
]
for bs in (2, 4, 9, 11):
    CASES.append(("LibSVMIter", dict(data_libsvm="s9.libsvm", data_shape=(6,), batch_size=bs)))
for parts, k in ((2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (4, 3)):
    CASES.append(("LibSVMIter", dict(data_libsvm="s9.libsvm", data_shape=(6,), batch_size=2,
                                     num_parts=parts, part_index=k)))
CASES.append(("LibSVMIter", dict(data_libsvm="s9.libsvm", data_shape=(6,), batch_size=4,
                                 label_libsvm="s9.labels.libsvm", label_shape=(3,))))


def dense(a):
    return a.asnumpy().tolist()


def run(kind, kw):
    os.chdir(HERE / "files")
    it = getattr(mx.io, kind)(**kw)
    out = {"kind": kind, "kwargs": kw,
           "provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name]
                            for d in it.provide_data],
           "provide_label": [[d.name, list(d.shape), np.dtype(d.dtype).name]
                             for d in it.provide_label],
           "epochs": []}
    for _ in range(3):
        ep = []
        try:
            for b in it:
                ep.append({"data": dense(b.data[0]), "data_stype": b.data[0].stype,
                           "label": dense(b.label[0]), "label_stype": b.label[0].stype,
                           "pad": b.pad, "index": [int(i) for i in b.index]})
        except mx.MXNetError as e:
            ep.append({"error": [ln for ln in str(e).splitlines() if "Check" in ln][-1]})
            out["epochs"].append(ep)
            return out
        out["epochs"].append(ep)
        it.reset()
    return out


def run_isolated(i):
    """MXNet's LibSVMIter segfaults now and then (its prefetch thread): each case runs in its
    own process, retried up to 10 times."""
    kind, kw = CASES[i]
    for _ in range(10):
        proc = subprocess.run([sys.executable, __file__, str(i)], capture_output=True,
                              text=True)
        try:
            return json.loads(proc.stdout)
        except ValueError:
            pass
    return {"kind": kind, "kwargs": kw, "crash": proc.returncode}


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(run(*CASES[int(sys.argv[1])]), default=list), flush=True)
    else:
        res = [run_isolated(i) for i in range(len(CASES))]
        OUT.write_text(json.dumps(res, default=list))
        print("wrote", OUT, len(res), "cases")
