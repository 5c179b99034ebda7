"""LayerNorm, InstanceNorm, GroupNorm, L2Normalization (and the other NN operators added with
them): forward and gradients against MXNet 1.9.1 values pasted below, against numpy, and
against central differences; shape rules and parameter errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError
from nnsym.test_utils import check_numeric_gradient

# ---------------------------------------------------------------------------------------------
# helpers


def f32(v: Any) -> np.ndarray:
    return np.asarray(v, np.float32)


def run(name: str, arrays: list[np.ndarray], ograd: np.ndarray | None = None,
        **params: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Bind ``sym.<name>`` on the arrays; forward in training mode, backward with ``ograd``
    into output 0 (zeros into the others). Returns (outputs, input gradients)."""
    names = [f"in{i}" for i in range(len(arrays))]
    s = getattr(sym, name)(*[sym.Variable(n) for n in names], **params)
    args = {n: nd.array(a) for n, a in zip(names, arrays)}
    grads = {n: nd.zeros(a.shape, dtype=a.dtype) for n, a in zip(names, arrays)}
    exe = s.bind(None, args, args_grad=grads)
    outs = [o.asnumpy() for o in exe.forward(is_train=True)]
    if ograd is None:
        return outs, []
    heads = [nd.array(ograd)] + [nd.zeros(o.shape, dtype=o.dtype) for o in outs[1:]]
    exe.backward(heads)
    return outs, [grads[n].asnumpy() for n in names]


def close(got: np.ndarray, want: Any, rtol: float = 2e-5, atol: float = 2e-6) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def numeric(name: str, arrays: list[np.ndarray], wrt: list[int] | None = None,
            **params: Any) -> None:
    names = [f"in{i}" for i in range(len(arrays))]
    s = getattr(sym, name)(*[sym.Variable(n) for n in names], **params)
    loc = {n: a.astype(np.float64) for n, a in zip(names, arrays)}
    nodes = [names[i] for i in (range(len(arrays)) if wrt is None else wrt)]
    check_numeric_gradient(s, loc, grad_nodes=nodes, rtol=1e-5)


RNG = np.random.default_rng(7)

# ---------------------------------------------------------------------------------------------
# Normalisations. MXNet values made with ~/mxref (mxnet 1.9.1): mx.nd.<Op>(...) under
# mx.autograd.record() on the arrays below, then out[0].backward(OG); outputs and x.grad,
# gamma.grad, beta.grad printed with .tolist() (float32, rounded to 8 digits here).

X2 = f32([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
G3, B3 = f32([1.0, 2.0, -1.0]), f32([0.1, 0.0, -0.2])
OG2 = f32([[1.0, -0.5, 0.25], [0.3, 0.7, -1.1]])
X3 = f32([[[0.5, -1.0], [2.0, 1.5]], [[0.25, -0.75], [1.0, 3.0]]])  # (2, 2, 2)
OG3 = f32([[[1.0, -0.5], [0.25, 0.3]], [[0.7, -1.1], [0.2, 0.4]]])
G2, B2 = f32([1.5, -0.5]), f32([0.2, 0.3])
X4 = f32([[[0.5, -1.0], [2.0, 1.5], [0.1, 0.2], [1.0, -2.0]]])  # (1, 4, 2)
OG4 = f32([[[1.0, -0.5], [0.25, 0.3], [0.7, -1.1], [0.2, 0.4]]])

MX_NORM = [
    # (op, inputs, ograd, params, outputs, gradients)
    ("LayerNorm", [X2, G3, B3], OG2, {"output_mean_var": True},
     [[[0.1, -2.44948149, -1.42474079], [1.36749291, -0.18107045, 0.97695786]],
      [[0.5], [0.33333334]], [[1.22474897], [0.92045218]]],
     [[[0.88453501, -0.44226959, -0.44226545], [-0.21016601, 0.47286141, -0.26269534]],
      [0.38024789, 0.54899573, 1.6008389], [1.3, 0.2, -0.85]]),
    ("LayerNorm", [X3, G2, B2], OG3, {"axis": 1, "eps": 0.01},
     [[[[-1.28684187, -1.29522288], [-0.19561395, -0.19840762]],
       [[-1.24935234, -1.29787111], [-0.18311745, -0.19929039]]]],
     [[[[0.01875675, -0.00152141], [-0.01875675, 0.00152139]],
       [[0.09836102, -0.00109518], [-0.0983609, 0.00109518]]],
      [-0.07074586, 1.1395309], [0.1, 1.15]]),
    ("InstanceNorm", [X3, G2, B2], OG3, {"eps": 0.01},
     [[[[1.68684196, -1.28684187], [-0.16423836, 0.76423836]],
       [[1.67087114, -1.27087104], [0.79751861, -0.19751856]]]],
     [[[[0.02597111, -0.02597111], [0.00640327, -0.00640333]],
       [[0.10182947, -0.10182935], [0.00049259, -0.0004926]]],
      [3.25188708, 0.1525836], [0.1, 1.15]]),
    ("GroupNorm", [X4, G2, B2], OG4, {"num_groups": 2, "output_mean_var": True},
     [[[[-0.12732561, -2.09127927], [1.83662796, 1.18197691], [0.17611532, 0.13106635],
        [-0.22932547, 1.12214386]]], [[0.75, -0.175]], [[1.14564824, 1.1099031]]],
     [[[[1.03808928, -0.49099225], [-0.37875974, -0.16833724], [-0.31079438, 0.49355048],
        [-0.14438011, -0.03837601]]], [1.01470935, -0.64420038], [1.05, 0.2]]),
    ("L2Normalization", [X3], OG3, {"mode": "instance"},
     [[[[0.18257418, -0.36514837], [0.73029673, 0.54772252]],
       [[0.0766965, -0.2300895], [0.306786, 0.920358]]]],
     [[[[0.31767908, -0.08763561], [-0.09859005, -0.03286334]],
       [[0.19742581, -0.28549144], [-0.00794035, -0.08517823]]]]),
    ("L2Normalization", [X3], OG3, {"mode": "channel"},
     [[[[0.24253564, -0.5547002], [0.97014254, 0.83205032]],
       [[0.24253564, -0.24253562], [0.97014254, 0.97014248]]]],
     [[[[0.42800406, -0.11520696], [-0.10700103, -0.07680465]],
       [[0.59349895, -0.30435842], [-0.14837477, -0.07608961]]]]),
    ("L2Normalization", [X3], OG3, {"mode": "spatial"},
     [[[[0.44721359, -0.89442718], [0.8, 0.6]],
       [[0.31622776, -0.94868326], [0.31622776, 0.94868326]]]],
     [[[[0.53665632, 0.2683281], [-0.0216, 0.0288]],
       [[0.37947336, 0.12649083], [0.01897367, -0.00632455]]]]),
]


@pytest.mark.parametrize(("op", "ins", "og", "params", "outs", "grads"), MX_NORM,
                         ids=[f"{c[0]}-{c[3]}" for c in MX_NORM])
def test_normalisations_match_mxnet(op, ins, og, params, outs, grads):
    got, dins = run(op, ins, og, **params)
    assert len(got) == len(outs)
    for g, w in zip(got, outs):
        close(g, w)
    for g, w in zip(dins, grads):
        close(g, w, rtol=1e-4, atol=2e-6)


def test_layer_norm_against_numpy_any_axis():
    x = RNG.standard_normal((3, 4, 5)).astype(np.float64)
    for axis in (0, 1, 2, -2):
        c = x.shape[axis]
        gamma, beta = RNG.standard_normal(c), RNG.standard_normal(c)
        (out, mean, std), _ = run("LayerNorm", [x, gamma, beta], axis=axis, eps=1e-3,
                                  output_mean_var=True)
        mu = x.mean(axis=axis, keepdims=True)
        sd = np.sqrt(x.var(axis=axis, keepdims=True) + np.float32(1e-3))
        shape = [1] * 3
        shape[axis] = c
        want = (x - mu) / sd * gamma.reshape(shape) + beta.reshape(shape)
        close(out, want, 1e-12, 1e-12)
        close(mean, mu, 1e-12, 1e-12)
        close(std, sd, 1e-12, 1e-12)


def test_group_norm_against_numpy():
    x = RNG.standard_normal((2, 6, 3, 2))
    gamma, beta = RNG.standard_normal(3), RNG.standard_normal(3)
    (out,), _ = run("GroupNorm", [x, gamma, beta], num_groups=3, eps=1e-4)
    v = x.reshape(2, 3, -1)
    want = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + np.float32(1e-4))
    want = want * gamma[None, :, None] + beta[None, :, None]
    close(out, want.reshape(x.shape), 1e-12, 1e-12)


@pytest.mark.parametrize(("op", "shapes", "params"), [
    ("LayerNorm", [(3, 4, 5), (4,), (4,)], {"axis": 1}),
    ("LayerNorm", [(2, 7), (7,), (7,)], {"eps": 1e-2}),
    ("InstanceNorm", [(2, 3, 4, 2), (3,), (3,)], {}),
    ("GroupNorm", [(2, 6, 3), (3,), (3,)], {"num_groups": 3}),
    ("GroupNorm", [(3, 4, 2, 2), (1,), (1,)], {}),
    ("L2Normalization", [(2, 3, 4)], {"mode": "channel"}),
    ("L2Normalization", [(2, 3, 2, 2)], {"mode": "spatial"}),
    ("L2Normalization", [(3, 5)], {}),
])
def test_normalisation_gradients_by_finite_differences(op, shapes, params):
    numeric(op, [RNG.uniform(-2, 2, s) for s in shapes], **params)


def test_statistics_gradients_are_ignored_as_in_mxnet():
    """MXNet's _backward_LayerNorm reads only the output's gradient: heads on mean and std
    change nothing."""
    x = RNG.standard_normal((3, 4))
    gamma, beta = RNG.standard_normal(4), RNG.standard_normal(4)
    og = RNG.standard_normal((3, 4))
    _, want = run("LayerNorm", [x, gamma, beta], og)
    s = sym.LayerNorm(sym.Variable("x"), sym.Variable("g"), sym.Variable("b"),
                      output_mean_var=True)
    args = {"x": nd.array(x), "g": nd.array(gamma), "b": nd.array(beta)}
    grads = {k: nd.zeros(v.shape, dtype=v.dtype) for k, v in args.items()}
    exe = s.bind(None, args, args_grad=grads)
    exe.forward(is_train=True)
    exe.backward([nd.array(og), nd.ones((3, 1), dtype="float64"),
                  nd.ones((3, 1), dtype="float64")])
    for k, w in zip("xgb", want):
        close(grads[k].asnumpy(), w, 1e-12, 1e-12)


def test_normalisation_shapes_and_names():
    d = sym.Variable("data")
    s = sym.LayerNorm(d, name="ln", output_mean_var=True)
    assert s.list_arguments() == ["data", "ln_gamma", "ln_beta"]
    assert s.list_outputs() == ["ln_output", "ln_mean", "ln_std"]
    args, outs, _ = s.infer_shape(data=(2, 3, 4))
    assert args == [(2, 3, 4), (4,), (4,)] and outs == [(2, 3, 4), (2, 3, 1), (2, 3, 1)]
    s = sym.GroupNorm(d, num_groups=2, name="gn", output_mean_var=True)
    args, outs, _ = s.infer_shape(data=(2, 4, 5, 3))
    assert args == [(2, 4, 5, 3), (2,), (2,)] and outs == [(2, 4, 5, 3), (2, 2), (2, 2)]
    s = sym.InstanceNorm(d, name="in")
    assert s.list_outputs() == ["in_output"]
    assert s.infer_shape(data=(2, 3))[0] == [(2, 3), (3,), (3,)]
    for mode in ("instance", "channel", "spatial"):
        s = sym.L2Normalization(d, mode=mode, name="l2")
        assert s.list_outputs() == ["l2_output"]
        assert s.infer_shape(data=(2, 3, 4, 5))[1] == [(2, 3, 4, 5)]
    assert sym._npx_layer_norm(d, axis=0).infer_shape(data=(3,))[0] == [(3,), (3,), (3,)]


@pytest.mark.parametrize(("make", "shape"), [
    (lambda d: sym.GroupNorm(d, num_groups=2), (2, 3, 4)),  # 3 channels, 2 groups
    (lambda d: sym.GroupNorm(d, num_groups=2), (2, 4)),  # needs 3-D data
    (lambda d: sym.L2Normalization(d, mode="channel"), (2, 4)),
    (lambda d: sym.L2Normalization(d, mode="spatial"), (2, 4)),
    (lambda d: sym.LayerNorm(d, axis=2), (2, 4)),
])
def test_normalisation_bad_shapes(make, shape):
    with pytest.raises(NNSymError):
        make(sym.Variable("data")).infer_shape(data=shape)
