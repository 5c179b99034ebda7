"""Dense C kernels of the elementwise family (unary math, clip, quadratic, ``_*_scalar``,
same-shape binary operators, add_n), the broadcasting operators, broadcast_to/broadcast_axis,
the axis reductions (sum, mean, max, min, prod, norm) and argmax/argmin against their numpy
references: every example in write and add mode and in further dtypes, NaN/Inf, zero-size
arrays, in-place calls, and random shapes for broadcast pairs and reduction axes.

Tolerances: float32 rtol 1e-5 (+ atol 1e-5 where results can be ~0: sums, quadratic), float64
rtol 1e-12 (+ atol 1e-12), float16 rtol 1e-3 (+ atol 1e-3), integers exact. float16 references
run on float32 copies of the inputs (numpy's float16 arithmetic rounds every step; the kernels
compute in float32).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnsym.codegen import compiler
from nnsym.errors import OperatorParamError
from nnsym.ir.opdef import DENSE
from nnsym.ir.spec import KernelCall
from nnsym.ops import REGISTRY
from nnsym.ops.elemwise.broadcast import BROADCAST
from nnsym.ops.elemwise.elemwise import BINARY, SCALAR_OPS, UNARY
from nnsym.ops.reduce.broadcast_reduce import REDUCTIONS
from nnsym.runtime.imperative import compile_call, infer_one, run_op
from nnsym.testing import assert_close, make_inputs, prefilled, reference_as

UNARY_NAMES = tuple(r.name for r in UNARY)
SCALAR_NAMES = tuple(r.name for r in SCALAR_OPS)
BINARY_NAMES = tuple(r.name for r in BINARY)
BROADCAST_NAMES = tuple(r.name for r in BROADCAST)
REDUCE_NAMES = (*(r.name for r in REDUCTIONS), "norm")
ARG_NAMES = ("argmax", "argmin")
ELEMWISE = (*UNARY_NAMES, "clip", "_contrib_quadratic", *SCALAR_NAMES, *BINARY_NAMES, "add_n")
NAMES = (*ELEMWISE, *BROADCAST_NAMES, "broadcast_to", "broadcast_axis", *REDUCE_NAMES, *ARG_NAMES)

FLOATS = ("float32", "float64", "float16")
# Operators whose integer results the references define exactly for the examples' data (other
# integer cases come from the operators' own int32 examples).
INT_SAFE = (
    *(r.name for r in UNARY if r.ints),
    "elemwise_add", "elemwise_sub", "elemwise_mul", "_maximum", "_minimum",
    "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_maximum", "broadcast_minimum",
    "broadcast_to", "broadcast_axis", "add_n", "sum", "mean", "max", "min", "prod",
    "argmax", "argmin",
)  # fmt: skip
INTS = ("int64", "uint8")
# Results that can be ~0 from larger terms (cancellation): an absolute tolerance too.
SUMMING = (*REDUCE_NAMES, "add_n", "_contrib_quadratic")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _dtypes(name, ex):
    out = [ex.dtype]
    if ex.dtype in FLOATS:
        out += [d for d in FLOATS if d != ex.dtype]
        if name in INT_SAFE:
            out += list(INTS)
    if name in ARG_NAMES:
        out.append("int32")
    return out


def _cases():
    for n in NAMES:
        op = REGISTRY[n]
        for ex in op.examples:
            for dt in _dtypes(n, ex):
                yield pytest.param(op, ex, dt, id=f"{n}-{ex}-{dt}")


CASES = list(_cases())


def _tol(dtype, op_name=""):
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        return 0.0, 0.0
    if dt == np.float16:
        return 1e-3, 1e-3
    if dt == np.float64:
        return 1e-12, 1e-12
    return 1e-5, (1e-5 if op_name in SUMMING else 1e-6)


def _cast_inputs(op, ex, dtype):
    """The example's inputs in another dtype (small integers for integer dtypes)."""
    ins = make_inputs(op, ex)
    dt = np.dtype(dtype)
    out = []
    for a in ins:
        if dt.kind in "iu" and a.dtype.kind == "f":
            a = np.round(a * 3)
            if dt.kind == "u":
                a = np.abs(a)
        out.append(a.astype(dt))
    return out


def check(op, params, inputs, req="write", seed=1):
    """run_op equals the reference (write: on NaN/77-filled outputs; add: on random prefills)."""
    p, _ = op.parse_params(params)
    _, out_t = infer_one(op, p, [a.shape for a in inputs], [a.dtype for a in inputs], "t")
    want = reference_as(op, p, inputs, out_t)
    if req == "add":
        pre = [prefilled(w.shape, w.dtype, seed) for w in want]
        got = run_op(op, params, inputs, req="add", outputs=[x.copy() for x in pre])
        want = [
            (a.astype(np.float64) + b.astype(np.float64)).astype(a.dtype)
            if a.dtype.kind == "f"
            else (a + b).astype(a.dtype)
            for a, b in zip(pre, want)
        ]
    else:
        outs = [np.full(w.shape, np.nan if w.dtype.kind == "f" else 77, w.dtype) for w in want]
        got = run_op(op, params, inputs, outputs=outs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, *_tol(w.dtype, op.name))
    return got


@pytest.fixture(scope="module", autouse=True)
def _compile_examples():
    """Build every example case's kernels in one go (a few parallel compiler calls)."""
    if compiler.backend() != "c":
        return
    specs = []
    for param in CASES:
        op, ex, dt = param.values
        p, _ = op.parse_params(ex.params)
        ins = _cast_inputs(op, ex, dt)
        shapes, dts = [a.shape for a in ins], [a.dtype for a in ins]
        out_s, out_t = infer_one(op, p, shapes, dts, "warm")
        for req in ("write", "add"):
            call = KernelCall(p, tuple(shapes), tuple(dts), tuple(out_s), tuple(out_t), req)
            specs.extend(ln.spec for ln in op.kernels[DENSE].lower(call).launches)
    compiler.functions(specs)


# ---------------------------------------------------------------------------------------------
# Every example, several dtypes, write and add


def test_every_operator_here_has_a_dense_kernel():
    assert all(DENSE in REGISTRY[n].kernels for n in NAMES)


@pytest.mark.parametrize("req", ["write", "add"])
@pytest.mark.parametrize(("op", "ex", "dtype"), CASES)
def test_example(op, ex, dtype, req):
    check(op, dict(ex.params), _cast_inputs(op, ex, dtype), req)


def test_one_kernel_serves_every_shape():
    """Sizes and strides are run-time values: same structure, same compiled kernel."""

    def spec(name, params, shapes, dtype="float32"):
        op = REGISTRY[name]
        p, _ = op.parse_params(params)
        dts = [np.dtype(dtype)] * len(shapes)
        out_s, out_t = infer_one(op, p, shapes, dts, "t")
        call = KernelCall(p, tuple(shapes), tuple(dts), tuple(out_s), tuple(out_t))
        return [ln.spec.name for ln in op.kernels[DENSE].lower(call).launches]

    assert spec("tanh", {}, [(3,)]) == spec("tanh", {}, [(40, 7)])
    assert spec("_mul_scalar", {"scalar": 2}, [(3,)]) == spec("_mul_scalar", {"scalar": 5}, [(9,)])
    assert spec("elemwise_add", {}, [(3,), (3,)]) == spec("broadcast_add", {}, [(2, 5), (2, 5)])
    assert spec("broadcast_add", {}, [(4, 3), (4, 1)]) == spec(
        "broadcast_add", {}, [(7, 2, 9), (7, 2, 1)]
    )
    assert spec("sum", {"axis": 1}, [(4, 3)]) == spec("sum", {"axis": (1, 2)}, [(8, 3, 5)])
    assert spec("max", {"axis": 0}, [(4, 3)]) == spec("max", {"axis": (0, 1)}, [(2, 4, 6)])


# ---------------------------------------------------------------------------------------------
# NaN and Inf

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 0.5, -1.5, 2.0, 30.0])


def _special(shape, seed, dtype):
    """Random values with NaN, +-Inf and zeros sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, shape)
    mask = rng.random(shape) < 0.3
    x[mask] = rng.choice(SPECIAL, size=int(mask.sum()))
    return x.astype(dtype)


UNARY_FORM = [
    *[(n, {}) for n in UNARY_NAMES],
    ("clip", {"a_min": -1.0, "a_max": 1.5}),
    ("_contrib_quadratic", {"a": 0.5, "b": -1.0, "c": 2.0}),
    *[(n, {"scalar": 1.5}) for n in SCALAR_NAMES],
    *[(n, {"scalar": -0.5}) for n in SCALAR_NAMES],
]


@pytest.mark.parametrize(("name", "params"), UNARY_FORM, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_form_nan_inf(name, params, dtype):
    x = np.concatenate([SPECIAL, -SPECIAL]).astype(dtype)
    check(REGISTRY[name], params, [x])
    check(REGISTRY[name], params, [_special((5, 7), 0, dtype)], "add")


@pytest.mark.parametrize("name", [*BINARY_NAMES, *BROADCAST_NAMES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_nan_inf(name, dtype):
    # every pair of special values
    a, b = np.meshgrid(SPECIAL, SPECIAL, indexing="ij")
    check(REGISTRY[name], {}, [a.astype(dtype), b.astype(dtype)])
    if name.startswith("broadcast"):
        check(REGISTRY[name], {}, [SPECIAL[:, None].astype(dtype), SPECIAL.astype(dtype)])


@pytest.mark.parametrize("name", [*REDUCE_NAMES, *ARG_NAMES])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_reduce_nan_inf(name, axis, dtype):
    x = _special((6, 40, 5), 1, dtype)
    x[1] = -np.inf  # a row of one value: max/argmax ties
    x[2, :, 1] = np.nan
    x[3, 7:, 2] = np.inf
    params = {} if axis is None else {"axis": axis}
    check(REGISTRY[name], params, [x])


def test_max_min_all_infinite():
    x = np.full((3, 17), -np.inf, "float32")
    for axis in (0, 1):
        np.testing.assert_array_equal(run_op(REGISTRY["max"], {"axis": axis}, [x])[0], -np.inf)
        np.testing.assert_array_equal(run_op(REGISTRY["argmax"], {"axis": axis}, [x])[0], 0)
        np.testing.assert_array_equal(run_op(REGISTRY["min"], {"axis": axis}, [-x])[0], np.inf)


def test_add_n_nan_inf():
    xs = [_special((4, 9), s, "float32") for s in range(5)]
    check(REGISTRY["add_n"], {"num_args": 5}, xs)
    check(REGISTRY["add_n"], {"num_args": 5}, xs, "add")


# ---------------------------------------------------------------------------------------------
# Integer corner cases


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8"])
def test_integer_division_never_traps(dtype):
    """C integer division by 0 (and INT_MIN / -1) traps; the kernels give 0 (and wrap)."""
    info = np.iinfo(dtype)
    a = np.array([7, 9, info.min, info.max, 0, 5], dtype)
    b = np.array([0, 0, -1 if info.min else 1, 0, 0, 2], np.int64).astype(dtype)
    got = run_op(REGISTRY["elemwise_div"], {}, [a, b])[0]
    want = np.array([0, 0, info.min, 0, 0, 2], dtype)
    np.testing.assert_array_equal(got, want)
    got = run_op(REGISTRY["broadcast_div"], {}, [a, b[:1]])[0]
    np.testing.assert_array_equal(got, np.zeros_like(a))
    np.testing.assert_array_equal(
        run_op(REGISTRY["_div_scalar"], {"scalar": 0.5}, [a])[0], np.zeros_like(a)
    )
    got = run_op(REGISTRY["_rdiv_scalar"], {"scalar": 6}, [a])[0]
    assert got[4] == 0 and got[5] == 1
    if info.min:
        got = run_op(REGISTRY["_div_scalar"], {"scalar": -1}, [a])[0]
        np.testing.assert_array_equal(got, (-a.astype(np.int64)).astype(dtype))
    got = run_op(REGISTRY["reciprocal"], {}, [a])[0]
    assert got[4] == 0


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "elemwise_add", "add_n"])
def test_integer_results_wrap_like_numpy(dtype, name):
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.max // 3, info.max, (5, 7), endpoint=True)
    x = x.astype(dtype)
    op = REGISTRY[name]
    ins = {"elemwise_add": [x, x], "add_n": [x, x, x]}.get(name, [x])
    params = {"add_n": {"num_args": 3}}.get(name, {"axis": 1} if name in REDUCE_NAMES else {})
    check(op, params, ins)


@pytest.mark.parametrize("is_int", [True, False])
@pytest.mark.parametrize("name", SCALAR_NAMES)
def test_scalar_ops_on_bool_and_int_data(name, is_int):
    """Bool data gives int64 (or float64) output, integer data with a float scalar float64."""
    rng = np.random.default_rng(4)
    xb = rng.integers(0, 2, (3, 4)).astype(bool)
    xi = rng.integers(1, 5, (3, 4)).astype("int32")
    for x in (xb, xi):
        if name in ("_rdiv_scalar", "_div_scalar") and x.dtype == bool:
            x = np.ones_like(x)  # no zero divisors
        check(REGISTRY[name], {"scalar": 2.0, "is_int": is_int}, [x])
        check(REGISTRY[name], {"scalar": 2.0, "is_int": is_int}, [x], "add")


# ---------------------------------------------------------------------------------------------
# Zero-size arrays

ZERO_SIZE = [
    ("tanh", {}, [(0,)]),
    ("relu", {}, [(2, 0, 3)]),
    ("clip", {"a_min": 0.0, "a_max": 1.0}, [(0, 4)]),
    ("_contrib_quadratic", {"a": 1.0}, [(0, 4)]),
    ("_plus_scalar", {"scalar": 1.0}, [(3, 0)]),
    ("elemwise_mul", {}, [(0, 3), (0, 3)]),
    ("add_n", {"num_args": 3}, [(0, 4)] * 3),
    ("broadcast_add", {}, [(0, 3), (1, 3)]),
    ("broadcast_mul", {}, [(2, 1), (1, 0)]),
    ("broadcast_maximum", {}, [(0,), (4, 1)]),
    ("broadcast_to", {"shape": (3, 0)}, [(1, 0)]),
    ("broadcast_axis", {"axis": 0, "size": 0}, [(1, 3)]),
    ("broadcast_axis", {"axis": 0, "size": 3}, [(1, 0)]),
    ("sum", {"axis": 0}, [(0, 3)]),
    ("sum", {"axis": 1}, [(3, 0)]),
    ("sum", {"axis": 0}, [(3, 0)]),
    ("sum", {}, [(0, 3)]),
    ("prod", {"axis": (0, 2)}, [(2, 0, 3)]),
    ("mean", {"axis": 1}, [(3, 0, 2)]),
    ("norm", {"axis": 1}, [(3, 0)]),
    ("norm", {}, [(0,)]),
]


@pytest.mark.parametrize(("name", "params", "shapes"), ZERO_SIZE, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("req", ["write", "add"])
def test_zero_size(name, params, shapes, dtype, req):
    if dtype == "int32" and name == "mean":
        pytest.skip("integer mean of nothing: 0 (the reference divides by zero)")
    check(REGISTRY[name], params, [np.zeros(s, dtype) for s in shapes], req)


@pytest.mark.parametrize(
    ("name", "want"), [("max", -np.inf), ("min", np.inf), ("argmax", 0), ("argmin", 0)]
)
def test_extreme_of_nothing(name, want):
    """numpy raises; the kernels give the reduction's identity (MXNet's initial value)."""
    got = run_op(REGISTRY[name], {"axis": 1}, [np.zeros((3, 0), "float32")])[0]
    np.testing.assert_array_equal(got, np.full(3, want, "float32"))
    for axis in (0, 1):
        got = run_op(REGISTRY[name], {"axis": axis}, [np.zeros((0, 0), "float32")])[0]
        assert got.shape == (0,)
    got = run_op(REGISTRY["mean"], {"axis": 1}, [np.zeros((2, 0), "int32")])[0]
    np.testing.assert_array_equal(got, [0, 0])


def test_norm_rejects_other_orders():
    with pytest.raises(OperatorParamError):
        run_op(REGISTRY["norm"], {"ord": 3}, [np.ones(3, "float32")])


# ---------------------------------------------------------------------------------------------
# In place: the output is one of the inputs

IN_PLACE = [
    *[(n, {}, 1) for n in ("tanh", "sigmoid", "abs", "square")],
    ("clip", {"a_min": -0.5, "a_max": 0.5}, 1),
    ("_contrib_quadratic", {"a": 1.0, "b": 2.0, "c": 3.0}, 1),
    *[(n, {"scalar": 1.5}, 1) for n in SCALAR_NAMES],
    *[(n, {}, 2) for n in BINARY_NAMES],
    ("add_n", {"num_args": 3}, 3),
]


@pytest.mark.parametrize(("name", "params", "n_in"), IN_PLACE, ids=str)
@pytest.mark.parametrize("alias", [0, -1])
def test_in_place(name, params, n_in, alias):
    op = REGISTRY[name]
    rng = np.random.default_rng(5)
    ins = [rng.uniform(0.5, 2, (7, 301)).astype("float32") for _ in range(n_in)]
    want = reference_as(op, op.parse_params(params)[0], ins, [np.dtype("float32")])[0]
    i = alias % n_in
    if (i, 0) not in op.inplace:
        pytest.skip("the operator does not allow this input in place")
    p, _ = op.parse_params(params)
    call = compile_call(op, p, [a.shape for a in ins], [a.dtype for a in ins])
    call.run(ins, [ins[i]])
    assert_close(ins[i], want, *_tol("float32", name))


@pytest.mark.parametrize("name", BROADCAST_NAMES)
@pytest.mark.parametrize(("lhs", "rhs"), [((6, 50), (6, 1)), ((6, 50), (50,)), ((3, 4, 5), (4, 1))])
def test_broadcast_in_place(name, lhs, rhs):
    op = REGISTRY[name]
    rng = np.random.default_rng(6)
    a, b = rng.uniform(0.5, 2, lhs).astype("float64"), rng.uniform(0.5, 2, rhs).astype("float64")
    want = reference_as(op, op.parse_params({})[0], [a, b], [a.dtype])[0]
    call = compile_call(op, op.parse_params({})[0], [a.shape, b.shape], [a.dtype, b.dtype])
    call.run([a, b], [a])
    assert_close(a, want, 1e-12, 1e-12)


# ---------------------------------------------------------------------------------------------
# Random shapes: broadcast pairs and reduction axes


@st.composite
def _broadcast_pair(draw):
    out = draw(st.lists(st.integers(0, 5), min_size=1, max_size=5))
    shapes = []
    for _ in range(2):
        lead = draw(st.integers(0, len(out) - 1))
        dims = [d if draw(st.booleans()) else 1 for d in out[lead:]]
        shapes.append(tuple(dims))
    return shapes


@SETTINGS
@given(
    shapes=_broadcast_pair(),
    name=st.sampled_from(BROADCAST_NAMES),
    dtype=st.sampled_from(("float32", "float64", "int32")),
    req=st.sampled_from(("write", "add")),
)
def test_broadcast_random_shapes(shapes, name, dtype, req):
    rng = np.random.default_rng(7)
    lo, hi = (0.5, 3.0) if name in ("broadcast_div", "broadcast_power") else (-3.0, 3.0)
    ins = [rng.uniform(lo, hi, s) for s in shapes]
    if dtype == "int32":
        ins = [np.round(a) + (a > 0) for a in ins]  # no zeros
    check(REGISTRY[name], {}, [a.astype(dtype) for a in ins], req)


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=5),
    data=st.data(),
    dtype=st.sampled_from(("float32", "float64", "int32")),
    req=st.sampled_from(("write", "add")),
)
def test_broadcast_to_random_shapes(shape, data, dtype, req):
    x_shape = tuple(d if data.draw(st.booleans()) else 1 for d in shape)
    target = tuple(0 if (data.draw(st.booleans()) and x == d) else d
                   for x, d in zip(x_shape, shape))  # fmt: skip
    x = np.random.default_rng(8).uniform(-3, 3, x_shape).round(2).astype(dtype)
    check(REGISTRY["broadcast_to"], {"shape": target}, [x], req)
    axes = tuple(i for i, (x, d) in enumerate(zip(x_shape, shape)) if x == 1)
    sizes = tuple(shape[i] for i in axes)
    check(REGISTRY["broadcast_axis"], {"axis": axes, "size": sizes}, [x], req)


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    data=st.data(),
    name=st.sampled_from(REDUCE_NAMES),
    keepdims=st.booleans(),
    dtype=st.sampled_from(("float32", "float64", "int32")),
    req=st.sampled_from(("write", "add")),
)
def test_reduce_random_axes(shape, data, name, keepdims, dtype, req):
    nd = len(shape)
    axes = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda a: a % nd, max_size=nd))
    params = {"axis": tuple(axes), "keepdims": keepdims}
    if name != "norm":
        params["exclude"] = data.draw(st.booleans())
    else:
        params["ord"] = data.draw(st.sampled_from((1, 2)))
    lo, hi = (0.5, 1.5) if name == "prod" else (-3.0, 3.0)
    x = np.random.default_rng(9).uniform(lo, hi, shape)
    if dtype == "int32":
        x = np.round(x)
    check(REGISTRY[name], params, [x.astype(dtype)], req)


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    data=st.data(),
    name=st.sampled_from(ARG_NAMES),
    keepdims=st.booleans(),
    dtype=st.sampled_from(("float32", "float64", "int32")),
)
def test_arg_reduce_random_axes(shape, data, name, keepdims, dtype):
    nd = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
    x = np.random.default_rng(10).integers(-3, 4, shape).astype(dtype)  # many ties
    check(REGISTRY[name], {"axis": axis, "keepdims": keepdims}, [x])


def test_large_reductions_match_numpy():
    """Long runs (the vectorised paths and the blocked kept-innermost path)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((37, 5003)).astype("float32")
    for name in ("sum", "mean", "max", "min", "norm", "argmax", "argmin"):
        for axis in (0, 1, None):
            check(REGISTRY[name], {} if axis is None else {"axis": axis}, [x])
    y = rng.standard_normal((3, 4500, 2)).astype("float64")
    for name in ("sum", "max", "argmin"):
        check(REGISTRY[name], {"axis": 1}, [y])
