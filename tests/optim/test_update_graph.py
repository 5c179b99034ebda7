"""The registered optimizer-update operators in bound graphs: the states they mutate are the
symbol's auxiliary states (as MXNet's FMutateInputs), updated in place by every forward, while
the weight argument keeps its value and the output is the new weight. Checked against the numpy
update (``update_reference``) over two forwards, and against values MXNet 1.9.1 printed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError, StorageTypeError
from nnsym.ops import REGISTRY
from nnsym.ops.optim.updates import BY_NAME, UPDATES, update_reference
from nnsym.testing import as_nd, make_inputs

CASES = [pytest.param(u.name, i, id=f"{u.name}-{i}") for u in UPDATES for i in range(2)]


def _symbol(name: str, params: dict) -> sym.Symbol:
    u = BY_NAME[name]
    fn = getattr(sym.contrib, name[len("_contrib_"):]) if name.startswith("_contrib_") \
        else getattr(sym, name)
    return fn(*[sym.var(n) for n in u.inputs], name="upd", **params)


@pytest.mark.parametrize(("name", "k"), CASES)
def test_forward_updates_aux_states_in_place(name, k):
    u, op = BY_NAME[name], REGISTRY[name]
    ex = op.examples[k]
    params, _ = op.parse_params(ex.params)
    ins = make_inputs(op, ex, seed=k)
    s = _symbol(name, dict(ex.params))
    assert s.list_auxiliary_states() == list(u.aux)
    assert s.list_arguments() == [n for n in u.inputs if n not in u.aux]
    arrays = dict(zip(u.inputs, ins))
    args = {n: as_nd(a) for n, a in arrays.items() if n not in u.aux}
    aux = {n: as_nd(a) for n, a in arrays.items() if n in u.aux}
    exe = s.bind(None, args, aux_states=aux)
    cur = list(ins)
    for step in range(2):
        out = exe.forward()[0].asnumpy()
        want, states = update_reference(name, params, *cur)
        tol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol, err_msg=f"step {step}")
        for i, v in states.items():
            cur[i] = v
            got = exe.aux_dict[u.inputs[i]].asnumpy()
            np.testing.assert_allclose(got, v, rtol=tol, atol=tol,
                                       err_msg=f"state {u.inputs[i]}, step {step}")
        # the weight argument is read, not written
        np.testing.assert_array_equal(exe.arg_dict["weight"].asnumpy(), ins[0])
    if name in ("mp_lamb_update_phase2",):
        np.testing.assert_array_equal(exe.aux_dict["weight32"].asnumpy(), ins[-1])


def test_mxnet_names_and_auxiliary_states():
    """MXNet 1.9.1's list_arguments / list_auxiliary_states of a symbol loaded from JSON."""
    want = {
        "sgd_update": (["weight", "grad"], []),
        "mp_sgd_mom_update": (["weight", "grad"], ["mom", "weight32"]),
        "adam_update": (["weight", "grad"], ["mean", "var"]),
        "lamb_update_phase2": (["weight", "g", "r1", "r2"], []),
        "mp_lamb_update_phase1": (["weight", "grad", "weight32"], ["mean", "var"]),
        "mp_lamb_update_phase2": (["weight", "g", "r1", "r2"], ["weight32"]),
        "_contrib_group_adagrad_update": (["weight", "grad"], ["history"]),
    }
    for name, (args, aux) in want.items():
        s = _symbol(name, {"t": 1, "wd": 0.0} if "lamb_update_phase1" in name
                    else {"lr": 0.1})
        assert (s.list_arguments(), s.list_auxiliary_states()) == (args, aux), name


def _sgd_mom_json() -> str:
    nodes = [{"op": "null", "name": n, "inputs": []} for n in ("w", "g", "m")]
    nodes.append({"op": "sgd_mom_update", "name": "u", "attrs": {"lr": "0.1", "momentum": "0.9"},
                  "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]})
    return json.dumps({"nodes": nodes, "arg_nodes": [0, 1, 2], "node_row_ptr": [0, 1, 2, 3, 4],
                       "heads": [[3, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}})


def test_mxnet_json_binds_and_updates_like_mxnet():
    # MXNet 1.9.1 on this JSON, w = g = m = 1: output 1.8, aux m 0.79999995, arg w 1
    s = sym.load_json(_sgd_mom_json())
    assert (s.list_arguments(), s.list_auxiliary_states()) == (["w", "g"], ["m"])
    assert s.infer_shape(w=(3, 4)) == ([(3, 4), (3, 4)], [(3, 4)], [(3, 4)])
    one = np.ones((2, 2), np.float32)
    exe = s.bind(None, {"w": nd.array(one), "g": nd.array(one)}, aux_states={"m": nd.array(one)})
    out = exe.forward()[0].asnumpy()
    np.testing.assert_array_equal(out, np.float32(1) + (np.float32(0.9) - np.float32(0.1)))
    np.testing.assert_array_equal(exe.aux_dict["m"].asnumpy(), np.float32(0.9) - np.float32(0.1))
    np.testing.assert_array_equal(exe.arg_dict["w"].asnumpy(), one)
    back = sym.load_json(s.tojson())
    assert (back.list_arguments(), back.list_auxiliary_states()) == (["w", "g"], ["m"])


def test_mixed_precision_float16_weight():
    rng = np.random.default_rng(0)
    w32 = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    g = rng.uniform(-1, 1, (3, 4)).astype(np.float16)
    mom = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    s = _symbol("mp_sgd_mom_update", {"lr": 0.1, "momentum": 0.9, "wd": 0.01})
    exe = s.bind(None, {"weight": as_nd(w32.astype(np.float16)), "grad": as_nd(g)},
                 aux_states={"mom": as_nd(mom), "weight32": as_nd(w32)})
    out = exe.forward()[0]
    assert out.dtype == np.float16
    p, _ = REGISTRY["mp_sgd_mom_update"].parse_params({"lr": 0.1, "momentum": 0.9, "wd": 0.01})
    want, states = update_reference("mp_sgd_mom_update", p, w32.astype(np.float16), g, mom, w32)
    np.testing.assert_allclose(out.asnumpy().astype(np.float32), want.astype(np.float32),
                               rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(exe.aux_dict["weight32"].asnumpy(), states[3], rtol=1e-6)
    np.testing.assert_allclose(exe.aux_dict["mom"].asnumpy(), states[2], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("lazy", [True, False])
def test_row_sparse_gradient_in_a_graph(lazy):
    """sgd_mom_update and adam_update with a row_sparse gradient (MXNet's FComputeEx): lazy
    updates change only the gradient's rows, weight decay and states included."""
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, (6, 3)).astype(np.float32)
    g = np.zeros_like(w)
    rows = np.array([1, 4])
    g[rows] = rng.uniform(-1, 1, (2, 3))
    mom = rng.uniform(-1, 1, w.shape).astype(np.float32)
    s = _symbol("sgd_mom_update", {"lr": 0.1, "momentum": 0.9, "wd": 0.1, "lazy_update": lazy})
    gs = nd.array(g).tostype("row_sparse")
    exe = s.bind(None, {"weight": nd.array(w), "grad": gs}, aux_states={"mom": nd.array(mom)})
    out = exe.forward()[0].asnumpy()
    sel = rows if lazy else np.arange(6)
    m2 = mom.copy()
    m2[sel] = np.float32(0.9) * mom[sel] - np.float32(0.1 * 0.1) * w[sel] - np.float32(0.1) * g[sel]
    w2 = w.copy()
    w2[sel] = w[sel] + m2[sel]
    np.testing.assert_allclose(out, w2, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(exe.aux_dict["mom"].asnumpy(), m2, rtol=1e-6, atol=1e-6)

    mean = np.zeros_like(w)
    var = np.zeros_like(w)
    s = _symbol("adam_update", {"lr": 0.1, "lazy_update": lazy})
    exe = s.bind(None, {"weight": nd.array(w), "grad": gs},
                 aux_states={"mean": nd.array(mean), "var": nd.array(var)})
    out = exe.forward()[0].asnumpy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    one = np.float32(1)
    m[sel] = (one - np.float32(0.9)) * g[sel]  # the scalars rounded to float32 first
    v[sel] = (one - np.float32(0.999)) * (g[sel] * g[sel])
    w3 = w.copy()
    w3[sel] = w[sel] - np.float32(0.1) * m[sel] / (np.sqrt(v[sel]) + np.float32(1e-8))
    np.testing.assert_allclose(out, w3, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe.aux_dict["mean"].asnumpy(), m, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(exe.aux_dict["var"].asnumpy(), v, rtol=1e-5, atol=1e-9)


def test_nd_out_form_still_updates_in_place():
    w = nd.array(np.ones((2, 3), np.float32))
    g = nd.array(np.ones((2, 3), np.float32))
    r = nd.sgd_update(w, g, lr=0.1, out=w)
    assert r is w
    np.testing.assert_allclose(w.asnumpy(), 0.9, rtol=1e-6)
    mom = nd.zeros((2, 3))
    nd.sgd_mom_update(w, g, mom, lr=0.1, momentum=0.9, out=w)
    np.testing.assert_allclose(mom.asnumpy(), -0.1, rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), 0.8, rtol=1e-6)


def test_bad_state_shape_names_the_input():
    s = _symbol("adam_update", {"lr": 0.1})
    with pytest.raises(NNSymError, match="var"):
        s.infer_shape(weight=(3, 4), var=(3, 5))
    s = _symbol("_contrib_group_adagrad_update", {"lr": 0.1})
    with pytest.raises(NNSymError, match="history"):
        s.infer_shape(weight=(3, 4), history=(3, 4))


def test_mixed_precision_lamb_phases_float16_weight():
    """MXNet's mp_lamb_update_phase1 takes a float16 weight and gradient and returns a float32
    direction; phase 2 returns the float16 weight and leaves weight32 as it was."""
    rng = np.random.default_rng(2)
    w32 = rng.uniform(0.1, 1, (3, 4)).astype(np.float32)
    w16, g16 = w32.astype(np.float16), rng.uniform(-1, 1, (3, 4)).astype(np.float16)
    mean, var = np.zeros((3, 4), np.float32), np.full((3, 4), 0.5, np.float32)
    raw = {"t": 2, "wd": 0.01}
    s = _symbol("mp_lamb_update_phase1", raw)
    exe = s.bind(None, {"weight": as_nd(w16), "grad": as_nd(g16), "weight32": as_nd(w32)},
                 aux_states={"mean": as_nd(mean), "var": as_nd(var)})
    d = exe.forward()[0]
    assert d.dtype == np.float32
    p, _ = REGISTRY["mp_lamb_update_phase1"].parse_params(raw)
    want, states = update_reference("mp_lamb_update_phase1", p, w16, g16, mean, var, w32)
    np.testing.assert_allclose(d.asnumpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe.aux_dict["var"].asnumpy(), states[3], rtol=1e-6)

    s = _symbol("mp_lamb_update_phase2", {"lr": 0.1})
    r1, r2 = np.array([2.0], np.float32), np.array([4.0], np.float32)
    exe = s.bind(None, {"weight": as_nd(w16), "g": as_nd(d.asnumpy()), "r1": as_nd(r1),
                        "r2": as_nd(r2)}, aux_states={"weight32": as_nd(w32)})
    out = exe.forward()[0]
    assert out.dtype == np.float16
    want = (w32 - np.float32(0.1 * 0.5) * d.asnumpy()).astype(np.float16)
    np.testing.assert_array_equal(out.asnumpy(), want)
    np.testing.assert_array_equal(exe.aux_dict["weight32"].asnumpy(), w32)


def test_row_sparse_ftrl_updates_row_sparse_states_lazily():
    """MXNet's sparse FTRL: row_sparse weight, gradient and states; only the gradient's rows
    change, the states (storing every row) in place."""
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    g = np.zeros_like(w)
    g[[0, 3]] = rng.uniform(-1, 1, (2, 3))
    z, n = rng.uniform(-1, 1, w.shape).astype(np.float32), np.full(w.shape, 0.5, np.float32)
    raw = {"lr": 0.1, "lamda1": 0.01, "wd": 0.01}
    s = _symbol("ftrl_update", raw)
    exe = s.bind(None, {"weight": nd.array(w).tostype("row_sparse"),
                        "grad": nd.array(g).tostype("row_sparse")},
                 aux_states={"z": nd.array(z).tostype("row_sparse"),
                             "n": nd.array(n).tostype("row_sparse")})
    out = exe.forward()[0]
    assert out.stype == "row_sparse"
    p, _ = REGISTRY["ftrl_update"].parse_params(raw)
    want, states = update_reference("ftrl_update", p, w, g, z, n)
    rows, other = [0, 3], [1, 2, 4]
    np.testing.assert_allclose(out.asnumpy()[rows], want[rows], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out.asnumpy()[other], w[other])
    for name, i, before in (("z", 2, z), ("n", 3, n)):
        got = exe.aux_dict[name]
        assert got.stype == "row_sparse"
        np.testing.assert_allclose(got.asnumpy()[rows], states[i][rows], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got.asnumpy()[other], before[other])


def test_row_sparse_gradient_without_a_sparse_kernel_updates_dense_states():
    """signum_update has no sparse kernel in MXNet (a dense fallback): the standard update
    with absent rows at gradient 0, the dense state still updated in place."""
    w = np.ones((4, 3), np.float32)
    g = np.zeros_like(w)
    g[1] = 1
    s = _symbol("signum_update", {"lr": 0.1, "momentum": 0.5})
    exe = s.bind(None, {"weight": nd.array(w), "grad": nd.array(g).tostype("row_sparse")},
                 aux_states={"mom": nd.array(np.full_like(w, 0.5))})
    out = exe.forward()[0].asnumpy()
    p, _ = REGISTRY["signum_update"].parse_params({"lr": 0.1, "momentum": 0.5})
    want, states = update_reference("signum_update", p, w, g, np.full_like(w, 0.5))
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_allclose(exe.aux_dict["mom"].asnumpy(), states[2], rtol=1e-6)


def test_partial_row_sparse_state_is_refused():
    s = _symbol("ftrl_update", {"lr": 0.1})
    z = np.zeros((4, 3), np.float32)
    z[1] = 1
    w = nd.array(np.ones((4, 3), np.float32)).tostype("row_sparse")
    exe = s.bind(None, {"weight": w, "grad": nd.array(np.ones((4, 3))).tostype("row_sparse")},
                 aux_states={"z": nd.array(z).tostype("row_sparse"),
                             "n": nd.array(np.ones((4, 3))).tostype("row_sparse")})
    with pytest.raises(StorageTypeError, match="every row"):
        exe.forward()
