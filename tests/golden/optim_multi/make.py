"""MXNet 1.9.1 fixtures for the fused multi-weight updates and multi_lars (nnsym never imports
this script). Run in the MXNet reference venv:

    cd tests/golden/optim_multi && ~/mxref/bin/python make.py

Writes fixtures.npz (inputs and, per case and step, the new weights and states) and
cases.json (the cases: operator, parameters, dtype, shapes)."""

from __future__ import annotations

import json
from pathlib import Path

import mxnet as mx
import numpy as np

HERE = Path(__file__).resolve().parent
SHAPES = [(4, 5), (7,), (2, 3, 2)]
STEPS = 3
rng = np.random.RandomState(0)
FIX: dict[str, np.ndarray] = {}
for i, s in enumerate(SHAPES):
    FIX[f"input/w{i}"] = rng.uniform(-1, 1, s).astype(np.float32)
    FIX[f"input/m{i}"] = rng.uniform(-0.1, 0.1, s).astype(np.float32)
    for t in range(STEPS):
        FIX[f"input/g{i}/{t}"] = rng.uniform(-2, 2, s).astype(np.float32)

CASES = []
for pre in (False, True):
    for mp in (False, True):
        for mom in (False, True):
            name = (f"{'preloaded_' if pre else ''}multi_{'mp_' if mp else ''}sgd"
                    f"{'_mom' if mom else ''}_update")
            for nw, dtype, extra in ((2, "float16" if mp else "float32",
                                      {"rescale_grad": 0.5, "clip_gradient": 0.4}),
                                     (3, "float32" if mp else "float64", {})):
                kw = dict(extra, num_weights=nw)
                if mom:
                    kw["momentum"] = 0.9
                lrs, wds = [0.1, 0.05, 0.2][:nw], [0.01, 0.0, 0.02][:nw]
                CASES.append({"id": f"{name}-{nw}-{dtype}", "op": name, "dtype": dtype,
                              "kwargs": kw, "lrs": lrs, "wds": wds, "mom": mom, "mp": mp,
                              "preloaded": pre})


def _run(c: dict) -> None:
    op = getattr(mx.nd, c["op"])
    nw, dt = c["kwargs"]["num_weights"], c["dtype"]
    ws = [mx.nd.array(FIX[f"input/w{i}"], dtype=dt) for i in range(nw)]
    moms = [mx.nd.array(FIX[f"input/m{i}"], dtype="float32" if c["mp"] else dt)
            for i in range(nw)]
    w32 = [mx.nd.array(FIX[f"input/w{i}"], dtype="float32") for i in range(nw)]
    kw = dict(c["kwargs"])
    extra = []
    if c["preloaded"]:
        extra = [mx.nd.array(c["lrs"], dtype="float32"), mx.nd.array(c["wds"], dtype="float32")]
    else:
        kw["lrs"], kw["wds"] = tuple(c["lrs"]), tuple(c["wds"])
    for t in range(STEPS):
        args = []
        for i in range(nw):
            args += [ws[i], mx.nd.array(FIX[f"input/g{i}/{t}"], dtype=dt)]
            if c["mom"]:
                args.append(moms[i])
            if c["mp"]:
                args.append(w32[i])
        op(*args, *extra, out=ws, **kw)
        for i in range(nw):
            FIX[f"{c['id']}/w{i}/{t}"] = ws[i].asnumpy()
            if c["mom"]:
                FIX[f"{c['id']}/m{i}/{t}"] = moms[i].asnumpy()
            if c["mp"]:
                FIX[f"{c['id']}/w32_{i}/{t}"] = w32[i].asnumpy()


for c in CASES:
    _run(c)

LARS = []
for k, (dt, kw) in enumerate((("float32", {"eta": 0.1, "eps": 1e-3, "rescale_grad": 2.0}),
                              ("float32", {"eta": 0.02, "eps": 1e-8}))):
    lrs = rng.uniform(0.01, 0.5, 6)
    wsq = rng.uniform(0, 4, 6)
    gsq = rng.uniform(0, 4, 6)
    wsq[1] = 0.0
    gsq[2] = 0.0
    wds = rng.uniform(0, 0.1, 6)
    ins = [mx.nd.array(a, dtype=dt) for a in (lrs, wsq, gsq, wds)]
    for n, a in zip(("lrs", "wsq", "gsq", "wds"), ins):
        FIX[f"lars{k}/{n}"] = a.asnumpy()
    FIX[f"lars{k}/out"] = mx.nd.multi_lars(*ins, **kw).asnumpy()
    LARS.append({"id": f"lars{k}", "dtype": dt, "kwargs": kw})

np.savez_compressed(HERE / "fixtures.npz", **FIX)
(HERE / "cases.json").write_text(json.dumps(
    {"mxnet": mx.__version__, "steps": STEPS, "cases": CASES, "lars": LARS}, indent=1) + "\n")
print(f"{len(CASES)} update cases, {len(LARS)} multi_lars cases")
