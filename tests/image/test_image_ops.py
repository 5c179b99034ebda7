"""The image family (``nd.image``/``sym.image``) beyond the registry tables: resize against
MXNet 1.9.1 (OpenCV) outputs (``resize_mxnet.npz``, written by ``make_fixtures.py``), values
MXNet printed, shape rules and errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import nd, sym
from nnsym.errors import NNSymError, NoKernelError, OperatorParamError, ShapeError

HERE = Path(__file__).resolve().parent
FIX = np.load(HERE / "resize_mxnet.npz")
N_FIX = len({k.split("/")[0] for k in FIX.files})


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in re.findall(r"-?\d+", text))


@pytest.mark.parametrize("k", range(N_FIX))
def test_resize_matches_opencv(k):
    """Float images to float32 rounding; uint8 nearest exactly, the others within 1: OpenCV's
    8-bit paths are fixed point (11-bit weights, SIMD rounding), nnsym's are float, rounded half
    to even."""
    x, want = FIX[f"{k}/in"], FIX[f"{k}/out"]
    size, keep, interp = (str(v) for v in FIX[f"{k}/params"])
    got = nd.image.resize(nd.array(x, dtype=x.dtype), size=_ints(size), keep_ratio=keep == "True",
                          interp=int(interp)).asnumpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    if x.dtype == np.uint8:
        diff = np.abs(got.astype(int) - want.astype(int))
        assert diff.max() <= (0 if interp == "0" else 1)
        assert (diff == 0).mean() > 0.5
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def test_namespaces_and_names():
    for name in ("to_tensor", "normalize", "flip_left_right", "flip_top_bottom", "crop",
                 "resize", "adjust_lighting"):
        assert callable(getattr(nd.image, name)) and callable(getattr(sym.image, name))
        assert getattr(nd, f"_image_{name}") is not None
    s = sym.image.to_tensor(sym.var("d"))
    assert s.list_arguments() == ["d"] and s.name.startswith("to_tensor")  # as MXNet
    _, out, _ = s.infer_shape(d=(5, 6, 3))
    assert out == [(3, 5, 6)]
    _, ot, _ = s.infer_type(d=np.uint8)
    assert ot == [np.float32]
    c = sym.image.crop(sym.var("d"), x=1, y=1, width=2, height=2)
    assert c.infer_shape(d=(5, 5, 3))[1] == [(2, 2, 3)]


def test_to_tensor_divides_without_clipping():
    # MXNet 1.9.1: int32 300 -> 1.1764706 (no clip), float16 in -> float32 out
    y = nd.image.to_tensor(nd.array(np.full((1, 1, 1), 300), dtype="int32"))
    np.testing.assert_allclose(y.asnumpy(), [[[300 / 255]]], rtol=1e-7)
    assert nd.image.to_tensor(nd.ones((2, 2, 5), dtype="float16")).dtype == np.float32
    assert nd.image.to_tensor(nd.ones((2, 2, 5))).shape == (5, 2, 2)


def test_adjust_lighting_values_printed_by_mxnet():
    z = nd.zeros((1, 1, 3))
    cases = {(1, 0, 0): [-31.47355, -32.211166, -32.366455],
             (0, 1, 0): [3.4478447, -0.021573, -3.330871],
             (0, 0, 1): [0.4602332, -0.934472, 0.4825044]}
    for alpha, want in cases.items():
        got = nd.image.adjust_lighting(z, alpha=alpha).asnumpy().ravel()
        np.testing.assert_allclose(got, want, rtol=1e-6)
    u = nd.array(np.full((1, 1, 3), 10), dtype="uint8")
    # MXNet: 10 - 3.147 -> 6 (truncated), 10 - 31.5 -> 0 (saturated)
    assert nd.image.adjust_lighting(u, alpha=(0.1, 0, 0)).asnumpy().ravel().tolist() == [6] * 3
    assert nd.image.adjust_lighting(u, alpha=(1, 0, 0)).asnumpy().ravel().tolist() == [0] * 3


def test_normalize_values_and_uint8_truncation():
    x = nd.array(np.full((3, 1, 1), 200), dtype="uint8")
    got = nd.image.normalize(x, mean=(0.5, 1, 2), std=(3, 3, 3)).asnumpy().ravel()
    assert got.tolist() == [66, 66, 66]  # MXNet 1.9.1: (200 - m) / 3 truncated
    y = nd.image.normalize(nd.ones((1, 3, 1, 1)) * 2, mean=(1,), std=(0.5,))
    np.testing.assert_array_equal(y.asnumpy().ravel(), [2, 2, 2])


def test_normalize_gradient_is_one_over_std():
    x = sym.var("x")
    s = sym.image.normalize(x, mean=(0.1, 0.2, 0.3), std=(1.0, 2.0, 4.0))
    g = nd.zeros((2, 3, 2, 2))
    exe = s.bind(None, {"x": nd.ones((2, 3, 2, 2))}, args_grad={"x": g})
    exe.forward(is_train=True)
    exe.backward([nd.ones((2, 3, 2, 2))])
    np.testing.assert_allclose(g.asnumpy()[1, :, 0, 0], [1, 0.5, 0.25])


@pytest.mark.parametrize(("fn", "kwargs", "shape", "err"), [
    ("to_tensor", {}, (2, 2), ShapeError),
    ("flip_left_right", {}, (2, 3, 4, 3), ShapeError),  # MXNet 1.9.1 takes no batch here
    ("normalize", {"mean": (0.1, 0.2), "std": (1.0,)}, (3, 2, 2), ShapeError),
    ("normalize", {"mean": (0.1,), "std": (1.0,)}, (4, 2, 2), ShapeError),
    ("normalize", {}, (3, 2, 2), ShapeError),  # MXNet's default mean has 4 values
    ("crop", {"x": 3, "y": 0, "width": 2, "height": 2}, (4, 4, 3), ShapeError),
    ("crop", {"x": 0, "y": 0, "width": 0, "height": 2}, (4, 4, 3), OperatorParamError),
    ("adjust_lighting", {"alpha": (1.0, 2.0, 3.0)}, (2, 2, 4), ShapeError),
    ("adjust_lighting", {"alpha": (1.0, 2.0)}, (2, 2, 3), OperatorParamError),
    ("resize", {"size": ()}, (2, 2, 3), OperatorParamError),
    ("resize", {"size": (2,), "interp": 5}, (2, 2, 3), OperatorParamError),
    ("resize", {"size": (2,)}, (2, 2, 3), NoKernelError),  # int32: OpenCV has no such depth
])
def test_bad_calls_raise_clear_errors(fn, kwargs, shape, err):
    with pytest.raises(err) as e:
        dt = "int32" if (fn, kwargs) == ("resize", {"size": (2,)}) else "float32"
        getattr(nd.image, fn)(nd.ones(shape, dtype=dt), **kwargs).asnumpy()
    assert isinstance(e.value, NNSymError)


def test_flips_crop_and_their_gradients():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    np.testing.assert_array_equal(nd.image.flip_left_right(nd.array(x)).asnumpy(), x[:, ::-1])
    np.testing.assert_array_equal(nd.image.flip_top_bottom(nd.array(x)).asnumpy(), x[::-1])
    v = sym.var("v")
    s = sym.image.crop(v, x=1, y=0, width=2, height=1)
    g = nd.zeros((2, 4, 3))
    exe = s.bind(None, {"v": nd.array(x)}, args_grad={"v": g})
    np.testing.assert_array_equal(exe.forward(is_train=True)[0].asnumpy(), x[:1, 1:3])
    exe.backward([nd.ones((1, 2, 3)) * 2])
    want = np.zeros_like(x)
    want[:1, 1:3] = 2
    np.testing.assert_array_equal(g.asnumpy(), want)
    assert mx.nd.image.crop(nd.ones((2, 4, 4, 1)), x=0, y=0, width=1, height=2).shape == \
        (2, 2, 1, 1)
