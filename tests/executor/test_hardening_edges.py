"""The executor's and NDArray's edges: non-contiguous inputs, huge shapes, Reshape's element
count, backward before forward, misspelled grad_req names, wrong arguments (each an NNSymError
naming what is wrong, never a raw numpy/cffi error or a silent wrong value)."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError, OperatorParamError, ShapeError
from nnsym.executor.executor import BindError, BindShapeError, ExecutorStateError
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.passes.manager import run_passes

# ---------------------------------------------------------------------------------------------
# Item 2: arrays that are not one C-ordered block are copied where they enter


STRIDED = [
    pytest.param(lambda b: b[::-1], id="reversed"),
    pytest.param(lambda b: b[::2], id="step-2"),
    pytest.param(lambda b: b.reshape(4, 6).T, id="transposed"),
    pytest.param(lambda b: b.reshape(4, 6)[:, 1:4], id="column-slice"),
    pytest.param(lambda b: b.astype(">f4"), id="big-endian"),
]


def _base() -> np.ndarray:
    return np.arange(24, dtype=np.float32) - 7.5


@pytest.mark.parametrize("view", STRIDED)
def test_ndarray_of_a_strided_view_holds_the_views_values(view):
    v = view(_base())
    a = nd.NDArray(v)
    assert a._data.flags.c_contiguous and a._data.dtype.isnative
    np.testing.assert_array_equal(a.asnumpy(), v)
    # imperative calls (the Python path and the C fast path) read the right values
    for _ in range(3):
        np.testing.assert_array_equal(nd.relu(a).asnumpy(), np.maximum(v, 0))
    np.testing.assert_array_equal((a * 2.0).asnumpy(), v * 2.0)


@pytest.mark.parametrize("view", STRIDED)
def test_bound_graph_reads_a_strided_view_correctly(view):
    v = view(_base())
    x = sym.Variable("x")
    exe = (sym.exp(x) * 2.0).bind(None, {"x": nd.NDArray(v)}, grad_req="null")
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), np.exp(v) * 2.0, rtol=1e-6)
    # forward(**kwargs) with strided numpy and NDArray values
    w = view(_base() * 0.5)
    np.testing.assert_allclose(exe.forward(x=w)[0].asnumpy(), np.exp(w) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(exe.forward(x=nd.NDArray(w))[0].asnumpy(), np.exp(w) * 2.0,
                               rtol=1e-6)


def test_read_only_array_is_copied_so_kernels_can_write():
    v = _base()
    v.flags.writeable = False
    a = nd.NDArray(v)
    a[:] = 1.0
    np.testing.assert_array_equal(a.asnumpy(), np.ones(24, np.float32))
    np.testing.assert_array_equal(v, _base())  # the caller's array is untouched


def test_copies_and_assignment_from_strided_views():
    v = _base()[::-3]
    dst = nd.zeros(v.shape)
    nd.NDArray(v).copyto(dst)
    np.testing.assert_array_equal(dst.asnumpy(), v)
    dst[:] = v[::-1]
    np.testing.assert_array_equal(dst.asnumpy(), v[::-1])
    np.testing.assert_array_equal(nd.array(v).asnumpy(), v)


def test_backward_with_strided_head_and_arguments():
    x = sym.Variable("x")
    base = np.linspace(-1, 1, 24, dtype=np.float32)
    v = base.reshape(4, 6).T  # (6, 4), not C-contiguous
    exe = sym.tanh(x).bind(None, {"x": nd.NDArray(v)}, args_grad={"x": nd.zeros(v.shape)})
    exe.forward(is_train=True)
    head = (base[::-1] * 3.0).reshape(4, 6).T
    exe.backward(nd.NDArray(head))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), head * (1 - np.tanh(v) ** 2),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Item 6: huge shapes are ShapeErrors (at parsing, inference or allocation), never raw numpy
# errors; dims and element counts beyond int64 are refused


def test_simple_bind_of_a_shape_numpy_cannot_allocate_names_the_array_and_its_bytes():
    x = sym.Variable("x")
    y = sym.relu(x, name="act")
    for req in ("write", "null"):
        with pytest.raises(BindShapeError, match=r"'x'.*\(1099511627776, 20\) float32: "
                                                 r"87960930222080 bytes"):
            y.simple_bind(x=(2**40, 20), grad_req=req)
    # 2**62 elements fit in int64, their float32 bytes do not
    with pytest.raises(BindShapeError, match="18446744073709551616 bytes"):
        y.simple_bind(x=(2**31, 2**31))


def test_bind_of_a_graph_whose_internal_entry_cannot_be_allocated_names_the_node():
    x = sym.Variable("x")
    big = sym.broadcast_to(x, shape=(2**22, 2**22, 4), name="bigb")
    y = sym.sum(sym.exp(big, name="e"), name="s")
    with pytest.raises(BindShapeError, match=r"cannot bind: memory block \d+ for the outputs "
                                             r"of nodes \[.*'bigb'.*281474976710656 bytes"):
        y.bind(None, {"x": nd.ones((1, 1, 1))}, grad_req="null")


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        ({"x": (1, 2**64)}, "does not fit in int64"),
        ({"x": (2**63,)}, "does not fit in int64"),
        ({"x": (2**40, 2**30)}, "1180591620717411303424 elements do not fit in int64"),
    ],
)
def test_shapes_beyond_int64_are_refused_at_inference(shapes, match):
    y = sym.relu(sym.Variable("x"))
    with pytest.raises(ShapeError, match=match):
        y.infer_shape(**shapes)
    with pytest.raises(ShapeError, match=match):
        y.simple_bind(**shapes)


def test_inferred_shapes_beyond_int64_name_the_node():
    x = sym.Variable("x")
    fc = sym.FullyConnected(x, num_hidden=2**40, name="fc")
    with pytest.raises(ShapeError, match=r"node 'fc' \(FullyConnected\): output 0: .*"
                                         r"elements do not fit in int64"):
        fc.infer_shape(x=(2**30, 4))
    b = sym.broadcast_to(x, shape=(2**40, 2**40), name="bc")
    with pytest.raises(ShapeError, match="node 'bc'"):
        b.infer_shape(x=(1, 1))
    with pytest.raises(ShapeError, match="node 'z' \\(null\\): bad __shape__"):
        sym.relu(sym.Variable("z", shape=(2**63,))).infer_shape()
    with pytest.raises(ShapeError, match="node 'z'"):
        sym.relu(sym.Variable("z", shape=(2**62, 4))).infer_shape()


def test_byte_size_beyond_int64_is_refused_when_the_dtype_is_known():
    y = sym.relu(sym.Variable("x"), name="r")
    idx = y.index
    seeds_s: list = [None] * idx.num_entries
    seeds_t: list = [None] * idx.num_entries
    seeds_s[0], seeds_t[0] = (2**61,), np.dtype("float64")  # the count fits, 2**64 bytes not
    g = y.graph(shape=tuple(seeds_s), dtype=tuple(seeds_t))
    with pytest.raises(ShapeError, match=r"node 'x'.*2305843009213693952 elements, "
                                         r"18446744073709551616 bytes"):
        run_passes(g, [infer_shape, infer_type])
    with pytest.raises(BindShapeError, match="'x'"):
        y.simple_bind(x=(2**61,), type_dict={"x": "float64"})


@pytest.mark.parametrize("make", [nd.zeros, nd.empty, nd.ones, lambda s: nd.full(s, 2.0)])
def test_nd_creation_refuses_huge_shapes(make):
    with pytest.raises(ShapeError, match="does not fit in int64"):
        make((1, 2**64))
    with pytest.raises(ShapeError, match="elements do not fit in int64"):
        make((2**62, 4))
    with pytest.raises(ShapeError, match="87960930222080 bytes"):
        make((2**40, 20))
    with pytest.raises(ShapeError, match="18446744073709551616 bytes"):
        make((2**31, 2**31))
    np.testing.assert_array_equal(make((2, 3)).shape, (2, 3))


def test_shape_params_beyond_int64_are_refused():
    x = sym.Variable("x")
    with pytest.raises(OperatorParamError, match="int64"):
        sym.Reshape(x, shape=(2**64,))
    with pytest.raises(OperatorParamError, match="int64"):
        sym.broadcast_to(x, shape=(1, 2**63))
    with pytest.raises(OperatorParamError, match="int64"):
        nd.broadcast_to(nd.ones((1, 1)), shape=(1, 2**63))


# ---------------------------------------------------------------------------------------------
# Item 7: Reshape keeps the element count


@pytest.mark.parametrize("shape", [(-1, 5), (3, 3, 3), (1, 1, 1), (), (5, -1), (2, 0)])
@pytest.mark.parametrize("reverse", [False, True])
def test_reshape_to_another_element_count_raises_in_inference(shape, reverse):
    x = sym.Variable("x")
    r = sym.Reshape(x, shape=shape, reverse=reverse, name="resh")
    with pytest.raises(ShapeError, match="node 'resh' \\(Reshape\\)"):
        r.infer_shape(x=(4, 6))
    with pytest.raises(ShapeError, match="resh"):
        r.simple_bind(x=(4, 6))
    with pytest.raises(ShapeError):
        nd.reshape(nd.ones((4, 6)), shape=shape, reverse=reverse)


@pytest.mark.parametrize(
    ("shape", "reverse", "want"),
    [
        ((-1, 4), False, (6, 4)),
        ((-1, 4), True, (6, 4)),
        ((0, -1), False, (2, 12)),
        ((-2, -1), False, (2, 3, 4, 1)),
        ((-1, -2), True, (1, 2, 3, 4)),
        ((-3, -1), False, (6, 4)),
        ((-4, 1, 2, -2), False, (1, 2, 3, 4)),
        ((0, -4, -1, 3, 0), False, (2, 1, 3, 4)),
        ((-1, 0), True, (6, 4)),
    ],
)
def test_reshape_special_values_give_numpys_values(shape, reverse, want):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = nd.reshape(nd.array(a), shape=shape, reverse=reverse)
    np.testing.assert_array_equal(out.asnumpy(), a.reshape(want))
    x = sym.Variable("x")
    exe = sym.Reshape(x, shape=shape, reverse=reverse).bind(None, {"x": nd.array(a)},
                                                             args_grad={"x": nd.zeros(a.shape)})
    np.testing.assert_array_equal(exe.forward(is_train=True)[0].asnumpy(), a.reshape(want))
    exe.backward(nd.array(np.ones(want, np.float32) * 3.0))
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), np.full(a.shape, 3.0))


def test_reshape_output_given_downstream_must_fit_the_input():
    x, y = sym.Variable("x"), sym.Variable("y")
    # the input's unknown dim cannot be filled from a 25-element output
    net = sym.Reshape(x, shape=(5, 5), name="resh") + y
    with pytest.raises(ShapeError, match="resh"):
        net.infer_shape(x=(0, 3, 4), y=(5, 5))


# ---------------------------------------------------------------------------------------------
# Item 8: backward before forward


def test_backward_before_forward_raises():
    x = sym.Variable("x")
    exe = sym.tanh(x).simple_bind(x=(2, 3))
    with pytest.raises(ExecutorStateError, match="before forward"):
        exe.backward(nd.ones((2, 3)))
    assert isinstance(ExecutorStateError("x"), NNSymError)
    # after a forward, backward runs and gives real gradients
    exe.arg_dict["x"][:] = 0.5
    exe.forward(is_train=True)
    exe.backward(nd.ones((2, 3)))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 1 - np.tanh(0.5) ** 2, rtol=1e-6)


def test_backward_after_inference_forward_runs_as_in_mxnet():
    # MXNet 1.9.1 runs backward after forward(is_train=False) (no error): so does nnsym.
    x = sym.Variable("x")
    exe = sym.tanh(x).simple_bind(x=(3,))
    exe.arg_dict["x"][:] = np.array([0.1, -0.2, 0.3], np.float32)
    exe.forward(is_train=False)
    exe.backward(nd.array([1.0, 2.0, 3.0]))
    want = np.array([1.0, 2.0, 3.0]) * (1 - np.tanh([0.1, -0.2, 0.3]) ** 2)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), want, rtol=1e-6)


def test_backward_before_forward_on_a_reshaped_executor_raises():
    x = sym.Variable("x")
    exe = sym.tanh(x).simple_bind(x=(4, 3))
    exe.forward(is_train=True)
    small = exe.reshape(x=(2, 3))
    with pytest.raises(ExecutorStateError):
        small.backward(nd.ones((2, 3)))


# ---------------------------------------------------------------------------------------------
# Item 10: grad_req names


def _fc():
    return sym.FullyConnected(sym.Variable("data"), num_hidden=3, name="fc")


def test_misspelled_grad_req_name_is_reported():
    net = _fc()
    with pytest.raises(BindError, match=r"unknown argument name\(s\) \['fc_wieght'\]") as e:
        net.simple_bind(data=(2, 4), grad_req={"fc_wieght": "write"})
    assert "fc_weight" in str(e.value)  # the arguments are listed
    args = {"data": nd.ones((2, 4)), "fc_weight": nd.ones((3, 4)), "fc_bias": nd.ones(3)}
    grads = {k: nd.zeros(v.shape) for k, v in args.items()}
    with pytest.raises(BindError, match="fc_bais"):
        net.bind(None, args, args_grad=grads, grad_req={"fc_weight": "write", "fc_bais": "add"})
    with pytest.raises(BindError, match="grad_req"):
        net.bind(None, args, args_grad=grads, grad_req=5)
    # the right names still work; unlisted arguments get no gradient (their given arrays are
    # kept untouched, as MXNet keeps them)
    exe = net.bind(None, args, args_grad=grads, grad_req={"fc_weight": "write"})
    assert exe.grad_dict["fc_bias"] is grads["fc_bias"]
    exe.forward(is_train=True)
    exe.backward(nd.ones((2, 3)))
    assert not grads["fc_bias"].asnumpy().any() and grads["fc_weight"].asnumpy().all()


# ---------------------------------------------------------------------------------------------
# Item 11: wrong arguments at the executor's edges


def _args():
    return {"data": nd.ones((2, 4)), "fc_weight": nd.ones((3, 4)), "fc_bias": nd.ones(3)}


@pytest.mark.parametrize(
    ("kw", "cls", "match"),
    [
        ({"args": [nd.ones((2, 4))]}, BindError, "1 arrays given for 3"),
        ({"args": {**_args(), "fc_wieght": nd.ones((3, 4))}}, BindError, "fc_wieght"),
        ({"args": {**_args(), "data": np.ones((2, 4), np.float32)}}, BindError,
         "'data' must be an NDArray, got a numpy.ndarray"),
        ({"args": {**_args(), "fc_bias": "zero"}}, BindError, "'fc_bias' must be an NDArray"),
        ({"args": nd.ones((2, 4))}, BindError, "expected a list of NDArrays or a dict"),
        ({"args": [None, *list(_args().values())[1:]]}, BindError, "`data` is missing"),
        ({"args": {**_args(), "fc_weight": nd.ones((3, 5))}}, ShapeError, "fc"),
        ({"args_grad": [nd.ones((2, 4))]}, BindError, "args_grad: 1 arrays given for 3"),
        ({"args_grad": {"fc_weight": np.zeros((3, 4))}}, BindError,
         "args_grad: 'fc_weight' must be an NDArray"),
        ({"args_grad": {"fc_weight": nd.zeros((4, 3))}}, BindShapeError,
         "gradient array for 'fc_weight' has shape"),
        ({"args_grad": {"fc_weight": nd.zeros((3, 4), dtype="float64")}}, BindError,
         "float64; the argument needs"),
        ({"args_grad": {"fc_wieght": nd.zeros((3, 4))}}, BindError, "fc_wieght"),
        ({"aux_states": [nd.ones(1)]}, BindError, "aux_states: 1 arrays given for 0"),
        ({"aux_states": {"moving_mean": nd.ones(1)}}, BindError, "moving_mean"),
    ],
    ids=str,
)
def test_bind_rejects_wrong_arrays_with_nnsym_errors(kw, cls, match):
    kw = {"args": _args(), **kw}
    with pytest.raises(cls, match=match):
        _fc().bind(None, **kw)


def test_bind_errors_are_also_the_builtin_errors_mxnet_raises():
    # MXNet raises TypeError (non-NDArray values) or ValueError (wrong lengths): both catch it.
    with pytest.raises(TypeError):
        _fc().bind(None, {**_args(), "data": np.ones((2, 4))})
    with pytest.raises(ValueError):
        _fc().bind(None, [nd.ones((2, 4))])


def test_bind_with_wrong_aux_shape_or_dtype_names_the_node():
    data = sym.Variable("data")
    bn = sym.BatchNorm(data, name="bn")
    args = {"data": nd.ones((2, 3)), "bn_gamma": nd.ones(3), "bn_beta": nd.zeros(3)}
    with pytest.raises(ShapeError, match="bn"):
        bn.bind(None, args, aux_states={"bn_moving_mean": nd.zeros(4),
                                        "bn_moving_var": nd.ones(3)})
    with pytest.raises(NNSymError, match="bn"):
        bn.bind(None, {**args, "bn_gamma": nd.ones(3, dtype="int32")},
                aux_states={"bn_moving_mean": nd.zeros(3), "bn_moving_var": nd.ones(3)})


def test_forward_keyword_errors():
    exe = _fc().simple_bind(data=(2, 4))
    with pytest.raises(BindError, match="Unknown argument 'dta'"):
        exe.forward(dta=nd.ones((2, 4)))
    with pytest.raises(TypeError, match="Unknown argument"):  # MXNet's TypeError still catches
        exe.forward(dta=nd.ones((2, 4)))
    with pytest.raises(BindShapeError, match="Argument data, need: \\(2, 4\\)"):
        exe.forward(data=nd.ones((3, 4)))
    with pytest.raises(BindError, match="'data' must be an NDArray or a numpy array, got a str"):
        exe.forward(data="ones")
    with pytest.raises(BindError, match="got a list"):
        exe.forward(data=[[1.0] * 4] * 2)
    # numpy arrays are accepted (MXNet accepts them) and other dtypes are cast
    exe.arg_dict["fc_weight"][:] = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe.arg_dict["fc_bias"][:] = 0.0
    x = np.arange(8, dtype=np.float64).reshape(2, 4)
    out = exe.forward(data=x)[0].asnumpy()
    np.testing.assert_allclose(out, x @ np.arange(12).reshape(3, 4).T, rtol=1e-6)


def test_backward_head_gradient_errors():
    x = sym.Variable("x")
    exe = sym.tanh(x).simple_bind(x=(2, 3))
    exe.forward(is_train=True)
    with pytest.raises(BindError, match="1 outputs"):
        exe.backward([nd.ones((2, 3)), nd.ones((2, 3))])
    with pytest.raises(BindShapeError, match="has shape \\(3, 3\\), the output has \\(2, 3\\)"):
        exe.backward(nd.ones((3, 3)))
    with pytest.raises(BindError, match=r"out_grads must be an NDArray.*got a str"):
        exe.backward("ones")
    with pytest.raises(BindError, match=r"got a numpy\.ndarray"):
        exe.backward(np.ones((2, 3), np.float32))
    with pytest.raises(BindError, match=r"head gradient for 'tanh.*_output' must be an NDArray"):
        exe.backward([np.ones((2, 3), np.float32)])
    with pytest.raises(BindError, match="unknown output"):
        exe.backward({"nope": nd.ones((2, 3))})
    # a dict by output name and a list both work
    name = exe._symbol.list_outputs()[0]
    exe.backward({name: nd.ones((2, 3)) * 2.0})
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2.0, rtol=1e-6)
