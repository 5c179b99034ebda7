"""RNN: MXNet's fused recurrent operator (rnn_relu, rnn_tanh, lstm, gru), multi-layer and
bidirectional, with its packed parameter vector; per-item sequence lengths and LSTM cell
clipping with cuDNN's semantics (MXNet's CPU build ignores both), and dropout between layers in
training (a hidden mask output, drawn from the run seed), and LSTM projection (LSTMP:
``projection_size`` P, the hidden state is W_r (o * tanh(c)), of size P)."""

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
    projection_size: int | None = field(
        default=None, lower=1, doc="LSTM: project the hidden state to this size (LSTMP)."
    )
    lstm_state_clip_min: float | None = field(
        default=None, doc="LSTM: clip the cell state to at least this (with the max)."
    )
    lstm_state_clip_max: float | None = field(
        default=None, doc="LSTM: clip the cell state to at most this (with the min)."
    )
    lstm_state_clip_nan: bool = field(
        default=False, doc="LSTM with clipping: a NaN cell state becomes the clip minimum."
    )
    use_sequence_length: bool = field(
        default=False, doc="Take a sequence_length input: each batch item's valid steps."
    )

    def __post_init__(self) -> None:
        if self.projection_size is not None and self.mode != "lstm":
            raise ValueError(f"projection_size is for mode='lstm' only, not {self.mode!r}")
        lo, hi = self.lstm_state_clip_min, self.lstm_state_clip_max
        if (lo is None) != (hi is None):
            raise ValueError("lstm_state_clip_min and lstm_state_clip_max must be given together")
        if lo is not None and hi is not None and not lo <= hi:
            raise ValueError(f"lstm_state_clip_min={lo} is above lstm_state_clip_max={hi}")
        if self.num_layers * self.dirs > 64:
            raise ValueError("at most 64 layer directions are supported")

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def proj(self) -> int:
        """The hidden state's size: projection_size, else state_size."""
        return self.projection_size or self.state_size

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    @property
    def drop(self) -> bool:
        """Whether there is dropout between layers (in training), kept in a hidden mask."""
        return self.p > 0 and self.num_layers > 1

    @property
    def clip(self) -> bool:
        """Whether the LSTM cell state is clipped (the bounds apply to lstm only)."""
        return self.mode == "lstm" and self.lstm_state_clip_min is not None


def param_count(p: RNNParams, input_size: int) -> int:
    """Length of the packed parameter vector."""
    gh, h, r, d = p.gates * p.state_size, p.state_size, p.proj, p.dirs
    wr = r * h if p.projection_size else 0
    n = 0
    for layer in range(p.num_layers):
        il = input_size if layer == 0 else d * r
        n += d * (gh * (il + r) + wr + 2 * gh)
    return n


def _state_inputs(p: RNNParams) -> tuple[str, ...]:
    return ("data", "parameters", "state", *(("state_cell",) if p.mode == "lstm" else ()))


def rnn_inputs(p: RNNParams) -> tuple[str, ...]:
    return (*_state_inputs(p), *(("sequence_length",) if p.use_sequence_length else ()))


def _visible_outputs(p: RNNParams) -> tuple[str, ...]:
    if not p.state_outputs:
        return ("output",)
    return ("output", "state_output", *(("statecell_output",) if p.mode == "lstm" else ()))


def rnn_outputs(p: RNNParams) -> tuple[str, ...]:
    """The visible outputs, then (dropout between layers) the hidden mask: 0 or 1 / (1 - p)
    per element of each lower layer's output, all ones at inference."""
    return (*_visible_outputs(p), *(("dropout_mask",) if p.drop else ()))


def rnn_shape(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    if data is None:
        return list(ins), list(outs)
    if len(data) != 3:
        raise RuleError(f"data has shape {shape_str(data)}; RNN needs (T, N, input size)")
    t, n, i = data
    h, r, ld = p.state_size, p.proj, p.num_layers * p.dirs
    st, sc = (ld, n, r), (ld, n, h)
    sts = [st, sc][: len(_state_inputs(p)) - 2]
    want = [data, None if i is None else (param_count(p, i),), *sts,
            *([(n,)] if p.use_sequence_length else [])]
    new = []
    for name, given, w in zip(rnn_inputs(p), ins, want):
        try:
            new.append(merge_shape(given, w))
        except RuleError:
            raise RuleError(
                f"{name} has shape {shape_str(given)} but data {shape_str(data)} with "
                f"state_size={h}, num_layers={p.num_layers} needs {shape_str(w)}"
            ) from None
    mask = [(p.num_layers - 1, t, n, p.dirs * r)] if p.drop else []
    return new, [(t, n, p.dirs * r), *[st, sc][: len(_visible_outputs(p)) - 1], *mask]


def rnn_type(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    """One float dtype for everything; sequence_length keeps its own (else takes it too)."""
    k = len(_state_inputs(p))
    t = next((v for v in (*ins[:k], *outs) if v is not None), None)
    rest = [v if v is not None else t for v in ins[k:]]
    return [t] * k + rest, [t] * len(outs)


def _lengths(p: RNNParams, tt: int, n: int, length: np.ndarray | None) -> np.ndarray:
    """Each item's valid steps: int(length) clipped to [0, T] (NaN or negative: 0)."""
    if length is None:
        return np.full(n, tt, np.int64)
    lv = length.astype(np.float64)
    ok = (lv >= 0) & np.isfinite(lv)
    return np.minimum(np.where(ok, lv, 0).astype(np.int64), tt)


def _clip_cell(p: RNNParams, c: np.ndarray) -> np.ndarray:
    if not p.clip:
        return c
    lo, hi = float(p.lstm_state_clip_min or 0.0), float(p.lstm_state_clip_max or 0.0)
    out = np.minimum(np.maximum(c, lo), hi)
    return np.where(np.isnan(c), lo if p.lstm_state_clip_nan else np.nan, out)


def unpack_parameters(p: RNNParams, w: np.ndarray,
            input_size: int) -> list[tuple[np.ndarray | None, ...]]:
    """(W_x, W_h, b_x, b_h, W_r or None) per (layer, direction), from the packed vector: all
    weights (per layer and direction W_x, W_h, then W_r with projection), then all biases."""
    gh, h, r, d = p.gates * p.state_size, p.state_size, p.proj, p.dirs
    mats, o = [], 0
    for layer in range(p.num_layers):
        il = input_size if layer == 0 else d * r
        for _ in range(d):
            wx = w[o : o + gh * il].reshape(gh, il)
            o += gh * il
            wh = w[o : o + gh * r].reshape(gh, r)
            o += gh * r
            wr = None
            if p.projection_size:
                wr = w[o : o + r * h].reshape(r, h)
                o += r * h
            mats.append((wx, wh, wr))
    out: list[tuple[np.ndarray | None, ...]] = []
    for k, (wx, wh, wr) in enumerate(mats):
        out.append((wx, wh, w[o + 2 * k * gh : o + (2 * k + 1) * gh],
                    w[o + (2 * k + 1) * gh : o + (2 * k + 2) * gh], wr))
    return out


def _sig(v: np.ndarray) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-v)))


def rnn_reference(p: RNNParams, data: np.ndarray, params: np.ndarray, state: np.ndarray,
                  *rest: np.ndarray) -> tuple[np.ndarray, ...]:
    """Inputs after state: state_cell (lstm), then sequence_length (use_sequence_length)."""
    state_cell = rest[0] if p.mode == "lstm" else None
    x = data.astype(np.float64)
    tt = x.shape[0]
    lens = _lengths(p, tt, x.shape[1], rest[-1] if p.use_sequence_length else None)
    h_, r_ = p.state_size, p.proj
    mats = unpack_parameters(p, params.astype(np.float64), x.shape[2])
    hy = np.zeros(state.shape)
    cy = np.zeros(state_cell.shape) if state_cell is not None else None
    for layer in range(p.num_layers):
        outs = []
        for d in range(p.dirs):
            k = layer * p.dirs + d
            wx, wh, bx, bh, wr = mats[k]
            assert wx is not None and wh is not None and bx is not None and bh is not None
            h = state[k].astype(np.float64)
            c = state_cell[k].astype(np.float64) if state_cell is not None else None
            ys = [np.zeros((x.shape[1], r_)) for _ in range(tt)]
            for s in range(tt):
                live = s < lens  # items still inside their sequence at this step
                t = np.where(lens - 1 - s >= 0, lens - 1 - s, 0) if d else np.full(len(lens), s)
                xt = x[t, np.arange(len(lens))]
                ax, ah = xt @ wx.T + bx, h @ wh.T + bh
                hprev, cprev = h, c
                if p.mode == "lstm":
                    a = ax + ah
                    i, f = _sig(a[:, :h_]), _sig(a[:, h_ : 2 * h_])
                    g, o = np.tanh(a[:, 2 * h_ : 3 * h_]), _sig(a[:, 3 * h_ :])
                    c = _clip_cell(p, f * c + i * g)
                    h = o * np.tanh(c)
                    if wr is not None:
                        h = h @ wr.T
                elif p.mode == "gru":
                    r = _sig(ax[:, :h_] + ah[:, :h_])
                    z = _sig(ax[:, h_ : 2 * h_] + ah[:, h_ : 2 * h_])
                    n = np.tanh(ax[:, 2 * h_ :] + r * ah[:, 2 * h_ :])
                    h = (1 - z) * n + z * h
                elif p.mode == "rnn_tanh":
                    h = np.tanh(ax + ah)
                else:
                    h = np.maximum(ax + ah, 0)
                h = np.where(live[:, None], h, hprev)
                if c is not None:
                    c = np.where(live[:, None], c, cprev)
                for b in np.flatnonzero(live):
                    ys[t[b]][b] = h[b]
            hy[k] = h
            if c is not None and cy is not None:
                cy[k] = c
            outs.append(np.stack(ys))
        x = np.concatenate(outs, axis=2)
    res = [x.astype(data.dtype)]
    if p.state_outputs:
        res.append(hy.astype(data.dtype))
        if cy is not None:
            res.append(cy.astype(data.dtype))
    if p.drop:  # inference: no dropout, the mask keeps everything
        res.append(np.ones((p.num_layers - 1, *x.shape), data.dtype))
    return tuple(res)


def _workspace(p: RNNParams, t: int, n: int, i: int, backward: bool) -> int:
    """Doubles, in the kernel's order (rnn_body.j2), as bytes."""
    h, d, g, nl = p.state_size, p.dirs, p.gates * p.state_size, p.num_layers
    hm, dr = max(h, p.proj), d * p.proj
    k = nl * t * n * dr + 2 * nl * d * (t + 1) * n * hm + nl * d * t * n * g + nl * d * t * n * h
    k += n + 2 * h
    if backward:
        k += t * n * dr + t * n * max(i, dr) + param_count(p, i) + 2 * n * hm + 2 * n * g
    return 8 * k


def _spec(call: KernelCall, stage: str, first: int = 0, **reqs: str) -> KernelSpec:
    """``first``: the position of the data among the node's inputs."""
    p: RNNParams = call.params
    dt = str(call.out_dtypes[0].name)
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"RNN has dense kernels for {FLOAT_DTYPES}, not {dt}")
    ldt = str(call.in_dtypes[first + len(_state_inputs(p))].name) if p.use_sequence_length else None
    return KernelSpec.make("nn/rnn.c.j2", dtype=dt, stage=stage, mode=p.mode,
                           proj=p.projection_size is not None,
                           state_outputs=p.state_outputs, clip=p.clip,
                           clip_nan=p.clip and p.lstm_state_clip_nan, ldtype=ldt, **reqs)


def _fa(p: RNNParams) -> tuple[float, ...]:
    """fa = [clip min, clip max, keep probability, mask seed (set by the runtime)]."""
    lo, hi = (p.lstm_state_clip_min or 0.0, p.lstm_state_clip_max or 0.0) if p.clip else (0, 0)
    return (float(lo), float(hi), 1.0 - p.p, 0.0)


def _ia(p: RNNParams, data: tuple[int, ...]) -> tuple[int, ...]:
    return (*data, p.state_size, p.num_layers, p.dirs, p.gates, p.proj)


def rnn_lowering(call: KernelCall) -> Lowered:
    p: RNNParams = call.params
    data = call.in_shapes[0]
    if 0 in data:
        return Lowered()
    k = len(_visible_outputs(p))
    drop = "none" if not p.drop else "random" if call.is_train else "keep"
    spec = _spec(call, "forward", req=call.out_req(0),
                 req_h=call.out_req(1) if k > 1 else "null",
                 req_c=call.out_req(2) if k > 2 else "null", drop=drop)
    ws = _workspace(p, data[0], data[1], data[2], False)
    seed = 3 if drop == "random" else None
    return Lowered((Launch(spec, _ia(p, data), _fa(p), workspace=ws, seed_slot=seed),))


def rnn_backward_lowering(call: KernelCall) -> Lowered:
    p: RNNParams = call.params
    ng = 1 + (p.state_outputs * (2 if p.mode == "lstm" else 1))
    data = call.in_shapes[ng]
    if 0 in data:
        return Lowered()
    k = len(call.out_shapes)
    spec = _spec(call, "backward", ng, req_dx=call.out_req(0), req_dw=call.out_req(1),
                 req_dh=call.out_req(2), req_dc=call.out_req(3) if k > 3 else "null",
                 drop="mask" if p.drop else "none")
    ws = _workspace(p, data[0], data[1], data[2], True)
    return Lowered((Launch(spec, _ia(p, data), _fa(p), workspace=ws),))


def _backward_inputs(p: RNNParams) -> tuple[str, ...]:
    """The visible outputs' gradients, the forward's inputs, then its dropout mask."""
    gs = ("ograd",)
    if p.state_outputs:
        gs += ("state_ograd", *(("statecell_ograd",) if p.mode == "lstm" else ()))
    return (*gs, *rnn_inputs(p), *(("dropout_mask",) if p.drop else ()))


def _backward_shape(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    k = len(_visible_outputs(p))
    return list(ins), list(ins[k : k + len(_state_inputs(p))])


def _backward_type(p: RNNParams, ins: list, outs: list) -> tuple[list, list]:
    k = len(_visible_outputs(p)) + len(_state_inputs(p))
    t = next((v for v in (*ins[:k], *outs) if v is not None), None)
    ls = [v if v is not None else t for v in ins[k : len(ins) - p.drop]]
    return [t] * k + ls + [t] * p.drop, [t] * len(outs)


BACKWARD_RNN = register(
    OpDef(
        name="_backward_RNN",
        params=RNNParams,
        inputs=_backward_inputs,
        outputs=lambda p: tuple(f"{n}_grad" for n in _state_inputs(p)),
        infer_shape=_backward_shape,
        infer_type=_backward_type,
        kernels={DENSE: Kernel(rnn_backward_lowering)},
        differentiable=False,
        doc="Gradient of RNN (backpropagation through time) to data, parameters and states.",
    )
)


def rnn_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Missing state gradients (outputs nobody reads) are zeros."""
    gs: list[Entry] = []
    zeros = get_op("zeros_like")
    nv = len(_visible_outputs(node.params))
    for k, g in enumerate(ograds[:nv]):
        if g is None:
            z = Node(zeros, f"{node.name}_zero_ograd{k}", zeros.parse_params({})[0],
                     (Entry(node, k),), {}, ())
            g = Entry(z, 0)
        gs.append(g)
    mask = [Entry(node, nv)] if node.params.drop else []
    b = backward_node(BACKWARD_RNN, node, [*gs, *node.inputs, *mask])
    n = len(_state_inputs(node.params))
    # sequence_length gets no gradient
    return [Entry(b, k) for k in range(n)] + [None] * (len(node.inputs) - n)


def _ex(mode: str, t: int, n: int, i: int, h: int, layers: int = 1, bi: bool = False,
        **kw: object) -> Example:
    proj = kw.get("projection_size")
    p = RNNParams(state_size=h, num_layers=layers, bidirectional=bi, mode=mode,
                  projection_size=proj if isinstance(proj, int) else None)
    st, sc = (layers * p.dirs, n, p.proj), (layers * p.dirs, n, h)
    shapes = ((t, n, i), (param_count(p, i),), st, *((sc,) if mode == "lstm" else ()))
    params = {"state_size": h, "num_layers": layers, "mode": mode, "bidirectional": bi, **kw}
    if kw.get("use_sequence_length"):  # lengths 1..T
        return Example((*shapes, (n,)), params, low=-0.8, high=0.8,
                       ints={len(shapes): (1, t + 1)})
    return Example(shapes, params, low=-0.8, high=0.8)


RNN = register(
    OpDef(
        name="RNN",
        params=RNNParams,
        inputs=rnn_inputs,
        outputs=rnn_outputs,
        num_visible_outputs=lambda p: len(_visible_outputs(p)),
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
            _ex("lstm", 4, 2, 3, 3, state_outputs=True, lstm_state_clip_min=-0.2,
                lstm_state_clip_max=0.25),
            _ex("lstm", 4, 3, 2, 2, bi=True, state_outputs=True, use_sequence_length=True),
            _ex("gru", 3, 3, 2, 2, layers=2, state_outputs=True, use_sequence_length=True),
            _ex("rnn_tanh", 3, 2, 2, 2, bi=True, use_sequence_length=True),
            # dropout between layers: random in training (see tests/ops/test_rnn_features.py)
            _ex("gru", 3, 2, 2, 2, layers=2, p=0.5),
            # LSTMP (MXNet's CPU build runs it in inference only: tests/ops/test_rnn_projection)
            _ex("lstm", 3, 2, 3, 3, projection_size=2),
            _ex("lstm", 3, 2, 2, 3, layers=2, bi=True, state_outputs=True, projection_size=2),
            _ex("lstm", 4, 3, 2, 3, bi=True, state_outputs=True, use_sequence_length=True,
                projection_size=2),
        ),
        bad_params=(
            {"state_size": 2, "num_layers": 1},
            {"state_size": 2, "num_layers": 1, "mode": "elman"},
            {"state_size": 0, "num_layers": 1, "mode": "lstm"},
            {"state_size": 2, "num_layers": 1, "mode": "gru", "projection_size": 2},
            {"state_size": 2, "num_layers": 1, "mode": "lstm", "projection_size": 0},
            {"state_size": 2, "num_layers": 1, "mode": "lstm", "lstm_state_clip_min": -1.0},
            {"state_size": 2, "num_layers": 1, "mode": "lstm", "lstm_state_clip_min": 1.0,
             "lstm_state_clip_max": -1.0},
        ),
    )
)
