"""The elementwise operators added for MXNet 1.9.1 parity: the unary math rows (arcsin ...
softsign, hard_sigmoid), the comparison/logic/mod/hypot operators in their elementwise,
broadcast and scalar forms, and the NDArray/Symbol operator dunders that dispatch to them.

Expected values were recorded with MXNet 1.9.1 (``nd.<op>`` forward, then ``backward`` with the
head gradient noted per table) and are checked through nnsym's nd functions and bound executors.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd
from nnsym.errors import NNSymError
from nnsym.ops import get_op
from nnsym.ops.common.stype import infer_storage
from nnsym.symbol import NameManager
from nnsym.testing import as_nd
from nnsym.types import SType

inf, nan = float("inf"), float("nan")
STYPE_NAMES = {SType.DEFAULT: "default", SType.CSR: "csr", SType.ROW_SPARSE: "row_sparse"}

# fmt: off
# MXNet 1.9.1: name -> (x, f(x), gradient for a head of 0.5, exposed in mx.nd.sparse)
UNARY_MX = {
    'arccos': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
               [[1.266104, 2.214298, 0.795399], [1.369438, 2.094395, 1.470629]],
               [[-0.524142, -0.625, -0.70014], [-0.51031, -0.57735, -0.502519]], True),
    'arccosh': ([[1.3, 1.6, 2.7], [1.2, 2.5, 3.1]],
                [[0.756433, 1.046968, 1.650193], [0.622363, 1.566799, 1.797457]],
                [[0.601929, 0.40032, 0.199363], [0.753778, 0.218218, 0.1704]], True),
    'arcsin': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
               [[0.304693, -0.643501, 0.775397], [0.201358, -0.523599, 0.100167]],
               [[0.524142, 0.625, 0.70014], [0.51031, 0.57735, 0.502519]], True),
    'arcsinh': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
                [[0.295673, -0.568825, 0.652667], [0.19869, -0.481212, 0.099834]],
                [[0.478913, 0.428746, 0.409616], [0.49029, 0.447214, 0.497519]], True),
    'arctan': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
               [[0.291457, -0.54042, 0.610726], [0.197396, -0.463648, 0.099669]],
               [[0.458716, 0.367647, 0.33557], [0.480769, 0.4, 0.49505]], True),
    'arctanh': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
                [[0.30952, -0.693147, 0.867301], [0.202733, -0.549306, 0.100335]],
                [[0.549451, 0.78125, 0.980392], [0.520833, 0.666667, 0.50505]], True),
    'cosh': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
             [[1.045339, 1.185465, 1.255169], [1.020067, 1.127626, 1.005004]],
             [[0.15226, -0.318327, 0.379292], [0.100668, -0.260548, 0.050083]], True),
    'sinh': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
             [[0.30452, -0.636654, 0.758584], [0.201336, -0.521095, 0.100167]],
             [[0.522669, 0.592733, 0.627585], [0.510033, 0.563813, 0.502502]], True),
    'tan': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
            [[0.309336, -0.684137, 0.842288], [0.20271, -0.546302, 0.100335]],
            [[0.547844, 0.734022, 0.854725], [0.520546, 0.649223, 0.505034]], True),
    'cbrt': ([[1.3, 1.6, 2.7], [1.2, 2.5, 3.1]],
             [[1.091393, 1.169607, 1.392477], [1.062659, 1.357209, 1.4581]],
             [[0.139922, 0.121834, 0.085955], [0.147591, 0.090481, 0.078392]], True),
    'rcbrt': ([[1.3, 1.6, 2.7], [1.2, 2.5, 3.1]],
              [[0.91626, 0.854988, 0.718145], [0.941036, 0.736806, 0.685824]],
              [[-0.117469, -0.089061, -0.04433], [-0.130699, -0.04912, -0.036872]], False),
    'degrees': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
                [[17.188734, -34.377468, 40.107044], [11.459155, -28.647888, 5.729578]],
                [[28.647888, 28.647888, 28.647888], [28.647888, 28.647888, 28.647888]], True),
    'radians': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
                [[0.005236, -0.010472, 0.012217], [0.003491, -0.008727, 0.001745]],
                [[0.008727, 0.008727, 0.008727], [0.008727, 0.008727, 0.008727]], True),
    'gamma': ([[1.3, 1.6, 2.7], [1.2, 2.5, 3.1]],
              [[0.897471, 0.893515, 1.544686], [0.918169, 1.329341, 2.19762]],
              [[-0.075922, 0.056313, 0.61539], [-0.132694, 0.467367, 1.056535]], True),
    'gammaln': ([[1.3, 1.6, 2.7], [1.2, 2.5, 3.1]],
                [[-0.108175, -0.112592, 0.434821], [-0.085374, 0.284683, 0.787375]],
                [[-0.084595, 0.063024, 0.398392], [-0.14452, 0.351578, 0.480763]], True),
    'log10': ([[1.3, 1.6, 2.7], [1.2, 2.5, 3.1]],
              [[0.113943, 0.20412, 0.431364], [0.079181, 0.39794, 0.491362]],
              [[0.167036, 0.135717, 0.080425], [0.180956, 0.086859, 0.070047]], True),
    'erfinv': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
               [[0.272463, -0.595116, 0.732869], [0.179143, -0.476936, 0.088856]],
               [[0.47726, 0.631431, 0.758182], [0.457565, 0.556292, 0.446626]], False),
    'fix': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]], [[0.0, -0.0, 0.0], [0.0, -0.0, 0.0]],
            [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], True),
    'trunc': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]], [[0.0, -0.0, 0.0], [0.0, -0.0, 0.0]],
              [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], True),
    'rint': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]], [[0.0, -1.0, 1.0], [0.0, -1.0, 0.0]],
             [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], True),
    'logical_not': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], False),
    'hard_sigmoid': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]], [[0.56, 0.38, 0.64], [0.54, 0.4, 0.52]],
                     [[0.1, 0.1, 0.1], [0.1, 0.1, 0.1]], False),
    'softsign': ([[0.3, -0.6, 0.7], [0.2, -0.5, 0.1]],
                 [[0.230769, -0.375, 0.411765], [0.166667, -0.333333, 0.090909]],
                 [[0.295858, 0.195312, 0.17301], [0.347222, 0.222222, 0.413223]], False),
}

# MXNet 1.9.1: name -> (f(A, B), dA, dB) for a head of ones
BINARY_MX = {
    '_equal': ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
               [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_not_equal': ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                   [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_greater': ([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                 [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_greater_equal': ([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                       [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_lesser': ([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_lesser_equal': ([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                      [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_logical_and': ([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_logical_or': ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_logical_xor': ([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    '_mod': ([[1.5, 0.5, -1.0], [2.0, -1.0, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
             [[-2.0, 3.0, 2.0], [3.0, 1.0, -0.0]]),
    '_hypot': ([[5.85235, 5.85235, 3.605551], [7.615773, 3.605551, 2.5]],
               [[0.939793, -0.939793, 0.83205], [-0.919145, 0.5547, 0.0]],
               [[0.341743, 0.341743, -0.5547], [0.393919, -0.83205, 1.0]]),
}

# MXNet 1.9.1: (name, scalar) -> (f(A), dA) for a head of ones
SCALAR_MX = {
    ('_equal_scalar', 2.0):
        ([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_equal_scalar', -2.0):
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_equal_scalar', 0.0):
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_not_equal_scalar', 2.0):
        ([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_not_equal_scalar', -2.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_not_equal_scalar', 0.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_greater_scalar', 2.0):
        ([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_greater_scalar', -2.0):
        ([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_greater_scalar', 0.0):
        ([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_greater_equal_scalar', 2.0):
        ([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_greater_equal_scalar', -2.0):
        ([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_greater_equal_scalar', 0.0):
        ([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_lesser_scalar', 2.0):
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_lesser_scalar', -2.0):
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_lesser_scalar', 0.0):
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_lesser_equal_scalar', 2.0):
        ([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_lesser_equal_scalar', -2.0):
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_lesser_equal_scalar', 0.0):
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_and_scalar', 2.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_and_scalar', -2.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_and_scalar', 0.0):
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_or_scalar', 2.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_or_scalar', -2.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_or_scalar', 0.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_xor_scalar', 2.0):
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_xor_scalar', -2.0):
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_logical_xor_scalar', 0.0):
        ([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ('_mod_scalar', 2.0): ([[1.5, 0.5, 1.0], [1.0, 0.0, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    ('_mod_scalar', -2.0):
        ([[-0.5, -1.5, -1.0], [-1.0, 0.0, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    ('_mod_scalar', 0.0): ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    ('_rmod_scalar', 2.0):
        ([[2.0, -3.5, 2.0], [-5.0, 0.0, 0.0]], [[-0.0, 1.0, -0.0], [1.0, -1.0, -inf]]),
    ('_rmod_scalar', -2.0):
        ([[3.5, -2.0, 1.0], [-2.0, 0.0, 0.0]], [[1.0, -0.0, 1.0], [-0.0, 1.0, inf]]),
    ('_rmod_scalar', 0.0):
        ([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[-0.0, 0.0, -0.0], [0.0, -0.0, nan]]),
    ('_hypot_scalar', 2.0): ([[5.85235, 5.85235, 3.605551], [7.28011, 2.828427, 2.0]],
                             [[0.939793, -0.939793, 0.83205], [-0.961524, 0.707107, 0.0]]),
    ('_hypot_scalar', -2.0): ([[5.85235, 5.85235, 3.605551], [7.28011, 2.828427, 2.0]],
                              [[0.939793, -0.939793, 0.83205], [-0.961524, 0.707107, 0.0]]),
    ('_hypot_scalar', 0.0):
        ([[5.5, 5.5, 3.0], [7.0, 2.0, 0.0]], [[1.0, -1.0, 1.0], [-1.0, 1.0, nan]]),
}
# fmt: on

A = [[5.5, -5.5, 3.0], [-7.0, 2.0, 0.0]]
B = [[2.0, 2.0, -2.0], [3.0, -3.0, 2.5]]
COMPARE = ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal")
LOGIC = ("logical_and", "logical_or", "logical_xor")
NUMPY = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
         "greater_equal": np.greater_equal, "lesser": np.less, "lesser_equal": np.less_equal,
         "logical_and": np.logical_and, "logical_or": np.logical_or,
         "logical_xor": np.logical_xor}


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=tol, atol=tol, equal_nan=True)


def run_backward(s, args, head):
    """Forward and backward of a bound symbol: (outputs, {name: gradient})."""
    args = {k: np.asarray(v, np.float64) for k, v in args.items()}
    grads = {k: nd.zeros(v.shape, dtype="float64") for k, v in args.items()}
    exe = s.bind(mx.cpu(), {k: as_nd(v) for k, v in args.items()}, args_grad=grads)
    outs = exe.forward(is_train=True)
    exe.backward([as_nd(np.asarray(head, np.float64))])
    return outs[0].asnumpy(), {k: g.asnumpy() for k, g in grads.items()}


# ---------------------------------------------------------------------------------------------
# Unary operators


@pytest.mark.parametrize("name", sorted(UNARY_MX))
def test_unary_forward_and_gradient_match_mxnet(name):
    x, y, dx, _ = UNARY_MX[name]
    close(getattr(nd, name)(as_nd(x)).asnumpy(), y)
    out, grads = run_backward(getattr(mx.sym, name)(mx.sym.var("x")), {"x": np.array(x)},
                              np.full((2, 3), 0.5))
    close(out, y)
    close(grads["x"], dx)


@pytest.mark.parametrize("name", sorted(UNARY_MX))
def test_unary_sparse_namespace_as_mxnet(name):
    assert hasattr(mx.sym.sparse, name) == UNARY_MX[name][3]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_unary_keeps_the_input_dtype(dtype):
    x = nd.array([[0.25, -0.5]], dtype=dtype)
    for name in UNARY_MX:
        assert getattr(nd, name)(x).dtype == np.dtype(dtype), name


def test_rounding_as_mxnet():
    x = nd.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -2.7, 2.7])
    # MXNet's rint sends ties to the floor; fix and trunc round toward zero.
    close(nd.rint(x).asnumpy(), [0, 1, 2, -1, -2, -3, 3, -3, 3])
    close(nd.fix(x).asnumpy(), [0, 1, 2, -0, -1, -2, 3, -2, 2])
    close(nd.trunc(x).asnumpy(), [0, 1, 2, -0, -1, -2, 3, -2, 2])
    xi = nd.array([[1, -2, 3], [4, 0, -5]], dtype="int32")
    for name in ("rint", "fix", "trunc"):
        got = getattr(nd, name)(xi)
        assert got.dtype == np.int32
        assert got.asnumpy().tolist() == [[1, -2, 3], [4, 0, -5]]


def test_special_functions_as_mxnet():
    x = nd.array([-1.5, -0.5, 0.5])
    close(nd.gamma(x).asnumpy(), [2.3632717, -3.544908, 1.7724538])
    close(nd.gammaln(x).asnumpy(), [0.86004704, 1.2655121, 0.5723649])
    # digamma (the gradient of gammaln) also below 0.5, through the reflection formula
    _, grads = run_backward(mx.sym.gammaln(mx.sym.var("x")),
                            {"x": np.array([-1.5, -0.5, 0.5, 4.0, 10.0])}, np.ones(5))
    close(grads["x"], [0.70315677, 0.03648992, -1.9635108, 1.2561177, 2.2517529])
    _, grads = run_backward(mx.sym.gamma(mx.sym.var("x")), {"x": np.array([-1.5, -0.5, 0.5])},
                            np.ones(3))
    close(grads["x"], [1.6617506, -0.12935339, -3.480232])
    e = nd.array([-1.0, -0.999, 0.0, 0.5, 0.999999, 1.0, 1.5], dtype="float64").asnumpy()
    got = nd.erfinv(nd.array(e, dtype="float64")).asnumpy()
    assert got[0] == -inf and got[5] == inf and np.isnan(got[6]) and got[2] == 0
    from math import erf
    close([erf(v) for v in got[1:5]], e[1:5], 1e-12)


def test_logical_not_and_hard_sigmoid_as_mxnet():
    close(nd.logical_not(nd.array([0, 2, nan, -1])).asnumpy(), [1, 0, 0, 0])
    assert nd.logical_not(nd.array([0, 3], dtype="int32")).asnumpy().tolist() == [1, 0]
    x = np.array([-3.0, -2.5, -2.4, 0.0, 2.4, 2.5, 2.6, 3.0])
    out, grads = run_backward(mx.sym.hard_sigmoid(mx.sym.var("x")), {"x": x}, np.ones(8))
    close(out, [0, 0, 0.02, 0.5, 0.98, 1, 1, 1])
    close(grads["x"], [0, 0, 0.2, 0.2, 0.2, 0, 0, 0])
    close(nd.hard_sigmoid(nd.array([0.5]), alpha=0.3, beta=0.4).asnumpy(), [0.55])
    attrs = mx.sym.hard_sigmoid(mx.sym.var("x"), alpha=0.3).list_attr()
    assert attrs == {"alpha": "0.3"}


@pytest.mark.parametrize(("name", "stype"), [
    ("arcsin", SType.CSR), ("sinh", SType.ROW_SPARSE), ("trunc", SType.CSR),
    ("degrees", SType.CSR), ("cosh", SType.DEFAULT), ("gamma", SType.DEFAULT),
    ("logical_not", SType.DEFAULT), ("rcbrt", SType.DEFAULT),
])
def test_sparse_inputs_keep_their_storage_where_f0_is_0(name, stype):
    op = get_op(name)
    ins = (SType.ROW_SPARSE if stype == SType.ROW_SPARSE else SType.CSR,)
    assert infer_storage(op, op.params(), ins).outs == (stype,)
    dense = np.array([[0, 0.5], [0, 0], [-0.25, 0]], np.float32)
    with warnings.catch_warnings():  # the dense ones fall back, with a warning
        warnings.simplefilter("ignore")
        got = getattr(nd, name)(as_nd(dense).tostype(STYPE_NAMES[ins[0]]))
    assert got.stype == STYPE_NAMES[stype]
    close(got.asnumpy(), getattr(nd, name)(as_nd(dense)).asnumpy())


# ---------------------------------------------------------------------------------------------
# Comparison, logic, mod and hypot


@pytest.mark.parametrize("name", sorted(BINARY_MX))
def test_binary_forward_and_gradient_match_mxnet(name):
    y, da, db = BINARY_MX[name]
    close(getattr(nd, name)(as_nd(A), as_nd(B)).asnumpy(), y)
    bname = "broadcast" + name
    close(getattr(nd, bname)(as_nd(A), as_nd(B)).asnumpy(), y)
    for fn in (name, bname):
        s = getattr(mx.sym, fn)(mx.sym.var("a"), mx.sym.var("b"))
        out, grads = run_backward(s, {"a": np.array(A), "b": np.array(B)}, np.ones((2, 3)))
        close(out, y)
        close(grads["a"], da)
        close(grads["b"], db)


@pytest.mark.parametrize(("name", "scalar"), sorted(SCALAR_MX))
def test_scalar_forward_and_gradient_match_mxnet(name, scalar):
    y, da = SCALAR_MX[(name, scalar)]
    close(getattr(nd, name)(as_nd(A), scalar=scalar).asnumpy(), y)
    s = getattr(mx.sym, name)(mx.sym.var("a"), scalar=scalar)
    out, grads = run_backward(s, {"a": np.array(A)}, np.ones((2, 3)))
    close(out, y)
    close(grads["a"], da)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "uint8"])
@pytest.mark.parametrize("name", COMPARE + LOGIC)
def test_comparisons_return_the_input_dtype(name, dtype):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, (3, 4)).astype(dtype)
    b = rng.integers(0, 4, (3, 4)).astype(dtype)
    want = NUMPY[name](a, b).astype(dtype)
    for got in (getattr(nd, "_" + name)(nd.array(a, dtype=dtype), nd.array(b, dtype=dtype)),
                getattr(nd, "broadcast_" + name)(nd.array(a, dtype=dtype),
                                                 nd.array(b[:1], dtype=dtype))):
        assert got.dtype == np.dtype(dtype)
    assert got.asnumpy().tolist() == NUMPY[name](a, b[:1]).astype(dtype).tolist()
    same = getattr(nd, "_" + name)(nd.array(a, dtype=dtype), nd.array(b, dtype=dtype))
    assert same.asnumpy().tolist() == want.tolist()
    sc = getattr(nd, f"_{name}_scalar")(nd.array(a, dtype=dtype), scalar=2)
    assert sc.dtype == np.dtype(dtype)
    assert sc.asnumpy().tolist() == NUMPY[name](a, 2).astype(dtype).tolist()


def test_nan_in_comparisons_and_logic():
    n, one = nd.array([nan]), nd.array([1.0])
    assert nd._equal(n, n).asnumpy().tolist() == [0.0]
    assert nd._not_equal(n, n).asnumpy().tolist() == [1.0]
    assert nd._logical_and(n, one).asnumpy().tolist() == [1.0]


def test_scalar_comparisons_cast_the_scalar_first_as_mxnet():
    ai = nd.array([[5, -5, 3], [-7, 2, 0]], dtype="int32")
    # int32 data: the scalar 2.5 becomes 2 (MXNet), unless is_int=False (float64 output)
    assert nd._equal_scalar(ai, scalar=2.5).asnumpy().tolist() == [[0, 0, 0], [0, 1, 0]]
    f = nd._equal_scalar(ai, scalar=2.5, is_int=False)
    assert f.dtype == np.float64 and f.asnumpy().sum() == 0
    assert nd._hypot_scalar(ai, scalar=2.5).asnumpy().tolist() == [[5, 5, 3], [7, 2, 2]]


def test_mod_as_mxnet():
    # floats: the divisor's sign (numpy's mod); a zero divisor gives 0 (numpy: NaN)
    a = nd.array([inf, 5.0, -0.0, 5.0, 4.0])
    b = nd.array([2.0, inf, 3.0, -inf, 0.0])
    close(nd._mod(a, b).asnumpy(), [nan, 5.0, 0.0, -inf, 0.0])
    ai = nd.array([[5, -5, 3], [-7, 2, 0]], dtype="int32")
    bi = nd.array([[2, 2, -2], [3, -3, 0]], dtype="int32")
    assert nd._mod(ai, bi).asnumpy().tolist() == [[1, 1, -1], [2, -1, 0]]
    assert nd._hypot(ai, bi).asnumpy().tolist() == [[5, 5, 3], [7, 3, 0]]
    assert nd._mod_scalar(ai, scalar=-2.5).asnumpy().tolist() == [[-1, -1, -1], [-1, 0, 0]]
    assert nd._mod_scalar(ai, scalar=0).asnumpy().tolist() == [[0, 0, 0], [0, 0, 0]]
    # int64 beyond 2**53 stays exact; INT_MIN % -1 does not trap
    big = 2**62 + 1
    x = nd.array([big, -(2**63)], dtype="int64")
    assert nd._mod_scalar(x, scalar=3).asnumpy().tolist() == [big % 3, -(2**63) % 3]
    assert nd._mod_scalar(x, scalar=-1).asnumpy().tolist() == [0, 0]


@pytest.mark.parametrize(("lhs", "rhs"), [((2, 3), (1, 3)), ((2, 1, 4), (3, 1)), ((1,), (2, 3))])
@pytest.mark.parametrize("name", [*COMPARE, *LOGIC, "mod", "hypot"])
def test_broadcast_shapes(name, lhs, rhs):
    rng = np.random.default_rng(1)
    a = rng.integers(1, 5, lhs).astype(np.float32)
    b = rng.integers(1, 5, rhs).astype(np.float32)
    got = getattr(nd, "broadcast_" + name)(as_nd(a), as_nd(b)).asnumpy()
    fn = {"mod": np.mod, "hypot": np.hypot, **NUMPY}[name]
    close(got, fn(a, b).astype(np.float32))
    s = getattr(mx.sym, "broadcast_" + name)(mx.sym.var("a"), mx.sym.var("b"))
    assert s.infer_shape(a=lhs, b=rhs)[1] == [np.broadcast_shapes(lhs, rhs)]


def test_aliases_as_mxnet():
    for alias, name in [("_Equal", "_equal"), ("_Not_Equal", "_not_equal"),
                        ("_Greater_Equal", "_greater_equal"), ("_Logical_Xor", "_logical_xor"),
                        ("_Mod", "_mod"), ("_Hypot", "_hypot"), ("_EqualScalar", "_equal_scalar"),
                        ("_LesserEqualScalar", "_lesser_equal_scalar"),
                        ("_RModScalar", "_rmod_scalar"), ("_HypotScalar", "_hypot_scalar"),
                        ("_LogicalAndScalar", "_logical_and_scalar")]:
        assert get_op(alias) is get_op(name)


# ---------------------------------------------------------------------------------------------
# NDArray and Symbol operators


def test_ndarray_comparisons_dispatch_as_mxnet():
    a = nd.array([[1, 2], [3, 4]])
    r = a == a
    assert isinstance(r, nd.NDArray) and r.dtype == np.float32
    assert r.asnumpy().tolist() == [[1, 1], [1, 1]]
    assert (a == nd.array([1, 4])).asnumpy().tolist() == [[1, 0], [0, 1]]  # broadcast_equal
    assert (a != 2).asnumpy().tolist() == [[1, 0], [1, 1]]
    assert (a > 2).asnumpy().tolist() == [[0, 0], [1, 1]]
    assert (a >= 2).asnumpy().tolist() == [[0, 1], [1, 1]]
    assert (a < nd.array([[2], [4]])).asnumpy().tolist() == [[1, 0], [1, 0]]
    assert (a <= 2).asnumpy().tolist() == [[1, 1], [0, 0]]
    # a number on the left: the mirrored comparison
    assert (2 < a).asnumpy().tolist() == [[0, 0], [1, 1]]
    assert (2 == a).asnumpy().tolist() == [[0, 1], [0, 0]]
    assert (3 >= a).asnumpy().tolist() == [[1, 1], [1, 0]]
    assert (a == np.float32(3)).asnumpy().tolist() == [[0, 0], [1, 0]]
    assert (a == True).asnumpy().tolist() == [[1, 0], [0, 0]]  # noqa: E712
    ai = nd.array([1, 5], dtype="int32")
    assert (ai > 2).dtype == np.int32
    for bad in (None, "x", [1, 2]):
        with pytest.raises(TypeError):
            a == bad  # noqa: B015
        with pytest.raises(TypeError):
            a < bad  # noqa: B015


def test_ndarray_mod_as_mxnet():
    a = nd.array([[1, 2], [3, 4]])
    assert (a % 2).asnumpy().tolist() == [[1, 0], [1, 0]]
    assert (5 % a).asnumpy().tolist() == [[0, 1], [2, 1]]
    assert (a % nd.array([2, 3])).asnumpy().tolist() == [[1, 2], [1, 1]]
    assert (nd.array([-5.5]) % 2).asnumpy().tolist() == [0.5]
    b = a.copy()
    b %= 3
    assert b.asnumpy().tolist() == [[1, 2], [0, 1]]


def test_ndarray_hash_bool_len_iter_contains():
    a = nd.array([[1, 2], [3, 4]])
    assert hash(a) == id(a) // 16
    assert {a: 1}[a] == 1 and a in [a] and a in {a}
    assert len(a) == 2
    rows = list(a)
    assert [r.shape for r in rows] == [(2,), (2,)]
    assert rows[1].asnumpy().tolist() == [3, 4]
    assert [r.shape for r in nd.array([1, 2])] == [(1,), (1,)]  # MXNet's 1-d a[i] is (1,)
    assert bool(nd.array([3])) and not bool(nd.array([0])) and bool(nd.array([[2]]))
    assert not bool(nd.zeros((0,)))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    # ``in`` iterates and compares elementwise, as in MXNet
    assert 2.0 in nd.array([1, 2]) and 5 not in nd.array([1, 2])
    with pytest.raises(ValueError, match="ambiguous"):
        3 in a  # noqa: B015


def test_accuracy_through_comparison():
    pred = nd.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    label = nd.array([1, 0, 0, 1])
    acc = nd.mean(nd.argmax(pred, axis=1) == label).asscalar()
    assert acc == pytest.approx(0.5)


def _ops_of(s):
    return [(n["op"], n["name"], n.get("attrs")) for n in json.loads(s.tojson())["nodes"]
            if n["op"] != "null"]


def test_symbol_operators_build_mxnets_nodes():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    with NameManager():
        cases = [(x == y, ("_equal", "_equal0", None)),
                 (x != 2, ("_not_equal_scalar", "_not_equal_scalar0", {"scalar": "2"})),
                 (2 < x, ("_greater_scalar", "_greater_scalar0", {"scalar": "2"})),
                 (x >= y, ("_greater_equal", "_greater_equal0", None)),
                 (x <= 1.5, ("_lesser_equal_scalar", "_lesser_equal_scalar0",
                             {"scalar": "1.5"})),
                 (x < y, ("_lesser", "_lesser0", None)),
                 (x > y, ("_greater", "_greater0", None)),
                 (x % y, ("_mod", "_mod0", None)),
                 (x % 3, ("_mod_scalar", "_modscalar0", {"scalar": "3"})),
                 (3 % x, ("_rmod_scalar", "_rmodscalar0", {"scalar": "3"}))]
    for s, want in cases:
        assert _ops_of(s) == [want]
    for bad in (None, "x"):
        with pytest.raises(TypeError):
            x == bad  # noqa: B015


def test_symbol_hash_and_bool():
    x = mx.sym.var("x")
    assert {x: 1}[x] == 1 and x in [x]
    with pytest.raises(NNSymError, match="not implemented for Symbol"):
        bool(x)
    with pytest.raises(TypeError):
        bool(x == x)


def test_symbol_operators_bind_and_run():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[1.0, 3.0], [2.0, 4.0]])
    out = mx.sym.Group([x == y, x != y, x > y, x >= 2, 2 > x, x % y, 7 % x, x % 3])
    exe = out.bind(mx.cpu(), {"x": as_nd(a), "y": as_nd(b)})
    got = [o.asnumpy() for o in exe.forward()]
    want = [a == b, a != b, a > b, a >= 2, 2 > a, np.mod(a, b), np.mod(7, a), np.mod(a, 3)]
    for g, w in zip(got, want):
        close(g, w.astype(np.float32))
    # gradients: comparisons give none, mod gives (1, -floor(x / y))
    _, grads = run_backward((x % y) + (x == y), {"x": a, "y": b}, np.ones((2, 2)))
    close(grads["x"], np.ones((2, 2)))
    close(grads["y"], -np.floor(a / b))
