"""MXNet's update operators (nd.signum_update, nag_mom_update, rmsprop_update, ...) against
MXNet 1.9.1 fixtures (tests/golden/training/optim/make.py, OPS): 3 steps with out=weight, and
out=None returning a new array while the weight stays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd

HERE = Path(__file__).resolve().parents[1] / "golden" / "training" / "optim"
META = json.loads((HERE / "cases.json").read_text())
FIX = dict(np.load(HERE / "fixtures.npz"))
SHAPE = tuple(META["shape"])


def _states(kinds: list[str], w: np.ndarray) -> list[nd.NDArray]:
    rng = np.random.RandomState(3)  # the generator's draws, in its order
    out = []
    for k in kinds:
        if k == "zeros":
            out.append(nd.array(np.zeros(SHAPE)))
        elif k == "abs":
            out.append(nd.array(np.abs(rng.randn(*SHAPE)) + 1))
        elif k == "small":
            out.append(nd.array(0.1 * rng.randn(*SHAPE)))
        else:
            out.append(nd.array(w, dtype=np.float32))
    return out


def _norm(a: nd.NDArray) -> float:
    return float(np.linalg.norm(a.asnumpy().astype(np.float64)))


@pytest.mark.parametrize("op", META["ops"], ids=[o["name"] for o in META["ops"]])
def test_update_op_matches_mxnet(op: dict[str, Any]) -> None:
    name, dtype = op["name"], op["dtype"]
    rtol, atol = (2e-3, 2e-3) if dtype == "float16" else (1e-4, 1e-5)
    w0 = FIX["input/w0"]
    w = nd.array(w0, dtype=dtype)
    st = _states(op["states"], w0)
    for s in range(3):
        g = nd.array(FIX[f"input/g0/{s}"], dtype=dtype)
        kw = dict(op["kwargs"])
        if "t" in kw:
            kw["t"] = s + 1
        if name in ("lamb", "mp_lamb"):
            lr, lo, hi = kw.pop("lr"), kw.pop("lower_bound", -1), kw.pop("upper_bound", -1)
            if name == "lamb":
                gd = nd.lamb_update_phase1(w, g, st[0], st[1], t=s + 1, **kw)
                nd.lamb_update_phase2(w, gd, _norm(w), _norm(gd), lr=lr, lower_bound=lo,
                                      upper_bound=hi, out=w)
            else:
                gd = nd.mp_lamb_update_phase1(w, g, st[0], st[1], st[2], t=s + 1, **kw)
                nd.mp_lamb_update_phase2(w, gd, _norm(st[2]), _norm(gd), st[2], lr=lr,
                                         lower_bound=lo, upper_bound=hi, out=w)
            np.testing.assert_allclose(gd.asnumpy(), FIX[f"op/{name}/g/{s}"], rtol=rtol, atol=atol)
        else:
            r = getattr(nd, name)(w, g, *st, out=w, **kw)
            assert r is w
        assert w.dtype == np.dtype(dtype)
        np.testing.assert_allclose(w.asnumpy().astype(np.float64), FIX[f"op/{name}/w/{s}"],
                                   rtol=rtol, atol=atol, err_msg=f"{name} step {s}")
        for i, a in enumerate(st):
            np.testing.assert_allclose(a.asnumpy(), FIX[f"op/{name}/s/{s}/{i}"], rtol=rtol,
                                       atol=atol, err_msg=f"{name} step {s} state {i}")
    if f"op/{name}/ret" in FIX:
        w = nd.array(w0, dtype=dtype)
        st = _states(op["states"], w0)
        kw = {k: (1 if k == "t" else v) for k, v in op["kwargs"].items()}
        r = getattr(nd, name)(w, nd.array(FIX["input/g0/0"], dtype=dtype), *st, **kw)
        assert r is not w
        np.testing.assert_array_equal(w.asnumpy(), FIX[f"op/{name}/ret_w"])
        np.testing.assert_allclose(r.asnumpy().astype(np.float64), FIX[f"op/{name}/ret"],
                                   rtol=rtol, atol=atol)


def test_step_number_is_required() -> None:
    from nnsym.errors import NNSymError

    w = nd.array(np.ones(3))
    z = [nd.array(np.zeros(3)) for _ in range(3)]
    with pytest.raises(NNSymError, match="t, the 1-based step number"):
        nd.ftml_update(w, w, z[0], z[1], z[2], lr=0.1)
    with pytest.raises(ValueError, match="t, the 1-based step number"):
        nd.lamb_update_phase1(w, w, z[0], z[1], t=0)
