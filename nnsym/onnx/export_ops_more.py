"""Converters for the operators registered after the first exporter (issue 13): linalg, the
legacy and spatial operators, RNN, casts and a few contrib and image operators. Same contract
as ``export_ops`` (``fn(x, node, ins, outs)``); imported at the end of it, adding to
``CONVERTERS``. Operators with no faithful ONNX form are listed in docs/onnx.md."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.ir.graph import Node
from nnsym.onnx.export_ops import (
    CONVERTERS,
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
