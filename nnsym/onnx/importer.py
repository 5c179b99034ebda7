"""``import_model``: an ONNX file as ``(sym, arg_params, aux_params)``.

The file is read with onnx's protobuf loader (no code runs from it). Each ONNX operator maps to
nnsym symbols by one small function in ``IMPORTERS``. Attribute-like inputs (Reshape's shape,
Slice's bounds, Clip's limits...) must be initializers or Constant nodes. ONNX shape inference
supplies the ranks and shapes some translations need.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnsym import symbol as S
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.ndarray import array as nd_array
from nnsym.onnx._lazy import OnnxError, onnx
from nnsym.symbol.symbol import Symbol

MAX_FILE_BYTES = 2 << 30  # protobuf's own limit for one message


class Importer:
    """The state of one import: symbols by ONNX tensor name, constants, parameters."""

    def __init__(self, model: Any):
        ox = onnx()
        self.model = model
        g = model.graph
        self.consts: dict[str, np.ndarray] = {
            t.name: ox.numpy_helper.to_array(t) for t in g.initializer}
        self.syms: dict[str, Symbol] = {}
        self.params: dict[str, np.ndarray] = {}
        self.shapes: dict[str, tuple[int | None, ...]] = {}
        try:
            inferred = ox.shape_inference.infer_shapes(model, data_prop=True)
            infos = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
        except Exception:  # NOTE: shapes are a help only; translations that need one say so
            infos = [*g.input, *g.output]
        for vi in infos:
            t = vi.type.tensor_type
            if t.HasField("shape"):
                self.shapes[vi.name] = tuple(
                    d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        for name, v in self.consts.items():
            self.shapes[name] = tuple(v.shape)
        self.node: Any = None
        self.shape_source: dict[str, str] = {}  # Shape node outputs -> the tensor measured

    # --- inputs -------------------------------------------------------------------------------
    def sym(self, name: str) -> Symbol:
        """The symbol of tensor ``name``; an initializer used as data becomes a parameter."""
        if name in self.syms:
            return self.syms[name]
        if name in self.consts:
            v = self.consts[name]
            self.params[name] = v
            # NOTE: the shape is recorded so simple_bind needs only the data shapes
            s = S.var(name, shape=v.shape, dtype=v.dtype)
            self.syms[name] = s
            return s
        raise self.error(f"input '{name}' is not produced by any earlier node")

    def const(self, name: str, what: str) -> np.ndarray:
        if name not in self.consts:
            raise self.error(f"{what} ('{name}') must be a constant (initializer or Constant)")
        return self.consts[name]

    def opt_const(self, k: int, what: str) -> np.ndarray | None:
        ins = self.node.input
        return self.const(ins[k], what) if len(ins) > k and ins[k] else None

    def shape(self, name: str) -> tuple[int, ...]:
        s = self.shapes.get(name)
        if s is None or any(d is None for d in s):
            raise self.error(f"the shape of '{name}' is needed and unknown")
        return tuple(int(d) for d in s if d is not None)

    def rank(self, name: str) -> int:
        s = self.shapes.get(name)
        if s is None:
            raise self.error(f"the rank of '{name}' is needed and unknown")
        return len(s)

    def attrs(self) -> dict[str, Any]:
        get = onnx().helper.get_attribute_value
        out = {}
        for a in self.node.attribute:
            v = get(a)
            out[a.name] = v.decode() if isinstance(v, bytes) else v
        return out

    def error(self, msg: str) -> OnnxError:
        n = self.node
        where = f"ONNX node '{n.name or n.output[0]}' ({n.op_type}): " if n is not None else ""
        return OnnxError(where + msg)

    def out_name(self, k: int = 0) -> str:
        return str(self.node.output[k])

    def new_param(self, hint: str, value: np.ndarray) -> Symbol:
        name = hint
        while name in self.consts or name in self.params:
            name += "_"
        self.params[name] = value
        return S.var(name, shape=value.shape, dtype=value.dtype)


Translation = Callable[[Importer, list[str], dict[str, Any]], Any]
IMPORTERS: dict[str, Translation] = {}


def _reg(*names: str) -> Callable[[Translation], Translation]:
    def deco(fn: Translation) -> Translation:
        for n in names:
            IMPORTERS[n] = fn
        return fn
    return deco


def _op(name: str) -> Callable[..., Symbol]:
    return getattr(S, name)  # type: ignore[no-any-return]


def _nm(m: Importer) -> str:
    return m.out_name()


UNARY = {"Relu": ("Activation", {"act_type": "relu"}),
         "Sigmoid": ("Activation", {"act_type": "sigmoid"}),
         "Tanh": ("Activation", {"act_type": "tanh"}),
         "Softplus": ("Activation", {"act_type": "softrelu"}),
         "Softsign": ("Activation", {"act_type": "softsign"}),
         "Abs": ("abs", {}), "Neg": ("negative", {}), "Exp": ("exp", {}), "Log": ("log", {}),
         "Sqrt": ("sqrt", {}), "Reciprocal": ("reciprocal", {}), "Sin": ("sin", {}),
         "Cos": ("cos", {}), "Tan": ("tan", {}), "Asin": ("arcsin", {}), "Acos": ("arccos", {}),
         "Atan": ("arctan", {}), "Sinh": ("sinh", {}), "Cosh": ("cosh", {}),
         "Asinh": ("arcsinh", {}), "Acosh": ("arccosh", {}), "Atanh": ("arctanh", {}),
         "Floor": ("floor", {}), "Ceil": ("ceil", {}), "Round": ("rint", {}),
         "Sign": ("sign", {}), "Erf": ("erf", {}), "Not": ("logical_not", {})}


def _unary(op: str, params: dict[str, Any]) -> Translation:
    def tr(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
        return _op(op)(m.sym(ins[0]), name=_nm(m), **params)
    return tr


for _k, (_o, _p) in UNARY.items():
    IMPORTERS[_k] = _unary(_o, _p)


@_reg("Identity", "Dropout")
def _identity(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("_copy")(m.sym(ins[0]), name=_nm(m))


# binary: (broadcast op, scalar op, reversed scalar op)
BINARY = {"Add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
          "Sub": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
          "Mul": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
          "Div": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
          "Pow": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
          "Max": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
          "Min": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar"),
          "Equal": ("broadcast_equal", "_equal_scalar", "_equal_scalar"),
          "Greater": ("broadcast_greater", "_greater_scalar", "_lesser_scalar"),
          "Less": ("broadcast_lesser", "_lesser_scalar", "_greater_scalar"),
          "GreaterOrEqual": ("broadcast_greater_equal", "_greater_equal_scalar",
                             "_lesser_equal_scalar"),
          "LessOrEqual": ("broadcast_lesser_equal", "_lesser_equal_scalar",
                          "_greater_equal_scalar"),
          "And": ("broadcast_logical_and", "_logical_and_scalar", "_logical_and_scalar"),
          "Or": ("broadcast_logical_or", "_logical_or_scalar", "_logical_or_scalar"),
          "Xor": ("broadcast_logical_xor", "_logical_xor_scalar", "_logical_xor_scalar")}


def _operand(m: Importer, name: str, rank: int) -> Symbol:
    """A broadcast operand of at least ``rank`` dims (MXNet broadcasts equal ranks only)."""
    if name in m.consts and name not in m.syms:
        v = m.consts[name]
        if v.ndim < rank:
            v = v.reshape((1,) * (rank - v.ndim) + v.shape)
        m.consts[name] = v
        return m.sym(name)
    s = m.sym(name)
    r = m.rank(name)
    if r < rank:
        return _op("Reshape")(s, shape=(1,) * (rank - r) + m.shape(name))
    return s


def _binary_of(m: Importer, op: str, sop: str, rop: str, x: str, y: str, name: str) -> Symbol:
    for k, (a, b) in enumerate(((x, y), (y, x))):
        if b in m.consts and m.consts[b].size == 1 and a not in m.consts:
            scalar = float(m.consts[b].reshape(()))
            return _op(sop if k == 0 else rop)(m.sym(a), scalar=scalar, name=name)
    rank = max(m.rank(x), m.rank(y))
    return _op(op)(_operand(m, x, rank), _operand(m, y, rank), name=name)


def _binary(op: str, sop: str, rop: str) -> Translation:
    def tr(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
        if len(ins) == 1:
            return _op("_copy")(m.sym(ins[0]), name=_nm(m))
        out = ins[0]
        for k, other in enumerate(ins[1:]):
            last = k == len(ins) - 2
            name = _nm(m) if last else f"{_nm(m)}_part{k}"
            s = _binary_of(m, op, sop, rop, out, other, name)
            if not last:
                m.syms[name] = s
                m.shapes[name] = m.shapes.get(_nm(m), m.shapes.get(out, ()))
                out = name
        return s
    return tr


for _k, (_o, _s, _r) in BINARY.items():
    IMPORTERS[_k] = _binary(_o, _s, _r)
IMPORTERS["Sum"] = IMPORTERS["Add"]


@_reg("Mod")
def _mod(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    # ONNX fmod=0 on integers is Python's %, as MXNet's mod; fmod=1 on floats is C's fmod
    if a.get("fmod", 0):
        x, y = m.sym(ins[0]), m.sym(ins[1])
        q = _op("trunc")(_op("broadcast_div")(x, y))
        return _op("broadcast_sub")(x, _op("broadcast_mul")(q, y), name=_nm(m))
    return _binary_of(m, "broadcast_mod", "_mod_scalar", "_rmod_scalar", ins[0], ins[1], _nm(m))


@_reg("Cast")
def _cast(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    dt = onnx().helper.tensor_dtype_to_np_dtype(a["to"])
    if dt == np.bool_:  # booleans are 0/1 in the input's dtype in nnsym
        return _op("_not_equal_scalar")(m.sym(ins[0]), scalar=0.0, name=_nm(m))
    return _op("Cast")(m.sym(ins[0]), dtype=np.dtype(dt).name, name=_nm(m))


@_reg("Where")
def _where(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    shape = m.shapes.get(_nm(m))
    args = []
    for n in ins:
        s = m.sym(n)
        if shape is not None and m.shapes.get(n) != shape and all(d is not None for d in shape):
            rank = len(shape)
            s = _operand(m, n, rank) if m.rank(n) < rank else s
            s = _op("broadcast_to")(s, shape=tuple(int(d or 0) for d in shape))
        args.append(s)
    return _op("where")(*args, name=_nm(m))


@_reg("Gemm")
def _gemm(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    has_c = len(ins) > 2 and ins[2]
    if not ta and alpha == 1.0 and beta == 1.0 and ins[1] in m.consts and (
            not has_c or (ins[2] in m.consts and m.consts[ins[2]].ndim == 1)):
        w = m.consts[ins[1]]
        if not tb:
            w = np.ascontiguousarray(w.T)
            weight = m.new_param(ins[1] + "_T", w)
        else:
            weight = m.sym(ins[1])
        kw: dict[str, Any] = {"num_hidden": int(w.shape[0]), "no_bias": not has_c}
        args = [m.sym(ins[0]), weight] + ([m.sym(ins[2])] if has_c else [])
        return _op("FullyConnected")(*args, name=_nm(m), **kw)
    y = _op("dot")(m.sym(ins[0]), m.sym(ins[1]), transpose_a=bool(ta), transpose_b=bool(tb))
    if alpha != 1.0:
        y = _op("_mul_scalar")(y, scalar=alpha)
    if not has_c:
        return _op("_copy")(y, name=_nm(m))
    c = _operand(m, ins[2], 2)
    if beta != 1.0:
        c = _op("_mul_scalar")(c, scalar=beta)
    return _op("broadcast_add")(y, c, name=_nm(m))


@_reg("MatMul")
def _matmul(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    ra, rb = m.rank(ins[0]), m.rank(ins[1])
    x, y = m.sym(ins[0]), m.sym(ins[1])
    if rb <= 2:
        return _op("dot")(x, y, name=_nm(m))
    if ra == rb == 3:
        return _op("batch_dot")(x, y, name=_nm(m))
    sa, sb = m.shape(ins[0]), m.shape(ins[1])
    if ra == rb and sa[:-2] == sb[:-2]:
        x3 = _op("Reshape")(x, shape=(-1, *sa[-2:]))
        y3 = _op("Reshape")(y, shape=(-1, *sb[-2:]))
        return _op("Reshape")(_op("batch_dot")(x3, y3), shape=(*sa[:-1], sb[-1]), name=_nm(m))
    raise m.error(f"MatMul of shapes {sa} and {sb} (broadcast batch dimensions)")


def _sym_pads(m: Importer, a: dict[str, Any], nd: int) -> tuple[int, ...]:
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise m.error(f"auto_pad {a['auto_pad']}")
    pads = list(a.get("pads", [0] * (2 * nd)))
    if pads[:nd] != pads[nd:]:
        raise m.error(f"asymmetric pads {pads}")
    return tuple(pads[:nd])


@_reg("Conv")
def _conv(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    w = m.shape(ins[1])
    nd = len(w) - 2
    kw = {"kernel": tuple(a.get("kernel_shape", w[2:])), "num_filter": int(w[0]),
          "stride": tuple(a.get("strides", [1] * nd)),
          "dilate": tuple(a.get("dilations", [1] * nd)),
          "pad": _sym_pads(m, a, nd), "num_group": int(a.get("group", 1)),
          "no_bias": len(ins) < 3 or not ins[2]}
    args = [m.sym(n) for n in ins if n]
    return _op("Convolution")(*args, name=_nm(m), **kw)


@_reg("ConvTranspose")
def _conv_transpose(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    w = m.shape(ins[1])
    nd = len(w) - 2
    group = int(a.get("group", 1))
    kw: dict[str, Any] = {
        "kernel": tuple(a.get("kernel_shape", w[2:])), "num_filter": int(w[1]) * group,
        "stride": tuple(a.get("strides", [1] * nd)), "dilate": tuple(a.get("dilations", [1] * nd)),
        "num_group": group, "no_bias": len(ins) < 3 or not ins[2]}
    if "output_shape" in a:
        kw["target_shape"] = tuple(a["output_shape"])
    else:
        kw["pad"] = _sym_pads(m, a, nd)
        kw["adj"] = tuple(a.get("output_padding", [0] * nd))
    args = [m.sym(n) for n in ins if n]
    return _op("Deconvolution")(*args, name=_nm(m), **kw)


@_reg("BatchNormalization")
def _batch_norm(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    args = [m.sym(n) for n in ins[:5]]
    return _op("BatchNorm")(*args, eps=float(a.get("epsilon", 1e-5)),
                            momentum=float(a.get("momentum", 0.9)), fix_gamma=False,
                            use_global_stats=True, name=_nm(m))


@_reg("InstanceNormalization")
def _instance_norm(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    args = [m.sym(n) for n in ins[:3]]
    return _op("InstanceNorm")(*args, eps=float(a.get("epsilon", 1e-5)), name=_nm(m))


@_reg("LayerNormalization")
def _layer_norm(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    axis = int(a.get("axis", -1))
    if axis not in (-1, m.rank(ins[0]) - 1) or len(ins) < 3 or not ins[2]:
        raise m.error("only axis=-1 with a bias maps to LayerNorm")
    args = [m.sym(n) for n in ins[:3]]
    return _op("LayerNorm")(*args, axis=-1, eps=float(a.get("epsilon", 1e-5)), name=_nm(m))


@_reg("LeakyRelu")
def _leaky_relu(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("LeakyReLU")(m.sym(ins[0]), act_type="leaky", slope=float(a.get("alpha", 0.01)),
                            name=_nm(m))


@_reg("Elu")
def _elu(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("LeakyReLU")(m.sym(ins[0]), act_type="elu", slope=float(a.get("alpha", 1.0)),
                            name=_nm(m))


@_reg("Selu")
def _selu(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if abs(float(a.get("alpha", 1.67326319)) - 1.67326319) > 1e-6 or abs(
            float(a.get("gamma", 1.05070102)) - 1.05070102) > 1e-6:
        raise m.error("Selu with non-default alpha/gamma")
    return _op("LeakyReLU")(m.sym(ins[0]), act_type="selu", name=_nm(m))


@_reg("PRelu")
def _prelu(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if ins[1] in m.consts:
        m.consts[ins[1]] = m.consts[ins[1]].reshape(-1)
        gamma = m.sym(ins[1])
    else:
        gamma = _op("Reshape")(m.sym(ins[1]), shape=(-1,))
    return _op("LeakyReLU")(m.sym(ins[0]), gamma, act_type="prelu", name=_nm(m))


@_reg("HardSigmoid")
def _hard_sigmoid(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("hard_sigmoid")(m.sym(ins[0]), alpha=float(a.get("alpha", 0.2)),
                               beta=float(a.get("beta", 0.5)), name=_nm(m))


@_reg("MaxPool", "AveragePool", "LpPool")
def _pool(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    k = tuple(a["kernel_shape"])
    nd = len(k)
    if a.get("dilations") and any(d != 1 for d in a["dilations"]):
        raise m.error("dilated pooling")
    if len(m.node.output) > 1 and m.node.output[1]:
        raise m.error("MaxPool's Indices output")
    kind = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}[m.node.op_type]
    kw: dict[str, Any] = {"kernel": k, "pool_type": kind,
                          "stride": tuple(a.get("strides", [1] * nd)), "pad": _sym_pads(m, a, nd),
                          "pooling_convention": "full" if a.get("ceil_mode", 0) else "valid"}
    if kind == "avg":
        kw["count_include_pad"] = bool(a.get("count_include_pad", 0))
    if kind == "lp":
        kw["p_value"] = int(a.get("p", 2))
    return _op("Pooling")(m.sym(ins[0]), name=_nm(m), **kw)


@_reg("GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool")
def _global_pool(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    kind = {"GlobalMaxPool": "max", "GlobalAveragePool": "avg", "GlobalLpPool": "lp"}[
        m.node.op_type]
    nd = m.rank(ins[0]) - 2
    kw: dict[str, Any] = {"kernel": (1,) * nd, "pool_type": kind, "global_pool": True}
    if kind == "lp":
        kw["p_value"] = int(a.get("p", 2))
    return _op("Pooling")(m.sym(ins[0]), name=_nm(m), **kw)


@_reg("Flatten")
def _flatten(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    axis = int(a.get("axis", 1))
    if axis == 1:
        return _op("Flatten")(m.sym(ins[0]), name=_nm(m))
    shape = m.shape(ins[0])
    if axis < 0:
        axis += len(shape)
    lead = int(np.prod(shape[:axis]))
    return _op("Reshape")(m.sym(ins[0]), shape=(lead, -1), name=_nm(m))


@_reg("Reshape")
def _reshape(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    shape = tuple(int(v) for v in m.const(ins[1], "the target shape"))
    if a.get("allowzero", 0) and 0 in shape:
        raise m.error("allowzero=1 with a 0 in the shape")
    return _op("Reshape")(m.sym(ins[0]), shape=shape, name=_nm(m))


@_reg("Transpose")
def _transpose(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    perm = tuple(a.get("perm", ()))
    return _op("transpose")(m.sym(ins[0]), axes=perm, name=_nm(m))


@_reg("Concat")
def _concat(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    args = [m.sym(n) for n in ins]
    return _op("Concat")(*args, num_args=len(args), dim=int(a["axis"]), name=_nm(m))


@_reg("Softmax", "LogSoftmax")
def _softmax(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    op = "softmax" if m.node.op_type == "Softmax" else "log_softmax"
    return _op(op)(m.sym(ins[0]), axis=int(a.get("axis", -1)), name=_nm(m))


@_reg("Clip")
def _clip(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    lo = m.opt_const(1, "Clip's min")
    hi = m.opt_const(2, "Clip's max")
    lo_v = float(lo) if lo is not None else float(a.get("min", -np.finfo(np.float32).max))
    hi_v = float(hi) if hi is not None else float(a.get("max", np.finfo(np.float32).max))
    return _op("clip")(m.sym(ins[0]), a_min=lo_v, a_max=hi_v, name=_nm(m))


def _axes_of(m: Importer, ins: list[str], a: dict[str, Any]) -> tuple[int, ...] | None:
    if len(ins) > 1 and ins[1]:
        return tuple(int(v) for v in m.const(ins[1], "the axes"))
    if "axes" in a:
        return tuple(int(v) for v in a["axes"])
    return None


REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
          "ReduceProd": "prod", "ReduceL1": "norm", "ReduceL2": "norm",
          "ReduceSumSquare": "_square_sum"}


def _reduce(op: str) -> Translation:
    def tr(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
        axes = _axes_of(m, ins, a)
        keep = bool(a.get("keepdims", 1))
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                return _op("_copy")(m.sym(ins[0]), name=_nm(m))
            axes = tuple(range(m.rank(ins[0])))
        kw: dict[str, Any] = {"axis": axes, "keepdims": keep}
        if op == "norm":
            kw["ord"] = 1 if m.node.op_type == "ReduceL1" else 2
        # NOTE: a full reduction without keepdims is 0-d in ONNX and shape (1,) in nnsym
        return _op(op)(m.sym(ins[0]), name=_nm(m), **kw)
    return tr


for _k, _o in REDUCE.items():
    IMPORTERS[_k] = _reduce(_o)


@_reg("ArgMax", "ArgMin")
def _argmax(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if a.get("select_last_index", 0):
        raise m.error("select_last_index=1")
    op = "argmax" if m.node.op_type == "ArgMax" else "argmin"
    y = _op(op)(m.sym(ins[0]), axis=int(a.get("axis", 0)), keepdims=bool(a.get("keepdims", 1)))
    return _op("Cast")(y, dtype="int64", name=_nm(m))


@_reg("Gather")
def _gather(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    axis = int(a.get("axis", 0))
    if ins[1] in m.consts and m.consts[ins[1]].ndim == 0 and ins[1] not in m.syms:
        m.consts[ins[1]] = m.consts[ins[1]].reshape(1)
        y = _op("take")(m.sym(ins[0]), m.sym(ins[1]), axis=axis, mode="wrap")
        return _op("squeeze")(y, axis=axis, name=_nm(m))
    return _op("take")(m.sym(ins[0]), m.sym(ins[1]), axis=axis, mode="wrap", name=_nm(m))


@_reg("GatherElements")
def _gather_elements(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    axis = int(a.get("axis", 0))
    if m.shape(ins[1])[axis] != 1:
        raise m.error("GatherElements with more than one index along the axis")
    return _op("pick")(m.sym(ins[0]), m.sym(ins[1]), axis=axis, keepdims=True, mode="wrap",
                       name=_nm(m))


@_reg("IsNaN")
def _isnan(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    x = m.sym(ins[0])
    return _op("broadcast_not_equal")(x, x, name=_nm(m))  # only NaN differs from itself


@_reg("GatherND")
def _gather_nd(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if a.get("batch_dims", 0):
        raise m.error("batch_dims != 0")
    r = m.rank(ins[1])
    idx = _op("transpose")(m.sym(ins[1]), axes=(r - 1, *range(r - 1)))
    return _op("gather_nd")(m.sym(ins[0]), idx, name=_nm(m))


@_reg("Slice")
def _slice(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    starts = [int(v) for v in m.const(ins[1], "Slice's starts")]
    ends = [int(v) for v in m.const(ins[2], "Slice's ends")]
    rank = m.rank(ins[0])
    axes_c = m.opt_const(3, "Slice's axes")
    steps_c = m.opt_const(4, "Slice's steps")
    axes = [int(v) % rank for v in axes_c] if axes_c is not None else list(range(len(starts)))
    steps = [int(v) for v in steps_c] if steps_c is not None else [1] * len(starts)
    n = max(axes) + 1
    begin: list[int | None] = [None] * n
    end: list[int | None] = [None] * n
    step: list[int | None] = [None] * n
    big = 2**31
    for ax, b, e, s in zip(axes, starts, ends, steps):
        begin[ax] = None if (s > 0 and b == 0) or abs(b) >= big else b
        end[ax] = None if abs(e) >= big else e
        step[ax] = s
    if all(s in (None, 1) for s in step):
        return _op("slice")(m.sym(ins[0]), begin=tuple(begin), end=tuple(end), name=_nm(m))
    return _op("slice")(m.sym(ins[0]), begin=tuple(begin), end=tuple(end), step=tuple(step),
                        name=_nm(m))


@_reg("Unsqueeze")
def _unsqueeze(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    axes = _axes_of(m, ins, a) or ()
    out_rank = m.rank(ins[0]) + len(axes)
    s = m.sym(ins[0])
    norm = sorted(ax % out_rank for ax in axes)
    for k, ax in enumerate(norm):
        s = _op("expand_dims")(s, axis=ax, name=_nm(m) if k == len(norm) - 1 else None)
    return s


@_reg("Squeeze")
def _squeeze(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    axes = _axes_of(m, ins, a)
    return _op("squeeze")(m.sym(ins[0]), axis=axes, name=_nm(m))


@_reg("Tile")
def _tile(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    reps = tuple(int(v) for v in m.const(ins[1], "Tile's repeats"))
    return _op("tile")(m.sym(ins[0]), reps=reps, name=_nm(m))


@_reg("Expand")
def _expand(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    shape = m.shape(_nm(m))
    src = _operand(m, ins[0], len(shape))
    return _op("broadcast_to")(src, shape=shape, name=_nm(m))


@_reg("Pad")
def _pad(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    pads = [int(v) for v in m.const(ins[1], "Pad's pads")]
    if len(ins) > 3 and ins[3]:
        raise m.error("Pad with axes")
    value = m.opt_const(2, "Pad's value")
    n = len(pads) // 2
    width = tuple(v for k in range(n) for v in (pads[k], pads[n + k]))
    mode = str(a.get("mode", "constant"))
    if mode not in ("constant", "edge", "reflect"):
        raise m.error(f"mode {mode}")
    return _op("Pad")(m.sym(ins[0]), mode=mode, pad_width=width,
                      constant_value=float(value) if value is not None else 0.0, name=_nm(m))


@_reg("LRN")
def _lrn(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("LRN")(m.sym(ins[0]), alpha=float(a.get("alpha", 1e-4)),
                      beta=float(a.get("beta", 0.75)), knorm=float(a.get("bias", 1.0)),
                      nsize=int(a["size"]), name=_nm(m))


@_reg("Resize", "Upsample")
def _resize(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if a.get("mode", "nearest") != "nearest":
        raise m.error(f"mode {a.get('mode')} (only nearest maps to UpSampling)")
    in_shape = m.shape(ins[0])
    out_shape = m.shape(_nm(m))
    if len(in_shape) != 4 or in_shape[:2] != out_shape[:2]:
        raise m.error("only NCHW spatial resizes map to UpSampling")
    sh, sw = out_shape[2] / in_shape[2], out_shape[3] / in_shape[3]
    if sh != sw or sh != int(sh):
        raise m.error(f"scales {sh}, {sw} (UpSampling needs one integer scale)")
    return _op("UpSampling")(m.sym(ins[0]), scale=int(sh), sample_type="nearest", num_args=1,
                             name=_nm(m))


@_reg("Split")
def _split(m: Importer, ins: list[str], a: dict[str, Any]) -> list[Symbol]:
    axis = int(a.get("axis", 0))
    n = len(m.node.output)
    sizes = m.opt_const(1, "Split's sizes")
    if sizes is not None and len(set(int(v) for v in sizes)) > 1:
        raise m.error("unequal splits")
    y = _op("SliceChannel")(m.sym(ins[0]), num_outputs=n, axis=axis, name=_nm(m))
    return [y[k] for k in range(n)]


@_reg("DepthToSpace")
def _depth_to_space(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if a.get("mode", "DCR") != "DCR":
        raise m.error("mode CRD")
    return _op("depth_to_space")(m.sym(ins[0]), block_size=int(a["blocksize"]), name=_nm(m))


@_reg("SpaceToDepth")
def _space_to_depth(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("space_to_depth")(m.sym(ins[0]), block_size=int(a["blocksize"]), name=_nm(m))


@_reg("TopK")
def _topk(m: Importer, ins: list[str], a: dict[str, Any]) -> list[Symbol]:
    k = int(m.const(ins[1], "TopK's k").reshape(-1)[0])
    y = _op("topk")(m.sym(ins[0]), k=k, axis=int(a.get("axis", -1)), ret_typ="both",
                    is_ascend=not a.get("largest", 1), dtype="int64", name=_nm(m))
    return [y[0], y[1]]


@_reg("Shape")
def _shape(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if "start" in a or "end" in a:
        raise m.error("Shape with start/end")
    m.shape_source[_nm(m)] = ins[0]
    return _op("shape_array")(m.sym(ins[0]), name=_nm(m))


@_reg("Size")
def _size(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    return _op("size_array")(m.sym(ins[0]), name=_nm(m))


@_reg("OneHot")
def _one_hot(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if int(a.get("axis", -1)) not in (-1, m.rank(ins[0])):
        raise m.error("axis other than -1")
    depth = int(m.const(ins[1], "OneHot's depth").reshape(-1)[0])
    vals = m.const(ins[2], "OneHot's values")
    return _op("one_hot")(m.sym(ins[0]), depth=depth, off_value=float(vals[0]),
                          on_value=float(vals[1]), dtype=np.dtype(vals.dtype).name, name=_nm(m))


@_reg("ConstantOfShape")
def _constant_of_shape(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol | None:
    v = a.get("value")
    value = onnx().numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1)
    src = m.shape_source.get(ins[0])
    if src is not None:  # ConstantOfShape(Shape(x)): zeros_like / ones_like of x
        x = m.sym(src)
        if float(value[0]) == 0.0:
            return _op("zeros_like")(x, name=_nm(m))
        if float(value[0]) == 1.0:
            return _op("ones_like")(x, name=_nm(m))
        return _op("_plus_scalar")(_op("zeros_like")(x), scalar=float(value[0]), name=_nm(m))
    shape = tuple(int(d) for d in m.const(ins[0], "ConstantOfShape's shape"))
    if float(np.prod(np.array(shape, np.float64))) > FOLD_MAX_ELEMENTS:
        raise m.error(f"a constant of shape {shape} is too large to build")
    arr = np.full(shape, value[0], dtype=value.dtype if v is not None else np.float32)
    m.consts[_nm(m)] = arr
    m.shapes[_nm(m)] = shape
    return None


def _constant(m: Importer, ins: list[str], a: dict[str, Any]) -> None:
    ox = onnx()
    if "value" in a:
        arr = ox.numpy_helper.to_array(a["value"])
    elif "value_float" in a:
        arr = np.array(a["value_float"], np.float32)
    elif "value_floats" in a:
        arr = np.array(a["value_floats"], np.float32)
    elif "value_int" in a:
        arr = np.array(a["value_int"], np.int64)
    elif "value_ints" in a:
        arr = np.array(a["value_ints"], np.int64)
    else:
        raise m.error(f"Constant with attributes {sorted(a)}")
    m.consts[_nm(m)] = arr
    m.shapes[_nm(m)] = tuple(arr.shape)


IMPORTERS["Constant"] = _constant


# Operators evaluated at import time when every input is a known constant (and Shape when its
# input's shape is known): the shape arithmetic exporters such as MXNet's write around Reshape.
FOLDABLE = frozenset({
    "Add", "Cast", "Ceil", "Concat", "ConstantOfShape", "Div", "Equal", "Expand", "Floor",
    "Gather", "Identity", "Max", "Min", "Mul", "Neg", "Range", "ReduceProd", "Reshape", "Size",
    "Slice", "Squeeze", "Sub", "Transpose", "Unsqueeze", "Where"})
FOLD_MAX_ELEMENTS = 1 << 20


def _fold(m: Importer, node: Any) -> bool:
    """Store the node's outputs as constants when they can be computed now; True if done."""
    ins = [n for n in node.input if n]
    if node.op_type == "Shape":
        s = m.shapes.get(ins[0])
        if s is not None and all(d is not None for d in s):
            a = m.attrs()
            value = np.array(s, np.int64)[a.get("start", 0):a.get("end", len(s))]
            m.consts[node.output[0]] = value  # NOTE: the Shape translation still makes a symbol
            m.shapes[node.output[0]] = tuple(value.shape)
        return False
    if node.op_type not in FOLDABLE or not all(n in m.consts for n in ins):
        return False
    if any(m.consts[n].size > FOLD_MAX_ELEMENTS for n in ins) or (
            node.op_type == "ConstantOfShape" and ins[0] in m.shape_source):
        return False
    if _fold_size(m, node) > FOLD_MAX_ELEMENTS:
        return False  # too large to precompute; the translation decides
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415  # NOTE: optional dependency

    try:
        outs = ReferenceEvaluator(node).run(None, {n: m.consts[n] for n in ins})
    except Exception as e:
        raise m.error(f"cannot evaluate this constant expression: {e}") from None
    for name, value in zip(node.output, outs):
        if name:
            arr = np.asarray(value)
            m.consts[name] = arr
            m.shapes[name] = tuple(arr.shape)
    return True


def _fold_size(m: Importer, node: Any) -> float:
    """An upper bound of the elements a foldable node would create (the ones that can grow)."""
    c = [m.consts[n] for n in node.input if n]
    if node.op_type == "ConstantOfShape":
        return float(np.prod(c[0].astype(np.float64)))
    if node.op_type == "Expand":
        shape = np.broadcast_shapes(tuple(int(v) for v in c[1]), c[0].shape)
        return float(np.prod(np.array(shape, np.float64)))
    if node.op_type == "Range":
        start, limit, delta = (float(v.reshape(())) for v in c[:3])
        return abs((limit - start) / delta) if delta else float("inf")
    return 0.0


def import_onnx_model(model: Any) -> tuple[Symbol, dict[str, NDArray], dict[str, NDArray]]:
    """``(sym, arg_params, aux_params)`` of an ``onnx.ModelProto``."""
    m = Importer(model)
    g = model.graph
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < 7:
            raise OnnxError(f"ONNX opset {opset.version} is too old (7 or newer is read)")
    for vi in g.input:
        if vi.name not in m.consts:
            m.syms[vi.name] = S.var(vi.name)
    for node in g.node:
        m.node = node
        if node.domain not in ("", "ai.onnx"):
            raise m.error(f"operator domain '{node.domain}' is not supported")
        if _fold(m, node):
            continue
        tr = IMPORTERS.get(node.op_type)
        if tr is None:
            raise m.error("this ONNX operator has no nnsym translation")
        out = tr(m, list(node.input), m.attrs())
        if out is None:
            continue
        outs = out if isinstance(out, list) else [out]
        for name, s in zip(node.output, outs):
            if name:
                m.syms[name] = s
    m.node = None
    heads = []
    for vi in g.output:
        if vi.name not in m.syms:
            if vi.name in m.consts:
                heads.append(m.sym(vi.name))
                continue
            raise OnnxError(f"graph output '{vi.name}' is not computed by any node")
        heads.append(m.syms[vi.name])
    sym = heads[0] if len(heads) == 1 else S.Group(heads)
    aux_names = set(sym.list_auxiliary_states())
    used = set(sym.list_inputs())
    arg_params: dict[str, NDArray] = {}
    aux_params: dict[str, NDArray] = {}
    for name, v in m.params.items():
        if name not in used:
            continue
        arr = nd_array(np.ascontiguousarray(v), dtype=v.dtype)
        (aux_params if name in aux_names else arg_params)[name] = arr
    return sym, arg_params, aux_params


def import_model(model_file: str | os.PathLike[str]) -> tuple[Symbol, dict[str, NDArray],
                                                              dict[str, NDArray]]:
    """Read an ONNX file as ``(sym, arg_params, aux_params)`` (MXNet's ``onnx.import_model``)."""
    return import_onnx_model(_load(model_file))


def _load(model_file: str | os.PathLike[str]) -> Any:
    """The ModelProto of a file, read by onnx's protobuf loader (bounded, no external data)."""
    size = Path(model_file).stat().st_size
    if size > MAX_FILE_BYTES:
        raise OnnxError(f"{model_file}: {size} bytes is more than one ONNX protobuf can hold")
    ox = onnx()
    try:
        model = ox.load_model(os.fspath(model_file), load_external_data=False)
    except Exception as e:
        raise OnnxError(f"{model_file}: not a readable ONNX model: {e}") from None
    if any(t.data_location == ox.TensorProto.EXTERNAL for t in model.graph.initializer):
        raise OnnxError(f"{model_file}: initializers stored in external files are not read")
    return model


def get_model_metadata(model_file: str | os.PathLike[str]) -> dict[str, list[tuple[str, Any]]]:
    """``{'input_tensor_data': [(name, shape)], 'output_tensor_data': [...]}`` as MXNet's."""
    model = _load(model_file)
    inits = {t.name for t in model.graph.initializer}

    def dims(vi: Any) -> tuple[Any, ...]:
        return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param
                     for d in vi.type.tensor_type.shape.dim)

    return {"input_tensor_data": [(vi.name, dims(vi)) for vi in model.graph.input
                                  if vi.name not in inits],
            "output_tensor_data": [(vi.name, dims(vi)) for vi in model.graph.output]}


@_reg("ReverseSequence")
def _reverse_sequence(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if int(a.get("time_axis", 0)) != 0 or int(a.get("batch_axis", 1)) != 1:
        raise m.error("only time_axis=0, batch_axis=1 maps to SequenceReverse")
    return _op("SequenceReverse")(m.sym(ins[0]), m.sym(ins[1]), use_sequence_length=True,
                                  name=_nm(m))


@_reg("ScatterND")
def _scatter_nd(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    base = m.consts.get(ins[0])
    if base is None or base.any() or a.get("reduction", "none") != "none":
        raise m.error("only a scatter into zeros maps to scatter_nd")
    r = m.rank(ins[1])
    idx = _op("transpose")(m.sym(ins[1]), axes=(r - 1, *range(r - 1)))
    return _op("scatter_nd")(m.sym(ins[2]), idx, shape=tuple(base.shape), name=_nm(m))


@_reg("CumSum")
def _cumsum(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    if int(a.get("exclusive", 0)) or int(a.get("reverse", 0)) or ins[1] not in m.consts:
        raise m.error("only an inclusive forward CumSum over a constant axis maps to cumsum")
    axis = int(np.asarray(m.consts[ins[1]]).reshape(-1)[0])
    return _op("_np_cumsum")(m.sym(ins[0]), axis=axis, name=_nm(m))


@_reg("Det")
def _det(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    y = _op("_linalg_det")(m.sym(ins[0]))
    shape = m.shape(ins[0])[:-2]  # ONNX drops the matrix axes; MXNet keeps (1,) for one matrix
    return _op("Reshape")(y, shape=shape, name=_nm(m)) if shape else y


@_reg("GridSample")
def _grid_sample(m: Importer, ins: list[str], a: dict[str, Any]) -> Symbol:
    mode, pad = a.get("mode", "bilinear"), a.get("padding_mode", "zeros")
    if mode not in ("bilinear", "linear") or pad != "zeros" or not int(a.get("align_corners", 0)):
        raise m.error("only bilinear, zero-padded, corner-aligned GridSample maps to "
                      "BilinearSampler")
    grid = _op("transpose")(m.sym(ins[1]), axes=(0, 3, 1, 2))
    return _op("BilinearSampler")(m.sym(ins[0]), grid, name=_nm(m))


# ONNX recurrent gate blocks as positions of MXNet's (lstm: i o f c <- i f g o; gru: z r h <-
# r z n); MXNet's block j is ONNX's block ORDER.index(j)
_RNN_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}
_RNN_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


@_reg("LSTM", "GRU", "RNN")
def _recurrent(m: Importer, ins: list[str], a: dict[str, Any]) -> list[Symbol]:
    """One ONNX recurrent node as a one-layer RNN: its W, R, B repacked into MXNet's flat
    parameters (gate blocks reordered), its output back in ONNX's (T, D, N, H) layout."""
    kind = m.node.op_type
    d = {"forward": 1, "bidirectional": 2}.get(a.get("direction", "forward"))
    acts = [str(v.decode() if isinstance(v, bytes) else v) for v in a.get("activations", [])]
    mode = {"LSTM": "lstm", "GRU": "gru"}.get(kind)
    if kind == "RNN":
        act = set(acts or ["Tanh"])
        mode = {frozenset({"Tanh"}): "rnn_tanh", frozenset({"Relu"}): "rnn_relu"}.get(
            frozenset(act))
    elif acts and acts != _RNN_DEFAULT_ACTS[kind] * (len(acts) // len(_RNN_DEFAULT_ACTS[kind])):
        mode = None
    gru_reset = kind != "GRU" or int(a.get("linear_before_reset", 0))
    bad = (d is None or mode is None or "clip" in a or int(a.get("input_forget", 0))
           or int(a.get("layout", 0)) or not gru_reset or (len(ins) > 7 and ins[7]))
    if bad:
        raise m.error("only forward or bidirectional, default activations (Tanh or Relu for "
                      "RNN), no clip, peepholes or input_forget, layout 0 and (GRU) "
                      "linear_before_reset=1 map to MXNet's RNN")
    assert d is not None and mode is not None
    h = int(a["hidden_size"])
    t, n, _ = m.shape(ins[0])
    g = len(_RNN_ORDER[kind])
    rows = np.concatenate([np.arange(h) + _RNN_ORDER[kind].index(j) * h for j in range(g)])
    dt = np.float32

    def opt(k: int) -> str | None:
        return ins[k] if len(ins) > k and ins[k] else None

    def take(name: str, idx: np.ndarray) -> Symbol:
        return _op("take")(m.sym(name), m.new_param(f"{_nm(m)}_rows", idx.astype(np.int64)),
                           axis=1)

    def flat(s: Symbol) -> Symbol:
        return _op("Reshape")(s, shape=(d, -1))

    weights = _op("Concat")(flat(take(ins[1], rows)), flat(take(ins[2], rows)), dim=1)
    b = opt(3)
    bias = (flat(take(b, np.concatenate([rows, rows + g * h]))) if b is not None
            else m.new_param(f"{_nm(m)}_bias", np.zeros((d, 2 * g * h), dt)))
    params = _op("Concat")(_op("Reshape")(weights, shape=(-1,)),
                           _op("Reshape")(bias, shape=(-1,)), dim=0)

    def state(k: int, hint: str) -> Symbol:
        s = opt(k)
        return m.sym(s) if s is not None else m.new_param(f"{_nm(m)}_{hint}",
                                                          np.zeros((d, n, h), dt))

    args = [m.sym(ins[0]), params, state(5, "h0")]
    if kind == "LSTM":
        args.append(state(6, "c0"))
    seq = opt(4)
    if seq is not None:
        args.append(m.sym(seq))
    r = _op("RNN")(*args, state_size=h, num_layers=1, bidirectional=d == 2, mode=mode,
                   state_outputs=True, use_sequence_length=seq is not None,
                   name=f"{_nm(m)}_rnn")
    y = _op("transpose")(_op("Reshape")(r[0], shape=(t, n, d, h)), axes=(0, 2, 1, 3),
                         name=_nm(m))
    return [y, r[1], *([r[2]] if kind == "LSTM" else [])]
