"""The index operators of the reduce family (where, take, pick, batch_take, one_hot,
argmax_channel, ...): values against numpy and against cases computed with MXNet 1.9.1,
gradients against finite differences, and out-of-range indices (never read out of bounds)."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.test_utils import check_numeric_gradient

A = np.arange(12, dtype=np.float32).reshape(3, 4)
# Odd indices: negative, past the end, fractional (truncated), NaN/Inf (read as 0).
ODD = np.array([[-1, 5], [1.7, -1.5]], np.float32)

# Computed with MXNet 1.9.1 (~/mxref: mxnet 1.9.1, numpy 1.23), e.g.
#   mx.nd.take(mx.nd.array(np.arange(12).reshape(3, 4)), mx.nd.array(ODD), axis=1).asnumpy()
MX_TAKE = {
    (1, "clip"): [[[0.0, 3.0], [1.0, 0.0]], [[4.0, 7.0], [5.0, 4.0]], [[8.0, 11.0], [9.0, 8.0]]],
    (1, "wrap"): [[[3.0, 1.0], [1.0, 3.0]], [[7.0, 5.0], [5.0, 7.0]], [[11.0, 9.0], [9.0, 11.0]]],
    (0, "wrap"): [[[8.0, 9.0, 10.0, 11.0], [8.0, 9.0, 10.0, 11.0]],
                  [[4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]],
}


@pytest.mark.parametrize(("axis", "mode"), list(MX_TAKE))
def test_take_matches_mxnet(axis, mode):
    got = nd.take(nd.array(A), nd.array(ODD), axis=axis, mode=mode).asnumpy()
    np.testing.assert_array_equal(got, np.array(MX_TAKE[axis, mode], np.float32))


def test_take_int_indices_and_dtype():
    idx = nd.array(np.array([[1, 2]], np.int32), dtype="int32")
    out = nd.take(nd.array(A.astype(np.float64), dtype="float64"), idx, axis=-1)
    assert out.dtype == np.float64
    assert out.shape == (3, 1, 2)
    np.testing.assert_array_equal(out.asnumpy(), np.take(A, [[1, 2]], axis=-1))


def test_take_raise_mode_clips_here():
    # MXNet raises on an out-of-range index in mode "raise"; nnsym's kernels clip.
    got = nd.take(nd.array(A), nd.array([7.0, -3.0]), axis=0, mode="raise").asnumpy()
    np.testing.assert_array_equal(got, A[[2, 0]])


def test_non_finite_indices_are_index_zero_and_stay_in_bounds():
    idx = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30], np.float32)
    for mode in ("clip", "wrap"):
        got = nd.take(nd.array(A), nd.array(idx), axis=1, mode=mode).asnumpy()
        if mode == "clip":
            want = A[:, [0, 0, 0, 0, 0]]
        else:
            want = A[:, [0, 0, 0, 0, 0]]
        np.testing.assert_array_equal(got, want)
    got = nd.pick(nd.array(A), nd.array(idx[:3]), axis=1).asnumpy()
    np.testing.assert_array_equal(got, A[:, 0])
    oh = nd.one_hot(nd.array(idx), depth=3).asnumpy()
    np.testing.assert_array_equal(oh, np.zeros((5, 3), np.float32))


def test_take_huge_indices_stay_in_bounds():
    big = np.array([1e18, -1e18, 2**40], np.float64)
    got = nd.take(nd.array(A), nd.array(big, dtype="float64"), axis=0).asnumpy()
    np.testing.assert_array_equal(got, A[[2, 0, 2]])
    got = nd.take(nd.array(A), nd.array(big, dtype="float64"), axis=0, mode="wrap").asnumpy()
    np.testing.assert_array_equal(got, A[[int(1e18) % 3, (-int(1e18)) % 3, 2**40 % 3]])


def test_pick_matches_mxnet():
    # mx.nd.pick(a, mx.nd.array([-1, 5, 1.6]), axis=1[, mode='wrap']), a = arange(12) as 3x4
    idx = nd.array([-1, 5, 1.6])
    np.testing.assert_array_equal(nd.pick(nd.array(A), idx, axis=1).asnumpy(), [0, 7, 9])
    np.testing.assert_array_equal(nd.pick(nd.array(A), idx, axis=1, mode="wrap").asnumpy(),
                                  [3, 5, 9])
    got = nd.pick(nd.array(A), nd.array([[-1, 5, 1.6, 2]]), axis=0, keepdims=True).asnumpy()
    np.testing.assert_array_equal(got, [[0, 9, 6, 11]])
    # the alias
    got = nd.choose_element_0index(nd.array(A), nd.array([3, 2, 1])).asnumpy()
    np.testing.assert_array_equal(got, [3, 6, 9])


def test_pick_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    idx = rng.integers(0, 5, size=(2, 3)).astype(np.float32)
    got = nd.pick(nd.array(x), nd.array(idx), axis=1).asnumpy()
    want = np.take_along_axis(x, idx.astype(np.int64)[:, None, :], axis=1)[:, 0, :]
    np.testing.assert_array_equal(got, want)


def test_one_hot_matches_mxnet():
    # mx.nd.one_hot(mx.nd.array([-1, 0, 2.7, 3, 5]), 4, on_value=3, off_value=-1, dtype='int32')
    got = nd.one_hot(nd.array([-1, 0, 2.7, 3, 5]), depth=4, on_value=3, off_value=-1, dtype="int32")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(
        got.asnumpy(),
        [[-1, -1, -1, -1], [3, -1, -1, -1], [-1, -1, 3, -1], [-1, -1, -1, 3], [-1, -1, -1, -1]],
    )
    assert nd.one_hot(nd.array([[1, 2]]), depth=3).shape == (1, 2, 3)


def test_batch_take_matches_mxnet():
    # mx.nd.batch_take(a, mx.nd.array([-1, 5, 2], dtype='int32'))
    got = nd.batch_take(nd.array(A), nd.array(np.array([-1, 5, 2], np.int32), dtype="int32"))
    np.testing.assert_array_equal(got.asnumpy(), [0, 7, 10])


def test_where_matches_mxnet():
    # mx.nd.where(mx.nd.array([1, 0, 1]), a, -a) and a same-shape condition
    got = nd.where(nd.array([1, 0, 1]), nd.array(A), nd.array(-A)).asnumpy()
    np.testing.assert_array_equal(got, np.where(np.array([1, 0, 1])[:, None] != 0, A, -A))
    got = nd.where(nd.array([[1, 0], [0, 2]]), nd.array([[1, 2], [3, 4]]),
                   nd.array([[5, 6], [7, 8]])).asnumpy()
    np.testing.assert_array_equal(got, [[1, 6], [7, 4]])


def test_where_shape_rules():
    c, x, y = sym.Variable("c"), sym.Variable("x"), sym.Variable("y")
    w = sym.where(c, x, y)
    args, outs, _ = w.infer_shape(x=(3, 4), c=(3,))
    assert outs == [(3, 4)]
    assert args[1:] == [(3, 4), (3, 4)]
    with pytest.raises(Exception, match="condition"):
        w.infer_shape(x=(3, 4), c=(4,))


def test_argmax_channel_matches_mxnet():
    # mx.nd.argmax_channel(mx.nd.array([[[1, 5], [3, 2], [3, 7]]])) -> [[1, 2]]
    got = nd.argmax_channel(nd.array([[[1, 5], [3, 2], [3, 7]]])).asnumpy()
    np.testing.assert_array_equal(got, [[1, 2]])
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(nd.argmax_channel(nd.array(x)).asnumpy(), x.argmax(1))


def _grad(s, args, wrt, head):
    grads = {k: nd.zeros(args[k].shape) for k in wrt}
    exe = s.bind(None, {k: nd.array(v) for k, v in args.items()}, args_grad=grads,
                 grad_req={k: ("write" if k in wrt else "null") for k in args})
    exe.forward(is_train=True)
    exe.backward(nd.array(head))
    return {k: g.asnumpy() for k, g in grads.items()}


def test_gradients_match_mxnet():
    a, i = sym.Variable("a"), sym.Variable("i")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    # take(x, [[1, 1], [3, -2]], axis=1).backward(arange(12) as 3x2x2) in MXNet
    g = _grad(sym.take(a, i, axis=1), {"a": x, "i": np.array([[1, 1], [3, -2]], np.float32)},
              ["a"], np.arange(12, dtype=np.float32).reshape(3, 2, 2))
    np.testing.assert_array_equal(
        g["a"], [[3, 1, 0, 2], [7, 9, 0, 6], [11, 17, 0, 10]])
    # pick(x, [0, 3, 3, 1], axis=0).backward([1, 2, 3, 4])
    g = _grad(sym.pick(a, i, axis=0), {"a": x, "i": np.array([0, 3, 3, 1], np.float32)},
              ["a"], np.array([1, 2, 3, 4], np.float32))
    np.testing.assert_array_equal(g["a"], [[1, 0, 0, 0], [0, 0, 0, 4], [0, 2, 3, 0]])
    # where([1, 0, 1], x, y).backward([[1, 2], [3, 4], [5, 6]])
    c, xs, ys = sym.Variable("c"), sym.Variable("x"), sym.Variable("y")
    g = _grad(sym.where(c, xs, ys), {"c": np.array([1, 0, 1], np.float32),
                                     "x": np.ones((3, 2), np.float32),
                                     "y": np.ones((3, 2), np.float32)},
              ["x", "y"], np.array([[1, 2], [3, 4], [5, 6]], np.float32))
    np.testing.assert_array_equal(g["x"], [[1, 2], [0, 0], [5, 6]])
    np.testing.assert_array_equal(g["y"], [[0, 0], [3, 4], [0, 0]])


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_and_pick_gradients_finite_differences(mode):
    rng = np.random.default_rng(2)
    a, i = sym.Variable("a"), sym.Variable("i")
    x = rng.standard_normal((3, 4, 2))
    idx = np.array([[-1, 2, 5], [0, 0, 3]], np.float64)
    check_numeric_gradient(sym.take(a, i, axis=1, mode=mode), {"a": x, "i": idx},
                           grad_nodes=["a"], rtol=1e-5)
    pidx = np.array([[-1, 2], [5, 3], [1, 1]], np.float64)
    check_numeric_gradient(sym.pick(a, i, axis=1, mode=mode), {"a": x, "i": pidx},
                           grad_nodes=["a"], rtol=1e-5)


def test_empty_axis_gives_zeros_not_a_read():
    x = np.zeros((3, 0), np.float32)
    got = nd.take(nd.array(x), nd.array([0, 1]), axis=1)
    assert got.shape == (3, 2)
    np.testing.assert_array_equal(got.asnumpy(), np.zeros((3, 2), np.float32))


# sort / argsort / topk. X has ties; MXNet 1.9.1 keeps tied elements in their original order
# in both directions. Literals from e.g. mx.nd.topk(mx.nd.array(X), k=2).asnumpy().
X = np.array([[3, 1, 3, 2, 1, 3], [0, 5, 5, 0, 2, 2]], np.float32)
MX_SORT = [
    ("topk", {"k": 2}, [[0, 2], [1, 2]]),
    ("topk", {"k": 2, "is_ascend": True}, [[1, 4], [0, 3]]),
    ("topk", {"k": 2, "ret_typ": "mask"}, [[1, 0, 1, 0, 0, 0], [0, 1, 1, 0, 0, 0]]),
    ("topk", {"k": 0, "ret_typ": "value"}, [[3, 3, 3, 2, 1, 1], [5, 5, 2, 2, 0, 0]]),
    ("topk", {"k": 2, "axis": 0, "ret_typ": "value"},
     [[3, 5, 5, 2, 2, 3], [0, 1, 3, 0, 1, 2]]),
    ("topk", {"k": 3, "axis": None, "ret_typ": "value"}, [5, 5, 3]),
    ("topk", {"k": 2, "axis": None}, [7, 8]),
    ("topk", {"k": 2, "axis": None, "ret_typ": "mask"},
     [[0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0]]),
    ("sort", {}, [[1, 1, 2, 3, 3, 3], [0, 0, 2, 2, 5, 5]]),
    ("sort", {"is_ascend": False}, [[3, 3, 3, 2, 1, 1], [5, 5, 2, 2, 0, 0]]),
    ("sort", {"axis": None}, [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 5, 5]),
    ("argsort", {}, [[1, 4, 3, 0, 2, 5], [0, 3, 4, 5, 1, 2]]),
    ("argsort", {"is_ascend": False}, [[0, 2, 5, 3, 1, 4], [1, 2, 4, 5, 0, 3]]),
    ("argsort", {"axis": None}, [6, 9, 1, 4, 3, 10, 11, 0, 2, 5, 7, 8]),
]


@pytest.mark.parametrize(("name", "params", "want"), MX_SORT)
def test_sort_family_matches_mxnet(name, params, want):
    got = getattr(nd, name)(nd.array(X), **params)
    assert got.dtype == np.float32  # values, masks and (by default) positions
    np.testing.assert_array_equal(got.asnumpy(), np.array(want, np.float32))


def test_topk_both_and_dtypes():
    v, i = nd.topk(nd.array(X), k=2, ret_typ="both")
    np.testing.assert_array_equal(v.asnumpy(), [[3, 3], [5, 5]])
    np.testing.assert_array_equal(i.asnumpy(), [[0, 2], [1, 2]])
    assert i.dtype == np.float32
    got = nd.topk(nd.array(X.astype(np.int32), dtype="int32"), k=2, dtype="int64")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.asnumpy(), [[0, 2], [1, 2]])
    # the mask keeps the data's dtype whatever dtype says (MXNet 1.9.1)
    assert nd.topk(nd.array(X), k=2, ret_typ="mask", dtype="int32").dtype == np.float32
    assert nd.argsort(nd.array(X), dtype="int32").dtype == np.int32


def test_sort_against_numpy_and_nan_last():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 40, 2)).astype(np.float32)
    np.testing.assert_array_equal(nd.sort(nd.array(x), axis=1).asnumpy(), np.sort(x, axis=1))
    np.testing.assert_array_equal(nd.argsort(nd.array(x), axis=1, dtype="int64").asnumpy(),
                                  np.argsort(x, axis=1, kind="stable"))
    y = np.array([[np.nan, 1, 3], [2, np.nan, -np.inf]], np.float32)
    np.testing.assert_array_equal(nd.sort(nd.array(y)).asnumpy(), np.sort(y, axis=1))
    np.testing.assert_array_equal(nd.sort(nd.array(y), is_ascend=False).asnumpy(),
                                  [[np.nan, 3, 1], [np.nan, 2, -np.inf]])


def test_topk_value_gradient_matches_mxnet():
    # y = [[3, 1, 2], [0, 5, 4]]; topk(y, k=2, ret_typ='value').backward([[1, 2], [3, 4]])
    a = sym.Variable("a")
    y = np.array([[3, 1, 2], [0, 5, 4]], np.float32)
    head = np.array([[1, 2], [3, 4]], np.float32)
    for ret in ("value", "both"):
        s = sym.topk(a, k=2, ret_typ=ret)
        if ret == "both":
            s = s[0]
        g = _grad(s, {"a": y}, ["a"], head)
        np.testing.assert_array_equal(g["a"], [[1, 0, 2], [0, 3, 4]])


@pytest.mark.parametrize("axis", [0, 1, None])
def test_sort_and_topk_gradients_finite_differences(axis):
    a = sym.Variable("a")
    x = np.random.default_rng(4).standard_normal((3, 4))
    check_numeric_gradient(sym.sort(a, axis=axis, is_ascend=False), {"a": x},
                           grad_nodes=["a"], rtol=1e-5)
    check_numeric_gradient(sym.topk(a, axis=axis, k=2, ret_typ="value"), {"a": x},
                           grad_nodes=["a"], rtol=1e-5)


def test_nansum_nanprod_match_mxnet():
    # x = [[nan, 2, 3], [nan, nan, nan]]: mx.nd.nansum(x, axis=1) -> [5, 0], nanprod -> [6, 1];
    # backward of ([1, 2]): nansum [[0, 1, 1], [0, 0, 0]], nanprod [[0, 3, 2], [0, 0, 0]]
    x = np.array([[np.nan, 2, 3], [np.nan, np.nan, np.nan]], np.float32)
    np.testing.assert_array_equal(nd.nansum(nd.array(x), axis=1).asnumpy(), [5, 0])
    np.testing.assert_array_equal(nd.nanprod(nd.array(x), axis=1).asnumpy(), [6, 1])
    np.testing.assert_array_equal(nd.nansum(nd.array(x)).asnumpy(), [5])
    np.testing.assert_array_equal(nd.nansum(nd.array(x), axis=0).asnumpy(), [0, 2, 3])
    a = sym.Variable("a")
    head = np.array([1, 2], np.float32)
    g = _grad(sym.nansum(a, axis=1), {"a": x}, ["a"], head)
    np.testing.assert_array_equal(g["a"], [[0, 1, 1], [0, 0, 0]])
    g = _grad(sym.nanprod(a, axis=1), {"a": x}, ["a"], head)
    np.testing.assert_array_equal(g["a"], [[0, 3, 2], [0, 0, 0]])


def test_gather_nd_scatter_nd_match_mxnet():
    d = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    # mx.nd.gather_nd(d, mx.nd.array([[1, 0, -1], [2, 1, 1.7]])): -1 counts from the end
    got = nd.gather_nd(nd.array(d), nd.array([[1, 0, -1], [2, 1, 1.7]])).asnumpy()
    np.testing.assert_array_equal(got, [[20, 21, 22, 23], [4, 5, 6, 7], [16, 17, 18, 19]])
    assert nd.gather_nd(nd.array(d), nd.array([[1, 0], [2, 1]])).shape == (2, 4)
    assert nd.gather_nd(nd.array([1, 2, 3]), nd.array([[2]])).shape == (1,)
    # mx.nd.scatter_nd(mx.nd.array([1, 2, 3]), mx.nd.array([[0, 1, 1], [1, 0, 1]]), shape=(2, 2))
    got = nd.scatter_nd(nd.array([1, 2, 3]), nd.array([[0, 1, 1], [1, 0, 1]]), shape=(2, 2))
    np.testing.assert_array_equal(got.asnumpy(), [[0, 1], [2, 3]])
    got = nd.scatter_nd(nd.array([[1, 2], [3, 4]]), nd.array([[0, 1]]), shape=(2, 2))
    np.testing.assert_array_equal(got.asnumpy(), [[1, 2], [3, 4]])
    # out-of-range components are clipped here (MXNet raises, or writes out of bounds)
    got = nd.gather_nd(nd.array(d), nd.array([[7], [-9]])).asnumpy()
    np.testing.assert_array_equal(got, d[1, 0][None])
    got = nd.scatter_nd(nd.array([5.0]), nd.array([[9], [-9]]), shape=(2, 2)).asnumpy()
    np.testing.assert_array_equal(got, [[0, 0], [5, 0]])


def test_gather_nd_scatter_nd_gradients_match_mxnet():
    a, i = sym.Variable("a"), sym.Variable("i")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # gather_nd(x, [[0, 0, 1], [1, 1, 2]]).backward([1, 2, 3]) in MXNet
    g = _grad(sym.gather_nd(a, i), {"a": x, "i": np.array([[0, 0, 1], [1, 1, 2]], np.float32)},
              ["a"], np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(g["a"], [[0, 3, 0], [0, 0, 3]])
    # scatter_nd([1, 2, 3], [[0, 1, 1], [1, 0, 1]], shape=(2, 2)).backward([[1, 2], [3, 4]])
    g = _grad(sym.scatter_nd(a, i, shape=(2, 2)),
              {"a": np.array([1, 2, 3], np.float32),
               "i": np.array([[0, 1, 1], [1, 0, 1]], np.float32)},
              ["a"], np.array([[1, 2], [3, 4]], np.float32))
    np.testing.assert_array_equal(g["a"], [2, 3, 4])
    rng = np.random.default_rng(5)
    check_numeric_gradient(sym.gather_nd(a, i),
                           {"a": rng.standard_normal((3, 4, 2)),
                            "i": np.array([[0, 2, 2, -1], [1, 3, 3, 0]], np.float64)},
                           grad_nodes=["a"], rtol=1e-5)
