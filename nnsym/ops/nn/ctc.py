"""CTCLoss (ctc_loss, _contrib_CTCLoss): connectionist temporal classification loss."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class CTCLossParams(Params):
    use_data_lengths: bool = field(
        default=False, doc="Read each sequence's length from data_lengths (else all T)."
    )
    use_label_lengths: bool = field(
        default=False,
        doc="Read each label's length from label_lengths (else up to the first padding value).",
    )
    blank_label: str = field(
        default="first",
        choices=("first", "last"),
        doc="first: blank is class 0, labels padded with 0; last: blank is the last class, "
        "labels padded with -1.",
    )


def ctc_inputs(p: CTCLossParams) -> tuple[str, ...]:
    return ("data", "label", *(("data_lengths",) if p.use_data_lengths else ()),
            *(("label_lengths",) if p.use_label_lengths else ()))


def ctc_shape(p: CTCLossParams, ins: list, outs: list) -> tuple[list, list]:
    data, label, *lens = ins
    if data is None and outs[1] is not None:
        data = outs[1]
    if data is not None and len(data) != 3:
        raise RuleError(f"data has shape {shape_str(data)}; CTCLoss needs (T, N, alphabet)")
    if label is not None and len(label) != 2:
        raise RuleError(f"label has shape {shape_str(label)}; it must be (N, label length)")
    n = None if data is None else data[1]
    try:
        label = merge_shape(label, (n, None))
        new_lens = [merge_shape(s, (n,)) for s in lens]
    except RuleError:
        raise RuleError(
            f"label {shape_str(label)} and the lengths {[shape_str(s) for s in lens]} must "
            f"have the batch size of data {shape_str(data)}"
        ) from None
    if data is None:
        return [data, label, *new_lens], list(outs)
    return [data, label, *new_lens], [(data[1],), data]


def ctc_type(p: CTCLossParams, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0] if ins[0] is not None else outs[0]
    return [t, *(v if v is not None else t for v in ins[1:])], [t, t]


def _lse(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


def ctc_reference(p: CTCLossParams, data: np.ndarray, label: np.ndarray,
                  *lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (loss per sequence, its gradient with respect to data)."""
    tt, n, a = data.shape
    blank, pad = (0, 0) if p.blank_label == "first" else (a - 1, -1)
    lens = list(lengths)
    dls = lens.pop(0) if p.use_data_lengths else None
    lls = lens.pop(0) if p.use_label_lengths else None
    x = data.astype(np.float64)
    ly = x - x.max(axis=2, keepdims=True)
    ly = ly - np.log(np.exp(ly).sum(axis=2, keepdims=True))
    loss = np.zeros(n)
    grad = np.zeros_like(x)
    for b in range(n):
        tb = min(max(int(dls[b]), 0), tt) if dls is not None else tt
        lab = [int(v) for v in label[b]]
        if lls is not None:
            lab = lab[: min(max(int(lls[b]), 0), len(lab))]
        elif pad in lab:
            lab = lab[: lab.index(pad)]
        ext = [blank]
        for c in lab:
            ext += [c, blank]
        sn = len(ext)
        al = np.full((tt, sn), -np.inf)
        be = np.full((tt, sn), -np.inf)
        if tb == 0:
            loss[b] = np.inf
            continue
        al[0, 0] = ly[0, b, ext[0]]
        if sn > 1:
            al[0, 1] = ly[0, b, ext[1]]
        for t in range(1, tb):
            for s in range(sn):
                v = al[t - 1, s]
                if s > 0:
                    v = _lse(v, al[t - 1, s - 1])
                if s > 1 and ext[s] != blank and ext[s] != ext[s - 2]:
                    v = _lse(v, al[t - 1, s - 2])
                al[t, s] = v + ly[t, b, ext[s]]
        be[tb - 1, sn - 1] = ly[tb - 1, b, ext[sn - 1]]
        if sn > 1:
            be[tb - 1, sn - 2] = ly[tb - 1, b, ext[sn - 2]]
        for t in range(tb - 2, -1, -1):
            for s in range(sn - 1, -1, -1):
                v = be[t + 1, s]
                if s + 1 < sn:
                    v = _lse(v, be[t + 1, s + 1])
                if s + 2 < sn and ext[s] != blank and ext[s] != ext[s + 2]:
                    v = _lse(v, be[t + 1, s + 2])
                be[t, s] = v + ly[t, b, ext[s]]
        logp = al[tb - 1, sn - 1] if sn == 1 else _lse(al[tb - 1, sn - 1], al[tb - 1, sn - 2])
        loss[b] = -logp
        for t in range(tb):
            occ = np.full(a, -np.inf)
            for s, c in enumerate(ext):
                occ[c] = _lse(occ[c], al[t, s] + be[t, s])
            with np.errstate(over="ignore"):
                grad[t, b] = np.exp(ly[t, b]) - np.exp(occ - ly[t, b] - logp)
    return loss.astype(data.dtype), grad.astype(data.dtype)


def _dtype(call: KernelCall) -> str:
    dt = str(call.in_dtypes[0].name)
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"CTCLoss has dense kernels for {FLOAT_DTYPES}, not {dt}")
    return dt


def ctc_lowering(call: KernelCall) -> Lowered:
    p: CTCLossParams = call.params
    tt, n, a = call.in_shapes[0]
    lab = call.in_shapes[1][1]
    if n == 0:
        return Lowered()
    k = 2
    dl = call.in_dtypes[k].name if p.use_data_lengths else ""
    k += p.use_data_lengths
    ll = call.in_dtypes[k].name if p.use_label_lengths else ""
    spec = KernelSpec.make(
        "nn/ctc_loss.c.j2", dtype=_dtype(call), ltype=call.in_dtypes[1].name, dltype=dl,
        lltype=ll, use_dl=p.use_data_lengths, use_ll=p.use_label_lengths,
        blank_first=p.blank_label == "first", req=call.out_req(0),
    )
    sx = 2 * lab + 1
    per = 8 * (2 * tt * sx + tt * a) + 8 * sx
    return Lowered((Launch(spec, (tt, n, a, lab), workspace=n * per),))


def ctc_backward_lowering(call: KernelCall) -> Lowered:
    shape = call.in_shapes[1]
    if size(shape) == 0:
        return Lowered()
    spec = KernelSpec.make("nn/ctc_loss_backward.c.j2", dtype=_dtype(call), req=call.out_req(0))
    return Lowered((Launch(spec, tuple(shape)),))


BACKWARD_CTC_LOSS = register(
    OpDef(
        name="_backward_CTCLoss",
        params=CTCLossParams,
        inputs=("ograd", "grad"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
        kernels={DENSE: Kernel(ctc_backward_lowering)},
        differentiable=False,
        doc="Gradient of CTCLoss: the saved gradient scaled by each sequence's output gradient.",
    )
)


def ctc_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """To data only (labels and lengths are integers in float arrays)."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_CTC_LOSS, node, [g, Entry(node, 1)])
    return [Entry(b, 0), *([None] * (len(node.inputs) - 1))]


CTC_LOSS = register(
    OpDef(
        name="CTCLoss",
        params=CTCLossParams,
        inputs=ctc_inputs,
        outputs=("out", "grad"),
        num_visible_outputs=1,
        infer_shape=ctc_shape,
        infer_type=ctc_type,
        reference=ctc_reference,
        kernels={DENSE: Kernel(ctc_lowering)},
        grad=ctc_grad,
        aliases=("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"),
        doc="CTC loss of (T, N, alphabet) activations (softmax inside) against padded labels.",
        examples=(
            Example(((6, 3, 5), (3, 3)), ints={1: (1, 5)}),
            Example(((6, 2, 4), (2, 2)), {"blank_label": "last"}, ints={1: (0, 3)}),
            Example(((7, 3, 5), (3, 2), (3,), (3,)),
                    {"use_data_lengths": True, "use_label_lengths": True},
                    ints={1: (1, 5), 2: (5, 8), 3: (0, 3)}),
            Example(((5, 2, 4), (2, 2), (2,)), {"use_data_lengths": True},
                    ints={1: (1, 4), 2: (4, 6)}, dtype="float64"),
        ),
        bad_params=({"blank_label": "middle"}, {"use_data_lengths": "maybe"}, {"blank": 0}),
    )
)
