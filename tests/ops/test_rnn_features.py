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
    head = [rng.normal(size=(3, 2, 2))]
    a, ga = run([*ins, np.array([2.0, 3.0])], head, state_size=2, num_layers=1, mode="lstm",
                use_sequence_length=True)
    b, gb = run([*ins, np.array([2, 3], np.int32)], head, state_size=2, num_layers=1,
                mode="lstm", use_sequence_length=True)
    np.testing.assert_array_equal(a[0], b[0])
    for x, y in zip(ga[:4], gb[:4]):
        np.testing.assert_array_equal(x, y)


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
                                 dict(projection_size=0)])
def test_bad_clip_or_projection_raises(bad):
    with pytest.raises(NNSymError, match=r"lstm_state_clip|projection_size"):
        sym.RNN(sym.Variable("x"), sym.Variable("w"), sym.Variable("s"), sym.Variable("c"),
                state_size=2, num_layers=1, mode="lstm", **bad)


# ---------------------------------------------------------------------------------------------
# dropout between layers (training)


def _mask_rnn(t: int, n: int, h: int, p: float, train: bool = True) -> np.ndarray:
    """A 2-layer rnn_relu whose output is its dropout mask: layer 0 outputs relu(b_x) = 1
    everywhere (zero weights), layer 1 is relu(I @ input) (identity W_x, no recurrence)."""
    prm = RNNParams(state_size=h, num_layers=2, mode="rnn_relu")
    w = np.zeros(param_count(prm, 1))
    nw0 = h * (1 + h)
    w[nw0 : nw0 + h * h] = np.eye(h).ravel()  # layer 1's W_x
    nw = nw0 + 2 * h * h
    w[nw : nw + h] = 1.0  # layer 0's b_x
    s = sym.RNN(sym.Variable("x"), sym.Variable("w"), sym.Variable("s"), state_size=h,
                num_layers=2, mode="rnn_relu", p=p)
    exe = s.bind(None, {"x": as_nd(np.zeros((t, n, 1))), "w": as_nd(w),
                          "s": as_nd(np.zeros((2, n, h)))})
    return exe.forward(is_train=train)[0].asnumpy()


@pytest.mark.parametrize("p", [0.25, 0.7])
def test_dropout_fraction_scale_and_seed(p):
    from nnsym import random as mxrandom
    from nnsym.ops.common.rng import next_seed
    from nnsym.ops.nn.dropout import keep_flags

    t, n, h = 20, 25, 40
    mxrandom.seed(11)
    m = _mask_rnn(t, n, h, p)
    kept = m != 0
    total = m.size
    sigma = np.sqrt(total * p * (1 - p))
    assert abs(kept.sum() - total * (1 - p)) < 5 * sigma
    np.testing.assert_allclose(m[kept], 1 / (1 - p), rtol=1e-15)
    # the generator is Dropout's, seeded by the run seed that follows mx.random.seed
    mxrandom.seed(11)
    np.testing.assert_array_equal(kept.ravel(), keep_flags(next_seed(), 1 - p, total))
    mxrandom.seed(11)
    again = _mask_rnn(t, n, h, p)
    np.testing.assert_array_equal(m, again)
    other = _mask_rnn(t, n, h, p)
    assert (other != m).any()
    # inference: no dropout
    assert (_mask_rnn(t, n, h, p, train=False) == 1).all()


def test_dropout_forward_and_backward_equal_two_layers_with_that_mask():
    """A 2-layer lstm with p > 0 equals two 1-layer lstms with the run's mask in between, in
    the outputs and in every gradient (the backward reuses the forward's mask)."""
    from nnsym import random as mxrandom

    rng = np.random.default_rng(4)
    t, n, i, h, p = 3, 2, 3, 2, 0.4
    ins = _inputs(rng, "lstm", t, n, i, h, 2, False)
    mxrandom.seed(21)
    mask = _mask_rnn(t, n, h, p)
    assert (mask == 0).any() and (mask != 0).any()
    kw: dict[str, Any] = dict(state_size=h, mode="lstm", state_outputs=True)
    heads = [rng.normal(size=(t, n, h)), rng.normal(size=(2, n, h)), rng.normal(size=(2, n, h))]
    mxrandom.seed(21)
    outs, grads = run(ins, heads, num_layers=2, p=p, **kw)
    # the same network as two single layers (packed vectors split per layer)
    g4 = 4 * h
    w = ins[1]
    wx0, wh0 = w[: g4 * i], w[g4 * i : g4 * (i + h)]
    o = g4 * (i + h)
    wx1, wh1 = w[o : o + g4 * h], w[o + g4 * h : o + 2 * g4 * h]
    b = w[o + 2 * g4 * h :]
    w0 = np.concatenate([wx0, wh0, b[: 2 * g4]])
    w1 = np.concatenate([wx1, wh1, b[2 * g4 :]])
    x, s0, s1, c0, c1 = (sym.Variable(v) for v in ("x", "s0", "s1", "c0", "c1"))
    v0, v1, vm = sym.Variable("w0"), sym.Variable("w1"), sym.Variable("m")
    lay0 = sym.RNN(x, v0, s0, c0, num_layers=1, **kw)
    lay1 = sym.RNN(lay0[0] * vm, v1, s1, c1, num_layers=1, **kw)
    net = sym.Group([lay1[0], lay0[1], lay1[1], lay0[2], lay1[2]])
    args = {"x": ins[0], "w0": w0, "w1": w1, "s0": ins[2][:1], "s1": ins[2][1:],
            "c0": ins[3][:1], "c1": ins[3][1:], "m": mask}
    grads2 = {k: nd.zeros(v.shape, dtype="float64") for k, v in args.items()}
    exe = net.bind(None, {k: as_nd(v) for k, v in args.items()}, args_grad=grads2)
    want = [o_.asnumpy() for o_ in exe.forward(is_train=True)]
    exe.backward([as_nd(heads[0]), as_nd(heads[1][:1]), as_nd(heads[1][1:]),
                  as_nd(heads[2][:1]), as_nd(heads[2][1:])])
    g = {k: v.asnumpy() for k, v in grads2.items()}
    np.testing.assert_allclose(outs[0], want[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[1], np.concatenate(want[1:3]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[2], np.concatenate(want[3:5]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grads[0], g["x"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads[2], np.concatenate([g["s0"], g["s1"]]), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(grads[3], np.concatenate([g["c0"], g["c1"]]), rtol=1e-9,
                               atol=1e-12)
    dw = np.concatenate([g["w0"][: g4 * (i + h)], g["w1"][: 2 * g4 * h],
                         g["w0"][g4 * (i + h) :], g["w1"][2 * g4 * h :]])
    np.testing.assert_allclose(grads[1], dw, rtol=1e-9, atol=1e-12)
