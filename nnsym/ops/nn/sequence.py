"""SequenceMask, SequenceLast and SequenceReverse: variable-length sequences along axis 0
(steps first, (T, B, ...)) or axis 1 (batch first, (B, T, ...)), with an optional
``sequence_length`` input of B lengths (use_sequence_length).

One template (``nn/sequence.c.j2``) serves the three forwards and their gradients. Lengths are
truncated to integers and clipped to [0, T]; MXNet reads out of bounds for lengths outside it
(SequenceLast with a 0 length returns whatever precedes the data), nnsym gives 0 there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class SequenceParams(Params):
    use_sequence_length: bool = field(
        default=False, doc="Take a second input sequence_length: the B sequence lengths."
    )
    axis: int = field(default=0, doc="The sequence axis: 0 (T, B, ...) or 1 (B, T, ...).")

    def __post_init__(self) -> None:
        if self.axis not in (0, 1):
            raise ValueError(f"axis must be 0 or 1, got {self.axis}")


@dataclass(frozen=True, kw_only=True)
class SequenceMaskParams(SequenceParams):
    value: float = field(default=0.0, doc="The value written past each sequence's end.")


@dataclass(frozen=True, kw_only=True)
class SequenceReverseParams(SequenceParams):
    def __post_init__(self) -> None:
        if self.axis != 0:
            raise ValueError(f"SequenceReverse supports axis 0 only, got {self.axis}")


def sequence_inputs(p: SequenceParams) -> tuple[str, ...]:
    return ("data", "sequence_length") if p.use_sequence_length else ("data",)


def _dims(p: SequenceParams, d: tuple) -> tuple[int, int, int]:
    """(T, B, rest)."""
    t, b = (d[0], d[1]) if p.axis == 0 else (d[1], d[0])
    return t, b, size(d[2:])


def _shape_rule(last: bool) -> Callable:
    def rule(p: SequenceParams, ins: list, outs: list) -> tuple[list, list]:
        """sequence_length: (B,); the output: the data (SequenceLast: without the axis)."""
        data = ins[0]
        if data is None:
            return list(ins), list(outs)
        if len(data) < 2:
            raise RuleError(
                f"data has shape {shape_str(data)}; sequence operators need at least 2 "
                "dimensions (steps and batch)"
            )
        new = [data]
        if len(ins) > 1:
            batch = (data[1 - p.axis],)
            try:
                new.append(merge_shape(ins[1], batch))
            except RuleError:
                raise RuleError(
                    f"sequence_length has shape {shape_str(ins[1])} but data {shape_str(data)} "
                    f"has batch size {batch[0]} (axis {1 - p.axis})"
                ) from None
        out = (*data[: p.axis], *data[p.axis + 1 :]) if last else data
        return new, [out]

    return rule


def sequence_type(p: SequenceParams, ins: list, outs: list) -> tuple[list, list]:
    """out = data's dtype; an unknown sequence_length takes it too (as MXNet)."""
    t = ins[0] if ins[0] is not None else outs[0]
    new = [t]
    if len(ins) > 1:
        new.append(ins[1] if ins[1] is not None else t)
    return new, [t]


def _lengths(p: SequenceParams, d: tuple, length: np.ndarray | None) -> np.ndarray:
    t, b, _ = _dims(p, d)
    if length is None:
        return np.full(b, t, np.int64)
    lv = length.astype(np.float64)
    ok = (lv >= 0) & np.isfinite(lv)
    return np.minimum(np.where(ok, lv, 0).astype(np.int64), t)


def _steps_first(p: SequenceParams, x: np.ndarray) -> np.ndarray:
    return x if p.axis == 0 else np.swapaxes(x, 0, 1)


def sequence_mask_reference(p: SequenceMaskParams, data, length=None):
    x = _steps_first(p, data.astype(np.float64)).copy()
    for b, n in enumerate(_lengths(p, data.shape, length)):
        x[n:, b] = p.value
    return _steps_first(p, x).astype(data.dtype)


def sequence_reverse_reference(p: SequenceReverseParams, data, length=None):
    x = data.copy()
    for b, n in enumerate(_lengths(p, data.shape, length)):
        x[:n, b] = data[:n, b][::-1]
    return x


def sequence_last_reference(p: SequenceParams, data, length=None):
    x = _steps_first(p, data)
    out = np.zeros(x.shape[1:], data.dtype)
    for b, n in enumerate(_lengths(p, data.shape, length)):
        if n > 0:
            out[b] = x[n - 1, b]
    return out


def _launch(call: KernelCall, kind: str, data_shape: tuple, value: float = 0.0) -> Lowered:
    """p = [input, (data for last_grad), (sequence_length), out]."""
    p: SequenceParams = call.params
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    n_in = len(call.in_shapes)
    spec = KernelSpec.make(
        "nn/sequence.c.j2", kind=kind, dtype=call.out_dtypes[0].name, axis=p.axis,
        use_len=p.use_sequence_length,
        ldtype=call.in_dtypes[-1].name if p.use_sequence_length else None,
        req=call.out_req(0), out_at=n_in,
    )
    return Lowered((Launch(spec, _dims(p, data_shape), (float(np.float32(value)),)),))


def _same_as_ograd(p: SequenceParams, ins: list, outs: list) -> tuple[list, list]:
    return list(ins), [ins[0] if ins[0] is not None else outs[0]]


def _backward(name: str, params: type[Params], kind: str) -> OpDef:
    """Mask and reverse: (ograd, [sequence_length]) -> data grad of the ograd's shape."""
    return register(
        OpDef(
            name=f"_backward_{name}",
            params=params,
            inputs=lambda p: ("ograd", "sequence_length") if p.use_sequence_length
            else ("ograd",),
            outputs=("data_grad",),
            infer_shape=_same_as_ograd,
            infer_type=_same_as_ograd,
            kernels={DENSE: Kernel(lambda call: _launch(call, kind, call.out_shapes[0]))},
            differentiable=False,
            doc=f"Gradient of {name}.",
        )
    )


BACKWARD_SEQUENCE_MASK = _backward("SequenceMask", SequenceMaskParams, "mask")
BACKWARD_SEQUENCE_REVERSE = _backward("SequenceReverse", SequenceReverseParams, "reverse")
BACKWARD_SEQUENCE_LAST = register(
    OpDef(
        name="_backward_SequenceLast",
        params=SequenceParams,
        inputs=lambda p: ("ograd", "data", "sequence_length") if p.use_sequence_length
        else ("ograd", "data"),
        outputs=("data_grad",),
        infer_shape=lambda p, ins, outs: (list(ins), [ins[1] if ins[1] is not None else outs[0]]),
        infer_type=lambda p, ins, outs: (list(ins), [ins[1] if ins[1] is not None else outs[0]]),
        ignore_inputs=(1,),
        kernels={DENSE: Kernel(lambda call: _launch(call, "last_grad", call.out_shapes[0]))},
        differentiable=False,
        doc="Gradient of SequenceLast: the output gradient at each sequence's last step.",
    )
)


def _grad(backward: OpDef, with_data: bool) -> Callable[[Node, list[Entry | None]], list]:
    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        reads = list(node.inputs) if with_data else list(node.inputs[1:])
        b = backward_node(backward, node, [g, *reads])
        # sequence_length gets no gradient
        return [Entry(b, 0)] + [None] * (len(node.inputs) - 1)

    return grad


def _examples(mask: bool, axis1: bool) -> tuple[Example, ...]:
    ex = [
        Example(((4, 3, 2),)),
        Example(((4, 3, 2), (3,)), {"use_sequence_length": True}, ints={1: (0, 5)}),
        Example(((5, 2), (2,)), {"use_sequence_length": True}, dtype="float64",
                ints={1: (1, 6)}),
    ]
    if axis1:
        ex.append(Example(((3, 4, 2), (3,)), {"use_sequence_length": True, "axis": 1},
                          ints={1: (0, 5)}))
    if mask:
        ex.append(Example(((4, 3), (3,)), {"use_sequence_length": True, "value": -1.5},
                          ints={1: (0, 5)}))
    return tuple(ex)


SEQUENCE_MASK = register(
    OpDef(
        name="SequenceMask",
        params=SequenceMaskParams,
        inputs=sequence_inputs,
        infer_shape=_shape_rule(False),
        infer_type=sequence_type,
        reference=sequence_mask_reference,
        kernels={DENSE: Kernel(
            lambda call: _launch(call, "mask", call.in_shapes[0], call.params.value))},
        grad=_grad(BACKWARD_SEQUENCE_MASK, False),
        aliases=("_npx_sequence_mask",),
        doc="Sets the steps past each sequence's length to value.",
        examples=_examples(True, True),
        bad_params=({"axis": 2}, {"value": "x"}, {"use_sequence_length": "maybe"}),
    )
)

SEQUENCE_REVERSE = register(
    OpDef(
        name="SequenceReverse",
        params=SequenceReverseParams,
        inputs=sequence_inputs,
        infer_shape=_shape_rule(False),
        infer_type=sequence_type,
        reference=sequence_reverse_reference,
        kernels={DENSE: Kernel(lambda call: _launch(call, "reverse", call.in_shapes[0]))},
        grad=_grad(BACKWARD_SEQUENCE_REVERSE, False),
        doc="Reverses the first length steps of every sequence (axis 0 only, as MXNet).",
        examples=_examples(False, False),
        bad_params=({"axis": 1}, {"value": 1.0}),
    )
)

SEQUENCE_LAST = register(
    OpDef(
        name="SequenceLast",
        params=SequenceParams,
        inputs=sequence_inputs,
        infer_shape=_shape_rule(True),
        infer_type=sequence_type,
        reference=sequence_last_reference,
        kernels={DENSE: Kernel(lambda call: _launch(call, "last", call.in_shapes[0]))},
        grad=_grad(BACKWARD_SEQUENCE_LAST, True),
        doc="The last step of every sequence (at its length); the output drops the axis.",
        examples=_examples(False, True),
        bad_params=({"axis": 2}, {"value": 1.0}),
    )
)
