"""quantized_flatten and quantized_act (relu): int8/uint8 data whose float32 range passes
through unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS, _range_type_check

RANGE_INPUTS = ("data", "min_data", "max_data")


def _pass_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (np.asarray(lo, np.float32).reshape(1).copy(),
            np.asarray(hi, np.float32).reshape(1).copy())


def _copy_lowering(call: KernelCall, dtypes: tuple[str, ...], relu: bool) -> Lowered:
    dt = call.in_dtypes[0].name
    if dt not in dtypes:
        raise NoKernelError(f"{call.params.__class__.__name__[:-6]} has kernels for {dtypes}, "
                            f"not {dt}")
    spec = KernelSpec.make("quantization/qcopy.c.j2", dtype=dt, relu=relu, req=call.req)
    return Lowered((Launch(spec, (size(call.in_shapes[0]),)),))


def _typed(ins: list, allowed: tuple[str, ...], op: str) -> tuple[list, list]:
    t = ins[0]
    if t is not None and np.dtype(t).name not in allowed:
        raise RuleError(f"data has dtype {np.dtype(t).name}; {op} takes {' or '.join(allowed)}")
    _range_type_check(ins, (1, 2))
    f = np.dtype("float32")
    return [t, f, f], [t, f, f]


# ------------------------------------------------------------------------- quantized_flatten

FLATTEN_DTYPES = ("int8", "uint8", "int32")


@dataclass(frozen=True, kw_only=True)
class QuantizedFlattenParams(Params):
    pass


def quantized_flatten_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0]
    new = [data, merge_shape(ins[1], (1,)), merge_shape(ins[2], (1,))]
    if data is None or any(d is None for d in data):
        return new, [outs[0], (1,), (1,)]
    rest = 1
    for d in data[1:]:
        rest *= d
    if not data:
        raise RuleError("quantized_flatten needs data of at least 1 dimension")
    return new, [(data[0], rest), (1,), (1,)]


def quantized_flatten_reference(p: Params, data: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    rest = int(np.prod(data.shape[1:]))
    return (data.reshape(data.shape[0], rest), *_pass_range(lo, hi))


QUANTIZED_FLATTEN = register(
    OpDef(
        name="_contrib_quantized_flatten",
        params=QuantizedFlattenParams,
        inputs=RANGE_INPUTS,
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_flatten_shape,
        infer_type=lambda p, ins, outs: _typed(ins, FLATTEN_DTYPES, "quantized_flatten"),
        reference=quantized_flatten_reference,
        kernels={DENSE: Kernel(lambda call: _copy_lowering(call, FLATTEN_DTYPES, False))},
        grad=no_gradient,
        differentiable=False,
        doc="Flattens quantized data to (N, rest); the range passes through.",
        examples=(
            Example(((2, 3, 4), (1,), (1,)), in_dtypes=("int8", "float32", "float32"),
                    ints={0: (-128, 128)}),
            Example(((3, 2, 2), (1,), (1,)), in_dtypes=("uint8", "float32", "float32"),
                    ints={0: (0, 256)}),
        ),
    )
)


# ----------------------------------------------------------------------------- quantized_act


@dataclass(frozen=True, kw_only=True)
class QuantizedActParams(Params):
    act_type: str = field(
        choices=("relu", "sigmoid", "softrelu", "softsign", "tanh"),
        doc="Activation function; only relu is computed (as in MXNet).",
    )

    def __post_init__(self) -> None:
        if self.act_type != "relu":
            raise ValueError(f"act_type={self.act_type!r}: quantized_act supports relu only")


def quantized_act_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0] if ins[0] is not None else outs[0]
    return [data, merge_shape(ins[1], (1,)), merge_shape(ins[2], (1,))], [data, (1,), (1,)]


def quantized_act_reference(p: QuantizedActParams, data: np.ndarray, lo: np.ndarray,
                            hi: np.ndarray):
    return (np.maximum(data, 0).astype(data.dtype), *_pass_range(lo, hi))


QUANTIZED_ACT = register(
    OpDef(
        name="_contrib_quantized_act",
        params=QuantizedActParams,
        inputs=RANGE_INPUTS,
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_act_shape,
        infer_type=lambda p, ins, outs: _typed(ins, ("int8",), "quantized_act"),
        reference=quantized_act_reference,
        kernels={DENSE: Kernel(lambda call: _copy_lowering(call, ("int8",), True))},
        differentiable=False,
        doc="relu of int8 data; the range passes through (as MXNet 1.9.1's build computes).",
        examples=(
            Example(((2, 3, 4), (1,), (1,)), {"act_type": "relu"},
                    in_dtypes=("int8", "float32", "float32"), ints={0: (-128, 128)}),
        ),
        bad_params=({}, {"act_type": "tanh"}, {"act_type": "gelu"}),
    )
)
