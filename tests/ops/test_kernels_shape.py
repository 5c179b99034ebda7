"""Dense C kernels of the shape operators (nnsym/ops/shape.py) against their numpy references:
every example in write and add mode, random shapes and parameters for the strided, joining and
tiling kernels, every Cast dtype pair, zero-size arrays, in-place calls and the view operators.

These kernels only move elements, so results are compared exactly (Cast too: its conversions
round as numpy's do); NaN payloads and signed zeros must survive a copy bit for bit.
"""

from __future__ import annotations

import itertools
import platform

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym.codegen import compiler
from nnsym.ir.opdef import DENSE
from nnsym.ir.spec import KernelCall
from nnsym.ops import REGISTRY
from nnsym.ops.shape.cast import CAST_DTYPES
from nnsym.runtime.imperative import compile_call, infer_one, run_op
from nnsym.testing import make_inputs, reference_outputs

NAMES = (
    "Reshape", "Flatten", "expand_dims", "squeeze", "transpose", "SwapAxis", "Concat",
    "SliceChannel", "slice", "slice_axis", "tile", "Cast", "zeros_like", "ones_like",
    "BlockGrad", "_copy",
)  # fmt: skip
VIEWS = ("Reshape", "Flatten", "expand_dims", "squeeze")
DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool")
CASES = [
    pytest.param(REGISTRY[n], ex, id=f"{n}-{ex}") for n in NAMES for ex in REGISTRY[n].examples
]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
BLOCKED = [
    ((67, 45), ()), ((8, 8), ()), ((130, 3), ()), ((3, 130), ()), ((5, 33, 17), (2, 1, 0)),
    ((4, 19, 21, 3), (0, 2, 1, 3)), ((2, 9, 70), (0, 2, 1)), ((64, 1, 64), (2, 1, 0)),
]  # fmt: skip
CAST_PAIRS = list(itertools.product(CAST_DTYPES, CAST_DTYPES))
REQS = ("write", "add")


def _specs(name, params, shapes, dtype):
    op = REGISTRY[name]
    p, _ = op.parse_params(params)
    dts = (np.dtype(dtype),) * len(shapes)
    out_s, out_t = infer_one(op, p, shapes, dts, "warm")
    calls = [KernelCall(p, tuple(shapes), dts, tuple(out_s), tuple(out_t), r) for r in REQS]
    return [ln.spec for c in calls for ln in op.kernels[DENSE].lower(c).launches]


@pytest.fixture(scope="module", autouse=True)
def _precompiled():
    """Build the fixed cases' kernels in one go (one compiler start per kernel is slow)."""
    if compiler.backend() != "c":
        return
    specs = [s for a, b in CAST_PAIRS for s in _specs("Cast", {"dtype": b}, [(2,)], a)]
    for shape, axes in BLOCKED:
        for dt in DTYPES:
            specs += _specs("transpose", {"axes": axes}, [shape], dt)
    compiler.functions(specs)


def _random(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -50
        return rng.integers(lo, 50, size=shape).astype(dt)
    return rng.uniform(-4, 4, size=shape).astype(dt)


def _check(op, params, inputs, req="write", seed=1):
    """run_op equals the reference exactly; in add mode on outputs prefilled at random."""
    p, _ = op.parse_params(params)
    want = reference_outputs(op, p, inputs)
    if req == "add":
        pre = [_random(w.shape, w.dtype, seed) for w in want]
        got = run_op(op, params, inputs, req="add", outputs=[x.copy() for x in pre])
        want = [a + b for a, b in zip(pre, want)]
    else:
        got = run_op(op, params, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w, strict=True)


def test_every_shape_operator_has_a_dense_kernel():
    assert all(DENSE in REGISTRY[n].kernels for n in NAMES)


@pytest.mark.parametrize("req", REQS)
@pytest.mark.parametrize(("op", "ex"), CASES)
def test_examples(op, ex, req):
    _check(op, dict(ex.params), make_inputs(op, ex), req)


# ---------------------------------------------------------------------------------------------
# Views


@pytest.mark.parametrize(("op", "ex"), [c for c in CASES if c.values[0].name in VIEWS])
def test_views_alias_the_input_in_write_mode_and_add_in_add_mode(op, ex):
    if compiler.backend() != "c":
        pytest.skip("the numpy backend runs references, which copy")
    (x,) = make_inputs(op, ex)
    (out,) = run_op(op, dict(ex.params), [x])
    assert np.shares_memory(out, x)
    pre = _random(out.shape, out.dtype)
    (acc,) = run_op(op, dict(ex.params), [x], req="add", outputs=[pre.copy()])
    assert not np.shares_memory(acc, x)
    np.testing.assert_array_equal(acc, pre + x.reshape(out.shape))


# ---------------------------------------------------------------------------------------------
# Random shapes and parameters

# every element width, and bool (add is logical or); all dtypes run in the fixed cases
dtypes = st.sampled_from(("float32", "float64", "float16", "uint8", "bool"))
reqs = st.sampled_from(REQS)


@st.composite
def shapes(draw, min_dims=1, max_dims=4, max_side=7):
    nd = draw(st.integers(min_dims, max_dims))
    return tuple(draw(st.lists(st.integers(0, max_side), min_size=nd, max_size=nd)))


@SETTINGS
@given(
    shape=st.one_of(shapes(max_dims=6, max_side=5), shapes(2, 3, max_side=40)),
    data=st.data(),
    dtype=dtypes,
    req=reqs,
)
def test_transpose_random(shape, data, dtype, req):
    axes = data.draw(st.permutations(range(len(shape))).map(tuple) | st.just(()))
    _check(REGISTRY["transpose"], {"axes": axes}, [_random(shape, dtype)], req)


@SETTINGS
@given(shape=shapes(max_dims=5, max_side=12), data=st.data(), dtype=dtypes, req=reqs)
def test_swapaxis_random(shape, data, dtype, req):
    nd = len(shape)
    d1, d2 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
    _check(REGISTRY["SwapAxis"], {"dim1": d1, "dim2": d2}, [_random(shape, dtype)], req)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("req", REQS)
@pytest.mark.parametrize(("shape", "axes"), BLOCKED)
def test_transpose_blocked_tiles_and_edges(shape, axes, dtype, req):
    _check(REGISTRY["transpose"], {"axes": axes}, [_random(shape, dtype)], req)


idx = st.one_of(st.none(), st.integers(-9, 9))


@SETTINGS
@given(shape=shapes(max_dims=4, max_side=8), data=st.data(), dtype=dtypes, req=reqs)
def test_slice_random(shape, data, dtype, req):
    k = data.draw(st.integers(1, len(shape)))
    begin = tuple(data.draw(idx) for _ in range(k))
    end = tuple(data.draw(idx) for _ in range(k))
    step = data.draw(
        st.just(()) | st.lists(st.one_of(st.none(), st.integers(-3, 3).filter(bool)),
                               min_size=k, max_size=k).map(tuple)
    )  # fmt: skip
    _check(REGISTRY["slice"], {"begin": begin, "end": end, "step": step},
           [_random(shape, dtype)], req)  # fmt: skip


@SETTINGS
@given(shape=shapes(max_dims=4, max_side=8).filter(all), data=st.data(), dtype=dtypes, req=reqs)
def test_slice_axis_random(shape, data, dtype, req):
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    n = shape[axis]
    b = data.draw(st.integers(0, n - 1))
    e = data.draw(st.integers(b + 1, n))
    begin = b - n if data.draw(st.booleans()) else b
    end = None if e == n and data.draw(st.booleans()) else e - n if e < n else e
    _check(REGISTRY["slice_axis"], {"axis": axis, "begin": begin, "end": end},
           [_random(shape, dtype)], req)  # fmt: skip


@SETTINGS
@given(shape=shapes(max_dims=4, max_side=6), data=st.data(), dtype=dtypes, req=reqs)
def test_concat_random(shape, data, dtype, req):
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    sizes = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=4))
    ins = []
    for i, n in enumerate(sizes):
        s = list(shape)
        s[dim] = n
        ins.append(_random(tuple(s), dtype, seed=i))
    _check(REGISTRY["Concat"], {"num_args": len(ins), "dim": dim}, ins, req)


@SETTINGS
@given(shape=shapes(max_dims=4, max_side=6), data=st.data(), dtype=dtypes, req=reqs)
def test_split_random(shape, data, dtype, req):
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    n = data.draw(st.integers(1, 4))
    squeeze = data.draw(st.booleans())
    s = list(shape)
    s[axis] = n if squeeze else n * data.draw(st.integers(0, 3))
    params = {"num_outputs": n, "axis": axis, "squeeze_axis": squeeze}
    _check(REGISTRY["SliceChannel"], params, [_random(tuple(s), dtype)], req)


@SETTINGS
@given(
    shape=shapes(max_dims=3, max_side=5),
    reps=st.lists(st.integers(1, 3), max_size=4).map(tuple),
    dtype=dtypes,
    req=reqs,
)
def test_tile_random(shape, reps, dtype, req):
    _check(REGISTRY["tile"], {"reps": reps}, [_random(shape, dtype)], req)


# ---------------------------------------------------------------------------------------------
# Cast


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("req", REQS)
@pytest.mark.parametrize(("src", "dst"), CAST_PAIRS)
def test_cast_every_dtype_pair(src, dst, req):
    rng = np.random.default_rng(0)
    hi = 100 if dst == "uint8" or src == "uint8" else 60
    lo = 0 if dst == "uint8" or src == "uint8" else -60
    x = rng.uniform(lo, hi, size=(7, 13))
    x = np.round(x) if np.dtype(src).kind in "iub" else x
    x = x.astype(src) if src != "bool" else x > 0
    _check(REGISTRY["Cast"], {"dtype": dst}, [x], req)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
@pytest.mark.parametrize("dst", ["float16", "float32", "float64", "bool"])
def test_cast_keeps_nan_inf_and_signed_zero(src, dst):
    vals = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-8, 7e4, -7e4, 1e-40, 3.14159]
    x = np.array(vals * 3, dtype=np.float64).astype(src)
    (got,) = run_op(REGISTRY["Cast"], {"dtype": dst}, [x])
    want = x.astype(dst)
    assert got.tobytes() == want.tobytes()  # bitwise: NaN, signs of zeros, rounding


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 conversions")
@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["int8", "uint8", "int32", "int64"])
def test_cast_out_of_range_floats_convert_as_numpy_does_on_x86(src, dst):
    vals = [300.0, -1.0, -2.7, 2.7, 127.9, 128.5, -129.0, 1e10, -1e10, np.nan, np.inf, -np.inf]
    x = np.array(vals * 3, dtype=src)
    (got,) = run_op(REGISTRY["Cast"], {"dtype": dst}, [x])
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_array_equal(got, x.astype(dst), strict=True)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_cast_float32_to_float16_rounds_to_nearest_even():
    """Every 4099th float32 bit pattern (subnormals, ties, overflow to inf). NaNs stay NaN, but
    their payloads may differ: F16C quiets signalling NaNs, numpy's software conversion does
    not."""
    bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    (got,) = run_op(REGISTRY["Cast"], {"dtype": "float16"}, [x])
    want = x.astype(np.float16)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    assert got[~nan].tobytes() == want[~nan].tobytes()


# ---------------------------------------------------------------------------------------------
# Zero-size arrays, in-place calls, bit-exact copies

ZERO = [
    ("Reshape", {"shape": (-1, 3)}, [(0, 3)]),
    ("Reshape", {"shape": (3, 0)}, [(3, 0)]),
    ("Flatten", {}, [(2, 0, 3)]),
    ("expand_dims", {"axis": 1}, [(0, 3)]),
    ("squeeze", {"axis": (1,)}, [(0, 1)]),
    ("transpose", {}, [(0, 3)]),
    ("transpose", {"axes": (1, 0, 2)}, [(4, 0, 5)]),
    ("SwapAxis", {"dim1": 0, "dim2": 1}, [(3, 0)]),
    ("Concat", {"num_args": 2, "dim": 1}, [(2, 0), (2, 0)]),
    ("Concat", {"num_args": 3, "dim": 0}, [(0, 3), (2, 3), (0, 3)]),
    ("Concat", {"num_args": 2, "dim": 0}, [(3, 0), (2, 0)]),
    ("SliceChannel", {"num_outputs": 2, "axis": 0}, [(4, 0)]),
    ("SliceChannel", {"num_outputs": 2, "axis": 1}, [(0, 4)]),
    ("slice", {"begin": (0,), "end": (2,)}, [(4, 0)]),
    ("slice", {"begin": (3,), "end": (1,)}, [(4, 5)]),
    ("slice_axis", {"axis": 1, "begin": 0, "end": 2}, [(0, 4)]),
    ("tile", {"reps": (2, 3)}, [(0, 2)]),
    ("Cast", {"dtype": "float16"}, [(0,)]),
    ("Cast", {"dtype": "float32"}, [(0, 2)]),
    ("zeros_like", {}, [(0, 2)]),
    ("ones_like", {}, [(0,)]),
    ("BlockGrad", {}, [(2, 0)]),
    ("_copy", {}, [(0,)]),
]


@pytest.mark.parametrize("req", REQS)
@pytest.mark.parametrize(("name", "params", "in_shapes"), ZERO, ids=[f"{z[0]}" for z in ZERO])
def test_zero_size(name, params, in_shapes, req):
    _check(REGISTRY[name], params, [_random(s, "float32", i) for i, s in enumerate(in_shapes)], req)


@pytest.mark.parametrize("req", REQS)
@pytest.mark.parametrize(
    ("name", "params"), [("_copy", {}), ("BlockGrad", {}), ("Cast", {"dtype": "float32"})]
)
def test_in_place(name, params, req):
    op = REGISTRY[name]
    x = _random((5, 7), "float32")
    want = x + x if req == "add" else x.copy()
    call = compile_call(op, op.parse_params(params)[0], [x.shape], [x.dtype], req)
    call.run([x], [x], req)
    np.testing.assert_array_equal(x, want)


BITWISE = [
    ("transpose", {}, (9, 11)),
    ("slice", {"begin": (None,), "end": (None,), "step": (-1,)}, (12, 3)),
    ("Concat", {"num_args": 1, "dim": 0}, (5, 4)),
    ("tile", {"reps": (2,)}, (4, 3)),
    ("SliceChannel", {"num_outputs": 1}, (5, 3)),
    ("_copy", {}, (7, 5)),
    ("Cast", {"dtype": "float32"}, (7, 3)),
]


@pytest.mark.parametrize(("name", "params", "shape"), BITWISE, ids=[b[0] for b in BITWISE])
def test_copies_keep_nan_payloads_and_signed_zeros(name, params, shape):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
    bits.flat[::3] = 0x7FC01234  # quiet NaN with a payload
    bits.flat[1::5] = 0x80000000  # -0.0
    x = bits.view(np.float32)
    op = REGISTRY[name]
    (got,) = run_op(op, params, [x])[:1]
    (want,) = reference_outputs(op, op.parse_params(params)[0], [x])[:1]
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize(("name", "value"), [("zeros_like", 0), ("ones_like", 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_ignores_nan_inputs(name, value, dtype):
    x = (
        np.full((3, 4), np.nan).astype(dtype)
        if dtype.startswith("float")
        else _random((3, 4), dtype)
    )
    (got,) = run_op(REGISTRY[name], {}, [x])
    np.testing.assert_array_equal(got, np.full((3, 4), value, dtype=dtype), strict=True)
