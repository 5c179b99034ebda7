"""RNN's use_sequence_length and LSTM cell clipping.

MXNet 1.9.1's CPU build accepts both options but silently ignores them (checked in the reference
venv: the outputs equal those without them), so there are no MXNet values to compare with. The
semantics are cuDNN's, which MXNet documents: each batch item runs its own length (the reverse
direction starting at its last valid step), so a batched run must equal running every item alone
on its truncated sequence without the option, a path that is itself checked against MXNet's
fixtures. Clipping is checked against its definition."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError
from nnsym.ops.nn.rnn import RNNParams, param_count
from nnsym.testing import as_nd


def run(arrays: list[np.ndarray], heads: list[np.ndarray] | None = None,
        **params: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Bind RNN on the arrays (training mode); backward with ``heads``. (outputs, grads)."""
    names = [f"in{i}" for i in range(len(arrays))]
    s = sym.RNN(*[sym.Variable(n) for n in names], **params)
    args = {n: as_nd(a) for n, a in zip(names, arrays)}
    grads = {n: nd.zeros(a.shape, dtype=a.dtype) for n, a in zip(names, arrays)}
    exe = s.bind(None, args, args_grad=grads)
    outs = [o.asnumpy() for o in exe.forward(is_train=True)]
    if heads is None:
        return outs, []
    exe.backward([as_nd(h) for h in heads])
    return outs, [grads[n].asnumpy() for n in names]


def _inputs(rng: np.random.Generator, mode: str, t: int, n: int, i: int, h: int,
            layers: int, bi: bool) -> list[np.ndarray]:
    p = RNNParams(state_size=h, num_layers=layers, bidirectional=bi, mode=mode)
    st = (layers * p.dirs, n, h)
    shapes = [(t, n, i), (param_count(p, i),), st] + ([st] if mode == "lstm" else [])
    return [rng.uniform(-0.9, 0.9, s) for s in shapes]


@pytest.mark.parametrize("mode,layers,bi", [("lstm", 2, True), ("gru", 2, False),
                                            ("rnn_tanh", 1, True)])
def test_sequence_length_equals_each_item_run_alone(mode, layers, bi):
    rng = np.random.default_rng(7)
    t, n, h = 4, 3, 2
    ins = _inputs(rng, mode, t, n, 3, h, layers, bi)
    lens = np.array([4, 1, 3], np.float64)
    kw: dict[str, Any] = dict(state_size=h, num_layers=layers, bidirectional=bi, mode=mode,
                              state_outputs=True)
    ld, dh = layers * (2 if bi else 1), (2 if bi else 1) * h
    nst = 2 if mode == "lstm" else 1
    heads = [rng.normal(size=(t, n, dh))] + [rng.normal(size=(ld, n, h)) for _ in range(nst)]
    outs, grads = run([*ins, lens], heads, use_sequence_length=True, **kw)
    assert grads[-1].tolist() == [0.0] * n  # no gradient to the lengths
    dparams = np.zeros_like(ins[1])
    for b, m in enumerate(lens.astype(int)):
        one = [ins[0][:m, b : b + 1], ins[1], *[s[:, b : b + 1] for s in ins[2:]]]
        hb = [heads[0][:m, b : b + 1], *[g[:, b : b + 1] for g in heads[1:]]]
        o1, g1 = run(one, hb, **kw)
        np.testing.assert_allclose(outs[0][:m, b : b + 1], o1[0], rtol=1e-10, atol=1e-12)
        assert not outs[0][m:, b].any(), "outputs past the length are 0"
        for k in range(1, 1 + nst):  # final states: those of the last valid step
            np.testing.assert_allclose(outs[k][:, b : b + 1], o1[k], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grads[0][:m, b : b + 1], g1[0], rtol=1e-9, atol=1e-12)
        assert not grads[0][m:, b].any(), "no gradient to steps past the length"
        for k in range(2, 2 + nst):
            np.testing.assert_allclose(grads[k][:, b : b + 1], g1[k], rtol=1e-9, atol=1e-12)
        dparams += g1[1]
    np.testing.assert_allclose(grads[1], dparams, rtol=1e-9, atol=1e-12)


def test_sequence_length_zero_and_too_long_are_clipped():
    rng = np.random.default_rng(3)
    ins = _inputs(rng, "gru", 3, 2, 2, 2, 1, False)
    kw: dict[str, Any] = dict(state_size=2, num_layers=1, mode="gru", state_outputs=True)
    outs, _ = run([*ins, np.array([0.0, 9.0])], use_sequence_length=True, **kw)
    full, _ = run(ins, **kw)
    assert not outs[0][:, 0].any()
    np.testing.assert_array_equal(outs[1][:, 0], ins[2][:, 0])  # length 0: the initial state
    np.testing.assert_allclose(outs[0][:, 1], full[0][:, 1], rtol=1e-12)


def test_sequence_length_shape_and_int_dtype():
    s = sym.RNN(sym.Variable("x"), sym.Variable("w"), sym.Variable("s"), sym.Variable("c"),
                sym.Variable("len"), state_size=2, num_layers=1, mode="lstm",
                use_sequence_length=True)
    assert s.list_arguments() == ["x", "w", "s", "c", "len"]
    args, outs, _ = s.infer_shape(x=(3, 5, 4))
    assert args[-1] == (5,) and outs == [(3, 5, 2)]
    types, _, _ = s.infer_type(x="float64", len="int32")
    assert [np.dtype(t).name for t in types] == ["float64"] * 4 + ["int32"]
    rng = np.random.default_rng(1)
    ins = _inputs(rng, "lstm", 3, 2, 2, 2, 1, False)
    a, _ = run([*ins, np.array([2.0, 3.0])], state_size=2, num_layers=1, mode="lstm",
               use_sequence_length=True)
    b, _ = run([*ins, np.array([2, 3], np.int32)], state_size=2, num_layers=1, mode="lstm",
               use_sequence_length=True)
    np.testing.assert_array_equal(a[0], b[0])


def _lstm_step(x, w, h0, c0, lo=None, hi=None):
    """One LSTM step by hand (gates i, f, g, o; W_x, W_h, then b_x, b_h)."""
    hh, ii = h0.shape[-1], x.shape[-1]
    g4 = 4 * hh
    wx, wh = w[: g4 * ii].reshape(g4, ii), w[g4 * ii : g4 * (ii + hh)].reshape(g4, hh)
    bx, bh = w[g4 * (ii + hh) : g4 * (ii + hh) + g4], w[g4 * (ii + hh) + g4 :]
    a = x @ wx.T + bx + h0 @ wh.T + bh
    sg = 1 / (1 + np.exp(-a))
    c = sg[:, hh : 2 * hh] * c0 + sg[:, :hh] * np.tanh(a[:, 2 * hh : 3 * hh])
    if lo is not None:
        c = np.clip(c, lo, hi)
    return sg[:, 3 * hh :] * np.tanh(c), c


def test_lstm_state_clip_by_hand():
    rng = np.random.default_rng(5)
    ins = _inputs(rng, "lstm", 1, 3, 2, 3, 1, False)
    ins[3] = rng.uniform(-2, 2, ins[3].shape)
    kw: dict[str, Any] = dict(state_size=3, num_layers=1, mode="lstm", state_outputs=True)
    outs, _ = run(ins, lstm_state_clip_min=-0.3, lstm_state_clip_max=0.4, **kw)
    h, c = _lstm_step(ins[0][0], ins[1], ins[2][0], ins[3][0], -0.3, 0.4)
    raw = _lstm_step(ins[0][0], ins[1], ins[2][0], ins[3][0])[1]
    assert ((raw < -0.3) | (raw > 0.4)).any() and ((raw > -0.3) & (raw < 0.4)).any()
    np.testing.assert_allclose(outs[2][0], c, rtol=1e-12)
    np.testing.assert_allclose(outs[0][0], h, rtol=1e-12)
    wide, _ = run(ins, lstm_state_clip_min=-1e9, lstm_state_clip_max=1e9, **kw)
    plain, _ = run(ins, **kw)
    for a, b in zip(wide, plain):
        np.testing.assert_array_equal(a, b)


def test_lstm_state_clip_gradient_stops_at_clipped_cells():
    rng = np.random.default_rng(9)
    ins = _inputs(rng, "lstm", 1, 2, 2, 2, 1, False)
    ins[3] = np.array([[[5.0, 0.0], [-5.0, 0.1]]])  # f * c0 dominates: cells 0 and 2 clip
    kw: dict[str, Any] = dict(state_size=2, num_layers=1, mode="lstm", state_outputs=True,
                              lstm_state_clip_min=-0.5, lstm_state_clip_max=0.5)
    heads = [np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), np.ones((1, 2, 2))]
    outs, grads = run(ins, heads, **kw)
    assert outs[2][0, 0, 0] == 0.5 and outs[2][0, 1, 0] == -0.5
    clipped = np.abs(outs[2]) == 0.5
    assert not clipped.all()
    # d cy / d c0 = f where the cell is inside the bounds, 0 where it was clipped
    np.testing.assert_array_equal(grads[3] == 0, clipped)


@pytest.mark.parametrize("clip_nan", [True, False])
def test_lstm_state_clip_nan(clip_nan):
    rng = np.random.default_rng(2)
    ins = _inputs(rng, "lstm", 1, 2, 2, 2, 1, False)
    ins[3][0, 1, 0] = np.nan
    outs, _ = run(ins, state_size=2, num_layers=1, mode="lstm", state_outputs=True,
                  lstm_state_clip_min=-0.5, lstm_state_clip_max=0.5,
                  lstm_state_clip_nan=clip_nan)
    cy = outs[2]
    assert np.isfinite(cy[0, 0]).all()
    if clip_nan:
        assert cy[0, 1, 0] == -0.5
    else:
        assert np.isnan(cy[0, 1, 0])


@pytest.mark.parametrize("bad", [dict(lstm_state_clip_min=-1.0),
                                 dict(lstm_state_clip_max=1.0),
                                 dict(lstm_state_clip_min=1.0, lstm_state_clip_max=0.0),
                                 dict(projection_size=1)])
def test_bad_clip_or_projection_raises(bad):
    with pytest.raises(NNSymError, match=r"lstm_state_clip|projection_size"):
        sym.RNN(sym.Variable("x"), sym.Variable("w"), sym.Variable("s"), sym.Variable("c"),
                state_size=2, num_layers=1, mode="lstm", **bad)
