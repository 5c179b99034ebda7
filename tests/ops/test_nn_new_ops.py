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
from nnsym.testing import as_nd

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
    args = {n: as_nd(a) for n, a in zip(names, arrays)}
    grads = {n: nd.zeros(a.shape, dtype=a.dtype) for n, a in zip(names, arrays)}
    exe = s.bind(None, args, args_grad=grads)
    outs = [o.asnumpy() for o in exe.forward(is_train=True)]
    if ograd is None:
        return outs, []
    heads = [as_nd(ograd)] + [nd.zeros(o.shape, dtype=o.dtype) for o in outs[1:]]
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
    args = {"x": as_nd(x), "g": as_nd(gamma), "b": as_nd(beta)}
    grads = {k: nd.zeros(v.shape, dtype=v.dtype) for k, v in args.items()}
    exe = s.bind(None, args, args_grad=grads)
    exe.forward(is_train=True)
    exe.backward([as_nd(og), nd.ones((3, 1), dtype="float64"),
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


# ---------------------------------------------------------------------------------------------
# softmin, SoftmaxActivation, losses. MXNet values made with ~/mxref (mxnet 1.9.1) as above
# (mx.autograd.record(), then backward with the given head gradient; loss heads backward()
# without one); labels got no attach_grad.

LAB = f32([2, 0])

MX_MISC = [
    # (op, inputs, ograd or None, params, output, data gradient)
    ("softmin", [X2], OG2, {},
     [[0.17529039, 0.78559703, 0.03911257], [0.07154059, 0.2497012, 0.6787582]],
     [[-0.21170345, 0.22960645, -0.017903], [-0.06083676, -0.31222165, 0.37305838]]),
    ("softmin", [X2], OG2, {"axis": 0, "temperature": 2.0},
     [[0.62245935, 0.65135491, 0.20181322], [0.37754068, 0.34864515, 0.79818678]],
     [[-0.08225129, 0.13625503, -0.10873214], [0.08225131, -0.13625504, 0.10873213]]),
    # MXNet's instance-mode gradient on 3-D data sums over axis 1, not the softmax's last axis
    # (its backward always uses the channel layout): only the 2-D case is compared here.
    ("SoftmaxActivation", [X2], OG2, {},
     [[0.17529039, 0.03911257, 0.78559703], [0.71844035, 0.20583661, 0.07572305]],
     [[0.11356479, -0.03332913, -0.08023567], [0.01701098, 0.08720837, -0.10421933]]),
    ("SoftmaxActivation", [X3], OG3, {"mode": "channel"},
     [[[0.18242551, 0.07585818], [0.81757444, 0.92414182]],
      [[0.32082129, 0.02297737], [0.67917871, 0.97702265]]],
     [[[0.11185984, -0.05608297], [-0.11185982, 0.05608296]],
      [[0.10894749, -0.03367412], [-0.10894749, 0.03367412]]]),
    ("softmax_cross_entropy", [X2, LAB], f32([2.0]), {}, [0.57198393],
     [[0.35058078, 0.07822514, -0.42880595], [-0.56311929, 0.41167322, 0.1514461]]),
    ("SVMOutput", [X2, LAB], None, {}, X2, [[3.0, 0.0, 0.0], [0.0, 2.5, 0.5]]),
    ("SVMOutput", [X2, LAB], None,
     {"margin": 0.5, "regularization_coefficient": 2.0, "use_linear": True},
     X2, [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]),
    ("make_loss", [X2], OG2, {}, X2, np.ones((2, 3))),
    ("smooth_l1", [X3 * 0.5], OG3, {},
     [[[0.03125, 0.125], [0.5, 0.28125]], [[0.0078125, 0.0703125], [0.125, 1.0]]],
     [[[0.25, 0.25], [0.25, 0.225]], [[0.0875, 0.4125], [0.1, 0.4]]]),
    ("smooth_l1", [X3 * 0.5], OG3, {"scalar": 2.0},
     [[[0.125, 0.375], [0.875, 0.625]], [[0.03125, 0.25], [0.375, 1.375]]],
     [[[1.0, 0.5], [0.25, 0.3]], [[0.35, 1.1], [0.2, 0.4]]]),
]


@pytest.mark.parametrize(("op", "ins", "og", "params", "out", "grad"), MX_MISC,
                         ids=[f"{c[0]}-{c[3]}" for c in MX_MISC])
def test_misc_ops_match_mxnet(op, ins, og, params, out, grad):
    names = [f"in{i}" for i in range(len(ins))]
    s = getattr(sym, op)(*[sym.Variable(n) for n in names], **params)
    args = {n: as_nd(a) for n, a in zip(names, ins)}
    grads = {names[0]: nd.zeros(ins[0].shape)}
    reqs = {n: ("write" if i == 0 else "null") for i, n in enumerate(names)}
    exe = s.bind(None, args, args_grad=grads, grad_req=reqs)
    got = exe.forward(is_train=True)[0].asnumpy()
    close(got, out)
    exe.backward([as_nd(og)] if og is not None else None)
    close(grads[names[0]].asnumpy(), grad, rtol=1e-5, atol=1e-6)


def test_softmax_cross_entropy_against_numpy_and_clamp():
    x = RNG.standard_normal((5, 4))
    lab = np.array([0, 3, 1, 2, 3], np.float64)
    (out,), _ = run("softmax_cross_entropy", [x, lab])
    lse = np.log(np.exp(x).sum(axis=1))
    close(out, [np.sum(lse - x[np.arange(5), lab.astype(int)])], 1e-12, 1e-12)
    # mx.nd.softmax_cross_entropy(mx.nd.array([[1, 2, 3.]]), mx.nd.array([7])) -> [18.420681]
    # in MXNet 1.9.1: a label out of range picks 0, and each term is at most -log(1e-8).
    (out,), _ = run("softmax_cross_entropy", [f32([[1, 2, 3]]), f32([7])])
    close(out, [18.420681])


def test_softmax_activation_instance_is_over_the_last_axis():
    # mx.nd.SoftmaxActivation(X3) in MXNet 1.9.1 (forward; FlatTo2D: the last axis)
    (out,), _ = run("SoftmaxActivation", [X3])
    close(out, [[[0.81757444, 0.18242551], [0.62245935, 0.37754068]],
                [[0.7310586, 0.26894143], [0.11920292, 0.88079703]]])
    with pytest.raises(NNSymError):
        sym.SoftmaxActivation(sym.Variable("d"), mode="channel").infer_shape(d=(2, 3))


def test_softmin_is_softmax_of_the_negation():
    x = RNG.standard_normal((3, 5))
    (a,), _ = run("softmin", [x], axis=1, temperature=0.7)
    (b,), _ = run("softmax", [-x], axis=1, temperature=0.7)
    close(a, b, 1e-12, 1e-15)


@pytest.mark.parametrize(("op", "shapes", "params"), [
    ("softmin", [(3, 4)], {"temperature": 3.0}),
    ("SoftmaxActivation", [(2, 3, 2)], {"mode": "channel"}),
    ("SoftmaxActivation", [(2, 3, 2)], {}),
    ("smooth_l1", [(4, 3)], {"scalar": 1.5}),
])
def test_misc_gradients_by_finite_differences(op, shapes, params):
    numeric(op, [RNG.uniform(-2, 2, s) for s in shapes], **params)


def test_softmax_cross_entropy_gradient_by_finite_differences():
    numeric("softmax_cross_entropy", [RNG.standard_normal((3, 4)), np.array([1.0, 0.0, 3.0])],
            wrt=[0])


def test_loss_shapes():
    d, lab = sym.Variable("d"), sym.Variable("l")
    assert sym.softmax_cross_entropy(d, lab).infer_shape(d=(3, 4), l=(3,))[1] == [(1,)]
    with pytest.raises(NNSymError):
        sym.softmax_cross_entropy(d, lab).infer_shape(d=(3, 4, 2), l=(3,))
    s = sym.SVMOutput(d, lab, name="s")
    assert s.list_arguments() == ["d", "l"]
    assert s.infer_shape(d=(3, 4, 2)) == ([(3, 4, 2), (3, 4)], [(3, 4, 2)], [])
    assert sym._sparse_make_loss(d).infer_shape(d=(2, 3))[1] == [(2, 3)]
    assert sym._npx_smooth_l1(d, scalar=2.0).infer_shape(d=(2, 3))[1] == [(2, 3)]


# ---------------------------------------------------------------------------------------------
# moments. MXNet values: mx.nd.moments(X3, ...) under mx.autograd.record(), then
# mx.autograd.backward([mean, var], [head_mean, head_var]); X3.grad (mxnet 1.9.1).

MX_MOMENTS = [
    ({"axes": (0, 2)}, f32([1, 2]), f32([0.5, -1]),
     [-0.25, 1.875], [0.40625, 0.546875],
     [[[0.4375, 0.0625], [0.4375, 0.6875]], [[0.375, 0.125], [0.9375, -0.0625]]]),
    ({"axes": (1,), "keepdims": True}, np.ones((2, 1, 2), np.float32),
     np.ones((2, 1, 2), np.float32),
     [[[1.25, 0.25]], [[0.625, 1.125]]], [[[0.5625, 1.5625]], [[0.140625, 3.515625]]],
     [[[-0.25, -0.75], [1.25, 1.75]], [[0.125, -1.375], [0.875, 2.375]]]),
]


@pytest.mark.parametrize(("params", "hm", "hv", "mean", "var", "grad"), MX_MOMENTS)
def test_moments_match_mxnet(params, hm, hv, mean, var, grad):
    s = sym.moments(sym.Variable("x"), **params)
    gx = nd.zeros(X3.shape)
    exe = s.bind(None, {"x": as_nd(X3)}, args_grad={"x": gx})
    m, v = (o.asnumpy() for o in exe.forward(is_train=True))
    close(m, mean)
    close(v, var)
    exe.backward([as_nd(hm), as_nd(hv)])
    close(gx.asnumpy(), grad)


def test_moments_against_numpy_and_shapes():
    x = RNG.standard_normal((2, 3, 4, 5))
    (m, v), _ = run("moments", [x], axes=(3, 1))
    close(m, x.mean(axis=(1, 3)), 1e-12, 1e-12)
    close(v, x.var(axis=(1, 3)), 1e-12, 1e-12)
    d = sym.Variable("d")
    assert sym.moments(d, axes=(0, 1, 2)).infer_shape(d=(2, 3, 4))[1] == [(1,), (1,)]
    assert sym.moments(d, axes=(-1, 0)).infer_shape(d=(2, 3, 4))[1] == [(3,), (3,)]
    for bad in ({"axes": (1, 1)}, {}, {"axes": (3,)}):
        with pytest.raises(NNSymError):
            sym.moments(d, **bad).infer_shape(d=(2, 3, 4))


def test_moments_gradient_by_finite_differences():
    numeric("moments", [RNG.standard_normal((3, 2, 4))], axes=(0, 2))


# ---------------------------------------------------------------------------------------------
# Sequence operators. MXNet values: x = mx.nd.array(np.arange(12).reshape(3, 2, 2)), lengths
# [2, 0], head gradient x * 0.1 + 1 (its step 0 for SequenceLast), under mx.autograd.record()
# with use_sequence_length=True (mxnet 1.9.1).

XS = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
OGS = XS * np.float32(0.1) + 1
LS = f32([2, 0])


def test_sequence_mask_matches_mxnet():
    (out,), (gx, _) = run("SequenceMask", [XS, LS], OGS, use_sequence_length=True, value=-1.0)
    close(out, [[[0, 1], [-1, -1]], [[4, 5], [-1, -1]], [[-1, -1], [-1, -1]]])
    close(gx, [[[1.0, 1.1], [0, 0]], [[1.4, 1.5], [0, 0]], [[0, 0], [0, 0]]])
    # mx.nd.SequenceMask(x, mx.nd.array([1, 2, 0]), use_sequence_length=True, axis=1, value=5)
    (out,), _ = run("SequenceMask", [XS, f32([1, 2, 0])], use_sequence_length=True, axis=1,
                    value=5.0)
    close(out, [[[0, 1], [5, 5]], [[4, 5], [6, 7]], [[5, 5], [5, 5]]])
    (out,), _ = run("SequenceMask", [XS])  # no lengths: identity
    close(out, XS)


def test_sequence_reverse_matches_mxnet():
    (out,), (gx, _) = run("SequenceReverse", [XS, LS], OGS, use_sequence_length=True)
    close(out, [[[4, 5], [2, 3]], [[0, 1], [6, 7]], [[8, 9], [10, 11]]])
    close(gx, [[[1.4, 1.5], [1.2, 1.3]], [[1.0, 1.1], [1.6, 1.7]], [[1.8, 1.9], [2.0, 2.1]]])
    (out,), _ = run("SequenceReverse", [XS])
    close(out, XS[::-1])


def test_sequence_last_matches_mxnet():
    (out,), (gx, _) = run("SequenceLast", [XS, LS], OGS[0], use_sequence_length=True)
    # MXNet reads before the data for the 0 length (garbage); nnsym gives 0 there.
    close(out, [[4, 5], [0, 0]])
    close(gx, [[[0, 0], [0, 0]], [[1.0, 1.1], [0, 0]], [[0, 0], [0, 0]]])
    # mx.nd.SequenceLast(x) and mx.nd.SequenceLast(x, axis=1)
    close(run("SequenceLast", [XS])[0][0], [[8, 9], [10, 11]])
    close(run("SequenceLast", [XS], axis=1)[0][0], [[2, 3], [6, 7], [10, 11]])
    # mx.nd.SequenceLast(x, mx.nd.array([2, 1, 1]), use_sequence_length=True, axis=1)
    (out,), _ = run("SequenceLast", [XS, f32([2, 1, 1])], use_sequence_length=True, axis=1)
    close(out, [[2, 3], [4, 5], [8, 9]])


@pytest.mark.parametrize(("op", "params"), [
    ("SequenceMask", {"value": 2.0}),
    ("SequenceMask", {"axis": 1}),
    ("SequenceReverse", {}),
    ("SequenceLast", {}),
    ("SequenceLast", {"axis": 1}),
])
def test_sequence_gradients_by_finite_differences(op, params):
    x = RNG.standard_normal((4, 3, 2))
    lengths = np.array([3.0, 0.0, 4.0]) if params.get("axis", 0) == 0 else np.array([1.0, 2.0,
                                                                                     2.0, 0.0])
    numeric(op, [x, lengths], wrt=[0], use_sequence_length=True, **params)


def test_sequence_shapes():
    d, n = sym.Variable("d"), sym.Variable("n")
    s = sym.SequenceLast(d, n, use_sequence_length=True, axis=1, name="s")
    assert s.list_arguments() == ["d", "n"]
    assert s.infer_shape(d=(3, 2, 4)) == ([(3, 2, 4), (3,)], [(3, 4)], [])
    assert sym.SequenceMask(d, name="m").list_arguments() == ["d"]
    assert sym._npx_sequence_mask(d).infer_shape(d=(3, 2))[1] == [(3, 2)]
    with pytest.raises(NNSymError):
        sym.SequenceReverse(d, axis=1)
    with pytest.raises(NNSymError):
        sym.SequenceMask(d).infer_shape(d=(3,))


def test_layer_norm_gradient_through_the_mean_only_is_zero():
    """Only the mean output reaches the loss: MXNet's backward ignores its gradient."""
    x = sym.Variable("x")
    s = sym.LayerNorm(x, sym.Variable("g"), sym.Variable("b"), output_mean_var=True)[1]
    args = {"x": nd.array(f32(RNG.standard_normal((2, 3)))), "g": nd.ones((3,)),
            "b": nd.zeros((3,))}
    grads = {k: nd.ones(v.shape) for k, v in args.items()}
    exe = s.bind(None, args, args_grad=grads)
    exe.forward(is_train=True)
    exe.backward([nd.ones((2, 1))])
    for v in grads.values():
        close(v.asnumpy(), np.zeros(v.shape))
