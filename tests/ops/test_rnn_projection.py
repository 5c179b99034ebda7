"""RNN with LSTM projection (LSTMP, ``projection_size``): forward against MXNet 1.9.1's values
(tests/golden/lstmp, inference: MXNet's CPU build has no LSTMP training) and the numpy
reference; gradients against finite differences (the registry's RNN examples with
projection_size also run the table-driven forward and gradient checks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError
from nnsym.ops.nn.rnn import RNNParams, param_count, rnn_reference
from nnsym.testing import as_nd

HERE = Path(__file__).resolve().parent.parent / "golden" / "lstmp"
META = json.loads((HERE / "cases.json").read_text())
FIX = np.load(HERE / "lstmp.npz")


def _bind(arrays: list[np.ndarray], **params: Any):
    names = [f"in{i}" for i in range(len(arrays))]
    s = sym.RNN(*[sym.Variable(n) for n in names], **params)
    args = {n: as_nd(a) for n, a in zip(names, arrays)}
    grads = {n: nd.zeros(a.shape, dtype=a.dtype) for n, a in zip(names, arrays)}
    return s.bind(None, args, args_grad=grads), grads, names


@pytest.mark.parametrize("cid", sorted(META))
def test_forward_matches_mxnet(cid):
    ins = [FIX[f"{cid}/in{k}"] for k in range(4)]
    want = [FIX[f"{cid}/out{k}"] for k in range(3)]
    exe, _, _ = _bind(ins, **META[cid])
    got = [o.asnumpy() for o in exe.forward(is_train=False)]
    tol = 1e-10 if ins[0].dtype == np.float64 else 1e-5
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    ref = rnn_reference(RNNParams(**META[cid]), *ins)
    for r, w in zip(ref, want):
        np.testing.assert_allclose(r, w, rtol=tol, atol=tol)


def test_shapes_follow_mxnet():
    """MXNet's infer_shape for T=3, N=2, I=3, H=4, P=2 (checked in the reference venv)."""
    mx_sizes = {(False, 1): 120, (False, 2): 224, (True, 1): 240, (True, 2): 512}
    for (bi, layers), size in mx_sizes.items():
        p = RNNParams(state_size=4, num_layers=layers, bidirectional=bi, mode="lstm",
                      projection_size=2)
        assert param_count(p, 3) == size
        s = sym.RNN(sym.var("data"), sym.var("parameters"), sym.var("state"),
                    sym.var("state_cell"), state_size=4, num_layers=layers, bidirectional=bi,
                    mode="lstm", projection_size=2, state_outputs=True)
        args, outs, _ = s.infer_shape(data=(3, 2, 3))
        ld, d = layers * (2 if bi else 1), 2 if bi else 1
        assert args == [(3, 2, 3), (size,), (ld, 2, 2), (ld, 2, 4)]
        assert outs == [(3, 2, 2 * d), (ld, 2, 2), (ld, 2, 4)]


@pytest.mark.parametrize("bi,layers,seq", [(False, 1, False), (True, 2, False), (True, 1, True)])
def test_gradients_match_finite_differences(bi, layers, seq):
    rng = np.random.default_rng(3)
    t, n, i, h, r = 3, 2, 2, 3, 2
    kw: dict[str, Any] = dict(state_size=h, num_layers=layers, bidirectional=bi, mode="lstm",
                              projection_size=r, state_outputs=True)
    p = RNNParams(**kw)
    ld = layers * p.dirs
    ins = [rng.uniform(-0.8, 0.8, s) for s in
           [(t, n, i), (param_count(p, i),), (ld, n, r), (ld, n, h)]]
    if seq:
        kw["use_sequence_length"] = True
        ins.append(np.array([3.0, 2.0]))
    heads = [rng.normal(size=(t, n, p.dirs * r)), rng.normal(size=(ld, n, r)),
             rng.normal(size=(ld, n, h))]
    exe, grads, names = _bind(ins, **kw)
    exe.forward(is_train=True)
    exe.backward([as_nd(x) for x in heads])

    def loss(arrs: list[np.ndarray]) -> float:
        outs = rnn_reference(RNNParams(**kw), *arrs)
        return float(sum(np.sum(o * hd) for o, hd in zip(outs, heads)))

    eps = 1e-6
    for k in range(4):
        num = np.zeros_like(ins[k])
        for j in range(ins[k].size):
            up = [a.copy() for a in ins]
            dn = [a.copy() for a in ins]
            up[k].flat[j] += eps
            dn[k].flat[j] -= eps
            num.flat[j] = (loss(up) - loss(dn)) / (2 * eps)
        np.testing.assert_allclose(grads[names[k]].asnumpy(), num, rtol=1e-5, atol=1e-7,
                                   err_msg=names[k])


def test_projection_needs_lstm_and_a_positive_size():
    with pytest.raises(NNSymError, match="projection_size"):
        sym.RNN(sym.var("d"), sym.var("w"), sym.var("s"), state_size=3, num_layers=1,
                mode="gru", projection_size=2)
    with pytest.raises(NNSymError, match="projection_size"):
        sym.RNN(sym.var("d"), sym.var("w"), sym.var("s"), sym.var("c"), state_size=3,
                num_layers=1, mode="lstm", projection_size=0)
