"""One small function per nnsym operator, writing its inference form as ONNX (opset 18) nodes.

Each converter is ``fn(x, node, ins, outs)``: ``x`` is the ``Exporter`` (inferred shapes and
dtypes, ``add``/``const``), ``ins`` the ONNX names of the node's inputs and ``outs`` the names its
visible outputs must get. ``CONVERTERS`` maps MXNet operator names to them; an operator missing
from it cannot be exported and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.ir.graph import Node
from nnsym.onnx._lazy import OnnxError, onnx
from nnsym.onnx.exporter import Exporter
from nnsym.ops.shape.join import split_v2_bounds

Converter = Callable[[Exporter, Node, list[str], list[str]], None]
CONVERTERS: dict[str, Converter] = {}

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def _reg(*names: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return deco


def _fail(node: Node, why: str) -> OnnxError:
    return OnnxError(f"node '{node.name}' ({node.op_name}): {why}; it cannot be exported to ONNX")


def _in_shape(x: Exporter, node: Node, k: int = 0) -> tuple[int, ...]:
    return x.shape(node.inputs[k])


def _in_dtype(x: Exporter, node: Node, k: int = 0) -> np.dtype:
    return x.dtype(node.inputs[k])


def _scalar(x: Exporter, node: Node, v: float, k: int = 0) -> str:
    return x.const(v, _in_dtype(x, node, k), hint=f"{node.name}_scalar")


def _ints(v: Sequence[int]) -> list[int]:
    return [int(a) for a in v]


def _axes(x: Exporter, axes: Sequence[int], hint: str = "axes") -> str:
    return x.const(_ints(axes), np.int64, hint=hint)


def _reshape(x: Exporter, data: str, shape: Sequence[int], out: str | None = None,
             codes: bool = False) -> str:
    """Reshape to ``shape``: concrete dims, or with ``codes`` ONNX's 0 (copy) and -1 (infer)."""
    zero = not codes and 0 in shape and -1 not in shape
    return x.add1("Reshape", [data, x.const(_ints(shape), hint="shape")], out,
                  allowzero=1 if zero else None)


def _as_out_shape(x: Exporter, node: Node, y: str, out: str, k: int = 0) -> None:
    """``y`` reshaped to the node's inferred output shape (MXNet has no 0-d results)."""
    _reshape(x, y, x.out_shape(node, k), out)


def _float_in(x: Exporter, node: Node, name: str) -> str:
    """Integer inputs computed in float64 where ONNX has float kernels only."""
    return x.cast(name, np.float64) if _in_dtype(x, node).kind in "iub" else name


# --- elementwise ----------------------------------------------------------------------------------
UNARY = {
    "abs": "Abs", "negative": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tan": "Tan", "arcsin": "Asin",
    "arccos": "Acos", "arctan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "tanh": "Tanh",
    "arcsinh": "Asinh", "arccosh": "Acosh", "arctanh": "Atanh", "floor": "Floor",
    "ceil": "Ceil", "rint": "Round", "sign": "Sign", "erf": "Erf", "sigmoid": "Sigmoid",
    "relu": "Relu", "softsign": "Softsign", "_copy": "Identity", "BlockGrad": "Identity",
    "make_loss": "Identity", "MakeLoss": "Identity",
    "LinearRegressionOutput": "Identity", "MAERegressionOutput": "Identity",
    "LogisticRegressionOutput": "Sigmoid", "SVMOutput": "Identity", "cast_storage": "Identity",
}


def _unary(op_type: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        x.add(op_type, ins[:1], outs)
    return conv


for _name, _op in UNARY.items():
    CONVERTERS[_name] = _unary(_op)


def _integral_identity(conv: Converter) -> Converter:
    """Rounding is the identity on integers (ONNX's Floor/Ceil/Round take floats only)."""
    def wrapped(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        if _in_dtype(x, node).kind in "iub":
            x.add("Identity", ins[:1], outs)
        else:
            conv(x, node, ins, outs)
    return wrapped


for _name in ("floor", "ceil", "rint"):
    CONVERTERS[_name] = _integral_identity(CONVERTERS[_name])


@_reg("Dropout")
def _dropout(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    if node.params.mode == "always" and node.params.p > 0:
        raise _fail(node, "mode 'always' (dropout at inference)")
    x.add("Identity", ins[:1], outs[:1])
    if len(outs) > 1:
        raise _fail(node, "the mask output")


def _then_scale(factor: float, first: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        y = x.add1(first, ins[:1])
        x.add("Mul", [y, _scalar(x, node, factor)], outs)
    return conv


CONVERTERS["log2"] = _then_scale(1 / math.log(2), "Log")
CONVERTERS["log10"] = _then_scale(1 / math.log(10), "Log")
CONVERTERS["degrees"] = _then_scale(180 / math.pi, "Identity")
CONVERTERS["radians"] = _then_scale(math.pi / 180, "Identity")


@_reg("square")
def _square(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Mul", [ins[0], ins[0]], outs)


@_reg("rsqrt")
def _rsqrt(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Reciprocal", [x.add1("Sqrt", ins)], outs)


@_reg("log1p")
def _log1p(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Log", [x.add1("Add", [ins[0], _scalar(x, node, 1.0)])], outs)


@_reg("expm1")
def _expm1(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Sub", [x.add1("Exp", ins), _scalar(x, node, 1.0)], outs)


def _signed(x: Exporter, node: Node, a: str, body: Callable[[str], str],
            out: str | None = None) -> str:
    """sign(a) * body(|a|)."""
    return x.add1("Mul", [x.add1("Sign", [a]), body(x.add1("Abs", [a]))], out)


@_reg("round")
@_integral_identity
def _round(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    # MXNet rounds halves away from zero; ONNX Round rounds them to even
    _signed(x, node, ins[0],
            lambda a: x.add1("Floor", [x.add1("Add", [a, _scalar(x, node, 0.5)])]), outs[0])


@_reg("trunc", "fix")
@_integral_identity
def _trunc(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _signed(x, node, ins[0], lambda a: x.add1("Floor", [a]), outs[0])


@_reg("cbrt")
def _cbrt(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _signed(x, node, ins[0], lambda a: x.add1("Pow", [a, _scalar(x, node, 1 / 3)]), outs[0])


@_reg("rcbrt")
def _rcbrt(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    c = _signed(x, node, ins[0], lambda a: x.add1("Pow", [a, _scalar(x, node, 1 / 3)]))
    x.add("Reciprocal", [c], outs)


@_reg("logical_not")
def _logical_not(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    b = x.add1("Not", [x.cast(ins[0], np.bool_)])
    x.cast(b, x.out_dtype(node), outs[0])


@_reg("hard_sigmoid")
def _hard_sigmoid(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    x.add("HardSigmoid", ins, outs, alpha=float(p.alpha), beta=float(p.beta))


@_reg("clip")
def _clip(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    lo, hi = _scalar(x, node, p.a_min), _scalar(x, node, p.a_max)
    if p.a_min > p.a_max:  # MXNet tests a_max first; crossed bounds differ from Clip
        low = x.add1("Where", [x.add1("Less", [ins[0], lo]), lo, ins[0]])
        x.add("Where", [x.add1("Greater", [ins[0], hi]), hi, low], outs)
    else:
        x.add("Clip", [ins[0], lo, hi], outs)


@_reg("_contrib_quadratic")
def _quadratic(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    dt = _in_dtype(x, node)
    v = _float_in(x, node, ins[0])
    fdt = np.float64 if dt.kind in "iub" else dt
    ax = x.add1("Mul", [v, x.const(p.a, fdt)])
    axb = x.add1("Add", [ax, x.const(p.b, fdt)])
    y = x.add1("Add", [x.add1("Mul", [axb, v]), x.const(p.c, fdt)],
               None if dt.kind in "iub" else outs[0])
    if dt.kind in "iub":
        x.cast(y, dt, outs[0])


@_reg("smooth_l1")
def _smooth_l1(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    s2 = float(node.params.scalar) ** 2
    a = x.add1("Abs", ins)
    small = x.add1("Less", [a, _scalar(x, node, 1.0 / s2)])
    quad = x.add1("Mul", [x.add1("Mul", [ins[0], ins[0]]), _scalar(x, node, 0.5 * s2)])
    lin = x.add1("Sub", [a, _scalar(x, node, 0.5 / s2)])
    x.add("Where", [small, quad, lin], outs)


# binary: same for elemwise_*, broadcast_* and the underscore forms
BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "power": "Pow",
          "maximum": "Max", "minimum": "Min"}
COMPARE = {"equal": ("Equal", False), "not_equal": ("Equal", True), "greater": ("Greater", False),
           "greater_equal": ("GreaterOrEqual", False), "lesser": ("Less", False),
           "lesser_equal": ("LessOrEqual", False)}
LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


def _binary(op_type: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        x.add(op_type, ins[:2], outs)
    return conv


def _compare(op_type: str, negate: bool) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        b = x.add1(op_type, ins[:2])
        if negate:
            b = x.add1("Not", [b])
        x.cast(b, x.out_dtype(node), outs[0])
    return conv


def _logical(op_type: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        b = x.add1(op_type, [x.cast(ins[0], np.bool_), x.cast(ins[1], np.bool_)])
        x.cast(b, x.out_dtype(node), outs[0])
    return conv


def _mod_of(x: Exporter, node: Node, a: str, b: str, out: str | None = None) -> str:
    if x.out_dtype(node).kind in "iu":
        return x.add1("Mod", [a, b], out, fmod=0)
    # MXNet's mod takes the divisor's sign (Python's %): a - floor(a / b) * b
    q = x.add1("Floor", [x.add1("Div", [a, b])])
    return x.add1("Sub", [a, x.add1("Mul", [q, b])], out)


def _hypot_of(x: Exporter, node: Node, a: str, b: str, out: str) -> str:
    dt = x.out_dtype(node)
    if dt.kind in "iub":
        a, b = x.cast(a, np.float64), x.cast(b, np.float64)
    s = x.add1("Add", [x.add1("Mul", [a, a]), x.add1("Mul", [b, b])])
    r = x.add1("Sqrt", [s], None if dt.kind in "iub" else out)
    return x.cast(r, dt, out) if dt.kind in "iub" else r


for _k, _op in BINARY.items():
    for _n in (f"elemwise_{_k}", f"broadcast_{_k}", f"_{_k}"):
        CONVERTERS[_n] = _binary(_op)
CONVERTERS["broadcast_plus"] = CONVERTERS["broadcast_add"]
CONVERTERS["broadcast_minus"] = CONVERTERS["broadcast_sub"]
for _k, (_op, _neg) in COMPARE.items():
    CONVERTERS[f"broadcast_{_k}"] = CONVERTERS[f"_{_k}"] = _compare(_op, _neg)
for _k, _op in LOGICAL.items():
    CONVERTERS[f"broadcast_{_k}"] = CONVERTERS[f"_{_k}"] = _logical(_op)


@_reg("_mod", "broadcast_mod")
def _mod(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _mod_of(x, node, ins[0], ins[1], outs[0])


@_reg("_hypot", "broadcast_hypot")
def _hypot(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _hypot_of(x, node, ins[0], ins[1], outs[0])


# scalar forms: (ONNX op, scalar on the right?)
SCALAR = {"_plus_scalar": ("Add", True), "_minus_scalar": ("Sub", True),
          "_rminus_scalar": ("Sub", False), "_mul_scalar": ("Mul", True),
          "_div_scalar": ("Div", True), "_rdiv_scalar": ("Div", False),
          "_power_scalar": ("Pow", True), "_rpower_scalar": ("Pow", False),
          "_maximum_scalar": ("Max", True), "_minimum_scalar": ("Min", True)}


def _scalar_input(x: Exporter, node: Node, data: str) -> tuple[str, np.dtype]:
    """The data in the dtype the op computes in (an integer array with a non-integer scalar
    is promoted, as MXNet does) and that dtype."""
    dt = x.out_dtype(node)
    if dt.kind == "f" and _in_dtype(x, node) != dt:
        return x.cast(data, dt), dt
    return data, _in_dtype(x, node)


def _scalar_op(op_type: str, right: bool) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        data, dt = _scalar_input(x, node, ins[0])
        c = x.const(node.params.scalar, dt, hint=f"{node.name}_scalar")
        x.add(op_type, [data, c] if right else [c, data], outs)
    return conv


def _scalar_compare(op_type: str, negate: bool) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        data, dt = _scalar_input(x, node, ins[0])
        b = x.add1(op_type, [data, x.const(node.params.scalar, dt, hint=f"{node.name}_scalar")])
        if negate:
            b = x.add1("Not", [b])
        x.cast(b, x.out_dtype(node), outs[0])
    return conv


def _scalar_logical(op_type: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        c = x.const(bool(node.params.scalar), np.bool_)
        b = x.add1(op_type, [x.cast(ins[0], np.bool_), c])
        x.cast(b, x.out_dtype(node), outs[0])
    return conv


for _n, (_op, _right) in SCALAR.items():
    CONVERTERS[_n] = _scalar_op(_op, _right)
for _k, (_op, _neg) in COMPARE.items():
    CONVERTERS[f"_{_k}_scalar"] = _scalar_compare(_op, _neg)
for _k, _op in LOGICAL.items():
    CONVERTERS[f"_{_k}_scalar"] = _scalar_logical(_op)


@_reg("_mod_scalar")
def _mod_scalar(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    data, dt = _scalar_input(x, node, ins[0])
    _mod_of(x, node, data, x.const(node.params.scalar, dt), outs[0])


@_reg("_rmod_scalar")
def _rmod_scalar(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    data, dt = _scalar_input(x, node, ins[0])
    _mod_of(x, node, x.const(node.params.scalar, dt), data, outs[0])


@_reg("_hypot_scalar")
def _hypot_scalar(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    data, dt = _scalar_input(x, node, ins[0])
    _hypot_of(x, node, data, x.const(node.params.scalar, dt), outs[0])


@_reg("add_n", "ElementWiseSum")
def _add_n(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    if _in_dtype(x, node).kind in "iub" and len(ins) > 1:  # ONNX Sum is float-only
        acc = ins[0]
        for k, name in enumerate(ins[1:]):
            acc = x.add1("Add", [acc, name], outs[0] if k == len(ins) - 2 else None)
        return
    x.add("Sum", ins, outs)


@_reg("where")
def _where(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    cond = x.cast(ins[0], np.bool_)
    cs, xs = _in_shape(x, node, 0), _in_shape(x, node, 1)
    if len(cs) == 1 and len(xs) > 1:  # MXNet: a 1-D condition picks whole rows
        cond = _reshape(x, cond, [cs[0]] + [1] * (len(xs) - 1))
    x.add("Where", [cond, ins[1], ins[2]], outs)


@_reg("Cast")
def _cast(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.cast(ins[0], x.out_dtype(node), outs[0])


@_reg("zeros_like", "ones_like")
def _fill_like(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    dt = x.out_dtype(node)
    value = np.array([1 if node.op_name == "ones_like" else 0], dtype=dt)
    x.add("ConstantOfShape", [x.add1("Shape", ins)], outs,
          value=onnx().numpy_helper.from_array(value))


@_reg("shape_array")
def _shape_array(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Shape", ins, outs)


@_reg("size_array")
def _size_array(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _reshape(x, x.add1("Size", ins), [1], outs[0])


# --- neural-network layers ------------------------------------------------------------------------
@_reg("FullyConnected")
def _fully_connected(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    data = ins[0]
    if p.flatten:
        if len(shape) != 2:
            data = x.add1("Flatten", [data], axis=1)
        x.add("Gemm", [data, ins[1]] + ([] if p.no_bias else [ins[2]]), outs, transB=1)
        return
    wt = x.add1("Transpose", [ins[1]], perm=[1, 0])
    if p.no_bias:
        x.add("MatMul", [data, wt], outs)
    else:
        x.add("Add", [x.add1("MatMul", [data, wt]), ins[2]], outs)


def _spatial(v: Sequence[int], nd: int, default: int) -> list[int]:
    return _ints(v) if len(v) else [default] * nd


@_reg("Convolution")
def _convolution(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if p.layout not in (None, "NCW", "NCHW", "NCDHW"):
        raise _fail(node, f"layout {p.layout} (ONNX Conv is channels-first)")
    nd = len(p.kernel)
    pad = _spatial(p.pad, nd, 0)
    x.add("Conv", ins[:2] + ([] if p.no_bias else [ins[2]]), outs,
          kernel_shape=_ints(p.kernel), strides=_spatial(p.stride, nd, 1),
          dilations=_spatial(p.dilate, nd, 1), pads=pad + pad, group=int(p.num_group))


@_reg("Deconvolution")
def _deconvolution(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if p.layout not in (None, "NCW", "NCHW", "NCDHW"):
        raise _fail(node, f"layout {p.layout} (ONNX ConvTranspose is channels-first)")
    nd = len(p.kernel)
    attrs: dict[str, Any] = {
        "kernel_shape": _ints(p.kernel), "strides": _spatial(p.stride, nd, 1),
        "dilations": _spatial(p.dilate, nd, 1), "group": int(p.num_group)}
    if len(p.target_shape):
        attrs["output_shape"] = list(x.out_shape(node)[2:])
    else:
        pad = _spatial(p.pad, nd, 0)
        attrs["pads"] = pad + pad
        attrs["output_padding"] = _spatial(p.adj, nd, 0)
    x.add("ConvTranspose", ins[:2] + ([] if p.no_bias else [ins[2]]), outs, **attrs)


@_reg("BatchNorm")
def _batch_norm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    axis = p.axis % len(shape)
    gamma = ins[1]
    if p.fix_gamma:  # MXNet uses gamma = 1 whatever the stored value
        gamma = x.const(np.ones(shape[axis]), _in_dtype(x, node, 1), hint=f"{node.name}_gamma1")
    data = ins[0]
    perm = None
    if axis != 1:
        perm = [0, axis] + [i for i in range(1, len(shape)) if i != axis]
        data = x.add1("Transpose", [data], perm=perm)
    y = x.add1("BatchNormalization", [data, gamma, *ins[2:5]], None if perm else outs[0],
               epsilon=float(p.eps), momentum=float(p.momentum))
    if perm is not None:
        x.add("Transpose", [y], [outs[0]], perm=[int(i) for i in np.argsort(perm)])
    if len(outs) > 1:
        raise _fail(node, "output_mean_var (batch statistics are a training output)")


ACTIVATION = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softrelu": "Softplus",
              "softsign": "Softsign"}


@_reg("Activation")
def _activation(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add(ACTIVATION[node.params.act_type], ins, outs)


def _gelu(x: Exporter, node: Node, a: str, out: str) -> None:
    e = x.add1("Erf", [x.add1("Mul", [a, _scalar(x, node, 1 / math.sqrt(2))])])
    half = x.add1("Mul", [a, _scalar(x, node, 0.5)])
    x.add1("Mul", [half, x.add1("Add", [e, _scalar(x, node, 1.0)])], out)


@_reg("LeakyReLU")
def _leaky_relu(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    t = p.act_type
    if t == "leaky":
        x.add("LeakyRelu", ins[:1], outs, alpha=float(p.slope))
    elif t == "rrelu":  # inference: the mean of the sampling range (no mask output)
        if len(outs) > 1:
            raise _fail(node, "rrelu's mask output")
        x.add("LeakyRelu", ins[:1], outs, alpha=float(p.lower_bound + p.upper_bound) / 2)
    elif t == "elu":
        x.add("Elu", ins[:1], outs, alpha=float(p.slope))
    elif t == "selu":
        x.add("Selu", ins[:1], outs)
    elif t == "gelu":
        _gelu(x, node, ins[0], outs[0])
    elif t == "prelu":
        shape = _in_shape(x, node)
        gshape = _in_shape(x, node, 1)
        slope = ins[1]
        if len(shape) > 2 and gshape != (1,):
            slope = _reshape(x, slope, [gshape[0]] + [1] * (len(shape) - 2))
        x.add("PRelu", [ins[0], slope], outs)
    else:
        raise _fail(node, f"act_type {t}")


@_reg("Pooling")
def _pooling(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if p.layout not in (None, "NCW", "NCHW", "NCDHW"):
        raise _fail(node, f"layout {p.layout}")
    kind = p.pool_type
    if kind == "lp" and int(p.p_value or 2) == 1:
        kind = "sum"  # MXNet's p=1 sums the values themselves (ONNX LpPool sums |x|)
    if kind == "lp" and int(p.p_value or 2) != 2:
        raise _fail(node, f"lp pooling with p_value {p.p_value} (MXNet takes no absolute value)")
    if kind == "sum" and p.global_pool:
        nsp = len(_in_shape(x, node)) - 2
        x.add("ReduceSum", [ins[0], _axes(x, list(range(2, 2 + nsp)))], outs, keepdims=1)
        return
    if p.global_pool:
        op = {"max": "GlobalMaxPool", "avg": "GlobalAveragePool", "lp": "GlobalLpPool"}.get(kind)
        if op is None:
            raise _fail(node, f"global pool_type {kind}")
        x.add(op, ins, outs, p=int(p.p_value or 2) if kind == "lp" else None)
        return
    nd = len(p.kernel)
    pad = _spatial(p.pad, nd, 0)
    if p.pooling_convention == "same":
        raise _fail(node, "pooling_convention 'same'")
    attrs: dict[str, Any] = {"kernel_shape": _ints(p.kernel), "strides": _spatial(p.stride, nd, 1),
                             "pads": pad + pad}
    full = p.pooling_convention == "full"
    if kind == "max":
        x.add("MaxPool", ins, outs, ceil_mode=int(full), **attrs)
    elif kind == "avg":
        include = 1 if p.count_include_pad is None else int(p.count_include_pad)
        x.add("AveragePool", ins, outs, ceil_mode=int(full), count_include_pad=include, **attrs)
    elif kind == "sum":
        if full:
            raise _fail(node, "sum pooling with pooling_convention 'full'")
        y = x.add1("AveragePool", ins, count_include_pad=1, **attrs)
        x.add("Mul", [y, _scalar(x, node, float(np.prod(p.kernel)))], outs)
    elif kind == "lp":
        if full:
            raise _fail(node, "lp pooling with pooling_convention 'full'")
        x.add("LpPool", ins, outs, p=int(p.p_value or 2), **attrs)
    else:
        raise _fail(node, f"pool_type {kind}")


@_reg("Flatten")
def _flatten(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Flatten", ins, outs, axis=1)


def _softmax_core(x: Exporter, node: Node, data: str, axis: int, op: str, out: str) -> None:
    p = node.params
    if getattr(p, "use_length", False):
        raise _fail(node, "use_length")
    t = getattr(p, "temperature", None)
    if t is not None and float(t) != 1.0:
        data = x.add1("Div", [data, _scalar(x, node, float(t))])
    if node.op_name == "softmin":
        data = x.add1("Neg", [data])
    dt = getattr(p, "dtype", None)
    if dt is not None and np.dtype(dt) != _in_dtype(x, node):
        data = x.cast(data, dt)
    x.add(op, [data], [out], axis=int(axis))


@_reg("softmax", "softmin")
def _softmax(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _softmax_core(x, node, ins[0], node.params.axis, "Softmax", outs[0])


@_reg("log_softmax")
def _log_softmax(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _softmax_core(x, node, ins[0], node.params.axis, "LogSoftmax", outs[0])


def _softmax_flat(x: Exporter, node: Node, data: str, out: str) -> None:
    shape = _in_shape(x, node)
    if len(shape) <= 2:
        x.add("Softmax", [data], [out], axis=-1)
        return
    y = x.add1("Softmax", [x.add1("Flatten", [data], axis=1)], axis=1)
    _reshape(x, y, shape, out)


@_reg("SoftmaxOutput", "Softmax")
def _softmax_output(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if p.multi_output:
        x.add("Softmax", ins[:1], outs, axis=1)
    elif p.preserve_shape:
        x.add("Softmax", ins[:1], outs, axis=-1)
    else:
        _softmax_flat(x, node, ins[0], outs[0])


@_reg("SoftmaxActivation")
def _softmax_activation(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Softmax", ins, outs, axis=1 if node.params.mode == "channel" else -1)


@_reg("LRN")
def _lrn(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if p.nsize % 2 == 0:
        raise _fail(node, f"an even nsize ({p.nsize}): ONNX LRN windows are odd-sized")
    shape = _in_shape(x, node)
    data = ins[0] if len(shape) == 4 else _reshape(x, ins[0], (list(shape) + [1, 1])[:4])
    if len(shape) > 4:
        raise _fail(node, f"a {len(shape)}-D input")
    y = x.add1("LRN", [data], outs[0] if len(shape) == 4 else None, alpha=float(p.alpha),
               beta=float(p.beta), bias=float(p.knorm), size=int(p.nsize))
    if len(shape) != 4:
        _reshape(x, y, shape, outs[0])


@_reg("Embedding")
def _embedding(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    n = _in_shape(x, node, 1)[0]
    idx = x.add1("Clip", [ins[0], _scalar(x, node, 0), _scalar(x, node, n - 1)])
    x.add("Gather", [ins[1], x.cast(idx, np.int64)], outs, axis=0)


@_reg("take")
def _take(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    axis = p.axis % len(_in_shape(x, node))
    n = _in_shape(x, node)[axis]
    idx = x.cast(ins[1], np.int64)
    if p.mode == "wrap":
        idx = x.add1("Mod", [idx, x.const(n)], fmod=0)
    else:  # clip (MXNet's default); 'raise' behaves the same for valid indices
        idx = x.add1("Clip", [idx, x.const(0), x.const(n - 1)])
    x.add("Gather", [ins[0], idx], outs, axis=int(axis))


@_reg("pick")
def _pick(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    axis = -1 if p.axis is None else p.axis % len(shape)
    if p.axis is None:
        raise _fail(node, "axis=None")
    n = shape[axis]
    idx = x.cast(ins[1], np.int64)
    if p.mode == "wrap":
        idx = x.add1("Mod", [idx, x.const(n)], fmod=0)
    else:
        idx = x.add1("Clip", [idx, x.const(0), x.const(n - 1)])
    if len(_in_shape(x, node, 1)) < len(shape):
        idx = x.add1("Unsqueeze", [idx, _axes(x, [axis])])
    y = x.add1("GatherElements", [ins[0], idx], axis=axis)
    _as_out_shape(x, node, y, outs[0])


@_reg("one_hot")
def _one_hot(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if int(p.depth) <= 0:
        raise _fail(node, "depth 0 (ONNX OneHot needs a positive depth)")
    dt = x.out_dtype(node)
    vals = x.const([p.off_value, p.on_value], np.float32)  # onnxruntime's OneHot kernels
    y = x.add1("OneHot", [x.cast(ins[0], np.int64), x.const([p.depth]), vals], axis=-1)
    x.cast(y, dt, outs[0])


@_reg("dot")
def _dot(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    a, b = ins[0], ins[1]
    sa, sb = _in_shape(x, node, 0), _in_shape(x, node, 1)
    if len(sa) == 2 and len(sb) == 2:
        if p.transpose_a:
            a = x.add1("Transpose", [a], perm=[1, 0])
        if p.transpose_b:
            b = x.add1("Transpose", [b], perm=[1, 0])
        x.add("MatMul", [a, b], outs)
        return
    # MXNet folds N-D operands to 2-D around the contracted axis (the first one when transposed)
    if p.transpose_a:
        a2 = x.add1("Transpose", [_reshape(x, a, [sa[0], -1])], perm=[1, 0])
    else:
        a2 = _reshape(x, a, [-1, sa[-1]])
    if p.transpose_b:
        b2 = x.add1("Transpose", [_reshape(x, b, [-1, sb[-1]])], perm=[1, 0])
    else:
        b2 = _reshape(x, b, [sb[0], -1])
    _reshape(x, x.add1("MatMul", [a2, b2]), x.out_shape(node), outs[0])


@_reg("batch_dot")
def _batch_dot(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    a, b = ins[0], ins[1]
    n = len(_in_shape(x, node))
    swap = list(range(n - 2)) + [n - 1, n - 2]
    if p.transpose_a:
        a = x.add1("Transpose", [a], perm=swap)
    if p.transpose_b:
        b = x.add1("Transpose", [b], perm=swap)
    x.add("MatMul", [a, b], outs)


@_reg("LayerNorm")
def _layer_norm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    axis = p.axis % len(shape)
    if axis == len(shape) - 1:
        x.add("LayerNormalization", ins[:3], outs[:1], axis=-1, epsilon=float(p.eps))
    else:
        ax = _axes(x, [axis])
        mean = x.add1("ReduceMean", [ins[0], ax], keepdims=1)
        d = x.add1("Sub", [ins[0], mean])
        var = x.add1("ReduceMean", [x.add1("Mul", [d, d]), ax], keepdims=1)
        std = x.add1("Sqrt", [x.add1("Add", [var, _scalar(x, node, p.eps)])])
        bshape = [1] * len(shape)
        bshape[axis] = shape[axis]
        g = _reshape(x, ins[1], bshape)
        b = _reshape(x, ins[2], bshape)
        x.add("Add", [x.add1("Mul", [x.add1("Div", [d, std]), g]), b], outs[:1])
    if len(outs) > 1:
        raise _fail(node, "output_mean_var")


@_reg("InstanceNorm")
def _instance_norm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    shape = _in_shape(x, node)
    if len(shape) >= 3:
        x.add("InstanceNormalization", ins, outs, epsilon=float(node.params.eps))
        return
    y = x.add1("InstanceNormalization", [_reshape(x, ins[0], [*shape, 1]), *ins[1:]],
               epsilon=float(node.params.eps))
    _reshape(x, y, shape, outs[0])


@_reg("L2Normalization")
def _l2_normalization(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    n = len(_in_shape(x, node))
    axes = {"instance": range(1, n), "channel": [1], "spatial": range(2, n)}[p.mode]
    ss = x.add1("ReduceSum", [x.add1("Mul", [ins[0], ins[0]]), _axes(x, list(axes))], keepdims=1)
    norm = x.add1("Sqrt", [x.add1("Add", [ss, _scalar(x, node, p.eps)])])
    x.add("Div", [ins[0], norm], outs)


# --- shapes -------------------------------------------------------------------------------------
@_reg("Reshape", "reshape")
def _reshape_op(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    codes = _ints(p.shape)
    simple = codes and not p.reverse and not len(p.target_shape) and all(c >= -1 for c in codes)
    # MXNet's 0 (copy) and -1 (infer) mean the same in ONNX; the other codes are resolved
    _reshape(x, ins[0], codes if simple else x.out_shape(node), outs[0], codes=bool(simple))


@_reg("reshape_like")
def _reshape_like(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _reshape(x, ins[0], x.out_shape(node), outs[0])


@_reg("transpose")
def _transpose(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    axes = _ints(node.params.axes)
    n = len(_in_shape(x, node))
    x.add("Transpose", ins, outs, perm=axes or list(range(n))[::-1])


@_reg("SwapAxis")
def _swap_axis(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    n = len(_in_shape(x, node))
    perm = list(range(n))
    d1, d2 = node.params.dim1 % n, node.params.dim2 % n
    perm[d1], perm[d2] = perm[d2], perm[d1]
    x.add("Transpose", ins, outs, perm=perm)


@_reg("Concat", "concat")
def _concat(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Concat", ins, outs, axis=int(node.params.dim))


@_reg("stack")
def _stack(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    axis = node.params.axis % (len(_in_shape(x, node)) + 1)
    parts = [x.add1("Unsqueeze", [i, _axes(x, [axis])]) for i in ins]
    x.add("Concat", parts, outs, axis=axis)


@_reg("SliceChannel", "split")
def _split(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    axis = p.axis % len(_in_shape(x, node))
    n = int(p.num_outputs)
    if not p.squeeze_axis:
        x.add("Split", ins, outs, axis=axis, num_outputs=n)
        return
    parts = x.add("Split", ins, n, axis=axis, num_outputs=n)
    for part, o in zip(parts, outs):
        x.add("Squeeze", [part, _axes(x, [axis])], [o])


@_reg("_split_v2")
def _split_v2(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    """One Slice per piece (pieces may be empty), then Squeeze with squeeze_axis."""
    p = node.params
    shape = _in_shape(x, node)
    axis = p.axis % len(shape)
    for (start, end), o in zip(split_v2_bounds(p, shape[axis]), outs):
        args = [ins[0], x.const([start]), x.const([end]), _axes(x, [axis])]
        if not p.squeeze_axis:
            x.add("Slice", args, [o])
        else:
            x.add("Squeeze", [x.add1("Slice", args), _axes(x, [axis])], [o])


@_reg("expand_dims")
def _expand_dims(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Unsqueeze", [ins[0], _axes(x, [node.params.axis])], outs)


@_reg("squeeze")
def _squeeze(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    ax = node.params.axis
    if ax is None:
        y = x.add1("Squeeze", ins)
    else:
        axes = [ax] if isinstance(ax, int) else list(ax)
        y = x.add1("Squeeze", [ins[0], _axes(x, axes)])
    _as_out_shape(x, node, y, outs[0])


@_reg("tile")
def _tile(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    reps = _ints(node.params.reps)
    shape = _in_shape(x, node)
    data = ins[0]
    if len(reps) > len(shape):
        data = _reshape(x, data, [1] * (len(reps) - len(shape)) + list(shape))
    reps = [1] * (len(shape) - len(reps)) + reps
    x.add("Tile", [data, x.const(reps)], outs)


@_reg("repeat")
def _repeat(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    data = ins[0]
    if p.axis is None:
        data, shape = _reshape(x, data, [-1]), (int(np.prod(shape)),)
        axis = 0
    else:
        axis = p.axis % len(shape)
    u = x.add1("Unsqueeze", [data, _axes(x, [axis + 1])])
    reps = [1] * (len(shape) + 1)
    reps[axis + 1] = int(p.repeats)
    _reshape(x, x.add1("Tile", [u, x.const(reps)]), x.out_shape(node), outs[0])


@_reg("reverse", "flip")
def _reverse(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    ax = node.params.axis
    listed = [ax] if isinstance(ax, int) else list(ax)
    ndim = len(_in_shape(x, node))
    # an axis listed twice is flipped twice
    axes = [a for a in range(ndim) if sum(b % ndim == a for b in listed) % 2]
    n = len(axes)
    if n == 0:
        x.add("Identity", ins, outs)
        return
    x.add("Slice", [ins[0], x.const([-1] * n), x.const([INT64_MIN] * n), x.const(axes),
                    x.const([-1] * n)], outs)


@_reg("slice", "crop")
def _slice(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    begin, end = list(p.begin), list(p.end)
    step = list(p.step) if len(p.step) else [None] * len(begin)
    starts, ends, steps = [], [], []
    for b, e, s in zip(begin, end, step):
        s = 1 if s is None else int(s)
        starts.append((0 if s > 0 else INT64_MAX) if b is None else int(b))
        ends.append((INT64_MAX if s > 0 else INT64_MIN) if e is None else int(e))
        steps.append(s)
    x.add("Slice", [ins[0], x.const(starts), x.const(ends), x.const(list(range(len(begin)))),
                    x.const(steps)], outs)


@_reg("slice_axis")
def _slice_axis(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    end = INT64_MAX if p.end is None else int(p.end)
    x.add("Slice", [ins[0], x.const([int(p.begin)]), x.const([end]), x.const([int(p.axis)])],
          outs)


@_reg("slice_like")
def _slice_like(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    out = x.out_shape(node)
    n = len(out)
    x.add("Slice", [ins[0], x.const([0] * n), x.const(list(out)), x.const(list(range(n)))], outs)


@_reg("broadcast_to", "broadcast_axis", "broadcast_axes", "broadcast_like")
def _broadcast_to(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Expand", [ins[0], x.const(list(x.out_shape(node)))], outs)


@_reg("Pad", "pad")
def _pad(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    pw = _ints(p.pad_width)
    pads = pw[0::2] + pw[1::2]
    args = [ins[0], x.const(pads)]
    if p.mode == "constant":
        args.append(_scalar(x, node, p.constant_value))
    x.add("Pad", args, outs, mode={"constant": "constant", "edge": "edge",
                                   "reflect": "reflect"}[p.mode])


@_reg("depth_to_space")
def _depth_to_space(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("DepthToSpace", ins, outs, blocksize=int(node.params.block_size), mode="DCR")


@_reg("space_to_depth")
def _space_to_depth(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("SpaceToDepth", ins, outs, blocksize=int(node.params.block_size))


@_reg("UpSampling")
def _upsampling(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    out = x.out_shape(node)
    if p.sample_type == "bilinear":
        s = int(p.scale)
        k = 2 * s - s % 2
        pad = math.ceil((s - 1) / 2)
        x.add("ConvTranspose", ins[:2], outs, kernel_shape=[k, k], strides=[s, s],
              pads=[pad] * 4, group=int(p.num_filter))
        return
    parts = []
    for k, name in enumerate(ins):
        h, w = _in_shape(x, node, k)[2:]
        parts.append(x.add1("Resize", [name, "", x.const(
            [1.0, 1.0, out[2] / h, out[3] / w], np.float32)], mode="nearest",
            coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    if len(parts) == 1:
        x.add("Identity", parts, outs)
    elif p.multi_input_mode == "sum":
        x.add("Sum", parts, outs)
    else:
        x.add("Concat", parts, outs, axis=1)


# --- reductions ---------------------------------------------------------------------------------
REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
          "prod": "ReduceProd", "sum_axis": "ReduceSum"}


def _reduce_axes(node: Node, ndim: int) -> list[int] | None:
    ax = node.params.axis
    if ax is None or (not isinstance(ax, int) and len(ax) == 0):
        axes = None
    else:
        axes = sorted({a % ndim for a in ([ax] if isinstance(ax, int) else ax)})
    if getattr(node.params, "exclude", False):
        axes = [i for i in range(ndim) if axes is None or i not in axes]
    return axes


def _reduce(op_type: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        shape = _in_shape(x, node)
        axes = _reduce_axes(node, len(shape))
        keep = int(bool(node.params.keepdims))
        if axes == []:
            x.add("Identity", ins, outs)
            return
        args = [ins[0]] + ([] if axes is None else [_axes(x, axes)])
        if not keep and (axes is None or len(axes) == len(shape)):
            # MXNet returns shape (1,) for a full reduction
            y = x.add1(op_type, args, keepdims=0)
            _reshape(x, y, [1], outs[0])
        else:
            x.add(op_type, args, outs, keepdims=keep)
    return conv


for _n, _op in REDUCE.items():
    CONVERTERS[_n] = _reduce(_op)


@_reg("norm")
def _norm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    op = {1: "ReduceL1", 2: "ReduceL2"}.get(int(p.ord))
    if op is None:
        raise _fail(node, f"ord={p.ord}")
    if x.out_dtype(node) == _in_dtype(x, node):
        _reduce(op)(x, node, ins, outs)
        return
    tmp = x.fresh(f"{node.name}_norm")
    _reduce(op)(x, node, ins, [tmp])
    x.cast(tmp, x.out_dtype(node), outs[0])


def _arg(op_type: str) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        p = node.params
        data = ins[0]
        if p.axis is None:
            y = x.add1(op_type, [x.add1("Reshape", [data, x.const([-1])])], axis=0, keepdims=0)
            _reshape(x, x.cast(y, x.out_dtype(node)), x.out_shape(node), outs[0])
            return
        y = x.add1(op_type, [data], axis=int(p.axis), keepdims=int(bool(p.keepdims)))
        _as_out_shape(x, node, x.cast(y, x.out_dtype(node)), outs[0])
    return conv


CONVERTERS["argmax"] = _arg("ArgMax")
CONVERTERS["argmin"] = _arg("ArgMin")


@_reg("argmax_channel")
def _argmax_channel(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    y = x.add1("ArgMax", ins, axis=1, keepdims=0)
    x.cast(y, x.out_dtype(node), outs[0])


@_reg("topk")
def _topk(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    axis = -1 if p.axis is None else p.axis % len(shape)
    data = ins[0]
    if p.axis is None:
        data, axis = _reshape(x, data, [-1]), 0
    k = int(p.k) if int(p.k) > 0 else shape[axis]
    vals, idx = x.add("TopK", [data, x.const([k])], 2, axis=axis, largest=int(not p.is_ascend))
    if p.ret_typ == "value":
        x.add("Identity", [vals], outs)
    elif p.ret_typ == "indices":
        x.cast(idx, x.out_dtype(node), outs[0])
    elif p.ret_typ == "both":
        x.add("Identity", [vals], [outs[0]])
        x.cast(idx, x.out_dtype(node, 1), outs[1])
    else:
        raise _fail(node, f"ret_typ {p.ret_typ}")


@_reg("sort")
def _sort(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    axis = -1 if p.axis is None else p.axis % len(shape)
    data = ins[0]
    if p.axis is None:
        data, axis = _reshape(x, data, [-1]), 0
        shape = (int(np.prod(shape)),)
    x.add("TopK", [data, x.const([shape[axis]])], [outs[0], x.fresh("unused")], axis=axis,
          largest=int(not p.is_ascend))


@_reg("argsort")
def _argsort(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    axis = -1 if p.axis is None else p.axis % len(shape)
    data = ins[0]
    if p.axis is None:
        data, axis = _reshape(x, data, [-1]), 0
        shape = (int(np.prod(shape)),)
    _, idx = x.add("TopK", [data, x.const([shape[axis]])], 2, axis=axis,
                   largest=int(not p.is_ascend))
    x.cast(idx, x.out_dtype(node), outs[0])


@_reg("gather_nd")
def _gather_nd(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    n = len(_in_shape(x, node, 1))
    m = _in_shape(x, node, 1)[0]
    dims = x.const(list(_in_shape(x, node, 0)[:m]))
    idx = x.cast(ins[1], np.int64)
    if n > 1:  # MXNet indexes along the first axis of indices, ONNX along the last
        idx = x.add1("Transpose", [idx], perm=list(range(1, n)) + [0])
    else:
        idx = x.add1("Unsqueeze", [idx, _axes(x, [1])])
    # MXNet counts negative indices from the end and clips the rest into range
    neg = x.add1("Less", [idx, x.const(0)])
    idx = x.add1("Where", [neg, x.add1("Add", [idx, dims]), idx])
    top = x.const([d - 1 for d in _in_shape(x, node, 0)[:m]])
    idx = x.add1("Max", [x.add1("Min", [idx, top]), x.const(0)])
    y = x.add1("GatherND", [ins[0], idx])
    if n == 1:
        # a 1-D index tuple selects one element or slice: drop the leading axis GatherND adds
        x.add("Squeeze", [y, _axes(x, [0])], outs)
    else:
        x.add("Identity", [y], outs)


@_reg("moments")
def _moments(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    n = len(_in_shape(x, node))
    axes = list(range(n)) if p.axes is None else [a % n for a in p.axes]
    ax = _axes(x, axes)
    mean_k = x.add1("ReduceMean", [ins[0], ax], keepdims=1)
    d = x.add1("Sub", [ins[0], mean_k])
    keep = int(bool(p.keepdims))
    var = x.add1("ReduceMean", [x.add1("Mul", [d, d]), ax], keepdims=keep)
    mean = mean_k if keep else x.add1("ReduceMean", [ins[0], ax], keepdims=0)
    _as_out_shape(x, node, mean, outs[0], 0)
    _as_out_shape(x, node, var, outs[1], 1)


@_reg("GroupNorm")
def _group_norm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if len(outs) > 1:
        raise _fail(node, "output_mean_var (batch statistics are a training output)")
    shape = _in_shape(x, node)
    g = int(p.num_groups)
    grouped = _reshape(x, ins[0], [shape[0], g, -1], codes=True)
    ax = _axes(x, [2])
    mean = x.add1("ReduceMean", [grouped, ax], keepdims=1)
    d = x.add1("Sub", [grouped, mean])
    var = x.add1("ReduceMean", [x.add1("Mul", [d, d]), ax], keepdims=1)
    y = x.add1("Div", [d, x.add1("Sqrt", [x.add1("Add", [var, _scalar(x, node, p.eps)])])])
    gamma = _reshape(x, ins[1], [1, g, 1])
    beta = _reshape(x, ins[2], [1, g, 1])
    _reshape(x, x.add1("Add", [x.add1("Mul", [y, gamma]), beta]), shape, outs[0])


def _nan_reduce(op_type: str, fill: float) -> Converter:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        if _in_dtype(x, node).kind != "f":
            _reduce(op_type)(x, node, ins, outs)
            return
        clean = x.add1("Where", [x.add1("IsNaN", ins[:1]), _scalar(x, node, fill), ins[0]])
        _reduce(op_type)(x, node, [clean], outs)
    return conv


CONVERTERS["nansum"] = _nan_reduce("ReduceSum", 0.0)
CONVERTERS["nanprod"] = _nan_reduce("ReduceProd", 1.0)
CONVERTERS["_square_sum"] = _reduce("ReduceSumSquare")


@_reg("batch_take")
def _batch_take(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    m = _in_shape(x, node)[-1]
    idx = x.add1("Clip", [x.cast(ins[1], np.int64), x.const(0), x.const(m - 1)])
    y = x.add1("GatherElements", [ins[0], x.add1("Unsqueeze", [idx, _axes(x, [1])])], axis=1)
    _as_out_shape(x, node, y, outs[0])


# --- sequences (time axis ``axis``, batch axis the other of the first two) ------------------------
def _lengths(x: Exporter, node: Node, name: str) -> str:
    return x.cast(name, np.int64)


@_reg("SequenceMask")
def _sequence_mask(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if not p.use_sequence_length:
        x.add("Identity", ins[:1], outs)
        return
    shape = _in_shape(x, node)
    a = int(p.axis)
    t, n = shape[a], shape[1 - a]
    steps = x.const(np.arange(t).reshape((t, 1) if a == 0 else (1, t)), np.int64)
    lens = _reshape(x, _lengths(x, node, ins[1]), (1, n) if a == 0 else (n, 1))
    mask = x.add1("Less", [steps, lens])
    if len(shape) > 2:
        mask = _reshape(x, mask, [*shape[:2]] + [1] * (len(shape) - 2))
    x.add("Where", [mask, ins[0], _scalar(x, node, p.value)], outs)


@_reg("SequenceLast")
def _sequence_last(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    a = int(p.axis)
    if not p.use_sequence_length:
        x.add("Gather", [ins[0], x.const(shape[a] - 1)], outs, axis=a)
        return
    n = shape[1 - a]
    last = x.add1("Sub", [_lengths(x, node, ins[1]), x.const(1)])
    last = x.add1("Clip", [last, x.const(0), x.const(shape[a] - 1)])
    idx_shape = [1] * len(shape)
    idx_shape[1 - a] = n
    idx = _reshape(x, last, idx_shape)
    full = list(shape)
    full[a] = 1
    idx = x.add1("Expand", [idx, x.const(full)])
    y = x.add1("GatherElements", [ins[0], idx], axis=a)
    x.add("Squeeze", [y, _axes(x, [a])], outs)


@_reg("SequenceReverse")
def _sequence_reverse(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if int(p.axis) != 0:
        raise _fail(node, f"axis {p.axis}")
    if not p.use_sequence_length:
        x.add("Slice", [ins[0], x.const([-1]), x.const([INT64_MIN]), x.const([0]),
                        x.const([-1])], outs)
        return
    x.add("ReverseSequence", [ins[0], _lengths(x, node, ins[1])], outs, batch_axis=1,
          time_axis=0)


@_reg("softmax_cross_entropy")
def _softmax_cross_entropy(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    logp = x.add1("LogSoftmax", ins[:1], axis=1)
    idx = x.add1("Unsqueeze", [x.cast(ins[1], np.int64), _axes(x, [1])])
    picked = x.add1("GatherElements", [logp, idx], axis=1)
    total = x.add1("ReduceSum", [picked], keepdims=0)
    _reshape(x, x.add1("Neg", [total]), [1], outs[0])


@_reg("scatter_nd")
def _scatter_nd(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    out = x.out_shape(node)
    n = len(_in_shape(x, node, 1))
    zero = onnx().numpy_helper.from_array(np.zeros(1, x.out_dtype(node)))
    base = x.add1("ConstantOfShape", [x.const(list(out))], value=zero)
    idx = x.cast(ins[1], np.int64)
    idx = x.add1("Transpose", [idx], perm=list(range(1, n)) + [0])
    x.add("ScatterND", [base, idx, ins[0]], outs)


@_reg("diag")
def _diag(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    k = int(p.k)
    if len(shape) == 1:  # a square matrix with the vector on its k-th diagonal
        n = shape[0]
        size = n + abs(k)
        rows = np.arange(n) + max(-k, 0)
        idx = np.stack([rows, rows + k], axis=1)
        zero = onnx().numpy_helper.from_array(np.zeros(1, _in_dtype(x, node)))
        base = x.add1("ConstantOfShape", [x.const([size, size])], value=zero)
        x.add("ScatterND", [base, x.const(idx), ins[0]], outs)
        return
    nd = len(shape)
    a1, a2 = p.axis1 % nd, p.axis2 % nd
    rest = [i for i in range(nd) if i not in (a1, a2)]
    length = max(0, min(shape[a1] - max(-k, 0), shape[a2] - max(k, 0)))
    if length == 0:
        raise _fail(node, "an empty diagonal")
    front = x.add1("Transpose", ins[:1], perm=[a1, a2, *rest])
    rows = np.arange(length) + max(-k, 0)
    picked = x.add1("GatherND", [front, x.const(np.stack([rows, rows + k], axis=1))])
    x.add("Transpose", [picked], outs, perm=[*range(1, len(rest) + 1), 0])
