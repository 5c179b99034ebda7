"""Make fixtures.npz + cases.json: MXNet 1.9.1 optimizers through get_updater, 5 steps.

Run in the MXNet reference venv:  ~/mxref/bin/python make.py
Every case updates two weights (indices 0 and 1) with fixed gradients and records both
weights and their states (flattened, dense) after every step. A case MXNet refuses is
recorded with its error instead of arrays.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import mxnet as mx
import numpy as np

STEPS = 5
SHAPE = (5, 3)
HERE = Path(__file__).resolve().parent
RSP_ROWS = [[0, 2, 3], [1, 4], [0, 1, 2, 3, 4], [3], [2, 4]]
IDX2NAME = {0: "fc_weight", 1: "fc_bias"}


def case(name, opt, kwargs=None, dtype="float32", wstype="default", gstype="default",
         names=False, lr_mult=None, wd_mult=None, sched=None):
    return {"name": name, "opt": opt, "kwargs": kwargs or {}, "dtype": dtype,
            "wstype": wstype, "gstype": gstype, "names": names, "lr_mult": lr_mult or {},
            "wd_mult": wd_mult or {}, "sched": sched}


WDC = {"wd": 0.01, "clip_gradient": 0.3, "rescale_grad": 2.0}
SCHED = {"step": 2, "factor": 0.5}
CASES = [
    case("sgd_plain", "sgd", {"learning_rate": 0.1}),
    case("sgd_mom_wd", "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}),
    case("sgd_mom_clip", "sgd", {"learning_rate": 0.1, "momentum": 0.9, **WDC}),
    case("sgd_sched", "sgd", {"learning_rate": 0.2, "momentum": 0.9}, sched=SCHED),
    case("sgd_mults", "sgd", {"learning_rate": 0.1, "momentum": 0.5, "wd": 0.1}, names=True,
         lr_mult={"fc_weight": 0.5}, wd_mult={"fc_bias": 2.0}),
    case("sgd_mp", "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01,
                           "multi_precision": True}, dtype="float16"),
    case("sgd_mp_nomom", "sgd", {"learning_rate": 0.1, "multi_precision": True},
         dtype="float16"),
    case("ccsgd", "ccsgd", {"learning_rate": 0.1, "momentum": 0.9}),
    case("nag_mom", "nag", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}),
    case("nag_clip", "nag", {"learning_rate": 0.1, "momentum": 0.9, **WDC}),
    case("nag_nomom", "nag", {"learning_rate": 0.1}),
    case("nag_mp", "nag", {"learning_rate": 0.1, "momentum": 0.9, "multi_precision": True},
         dtype="float16"),
    case("signum", "signum", {"learning_rate": 0.01, "momentum": 0.9, "wd": 0.01,
                              "wd_lh": 0.02}),
    case("signum_clip", "signum", {"learning_rate": 0.01, "momentum": 0.9, **WDC}),
    case("signsgd", "signum", {"learning_rate": 0.01, "momentum": 0.0, "wd": 0.01}),
    case("ftml", "ftml", {"learning_rate": 0.01}),
    case("ftml_clip", "ftml", {"learning_rate": 0.01, "beta1": 0.5, **WDC}),
    case("lars", "lars", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01}, names=True),
    case("lars_sched", "lars", {"learning_rate": 0.1, "momentum": 0.9, "eta": 0.01,
                                "eps": 1e-6, **WDC}, names=True, sched=SCHED),
    case("lars_nomom", "lars", {"learning_rate": 0.1}),
    case("lbsgd", "lbsgd", {"learning_rate": 0.1, "momentum": 0.9, "batch_scale": 2,
                            "warmup_epochs": 1, "updates_per_epoch": 4, "wd": 0.01}),
    case("lbsgd_lars", "lbsgd", {"learning_rate": 0.1, "batch_scale": 2,
                                 "warmup_strategy": "lars", **WDC}),
    case("lamb", "lamb", {"learning_rate": 0.01}),
    case("lamb_opts", "lamb", {"learning_rate": 0.01, "bias_correction": False,
                               "lower_bound": 0.1, "upper_bound": 2.0, **WDC}),
    case("lamb_mp", "lamb", {"learning_rate": 0.01, "wd": 0.01, "multi_precision": True},
         dtype="float16"),
    case("dcasgd", "dcasgd", {"learning_rate": 0.1, "wd": 0.01}),
    case("dcasgd_mom", "dcasgd", {"learning_rate": 0.1, "momentum": 0.9, **WDC}),
    case("adam", "adam", {"learning_rate": 0.01}),
    case("adam_clip", "adam", {"learning_rate": 0.01, **WDC}),
    case("adam_sched", "adam", {"learning_rate": 0.02}, sched=SCHED),
    case("adam_mp", "adam", {"learning_rate": 0.01, "wd": 0.01, "multi_precision": True},
         dtype="float16"),
    case("adagrad", "adagrad", {"learning_rate": 0.1, "wd": 0.01}),
    case("adagrad_clip", "adagrad", {"learning_rate": 0.1, "eps": 1e-5, **WDC}),
    case("rmsprop", "rmsprop", {"learning_rate": 0.01}),
    case("rmsprop_clip", "rmsprop", {"learning_rate": 0.01, "gamma1": 0.8,
                                     "clip_weights": 0.5, **WDC}),
    case("rmsprop_centered", "rmsprop", {"learning_rate": 0.01, "centered": True}),
    case("rmsprop_centered_clip", "rmsprop", {"learning_rate": 0.01, "centered": True,
                                              "gamma2": 0.8, "clip_weights": 0.5, **WDC}),
    case("adadelta", "adadelta", {}),
    case("adadelta_clip", "adadelta", {"rho": 0.8, "epsilon": 1e-4, **WDC}),
    case("ftrl", "ftrl", {}),
    case("ftrl_opts", "ftrl", {"learning_rate": 0.5, "lamda1": 0.001, "beta": 0.5, **WDC}),
    case("adamax", "adamax", {}),
    case("adamax_clip", "adamax", {"beta1": 0.8, **WDC}),
    case("nadam", "nadam", {}),
    case("nadam_clip", "nadam", {"schedule_decay": 0.01, **WDC}),
    case("groupadagrad", "groupadagrad", {"learning_rate": 0.1}),
    case("groupadagrad_clip", "groupadagrad", {"learning_rate": 0.1, "eps": 1e-3,
                                               "clip_gradient": 0.3, "rescale_grad": 2.0}),
    # row_sparse gradients
    case("groupadagrad_rsp", "groupadagrad", {"learning_rate": 0.1, "clip_gradient": 0.3},
         gstype="row_sparse"),
    case("groupadagrad_rsp_w", "groupadagrad", {"learning_rate": 0.1}, wstype="row_sparse",
         gstype="row_sparse"),
    case("sgd_rsp", "sgd", {"learning_rate": 0.1, "wd": 0.01}, gstype="row_sparse"),
    case("sgd_rsp_std", "sgd", {"learning_rate": 0.1, "wd": 0.01, "lazy_update": False},
         gstype="row_sparse"),
    case("sgd_mom_rsp", "sgd", {"learning_rate": 0.1, "momentum": 0.9, **WDC},
         gstype="row_sparse"),
    case("sgd_mom_rsp_w", "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01},
         wstype="row_sparse", gstype="row_sparse"),
    case("sgd_mom_rsp_std", "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01,
                                    "lazy_update": False}, gstype="row_sparse"),
    case("adam_rsp", "adam", {"learning_rate": 0.01, **WDC}, gstype="row_sparse"),
    case("adam_rsp_w", "adam", {"learning_rate": 0.01, "wd": 0.01}, wstype="row_sparse",
         gstype="row_sparse"),
    case("adam_rsp_std", "adam", {"learning_rate": 0.01, "wd": 0.01, "lazy_update": False},
         gstype="row_sparse"),
    case("adagrad_rsp", "adagrad", {"learning_rate": 0.1, "clip_gradient": 0.3,
                                    "rescale_grad": 2.0}, gstype="row_sparse"),
    case("adagrad_rsp_w", "adagrad", {"learning_rate": 0.1}, wstype="row_sparse",
         gstype="row_sparse"),
    case("ftrl_rsp_w", "ftrl", {"learning_rate": 0.5, **WDC}, wstype="row_sparse",
         gstype="row_sparse"),
    case("ftrl_rsp", "ftrl", {"learning_rate": 0.5, "wd": 0.01}, gstype="row_sparse"),
    case("lars_rsp", "lars", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01},
         gstype="row_sparse"),
    case("rmsprop_rsp", "rmsprop", {"learning_rate": 0.01, "wd": 0.01}, gstype="row_sparse"),
    case("nag_rsp", "nag", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01},
         gstype="row_sparse"),
    case("signum_rsp", "signum", {"learning_rate": 0.01, "momentum": 0.9, "wd": 0.01},
         gstype="row_sparse"),
]


def flat(state):
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [a for s in state for a in flat(s)]
    return [state.asnumpy()]


def inputs():
    rng = np.random.RandomState(7)
    w = [rng.randn(*SHAPE).astype(np.float32) for _ in range(2)]
    g = [[rng.randn(*SHAPE).astype(np.float32) for _ in range(2)] for _ in range(STEPS)]
    return w, g


def run(c, arrays):
    w0, grads = inputs()
    kw = dict(c["kwargs"])
    if c["names"]:
        kw["param_idx2name"] = IDX2NAME
    if c["sched"]:
        kw["lr_scheduler"] = mx.lr_scheduler.FactorScheduler(base_lr=kw["learning_rate"],
                                                             **c["sched"])
    opt = mx.optimizer.create(c["opt"], **kw)
    if c["lr_mult"]:
        opt.set_lr_mult(c["lr_mult"])
    if c["wd_mult"]:
        opt.set_wd_mult(c["wd_mult"])
    upd = mx.optimizer.get_updater(opt)
    ws = []
    for w in w0:
        a = mx.nd.array(w, dtype=c["dtype"])
        ws.append(a.tostype("row_sparse") if c["wstype"] == "row_sparse" else a)
    for s in range(STEPS):
        for i in range(2):
            g = grads[s][i]
            if c["gstype"] == "row_sparse":
                rows = RSP_ROWS[(s + i) % STEPS]
                ga = mx.nd.sparse.row_sparse_array((g[rows], rows), shape=SHAPE,
                                                   dtype=c["dtype"])
            else:
                ga = mx.nd.array(g, dtype=c["dtype"])
            upd(i, ga, ws[i])
            arrays[f"{c['name']}/w{i}/{s}"] = ws[i].asnumpy()
            for k, a in enumerate(flat(upd.states[i])):
                arrays[f"{c['name']}/s{i}/{s}/{k}"] = a


# The update operators themselves (mx.nd.*_update): 3 steps with out=weight.
# state inits: "zeros", "abs" (|N(0,1)| + 1), "small" (0.1 N(0,1)); "w32": the float32 master
OPS = [
    ("signsgd_update", [], {"lr": 0.01, "wd": 0.01}, "float32"),
    ("signum_update", ["zeros"], {"lr": 0.01, "momentum": 0.9, "wd": 0.01, "wd_lh": 0.02,
                                  "rescale_grad": 2.0, "clip_gradient": 0.3}, "float32"),
    ("nag_mom_update", ["zeros"], {"lr": 0.1, "momentum": 0.9, "wd": 0.01}, "float32"),
    ("rmsprop_update", ["abs"], {"lr": 0.01, "gamma1": 0.9, "clip_weights": 0.5, "wd": 0.01,
                                 "clip_gradient": 0.3}, "float32"),
    ("rmspropalex_update", ["abs", "small", "zeros"], {"lr": 0.01, "gamma2": 0.8},
     "float32"),
    ("ftml_update", ["zeros", "zeros", "zeros"], {"lr": 0.01, "wd": 0.01, "t": None},
     "float32"),
    ("ftrl_update", ["zeros", "zeros"], {"lr": 0.1, "lamda1": 0.01, "wd": 0.01}, "float32"),
    ("mp_sgd_update", ["w32"], {"lr": 0.1, "wd": 0.01}, "float16"),
    ("mp_sgd_mom_update", ["zeros", "w32"], {"lr": 0.1, "momentum": 0.9}, "float16"),
    ("mp_nag_mom_update", ["zeros", "w32"], {"lr": 0.1, "momentum": 0.9, "wd": 0.01},
     "float16"),
    ("lamb", ["zeros", "zeros"], {"wd": 0.01, "lr": 0.01, "lower_bound": 0.1,
                                  "upper_bound": 2.0}, "float32"),
    ("mp_lamb", ["zeros", "zeros", "w32"], {"wd": 0.01, "lr": 0.01}, "float16"),
]


def op_states(kinds, w):
    rng = np.random.RandomState(3)
    out = []
    for k in kinds:
        if k == "zeros":
            out.append(mx.nd.zeros(SHAPE))
        elif k == "abs":
            out.append(mx.nd.array(np.abs(rng.randn(*SHAPE)) + 1))
        elif k == "small":
            out.append(mx.nd.array(0.1 * rng.randn(*SHAPE)))
        else:
            out.append(mx.nd.array(w, dtype="float32"))
    return out


def run_op(name, kinds, kw, dtype, arrays):
    w0, grads = inputs()
    w = mx.nd.array(w0[0], dtype=dtype)
    st = op_states(kinds, w0[0])
    for s in range(3):
        g = mx.nd.array(grads[s][0], dtype=dtype)
        k = dict(kw)
        if "t" in k:
            k["t"] = s + 1
        if name in ("lamb", "mp_lamb"):
            lr, lo, hi = k.pop("lr"), k.pop("lower_bound", -1), k.pop("upper_bound", -1)
            if name == "lamb":
                gd = mx.nd.lamb_update_phase1(w, g, *st, t=s + 1, **k)
                mx.nd.lamb_update_phase2(w, gd, w.norm(), gd.norm(), lr=lr, lower_bound=lo,
                                         upper_bound=hi, out=w)
            else:
                gd = mx.nd.mp_lamb_update_phase1(w, g, *st, t=s + 1, **k)
                mx.nd.mp_lamb_update_phase2(w, gd, st[2].norm(), gd.norm(), st[2], lr=lr,
                                            lower_bound=lo, upper_bound=hi, out=w)
            arrays[f"op/{name}/g/{s}"] = gd.asnumpy()
        else:
            getattr(mx.nd, name)(w, g, *st, out=w, **k)
        arrays[f"op/{name}/w/{s}"] = w.asnumpy()
        for i, a in enumerate(st):
            arrays[f"op/{name}/s/{s}/{i}"] = a.asnumpy()
    # out=None: a new array, the weight unchanged (states still change)
    w = mx.nd.array(w0[0], dtype=dtype)
    st = op_states(kinds, w0[0])
    if name not in ("lamb", "mp_lamb"):
        k = {kk: (1 if kk == "t" else v) for kk, v in kw.items()}
        r = getattr(mx.nd, name)(w, mx.nd.array(grads[0][0], dtype=dtype), *st, **k)
        arrays[f"op/{name}/ret"] = r.asnumpy()
        arrays[f"op/{name}/ret_w"] = w.asnumpy()


def main():
    arrays = {}
    w0, grads = inputs()
    for i in range(2):
        arrays[f"input/w{i}"] = w0[i]
        for s in range(STEPS):
            arrays[f"input/g{i}/{s}"] = grads[s][i]
    out = []
    for c in CASES:
        c = dict(c)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run(c, arrays)
            c["error"] = None
        except Exception as e:  # recorded: MXNet refuses this case
            c["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            for k in [k for k in arrays if k.startswith(c["name"] + "/")]:
                del arrays[k]
        out.append(c)
        print(c["name"], c["error"] or "ok")
    for name, kinds, kw, dtype in OPS:
        run_op(name, kinds, kw, dtype, arrays)
        print(name, "ok")
    np.savez_compressed(HERE / "fixtures.npz", **arrays)
    with (HERE / "cases.json").open("w") as f:
        json.dump({"steps": STEPS, "shape": SHAPE, "rsp_rows": RSP_ROWS,
                   "ops": [{"name": n, "states": k, "kwargs": kw, "dtype": d}
                           for n, k, kw, d in OPS],
                   "idx2name": {str(k): v for k, v in IDX2NAME.items()}, "cases": out},
                  f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
