"""The fused multi-weight updates (multi_*/preloaded_multi_* sgd, mom, mp) and multi_lars:
3 steps with out=weights against MXNet 1.9.1 fixtures (tests/golden/optim_multi/make.py), the
returned arrays with out=None, bound graphs (momenta and master weights are auxiliary states
updated in place, checked against the numpy ``multi_reference``), and the errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import DTypeError, NNSymError, OperatorParamError, ShapeError
from nnsym.ops import REGISTRY
from nnsym.ops.optim.multi import BY_NAME, MULTIS, multi_reference
from nnsym.testing import as_nd, make_inputs

HERE = Path(__file__).resolve().parents[1] / "golden" / "optim_multi"
META = json.loads((HERE / "cases.json").read_text())
FIX = dict(np.load(HERE / "fixtures.npz"))


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-3, "atol": 2e-3} if dtype == "float16" else {"rtol": 1e-5, "atol": 1e-6}


@pytest.mark.parametrize("c", META["cases"], ids=[c["id"] for c in META["cases"]])
def test_steps_match_mxnet(c: dict[str, Any]) -> None:
    nw, dt = c["kwargs"]["num_weights"], c["dtype"]
    sdt = "float32" if c["mp"] else dt
    ws = [nd.array(FIX[f"input/w{i}"], dtype=dt) for i in range(nw)]
    moms = [nd.array(FIX[f"input/m{i}"], dtype=sdt) for i in range(nw)]
    w32 = [nd.array(FIX[f"input/w{i}"], dtype="float32") for i in range(nw)]
    kw = dict(c["kwargs"])
    extra = []
    if c["preloaded"]:
        extra = [nd.array(c["lrs"], dtype="float32"), nd.array(c["wds"], dtype="float32")]
    else:
        kw["lrs"], kw["wds"] = tuple(c["lrs"]), tuple(c["wds"])
    for t in range(META["steps"]):
        args = []
        for i in range(nw):
            args += [ws[i], nd.array(FIX[f"input/g{i}/{t}"], dtype=dt)]
            args += [moms[i]] if c["mom"] else []
            args += [w32[i]] if c["mp"] else []
        r = getattr(nd, c["op"])(*args, *extra, out=ws, **kw)
        assert [a is b for a, b in zip(r, ws)] == [True] * nw
        for i in range(nw):
            assert ws[i].dtype == np.dtype(dt)
            np.testing.assert_allclose(ws[i].asnumpy(), FIX[f"{c['id']}/w{i}/{t}"], **_tol(dt),
                                       err_msg=f"weight {i} step {t}")
            if c["mom"]:
                np.testing.assert_allclose(moms[i].asnumpy(), FIX[f"{c['id']}/m{i}/{t}"],
                                           **_tol(sdt), err_msg=f"mom {i} step {t}")
            if c["mp"]:
                np.testing.assert_allclose(w32[i].asnumpy(), FIX[f"{c['id']}/w32_{i}/{t}"],
                                           **_tol("float32"), err_msg=f"weight32 {i} step {t}")


@pytest.mark.parametrize("c", META["lars"], ids=[c["id"] for c in META["lars"]])
def test_multi_lars_matches_mxnet(c: dict[str, Any]) -> None:
    ins = [nd.array(FIX[f"{c['id']}/{n}"], dtype=c["dtype"]) for n in ("lrs", "wsq", "gsq", "wds")]
    out = nd.multi_lars(*ins, **c["kwargs"]).asnumpy()
    want = FIX[f"{c['id']}/out"]
    np.testing.assert_allclose(out, want, rtol=1e-6)
    # a zero weight norm or gradient norm keeps the learning rate
    np.testing.assert_array_equal(out[1:3], FIX[f"{c['id']}/lrs"][1:3])


def test_multi_lars_hand_computed() -> None:
    x = [nd.array(v) for v in ([0.1, 0.2], [4.0, 0.0], [1.0, 1.0], [0.01, 0.02])]
    out = nd.multi_lars(*x, eta=0.1, eps=1e-3, rescale_grad=2.0).asnumpy()
    # 0.1 * 0.1 * 2 / (sqrt(1 * 2^2) + 0.01 * 2 + 1e-3); the second weight's norm is 0
    np.testing.assert_allclose(out, [0.02 / 2.021, 0.2], rtol=1e-6)


def test_out_none_returns_new_weights_and_keeps_them() -> None:
    w = [nd.array(np.arange(6.0).reshape(2, 3)), nd.array([1.0, 2.0])]
    g = [nd.ones((2, 3)), nd.ones(2)]
    m = [nd.zeros((2, 3)), nd.zeros(2)]
    r = nd.multi_sgd_mom_update(w[0], g[0], m[0], w[1], g[1], m[1], lrs=(0.1, 0.2),
                                wds=(0.0, 0.0), momentum=0.9, num_weights=2)
    # values MXNet 1.9.1 gives (multi_sgd_update of the same weights: [[-0.1, 0.9, 1.9], ...])
    np.testing.assert_allclose(r[0].asnumpy(), np.arange(6.0).reshape(2, 3) - 0.1, rtol=1e-6)
    np.testing.assert_allclose(r[1].asnumpy(), [0.8, 1.8], rtol=1e-6)
    np.testing.assert_array_equal(w[1].asnumpy(), [1.0, 2.0])
    np.testing.assert_allclose(m[1].asnumpy(), [-0.2, -0.2], rtol=1e-6)


MXNET_NAMES = {  # MXNet 1.9.1's list_arguments / list_auxiliary_states, name="u", 2 weights
    "multi_sgd_update": (["weight_0", "grad_0", "weight_1", "grad_1"], []),
    "multi_mp_sgd_update": (["weight_0", "grad_0", "weight_1", "grad_1"],
                            ["weight32_0", "weight32_1"]),
    "preloaded_multi_mp_sgd_mom_update": (
        ["weight_0", "grad_0", "weight_1", "grad_1", "lrs", "wds"],
        ["mom_0", "weight32_0", "mom_1", "weight32_1"]),
}


@pytest.mark.parametrize("name", sorted(MXNET_NAMES))
def test_symbol_names_match_mxnet(name: str) -> None:
    kw: dict[str, Any] = {} if name.startswith("preloaded") else {"lrs": (1, 1), "wds": (0, 0)}
    s = getattr(sym, name)(num_weights=2, name="u", **kw)
    args, aux = MXNET_NAMES[name]
    assert s.list_arguments() == [f"u_{a}" for a in args]
    assert s.list_auxiliary_states() == [f"u_{a}" for a in aux]
    assert s.list_outputs() == ["u_output0", "u_output1"]


@pytest.mark.parametrize("m", MULTIS, ids=[m.name for m in MULTIS])
def test_bound_graph_updates_states_in_place(m: Any) -> None:
    op = REGISTRY[m.name]
    ex = op.examples[1]
    params, _ = op.parse_params(ex.params)
    ins = make_inputs(op, ex, seed=1)
    s = getattr(sym, m.name)(name="u", **dict(ex.params))
    s = sym.load_json(s.tojson())  # the JSON round trip keeps the parameters
    names = op.input_names(params)
    aux_names = set(op.aux_names(params))
    args = {f"u_{n}": as_nd(a) for n, a in zip(names, ins) if n not in aux_names}
    aux = {f"u_{n}": as_nd(a) for n, a in zip(names, ins) if n in aux_names}
    exe = s.bind(None, args, aux_states=aux)
    state = list(ins)
    for _ in range(2):
        outs = exe.forward()
        want, new = multi_reference(m.name, params, *state)
        for o, w in zip(outs, want):
            np.testing.assert_allclose(o.asnumpy(), w, rtol=1e-5, atol=1e-6)
        for i, v in new.items():
            np.testing.assert_allclose(exe.aux_dict[f"u_{names[i]}"].asnumpy(), v, rtol=1e-5,
                                       atol=1e-6)
            state[i] = v
    # the weight arguments are not written
    np.testing.assert_array_equal(exe.arg_dict["u_weight_0"].asnumpy(), ins[0])


def test_errors_name_the_problem() -> None:
    w, g = nd.ones((2, 3)), nd.ones((2, 3))
    with pytest.raises(OperatorParamError, match="lrs has 1 values but num_weights is 2"):
        nd.multi_sgd_update(w, g, w, g, lrs=(0.1,), wds=(0.0, 0.0), num_weights=2)
    with pytest.raises(OperatorParamError, match="wds has 2 values but num_weights is 1"):
        nd.multi_sgd_update(w, g, lrs=(0.1,), wds=(0.0, 0.0))
    with pytest.raises(NNSymError, match="num_weights=1 takes 2 inputs"):
        nd.multi_sgd_update(w, g, w, g, lrs=(0.1,), wds=(0.0,), num_weights=1)
    with pytest.raises(ShapeError, match="grad_0 has shape"):
        nd.multi_sgd_update(w, nd.ones((3, 2)), lrs=(0.1,), wds=(0.0,))
    with pytest.raises(ShapeError, match=r"lrs has shape \(3,\); expected \(2,\)"):
        nd.preloaded_multi_sgd_update(w, g, w, g, nd.ones(3), nd.ones(2), num_weights=2)
    with pytest.raises(DTypeError, match="weight32_0 must be float32"):
        nd.multi_mp_sgd_update(w, g, nd.ones((2, 3), dtype="float64"), lrs=(0.1,), wds=(0.0,))


def test_registered_names() -> None:
    assert set(BY_NAME) <= set(REGISTRY)
    assert "multi_lars" in REGISTRY


def test_reset_arrays_zeroes_in_place_and_returns_nothing() -> None:
    a, b = nd.ones((2, 3)), nd.array(np.arange(4), dtype="int32")
    c = nd.array(np.full((2, 2), 7.0), dtype="float64")
    r = nd.reset_arrays(a, b, c, num_arrays=3)
    assert r == []  # as MXNet 1.9.1's nd.reset_arrays
    np.testing.assert_array_equal(a.asnumpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(b.asnumpy(), np.zeros(4, np.int32))
    np.testing.assert_array_equal(c.asnumpy(), np.zeros((2, 2)))
    assert (a.dtype, b.dtype, c.dtype) == (np.float32, np.int32, np.float64)
    with pytest.raises(NNSymError, match="num_arrays=2 takes 2 arrays, not 3"):
        nd.reset_arrays(a, b, c, num_arrays=2)
    with pytest.raises(OperatorParamError, match="num_arrays"):
        nd.reset_arrays(a)
