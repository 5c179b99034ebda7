"""Converters for the operators registered after the first exporter (issue 13): linalg, the
legacy and spatial operators, RNN, casts and a few contrib and image operators. Same contract
as ``export_ops`` (``fn(x, node, ins, outs)``); importing this module adds them to
``CONVERTERS`` (import the complete table from here). Operators with no faithful ONNX form
are listed in docs/onnx.md."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.ir.graph import Node
from nnsym.onnx.export_ops import CONVERTERS as CONVERTERS  # the complete table (re-exported)
from nnsym.onnx.export_ops import (
    _as_out_shape,
    _axes,
    _fail,
    _in_dtype,
    _in_shape,
    _reg,
    _reshape,
    _scalar,
)
from nnsym.onnx.exporter import Exporter, tensor_type
from nnsym.ops.image.image import lighting_consts, resize_tables
from nnsym.ops.nn.rnn import param_count, unpack_parameters


def _scaled(x: Exporter, node: Node, y: str, alpha: float, out: str | None = None) -> str:
    if alpha == 1.0:
        return x.add1("Identity", [y], out)
    return x.add1("Mul", [y, _scalar(x, node, alpha)], out)


def _swap_last(x: Exporter, a: str, ndim: int) -> str:
    return x.add1("Transpose", [a], perm=[*range(ndim - 2), ndim - 1, ndim - 2])


def _rows_last(node: Node, ndim: int) -> list[int] | None:
    """The permutation moving the rows axis (``axis``) next to the last, or None if it is."""
    axis = node.params.axis % ndim
    if axis == ndim - 2:
        return None
    if axis == ndim - 1:
        raise _fail(node, f"axis={node.params.axis} (the rows on the columns' axis)")
    return [*(i for i in range(ndim - 1) if i != axis), axis, ndim - 1]


# --- linalg ---------------------------------------------------------------------------------------
@_reg("_linalg_gemm2", "_linalg_gemm")
def _gemm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    n = len(_in_shape(x, node))
    perm = _rows_last(node, n)
    ins = [x.add1("Transpose", [i], perm=perm) for i in ins] if perm else list(ins)
    a = _swap_last(x, ins[0], n) if p.transpose_a else ins[0]
    b = _swap_last(x, ins[1], n) if p.transpose_b else ins[1]
    y = _scaled(x, node, x.add1("MatMul", [a, b]), float(p.alpha))
    if node.op_name == "_linalg_gemm":
        y = x.add1("Add", [y, _scaled(x, node, ins[2], float(p.beta))])
    if perm:
        x.add("Transpose", [y], outs[:1], perm=[int(i) for i in np.argsort(perm)])
    else:
        x.add("Identity", [y], outs[:1])


@_reg("_linalg_syrk")
def _syrk(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    at = _swap_last(x, ins[0], len(_in_shape(x, node)))
    pair = [at, ins[0]] if p.transpose else [ins[0], at]
    _scaled(x, node, x.add1("MatMul", pair), float(p.alpha), outs[0])


@_reg("_linalg_trmm")
def _trmm(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    n = _in_shape(x, node)[-1]
    tri = np.tril(np.ones((n, n))) if p.lower else np.triu(np.ones((n, n)))
    a = x.add1("Mul", [ins[0], x.const(tri, _in_dtype(x, node), hint=f"{node.name}_tri")])
    if p.transpose:
        a = _swap_last(x, a, len(_in_shape(x, node)))
    pair = [ins[1], a] if p.rightside else [a, ins[1]]
    _scaled(x, node, x.add1("MatMul", pair), float(p.alpha), outs[0])


@_reg("_linalg_det")
def _det(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _as_out_shape(x, node, x.add1("Det", ins[:1]), outs[0])


@_reg("_linalg_slogdet")
def _slogdet(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    det = x.add1("Det", ins[:1])
    _as_out_shape(x, node, x.add1("Sign", [det]), outs[0], 0)
    _as_out_shape(x, node, x.add1("Log", [x.add1("Abs", [det])]), outs[1], 1)


def _index_table(node: Node, shape: tuple[int, ...]) -> np.ndarray:
    """Where each output element comes from: the operator's own reference run on 1, 2, 3, ...
    (0 marks a zero), so the table follows its element order exactly."""
    assert node.op is not None and node.op.reference is not None
    src = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float64).reshape(shape)
    out = node.op.reference(node.params, src)
    table: np.ndarray = np.rint(np.asarray(out[0] if isinstance(out, tuple) else out))
    return table.astype(np.int64)


def _gather_last(x: Exporter, node: Node, ins: list[str], outs: list[str], k: int) -> None:
    """The output's last ``k`` dims gathered from the input's last two (k=1) or last one
    (k=2) by the reference's index table, 0 meaning a zero."""
    shape = _in_shape(x, node)
    m = 2 if k == 1 else 1
    batch, core = shape[: len(shape) - m], shape[len(shape) - m :]
    table = _index_table(node, core)
    flat = _reshape(x, ins[0], [*batch, int(np.prod(core))])
    if (table == 0).any():  # a zero to pick for the untouched elements
        zero = x.const(np.zeros((*batch, 1)), _in_dtype(x, node), hint=f"{node.name}_zero")
        flat = x.add1("Concat", [zero, flat], axis=-1)
    else:
        table = table - 1
    y = x.add1("Gather", [flat, x.const(table.reshape(-1))], axis=len(batch))
    _as_out_shape(x, node, y, outs[0])


@_reg("_linalg_extractdiag", "_linalg_extracttrian")
def _extract(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _gather_last(x, node, ins, outs, 1)


@_reg("_linalg_makediag", "_linalg_maketrian")
def _make(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _gather_last(x, node, ins, outs, 2)


@_reg("_linalg_sumlogdiag")
def _sumlogdiag(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    shape = _in_shape(x, node)
    n = shape[-1]
    eye = x.const(np.eye(n), _in_dtype(x, node), hint=f"{node.name}_eye")
    diag = x.add1("ReduceSum", [x.add1("Mul", [ins[0], eye]), _axes(x, [-1])], keepdims=0)
    total = x.add1("ReduceSum", [x.add1("Log", [diag]), _axes(x, [-1])], keepdims=0)
    _as_out_shape(x, node, total, outs[0])


@_reg("khatri_rao")
def _khatri_rao(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    acc = ins[0]
    k = _in_shape(x, node)[-1]
    for b in ins[1:]:
        prod = x.add1("Mul", [x.add1("Unsqueeze", [acc, _axes(x, [1])]),
                              x.add1("Unsqueeze", [b, _axes(x, [0])])])
        acc = _reshape(x, prod, [-1, k])
    x.add("Identity", [acc], outs)


# --- casts, identities, small contrib and image operators ----------------------------------------
@_reg("amp_cast", "amp_multicast")
def _to_out_dtype(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    for k, out in enumerate(outs):
        x.add("Cast", [ins[k]], [out], to=tensor_type(x.out_dtype(node, k)))


@_reg("_np_cumsum")
def _cumsum(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    a, axis = ins[0], node.params.axis
    if axis is None:
        a, axis = _reshape(x, a, [-1]), 0
    if x.out_dtype(node) != _in_dtype(x, node):
        a = x.cast(a, x.out_dtype(node))
    x.add("CumSum", [a, x.const(int(axis), np.int64, hint="axis")], outs)


@_reg("IdentityAttachKLSparseReg", "_contrib_gradientmultiplier")
def _identity(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    x.add("Identity", ins[:1], outs[:1])


CONVERTERS["_contrib_round_ste"] = CONVERTERS["round"]
CONVERTERS["_contrib_sign_ste"] = CONVERTERS["sign"]


@_reg("_contrib_div_sqrt_dim")
def _div_sqrt_dim(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    d = _in_shape(x, node)[-1]
    x.add("Div", [ins[0], _scalar(x, node, float(np.sqrt(d)))], outs)


@_reg("_image_to_tensor")
def _to_tensor(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    n = len(_in_shape(x, node))
    perm = [2, 0, 1] if n == 3 else [0, 3, 1, 2]
    y = x.cast(x.add1("Transpose", ins[:1], perm=perm), x.out_dtype(node))
    x.add("Div", [y, x.const(255.0, x.out_dtype(node), hint=f"{node.name}_255")], outs)


@_reg("_image_normalize")
def _normalize(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    c = shape[-3]
    dt = x.out_dtype(node)
    mean = np.broadcast_to(np.asarray(p.mean, np.float64), (c,)).reshape(c, 1, 1)
    std = np.broadcast_to(np.asarray(p.std, np.float64), (c,)).reshape(c, 1, 1)
    a = x.cast(ins[0], dt) if _in_dtype(x, node) != dt else ins[0]
    y = x.add1("Sub", [a, x.const(mean, dt, hint=f"{node.name}_mean")])
    x.add("Div", [y, x.const(std, dt, hint=f"{node.name}_std")], outs)


def _flip(axis: int) -> object:
    def conv(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
        x.add("Slice", [ins[0], x.const([-1]), x.const([np.iinfo(np.int64).min]),
                        _axes(x, [axis]), x.const([-1])], outs)
    return conv


CONVERTERS["_image_flip_left_right"] = _flip(-2)  # type: ignore[assignment]
CONVERTERS["_image_flip_top_bottom"] = _flip(-3)  # type: ignore[assignment]


# --- Crop (legacy): a window of the last two axes --------------------------------------------
@_reg("Crop")
def _crop(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    shape, out = _in_shape(x, node), x.out_shape(node)
    h, w = out[-2], out[-1]
    p = node.params
    if p.center_crop:
        top, left = (shape[-2] - h) // 2, (shape[-1] - w) // 2
    else:
        top, left = int(p.offset[0]), int(p.offset[1])
    x.add("Slice", [ins[0], x.const([top, left]), x.const([top + h, left + w]),
                    _axes(x, [len(shape) - 2, len(shape) - 1])], outs[:1])


# --- spatial sampling --------------------------------------------------------------------------
def _base_grid(h: int, w: int) -> np.ndarray:
    """(3, H * W): normalized x, y in [-1, 1] and ones, row-major over (H, W)."""
    ys, xs = np.meshgrid(np.linspace(-1, 1, h) if h > 1 else np.array([-1.0]),
                         np.linspace(-1, 1, w) if w > 1 else np.array([-1.0]), indexing="ij")
    return np.stack([xs.ravel(), ys.ravel(), np.ones(h * w)])


def _affine_grid(x: Exporter, node: Node, loc: str, h: int, w: int, dt: np.dtype) -> str:
    """(N, 2, H, W) sampling grid from (N, 6) affine parameters."""
    theta = _reshape(x, loc, [-1, 2, 3])
    g = x.add1("MatMul", [theta, x.const(_base_grid(h, w), dt, hint=f"{node.name}_grid")])
    return _reshape(x, g, [-1, 2, h, w])


def _sample(x: Exporter, data: str, grid_n2hw: str, out: str) -> None:
    """Bilinear sampling, zero outside, corners aligned: ONNX GridSample on an NHW2 grid."""
    grid = x.add1("Transpose", [grid_n2hw], perm=[0, 2, 3, 1])
    x.add("GridSample", [data, grid], [out], mode="bilinear", padding_mode="zeros",
          align_corners=1)


@_reg("GridGenerator")
def _grid_generator(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    dt = x.out_dtype(node)
    _, _, h, w = x.out_shape(node)
    if node.params.transform_type == "affine":
        x.add("Identity", [_affine_grid(x, node, ins[0], h, w, dt)], outs[:1])
        return
    # warp: (flow + pixel coordinates) normalized to [-1, 1]
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    pix = x.const(np.stack([xs, ys])[None], dt, hint=f"{node.name}_pixels")
    scale = np.array([2 / max(w - 1, 1), 2 / max(h - 1, 1)]).reshape(1, 2, 1, 1)
    y = x.add1("Mul", [x.add1("Add", [ins[0], pix]), x.const(scale, dt, hint="scale")])
    x.add("Sub", [y, x.const(1.0, dt, hint="one")], outs[:1])


@_reg("BilinearSampler")
def _bilinear_sampler(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _sample(x, ins[0], ins[1], outs[0])


@_reg("SpatialTransformer")
def _spatial_transformer(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    _, _, h, w = x.out_shape(node)
    _sample(x, ins[0], _affine_grid(x, node, ins[1], h, w, x.out_dtype(node)), outs[0])


# --- RNN: one ONNX LSTM / GRU / RNN node per layer --------------------------------------------
# ONNX's gate order as positions in MXNet's (lstm: i f g o -> i o f c; gru: r z n -> z r h)
_GATE_ORDER = {"lstm": [0, 3, 1, 2], "gru": [1, 0, 2], "rnn_tanh": [0], "rnn_relu": [0]}


@_reg("RNN")
def _rnn(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if p.projection_size is not None:
        raise _fail(node, "projection_size (ONNX's LSTM has no projection)")
    if p.clip:
        raise _fail(node, "lstm_state_clip_min/max (ONNX's clip bounds the gates, not the cell)")
    t, n, i = _in_shape(x, node)
    h, d, lstm = p.state_size, p.dirs, p.mode == "lstm"
    order = _GATE_ORDER[p.mode]
    idx = unpack_parameters(p, np.arange(param_count(p, i)), i)

    def gates(a: np.ndarray | None) -> np.ndarray:
        assert a is not None
        return np.concatenate([a[k * h : (k + 1) * h] for k in order])

    seq = ""
    if p.use_sequence_length:
        seq = x.cast(ins[4 if lstm else 3], np.int32)
    kind = "LSTM" if lstm else "GRU" if p.mode == "gru" else "RNN"
    attrs: dict[str, Any] = {"hidden_size": h,
                                "direction": "bidirectional" if d == 2 else "forward"}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1
    if kind == "RNN":
        attrs["activations"] = ["Tanh" if p.mode == "rnn_tanh" else "Relu"] * d
    data, hys, cys = ins[0], [], []
    for layer in range(p.num_layers):
        ks = range(layer * d, (layer + 1) * d)
        w = np.stack([gates(idx[k][0]) for k in ks])
        r = np.stack([gates(idx[k][1]) for k in ks])
        b = np.stack([np.concatenate([gates(idx[k][2]), gates(idx[k][3])]) for k in ks])
        tensors = [x.add1("Gather", [ins[1], x.const(a, hint=f"{node.name}_idx")], axis=0)
                   for a in (w, r, b)]
        rows = [x.const([layer * d]), x.const([(layer + 1) * d]), _axes(x, [0])]
        h0 = x.add1("Slice", [ins[2], *rows])
        extra = [x.add1("Slice", [ins[3], *rows])] if lstm else []
        res = x.add(kind, [data, *tensors, seq, h0, *extra], 3 if lstm else 2, **attrs)
        hys.append(res[1])
        if lstm:
            cys.append(res[2])
        y = x.add1("Transpose", [res[0]], perm=[0, 2, 1, 3])
        data = _reshape(x, y, [t, n, d * h])
    x.add("Identity", [data], outs[:1])
    if len(outs) > 1:
        x.add("Concat", hys, outs[1:2], axis=0)
    if len(outs) > 2:
        x.add("Concat", cys, outs[2:3], axis=0)


# --- operators whose output depends on the input's shape only: a constant ----------------------
@_reg("_contrib_arange_like", "_contrib_index_array", "_contrib_MultiBoxPrior")
def _shape_constant(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    assert node.op is not None and node.op.reference is not None
    zeros = np.zeros(_in_shape(x, node), _in_dtype(x, node))
    out = node.op.reference(node.params, zeros)
    value = np.asarray(out[0] if isinstance(out, tuple) else out)
    x.add("Identity", [x.const(value, x.out_dtype(node), hint=f"{node.name}_value")], outs[:1])


# --- normalization and pooling variants ---------------------------------------------------------
@_reg("BatchNorm_v1", "_contrib_SyncBatchNorm", "_contrib_BatchNormWithReLU")
def _batch_norm_like(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    if len(outs) > 1:
        raise _fail(node, "output_mean_var (batch statistics are a training output)")
    shape = _in_shape(x, node)
    axis = getattr(p, "axis", 1) % len(shape)
    gamma = ins[1]
    if p.fix_gamma:
        gamma = x.const(np.ones(shape[axis]), _in_dtype(x, node, 1), hint=f"{node.name}_gamma1")
    perm = [0, axis] + [i for i in range(1, len(shape)) if i != axis]
    data = x.add1("Transpose", ins[:1], perm=perm) if axis != 1 else ins[0]
    y = x.add1("BatchNormalization", [data, gamma, *ins[2:5]], epsilon=float(p.eps),
               momentum=float(p.momentum))
    if node.op_name == "_contrib_BatchNormWithReLU":
        y = x.add1("Relu", [y])
    if axis != 1:
        x.add("Transpose", [y], outs[:1], perm=[int(i) for i in np.argsort(perm)])
    else:
        x.add("Identity", [y], outs[:1])


CONVERTERS["_contrib_SparseEmbedding"] = CONVERTERS["Embedding"]


# --- densities ------------------------------------------------------------------------------------
@_reg("_random_pdf_normal", "_random_pdf_exponential", "_random_pdf_uniform")
def _pdf(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    dt = _in_dtype(x, node)
    extra = len(_in_shape(x, node)) - len(_in_shape(x, node, 1))
    prm = [x.add1("Unsqueeze", [v, _axes(x, list(range(-extra, 0)))]) if extra else v
           for v in ins[1:]]
    s = ins[0]

    def c(v: float) -> str:
        return x.const(v, dt, hint=f"{node.name}_c")

    kind = node.op_name[len("_random_pdf_"):]
    if kind == "normal":
        z = x.add1("Div", [x.add1("Sub", [s, prm[0]]), prm[1]])
        lp = x.add1("Sub", [x.add1("Mul", [c(-0.5), x.add1("Mul", [z, z])]),
                            x.add1("Add", [x.add1("Log", [prm[1]]), c(0.5 * np.log(2 * np.pi))])])
    elif kind == "exponential":
        lp = x.add1("Sub", [x.add1("Log", [prm[0]]), x.add1("Mul", [prm[0], s])])
    else:
        inside = x.add1("And", [x.add1("GreaterOrEqual", [s, prm[0]]),
                                x.add1("LessOrEqual", [s, prm[1]])])
        width = x.add1("Neg", [x.add1("Log", [x.add1("Sub", [prm[1], prm[0]])])])
        lp = x.add1("Where", [inside, x.add1("Expand", [width, x.add1("Shape", [s])]),
                              c(-np.inf)])
    y = lp if node.params.is_log else x.add1("Exp", [lp])
    _as_out_shape(x, node, y, outs[0])


# --- index arithmetic -----------------------------------------------------------------------------
def _strides(shape: tuple[int, ...]) -> np.ndarray:
    return np.array([int(np.prod(shape[k + 1:])) for k in range(len(shape))], np.int64)


@_reg("_ravel_multi_index")
def _ravel(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    dt = _in_dtype(x, node)
    st = _strides(tuple(node.params.shape))
    n = _in_shape(x, node)[0]
    w = x.const(st.reshape(n, *([1] * (len(_in_shape(x, node)) - 1))), dt, hint="strides")
    y = x.add1("ReduceSum", [x.add1("Mul", [ins[0], w]), _axes(x, [0])], keepdims=0)
    _as_out_shape(x, node, y, outs[0])


@_reg("_unravel_index")
def _unravel(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    dt = _in_dtype(x, node)
    shape = tuple(int(v) for v in node.params.shape)
    col = [len(shape)] + [1] * len(_in_shape(x, node))
    st = x.const(_strides(shape).reshape(col), np.float64, hint="strides")
    dims = x.const(np.array(shape).reshape(col), np.float64, hint="dims")
    v = x.add1("Unsqueeze", [x.cast(ins[0], np.float64), _axes(x, [0])])
    q = x.add1("Floor", [x.add1("Div", [v, st])])
    r = x.add1("Sub", [q, x.add1("Mul", [x.add1("Floor", [x.add1("Div", [q, dims])]), dims])])
    # the first index is not wrapped: MXNet's is the quotient itself
    first = x.const(np.arange(len(shape)).reshape(col) == 0, np.bool_, hint="first")
    x.cast(x.add1("Where", [first, q, r]), dt, outs[0])


# --- finiteness and sums of squares (MXNet's optimizer helpers) -------------------------------
def _all_finite_of(x: Exporter, a: str) -> str:
    """1.0 (float32) when every element is finite: a - a is 0 there, NaN otherwise."""
    zero = x.const(0.0, np.float32, hint="zero")
    a32 = x.cast(a, np.float32)
    ok = x.cast(x.add1("Equal", [x.add1("Sub", [a32, a32]), zero]), np.float32)
    return _reshape(x, x.add1("ReduceMin", [ok], keepdims=0), [1])


@_reg("all_finite", "multi_all_finite")
def _all_finite(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    oks = [_all_finite_of(x, a) for a in ins]
    x.add("Min", oks, outs[:1]) if len(oks) > 1 else x.add("Identity", oks, outs[:1])


@_reg("multi_sum_sq")
def _multi_sum_sq(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    sq = [x.add1("Mul", [c, c]) for c in (x.cast(a, np.float32) for a in ins)]
    sums = [_reshape(x, x.add1("ReduceSum", [v], keepdims=0), [1]) for v in sq]
    x.add("Concat", sums, outs[:1], axis=0)


# --- small contrib operators ----------------------------------------------------------------------
@_reg("_contrib_allclose")
def _allclose(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    dt = _in_dtype(x, node)
    ct = np.dtype(np.float32) if dt == np.float16 else dt
    a, b = (x.cast(v, ct) if ct != dt else v for v in ins[:2])
    tol = x.add1("Add", [x.const(np.float32(p.atol).astype(ct), ct, hint="atol"),
                         x.add1("Mul", [x.const(np.float32(p.rtol).astype(ct), ct, hint="rtol"),
                                        x.add1("Abs", [b])])])
    close = x.add1("Or", [x.add1("Equal", [a, b]),
                          x.add1("LessOrEqual", [x.add1("Abs", [x.add1("Sub", [a, b])]), tol])])
    if ct.kind == "f":
        na, nb = x.add1("IsNaN", [a]), x.add1("IsNaN", [b])
        nan = x.add1("Or", [na, nb])
        close = x.add1("And", [x.add1("Not", [nan]), close])
        if p.equal_nan:
            close = x.add1("Or", [close, x.add1("And", [na, nb])])
    ok = x.add1("ReduceMin", [x.cast(close, np.int32)], keepdims=0)
    _as_out_shape(x, node, x.cast(ok, x.out_dtype(node)), outs[0])


@_reg("fill_element_0index")
def _fill_element_0index(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    n = _in_shape(x, node)[0]
    idx = _reshape(x, x.cast(ins[2], np.int64), [n, 1])
    x.add("ScatterElements", [ins[0], idx, _reshape(x, ins[1], [n, 1])], outs, axis=1)


@_reg("_contrib_getnnz")
def _getnnz(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    nz = x.cast(x.add1("Not", [x.add1("Equal", [ins[0], _scalar(x, node, 0)])]), np.int64)
    axis = node.params.axis
    args = [nz] if axis is None else [nz, _axes(x, [int(axis)])]
    _as_out_shape(x, node, x.add1("ReduceSum", args, keepdims=0), outs[0])


@_reg("_contrib_index_copy")
def _index_copy(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    k = _in_shape(x, node, 1)[0]
    idx = _reshape(x, x.cast(ins[1], np.int64), [k, 1])
    x.add("ScatterND", [ins[0], idx, ins[2]], outs)


@_reg("_contrib_edge_id")
def _edge_id(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    rows, cols = _in_shape(x, node)
    u, v = x.cast(ins[1], np.int64), x.cast(ins[2], np.int64)

    def inside(i: str, n: int) -> str:
        return x.add1("And", [x.add1("GreaterOrEqual", [i, x.const(0)]),
                              x.add1("Less", [i, x.const(n)])])

    ok = x.add1("And", [inside(u, rows), inside(v, cols)])
    uc = x.add1("Clip", [u, x.const(0), x.const(rows - 1)])
    vc = x.add1("Clip", [v, x.const(0), x.const(cols - 1)])
    pos = x.add1("Concat", [x.add1("Unsqueeze", [uc, _axes(x, [1])]),
                            x.add1("Unsqueeze", [vc, _axes(x, [1])])], axis=1)
    val = x.add1("GatherND", [ins[0], pos])
    ok = x.add1("And", [ok, x.add1("Not", [x.add1("Equal", [val, _scalar(x, node, 0)])])])
    x.add("Where", [ok, val, _scalar(x, node, -1)], outs)


@_reg("_contrib_count_sketch")
def _count_sketch(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    shape = _in_shape(x, node)
    n_in, dt = shape[-1], _in_dtype(x, node)
    out_dim = int(node.params.out_dim)
    h = _reshape(x, x.cast(ins[1], np.int64), [n_in])
    # a negative bucket adds nowhere (ONNX's OneHot would count it from the end)
    h = x.add1("Where", [x.add1("Less", [h, x.const(0)]), x.const(out_dim), h])
    onehot = x.add1("OneHot", [h, x.const([out_dim]), x.const([0, 1], np.float32, hint="onoff")],
                    axis=-1)
    m = x.add1("Mul", [x.cast(onehot, dt), _reshape(x, x.cast(ins[2], dt), [n_in, 1])])
    flat = _reshape(x, ins[0], [-1, n_in])
    _as_out_shape(x, node, x.add1("MatMul", [flat, m]), outs[0])


@_reg("_image_crop")
def _image_crop(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    n = len(_in_shape(x, node))
    x.add("Slice", [ins[0], x.const([p.y, p.x]), x.const([p.y + p.height, p.x + p.width]),
                    _axes(x, [n - 3, n - 2])], outs)


# --- interleaved attention matmuls ------------------------------------------------------------
def _heads_split(x: Exporter, a: str, parts: int, heads: int, shape: tuple[int, ...]) -> str:
    """(L, B, parts*H*D) -> (parts, B, H, L, D)."""
    n, b, f = shape
    r = _reshape(x, a, [n, b, heads, parts, f // parts // heads])
    return x.add1("Transpose", [r], perm=[3, 1, 2, 0, 4])


def _part(x: Exporter, t: str, k: int) -> str:
    return x.add1("Gather", [t, x.const(k, np.int64, hint="part")], axis=0)


@_reg("_contrib_interleaved_matmul_selfatt_qk", "_contrib_interleaved_matmul_encdec_qk")
def _interleaved_qk(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    heads = int(node.params.heads)
    if node.op_name.endswith("selfatt_qk"):
        t = _heads_split(x, ins[0], 3, heads, _in_shape(x, node))
        q, k = _part(x, t, 0), _part(x, t, 1)
        d = _in_shape(x, node)[2] // 3 // heads
    else:
        q = _part(x, _heads_split(x, ins[0], 1, heads, _in_shape(x, node)), 0)
        k = _part(x, _heads_split(x, ins[1], 2, heads, _in_shape(x, node, 1)), 0)
        d = _in_shape(x, node)[2] // heads
    kt = x.add1("Transpose", [k], perm=[0, 1, 3, 2])
    s = x.add1("Div", [x.add1("MatMul", [q, kt]), _scalar(x, node, float(np.sqrt(d)))])
    _as_out_shape(x, node, s, outs[0])


@_reg("_contrib_interleaved_matmul_selfatt_valatt", "_contrib_interleaved_matmul_encdec_valatt")
def _interleaved_valatt(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    heads = int(node.params.heads)
    shape = _in_shape(x, node)
    if node.op_name.endswith("selfatt_valatt"):
        v = _part(x, _heads_split(x, ins[0], 3, heads, shape), 2)
    else:
        v = _part(x, _heads_split(x, ins[0], 2, heads, shape), 1)
    att = _in_shape(x, node, 1)
    a = _reshape(x, ins[1], [shape[1], heads, att[1], att[2]])
    y = x.add1("Transpose", [x.add1("MatMul", [a, v])], perm=[2, 0, 1, 3])
    _as_out_shape(x, node, y, outs[0])


# --- separable linear resampling: matrices read off the reference -----------------------------
@_reg("_contrib_AdaptiveAvgPooling2D", "_contrib_BilinearResize2D")
def _separable(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    """out = R_h @ data @ R_w^T over the last two axes; column i of R_h is the reference's
    response to row i set to 1 (exact for operators whose weights sum to 1 along each axis)."""
    assert node.op is not None and node.op.reference is not None
    ref = node.op.reference
    h, w = _in_shape(x, node)[-2:]
    oh, ow = x.out_shape(node)[-2:]
    extra = [np.zeros(_in_shape(x, node, k)) for k in range(1, len(ins))]
    rh, rw = np.zeros((oh, h)), np.zeros((ow, w))
    for i in range(h):
        e = np.zeros((1, 1, h, w))
        e[0, 0, i, :] = 1
        rh[:, i] = np.asarray(ref(node.params, e, *extra)).reshape(oh, ow)[:, 0]
    for j in range(w):
        e = np.zeros((1, 1, h, w))
        e[0, 0, :, j] = 1
        rw[:, j] = np.asarray(ref(node.params, e, *extra)).reshape(oh, ow)[0, :]
    lead = int(np.prod(_in_shape(x, node)[:-2]))
    y = _apply_separable(x, node, ins[0], rh, rw, lead, _in_dtype(x, node))
    _as_out_shape(x, node, y, outs[0])


def _apply_separable(x: Exporter, node: Node, data: str, rh: np.ndarray, rw: np.ndarray,
                     lead: int, dt: np.dtype) -> str:
    """R_h @ data @ R_w^T on (lead..., H, W) data as two 2-D products with constant right
    operands (W first, then H, as the kernels sum), a transpose between."""
    (oh, h), (ow, w) = rh.shape, rw.shape
    y = x.add1("MatMul", [_reshape(x, data, [lead * h, w]),
                          x.const(rw.T, dt, hint=f"{node.name}_cols")])
    y = x.add1("Transpose", [_reshape(x, y, [lead, h, ow])], perm=[0, 2, 1])
    y = x.add1("MatMul", [_reshape(x, y, [lead * ow, h]),
                          x.const(rh.T, dt, hint=f"{node.name}_rows")])
    return x.add1("Transpose", [_reshape(x, y, [lead, ow, oh])], perm=[0, 2, 1])


def _tap_matrix(idx: np.ndarray, wts: np.ndarray, n: int) -> np.ndarray:
    m = np.zeros((idx.shape[0], n))
    for o in range(idx.shape[0]):
        for k in range(idx.shape[1]):
            m[o, idx[o, k]] += wts[o, k]
    return m


@_reg("_image_resize")
def _image_resize(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    """(N)HWC: the kernel's row and column tap tables as matrices; 8-bit results rounded
    half to even (ONNX Round, numpy's rint) and clipped."""
    shape = _in_shape(x, node)
    nhwc = shape if len(shape) == 4 else (1, *shape)
    n, h, w, c = nhwc
    iy, wy, ix, wx = resize_tables(node.params, h, w)
    dt = _in_dtype(x, node)
    ct = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    a = x.cast(ins[0], ct) if dt != ct else ins[0]
    a = x.add1("Transpose", [_reshape(x, a, list(nhwc))], perm=[0, 3, 1, 2])
    rh, rw = _tap_matrix(iy, wy, h), _tap_matrix(ix, wx, w)
    y = _apply_separable(x, node, a, rh, rw, n * c, ct)
    y = x.add1("Transpose", [_reshape(x, y, [n, c, rh.shape[0], rw.shape[0]])],
               perm=[0, 2, 3, 1])
    if dt == np.uint8:
        y = x.add1("Clip", [x.add1("Round", [y]), x.const(0, ct, hint="lo"),
                            x.const(255, ct, hint="hi")])
    _as_out_shape(x, node, x.cast(y, dt) if dt != ct else y, outs[0])


@_reg("_contrib_box_encode")
def _box_encode(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    samples, matches, anchors, refs, means, stds = ins[:6]
    b, n = _in_shape(x, node)
    nref = _in_shape(x, node, 3)[1]
    if nref == 0:
        raise _fail(node, "no reference boxes")
    dt = _in_dtype(x, node)
    m = x.cast(matches, np.int64)
    ok = x.add1("And", [x.add1("Greater", [samples, x.const(0.5, dt, hint="half")]),
                        x.add1("And", [x.add1("GreaterOrEqual", [m, x.const(0)]),
                                       x.add1("Less", [m, x.const(nref)])])])
    idx = x.add1("Where", [ok, m, x.const(0)])
    idx = x.add1("Expand", [x.add1("Unsqueeze", [idx, _axes(x, [2])]), x.const([b, n, 4])])
    g = x.add1("GatherElements", [refs, idx], axis=1)

    def centre(box: str) -> tuple[str, str, str, str]:
        w = x.add1("Sub", [_coord(x, box, 2), _coord(x, box, 0)])
        h = x.add1("Sub", [_coord(x, box, 3), _coord(x, box, 1)])
        two = x.const(2, dt, hint="two")
        return (x.add1("Add", [_coord(x, box, 0), x.add1("Div", [w, two])]),
                x.add1("Add", [_coord(x, box, 1), x.add1("Div", [h, two])]), w, h)

    ax, ay, aw, ah = centre(anchors)
    gx, gy, gw, gh = centre(g)
    raw = [x.add1("Div", [x.add1("Sub", [gx, ax]), aw]),
           x.add1("Div", [x.add1("Sub", [gy, ay]), ah]),
           x.add1("Log", [x.add1("Div", [gw, aw])]), x.add1("Log", [x.add1("Div", [gh, ah])])]
    t = [x.add1("Div", [x.add1("Sub", [v, _coord(x, means, k)]), _coord(x, stds, k)])
         for k, v in enumerate(raw)]
    okx = x.add1("Expand", [x.add1("Unsqueeze", [ok, _axes(x, [2])]), x.const([b, n, 4])])
    x.add("Where", [okx, x.add1("Concat", t, axis=-1), x.const(0, dt, hint="zero")], outs[:1])
    if len(outs) > 1:
        x.add("Cast", [okx], outs[1:2], to=tensor_type(dt))


# --- boxes ----------------------------------------------------------------------------------------
def _coord(x: Exporter, boxes: str, k: int) -> str:
    """Component k of (..., 4) boxes, keeping the axis."""
    return x.add1("Gather", [boxes, x.const([k], np.int64, hint="k")], axis=-1)


@_reg("_contrib_box_iou")
def _box_iou(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    center = node.params.format == "center"
    dt = _in_dtype(x, node)
    zero, one = x.const(0, dt, hint="zero"), x.const(1, dt, hint="one")
    a = _reshape(x, ins[0], [-1, 1, 4])
    b = _reshape(x, ins[1], [1, -1, 4])

    def span(box: str, k: int) -> tuple[str, str]:
        lo, hi = _coord(x, box, k), _coord(x, box, k + 2)
        if not center:
            return lo, hi
        half = x.add1("Div", [hi, x.const(2, dt, hint="two")])
        return x.add1("Sub", [lo, half]), x.add1("Add", [lo, half])

    def overlap(k: int) -> str:
        (a0, a1), (b0, b1) = span(a, k), span(b, k)
        w = x.add1("Sub", [x.add1("Min", [a1, b1]), x.add1("Max", [a0, b0])])
        return x.add1("Where", [x.add1("Greater", [w, zero]), w, zero])

    def area(box: str) -> str:
        w, h = _coord(x, box, 2), _coord(x, box, 3)
        if not center:
            w, h = x.add1("Sub", [w, _coord(x, box, 0)]), x.add1("Sub", [h, _coord(x, box, 1)])
        neg = x.add1("Or", [x.add1("Less", [w, zero]), x.add1("Less", [h, zero])])
        return x.add1("Where", [neg, zero, x.add1("Mul", [w, h])])

    i = x.add1("Mul", [overlap(0), overlap(1)])
    u = x.add1("Sub", [x.add1("Add", [area(a), area(b)]), i])
    pos = x.add1("Greater", [i, zero])
    iou = x.add1("Where", [pos, x.add1("Div", [i, x.add1("Where", [pos, u, one])]), zero])
    _as_out_shape(x, node, iou, outs[0])


@_reg("_contrib_box_decode")
def _box_decode(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    dt = _in_dtype(x, node)
    d, a = ins[0], ins[1]

    def c(v: float) -> str:
        return x.const(v, dt, hint="c")

    if p.format == "corner":
        aw = x.add1("Sub", [_coord(x, a, 2), _coord(x, a, 0)])
        ah = x.add1("Sub", [_coord(x, a, 3), _coord(x, a, 1)])
        ax = x.add1("Add", [_coord(x, a, 0), x.add1("Div", [aw, c(2)])])
        ay = x.add1("Add", [_coord(x, a, 1), x.add1("Div", [ah, c(2)])])
    else:
        ax, ay, aw, ah = (_coord(x, a, k) for k in range(4))
    ox = x.add1("Add", [x.add1("Mul", [x.add1("Mul", [_coord(x, d, 0), c(p.std0)]), aw]), ax])
    oy = x.add1("Add", [x.add1("Mul", [x.add1("Mul", [_coord(x, d, 1), c(p.std1)]), ah]), ay])
    dw = x.add1("Mul", [_coord(x, d, 2), c(p.std2)])
    dh = x.add1("Mul", [_coord(x, d, 3), c(p.std3)])
    if p.clip > 0:
        dw, dh = x.add1("Min", [dw, c(p.clip)]), x.add1("Min", [dh, c(p.clip)])
    ow = x.add1("Div", [x.add1("Mul", [x.add1("Exp", [dw]), aw]), c(2)])
    oh = x.add1("Div", [x.add1("Mul", [x.add1("Exp", [dh]), ah]), c(2)])
    x.add("Concat", [x.add1("Sub", [ox, ow]), x.add1("Sub", [oy, oh]), x.add1("Add", [ox, ow]),
                     x.add1("Add", [oy, oh])], outs[:1], axis=-1)


# --- FFT (MXNet's interleaved real/imaginary layout) -------------------------------------------
@_reg("_contrib_fft", "_contrib_ifft")
def _fft(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    shape = _in_shape(x, node)
    n = len(shape)
    if node.op_name == "_contrib_fft":
        sig = x.add1("Unsqueeze", [ins[0], _axes(x, [n])])
        z = x.add1("DFT", [sig], axis=n - 1)
        _reshape(x, z, [*shape[:-1], 2 * shape[-1]], outs[0])
        return
    d = shape[-1] // 2
    z = x.add1("DFT", [_reshape(x, ins[0], [*shape[:-1], d, 2])], axis=n - 1, inverse=1)
    real = x.add1("Gather", [z, x.const(0, np.int64, hint="re")], axis=-1)
    x.add("Mul", [real, _scalar(x, node, float(d))], outs[:1])


# --- im2col / col2im: grouped (transposed) convolutions with one-hot kernels ---------------------
def _one_hot_kernels(c: int, kernel: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """(C * K, 1, *kernel): output channel c * K + j picks kernel position j of channel c."""
    k = int(np.prod(kernel))
    eye = np.eye(k).reshape(k, 1, *kernel)  # kernel j is one-hot at position j
    return np.concatenate([eye] * c).astype(dt)


def _conv_attrs(p: Any, nd: int) -> dict[str, Any]:
    pad = [int(v) for v in (p.pad or (0,) * nd)]
    return {"kernel_shape": [int(v) for v in p.kernel],
            "strides": [int(v) for v in (p.stride or (1,) * nd)],
            "dilations": [int(v) for v in (p.dilate or (1,) * nd)], "pads": pad + pad}


@_reg("im2col")
def _im2col(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    shape = _in_shape(x, node)
    c, nd = shape[1], len(p.kernel)
    w = x.const(_one_hot_kernels(c, tuple(p.kernel), _in_dtype(x, node)), _in_dtype(x, node),
                hint=f"{node.name}_onehot")
    y = x.add1("Conv", [ins[0], w], group=c, **_conv_attrs(p, nd))
    _as_out_shape(x, node, y, outs[0])


@_reg("col2im")
def _col2im(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    p = node.params
    out = x.out_shape(node)
    nd = len(p.kernel)
    attrs = _conv_attrs(p, nd)
    spatial = []
    for k in range(nd):
        span = attrs["dilations"][k] * (attrs["kernel_shape"][k] - 1) + 1
        spatial.append((out[2 + k] + 2 * attrs["pads"][k] - span) // attrs["strides"][k] + 1)
    c = out[1]
    cols = _reshape(x, ins[0], [out[0], c * int(np.prod(p.kernel)), *spatial])
    w = x.const(_one_hot_kernels(c, tuple(p.kernel), _in_dtype(x, node)), _in_dtype(x, node),
                hint=f"{node.name}_onehot")
    # the rows a floor division dropped come back as output padding (less than the stride)
    extra = [out[2 + k] + 2 * attrs["pads"][k] - (spatial[k] - 1) * attrs["strides"][k]
             - attrs["dilations"][k] * (attrs["kernel_shape"][k] - 1) - 1 for k in range(nd)]
    x.add("ConvTranspose", [cols, w], outs[:1], group=c, output_padding=extra, **attrs)


@_reg("_image_adjust_lighting")
def _adjust_lighting(x: Exporter, node: Node, ins: list[str], outs: list[str]) -> None:
    dt = _in_dtype(x, node)
    ct = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    sub = x.const(np.asarray(lighting_consts(_in_shape(x, node), node.params.alpha)), ct,
                  hint=f"{node.name}_shift")
    y = x.add1("Sub", [x.cast(ins[0], ct) if dt != ct else ins[0], sub])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        y = x.add1("Clip", [y, x.const(info.min, ct, hint="lo"), x.const(info.max, ct, hint="hi")])
    if dt != ct:
        x.add("Cast", [y], outs[:1], to=tensor_type(dt))
    else:
        x.add("Identity", [y], outs[:1])
