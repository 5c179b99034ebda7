"""RNN: MXNet's fused recurrent operator (rnn_relu, rnn_tanh, lstm, gru), multi-layer and
bidirectional, with its packed parameter vector."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    get_op,
    merge_shape,
    register,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}
FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class RNNParams(Params):
    state_size: int = field(lower=1, doc="Hidden state size H.")
    num_layers: int = field(lower=1, doc="Number of stacked layers.")
    bidirectional: bool = field(default=False, doc="Also run each layer backwards in time.")
    mode: str = field(choices=tuple(GATES), doc="The cell: rnn_relu, rnn_tanh, lstm or gru.")
    p: float = field(default=0.0, lower=0.0, upper=1.0, doc="Dropout between layers (training).")
    state_outputs: bool = field(default=False, doc="Also output the final states.")
    projection_size: int | None = field(default=None, doc="LSTM projection (not supported).")
    lstm_state_clip_min: float | None = field(default=None, doc="Cell clip (not supported).")
    lstm_state_clip_max: float | None = field(default=None, doc="Cell clip (not supported).")
    lstm_state_clip_nan: bool = field(default=False, doc="Cell clip of NaN (not supported).")
    use_sequence_length: bool = field(
        default=False, doc="Per-sequence lengths (not supported, as on MXNet's CPU)."
    )

    def __post_init__(self) -> None:
        for name in ("projection_size", "lstm_state_clip_min", "lstm_state_clip_max"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name} is not implemented in nnsym")
        if self.lstm_state_clip_nan or self.use_sequence_length:
            raise ValueError("lstm_state_clip_nan and use_sequence_length are not implemented")
        if self.num_layers * self.dirs > 64:
            raise ValueError("at most 64 layer directions are supported")

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def gates(self) -> int:
        return GATES[self.mode]


def param_count(p: RNNParams, input_size: int) -> int:
    """Length of the packed parameter vector."""
    gh, h, d = p.gates * p.state_size, p.state_size, p.dirs
    n = 0
    for layer in range(p.num_layers):
        il = input_size if layer == 0 else d * h
        n += d * (gh * (il + h) + 2 * gh)
    return n


def rnn_inputs(p: RNNParams) -> tuple[str, ...]:
    return ("data", "parameters", "state", *(("state_cell",) if p.mode == "lstm" else ()))


def rnn_outputs(p: RNNParams) -> tuple[str, ...]:
    if not p.state_outputs:
        return ("output",)
    return ("output", "state_output", *(("statecell_output",) if p.mode == "lstm" else ()))


def rnn_shape(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != 3:
        raise RuleError(f"data has shape {shape_str(data)}; RNN needs (T, N, input size)")
    t, n, i = data
    h, ld = p.state_size, p.num_layers * p.dirs
    st = (ld, n, h)
    want = [data, None if i is None else (param_count(p, i),), *([st] * (len(ins) - 2))]
    new = []
    for name, given, w in zip(rnn_inputs(p), ins, want):
        try:
            new.append(merge_shape(given, w))
        except RuleError:
            raise RuleError(
                f"{name} has shape {shape_str(given)} but data {shape_str(data)} with "
                f"state_size={h}, num_layers={p.num_layers} needs {shape_str(w)}"
            ) from None
    return new, [(t, n, p.dirs * h), *([st] * (len(outs) - 1))]


def rnn_type(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    t = next((v for v in (*ins, *outs) if v is not None), None)
    return [t] * len(ins), [t] * len(outs)


def _unpack(p: RNNParams, w: np.ndarray, input_size: int) -> list[tuple[np.ndarray, ...]]:
    """(W_x, W_h, b_x, b_h) per (layer, direction), from the packed vector."""
    gh, h, d = p.gates * p.state_size, p.state_size, p.dirs
    mats, o = [], 0
    for layer in range(p.num_layers):
        il = input_size if layer == 0 else d * h
        for _ in range(d):
            wx = w[o : o + gh * il].reshape(gh, il)
            o += gh * il
            wh = w[o : o + gh * h].reshape(gh, h)
            o += gh * h
            mats.append((wx, wh))
    out: list[tuple[np.ndarray, ...]] = []
    for k, (wx, wh) in enumerate(mats):
        out.append((wx, wh, w[o + 2 * k * gh : o + (2 * k + 1) * gh],
                    w[o + (2 * k + 1) * gh : o + (2 * k + 2) * gh]))
    return out


def _sig(v: np.ndarray) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-v)))


def rnn_reference(p: RNNParams, data: np.ndarray, params: np.ndarray, state: np.ndarray,
                  state_cell: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    x = data.astype(np.float64)
    tt = x.shape[0]
    h_ = p.state_size
    mats = _unpack(p, params.astype(np.float64), x.shape[2])
    hy, cy = np.zeros(state.shape), np.zeros(state.shape)
    for layer in range(p.num_layers):
        outs = []
        for d in range(p.dirs):
            k = layer * p.dirs + d
            wx, wh, bx, bh = mats[k]
            h = state[k].astype(np.float64)
            c = state_cell[k].astype(np.float64) if state_cell is not None else None
            ys = [np.empty(0)] * tt
            for t in range(tt)[:: -1 if d else 1]:
                ax, ah = x[t] @ wx.T + bx, h @ wh.T + bh
                if p.mode == "lstm":
                    a = ax + ah
                    i, f = _sig(a[:, :h_]), _sig(a[:, h_ : 2 * h_])
                    g, o = np.tanh(a[:, 2 * h_ : 3 * h_]), _sig(a[:, 3 * h_ :])
                    c = f * c + i * g
                    h = o * np.tanh(c)
                elif p.mode == "gru":
                    r = _sig(ax[:, :h_] + ah[:, :h_])
                    z = _sig(ax[:, h_ : 2 * h_] + ah[:, h_ : 2 * h_])
                    n = np.tanh(ax[:, 2 * h_ :] + r * ah[:, 2 * h_ :])
                    h = (1 - z) * n + z * h
                elif p.mode == "rnn_tanh":
                    h = np.tanh(ax + ah)
                else:
                    h = np.maximum(ax + ah, 0)
                ys[t] = h
            hy[k] = h
            if c is not None:
                cy[k] = c
            outs.append(np.stack(ys))
        x = np.concatenate(outs, axis=2)
    res = [x.astype(data.dtype)]
    if p.state_outputs:
        res.append(hy.astype(data.dtype))
        if p.mode == "lstm":
            res.append(cy.astype(data.dtype))
    return tuple(res)


def _workspace(p: RNNParams, t: int, n: int, i: int, backward: bool) -> int:
    h, d, g, nl = p.state_size, p.dirs, p.gates * p.state_size, p.num_layers
    dh = d * h
    k = nl * t * n * dh + 2 * nl * d * (t + 1) * n * h + nl * d * t * n * g + nl * d * t * n * h
    if backward:
        k += t * n * dh + t * n * max(i, dh) + param_count(p, i) + 2 * n * h + 2 * n * g
    return 8 * k


def _spec(call: KernelCall, stage: str, **reqs: str) -> KernelSpec:
    p: RNNParams = call.params
    dt = str(call.out_dtypes[0].name)
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"RNN has dense kernels for {FLOAT_DTYPES}, not {dt}")
    return KernelSpec.make("nn/rnn.c.j2", dtype=dt, stage=stage, mode=p.mode,
                           state_outputs=p.state_outputs, **reqs)


def _ia(p: RNNParams, data: tuple[int, ...]) -> tuple[int, ...]:
    return (*data, p.state_size, p.num_layers, p.dirs, p.gates)


def rnn_lowering(call: KernelCall) -> Lowered:
    p: RNNParams = call.params
    if call.is_train and p.p > 0 and p.num_layers > 1:
        raise NoKernelError("RNN: dropout between layers (p > 0) in training is not implemented")
    data = call.in_shapes[0]
    if 0 in data:
        return Lowered()
    k = len(call.out_shapes)
    spec = _spec(call, "forward", req=call.out_req(0),
                 req_h=call.out_req(1) if k > 1 else "null",
                 req_c=call.out_req(2) if k > 2 else "null")
    ws = _workspace(p, data[0], data[1], data[2], False)
    return Lowered((Launch(spec, _ia(p, data), workspace=ws),))


def rnn_backward_lowering(call: KernelCall) -> Lowered:
    p: RNNParams = call.params
    ng = 1 + (p.state_outputs * (2 if p.mode == "lstm" else 1))
    data = call.in_shapes[ng]
    if 0 in data:
        return Lowered()
    k = len(call.out_shapes)
    spec = _spec(call, "backward", req_dx=call.out_req(0), req_dw=call.out_req(1),
                 req_dh=call.out_req(2), req_dc=call.out_req(3) if k > 3 else "null")
    ws = _workspace(p, data[0], data[1], data[2], True)
    return Lowered((Launch(spec, _ia(p, data), workspace=ws),))


def _backward_inputs(p: RNNParams) -> tuple[str, ...]:
    gs = ("ograd",)
    if p.state_outputs:
        gs += ("state_ograd", *(("statecell_ograd",) if p.mode == "lstm" else ()))
    return (*gs, *rnn_inputs(p))


def _backward_shape(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    k = len(ins) - len(rnn_inputs(p))
    return list(ins), list(ins[k:])


BACKWARD_RNN = register(
    OpDef(
        name="_backward_RNN",
        params=RNNParams,
        inputs=_backward_inputs,
        outputs=lambda p: tuple(f"{n}_grad" for n in rnn_inputs(p)),
        infer_shape=_backward_shape,
        infer_type=rnn_type,
        kernels={DENSE: Kernel(rnn_backward_lowering)},
        differentiable=False,
        doc="Gradient of RNN (backpropagation through time) to data, parameters and states.",
    )
)


def rnn_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Missing state gradients (outputs nobody reads) are zeros."""
    gs: list[Entry] = []
    zeros = get_op("zeros_like")
    for k, g in enumerate(ograds):
        if g is None:
            z = Node(zeros, f"{node.name}_zero_ograd{k}", zeros.parse_params({})[0],
                     (Entry(node, k),), {}, ())
            g = Entry(z, 0)
        gs.append(g)
    b = backward_node(BACKWARD_RNN, node, [*gs, *node.inputs])
    return [Entry(b, k) for k in range(len(node.inputs))]


def _ex(mode: str, t: int, n: int, i: int, h: int, layers: int = 1, bi: bool = False,
        **kw: object) -> Example:
    p = RNNParams(state_size=h, num_layers=layers, bidirectional=bi, mode=mode)
    st = (layers * p.dirs, n, h)
    shapes = ((t, n, i), (param_count(p, i),), st, *((st,) if mode == "lstm" else ()))
    params = {"state_size": h, "num_layers": layers, "mode": mode, "bidirectional": bi, **kw}
    return Example(shapes, params, low=-0.8, high=0.8)


RNN = register(
    OpDef(
        name="RNN",
        params=RNNParams,
        inputs=rnn_inputs,
        outputs=rnn_outputs,
        infer_shape=rnn_shape,
        infer_type=rnn_type,
        reference=rnn_reference,
        kernels={DENSE: Kernel(rnn_lowering)},
        grad=rnn_grad,
        train_mode=True,
        doc="Fused multi-layer (bidirectional) RNN, LSTM or GRU over (T, N, C) data.",
        examples=(
            _ex("lstm", 3, 2, 3, 2),
            _ex("gru", 3, 2, 3, 2, state_outputs=True),
            _ex("rnn_tanh", 4, 2, 2, 3, layers=2, bi=True),
            _ex("rnn_relu", 3, 1, 2, 2, state_outputs=True),
            _ex("lstm", 3, 2, 2, 2, layers=2, bi=True, state_outputs=True),
        ),
        bad_params=(
            {"state_size": 2, "num_layers": 1},
            {"state_size": 2, "num_layers": 1, "mode": "elman"},
            {"state_size": 0, "num_layers": 1, "mode": "lstm"},
            {"state_size": 2, "num_layers": 1, "mode": "lstm", "projection_size": 2},
        ),
    )
)
