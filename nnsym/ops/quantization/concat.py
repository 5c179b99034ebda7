"""quantized_concat: int8 inputs rescaled to one common range and joined along an axis."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS, maxabs
from nnsym.types import shape_str

MAX_ARGS = 1024
F32 = np.float32


@dataclass(frozen=True, kw_only=True)
class QuantizedConcatParams(Params):
    num_args: int = field(lower=1, upper=MAX_ARGS, doc="Number of data inputs.")
    dim: int = field(default=1, doc="The axis to join along.")


def quantized_concat_inputs(p: QuantizedConcatParams) -> tuple[str, ...]:
    data = tuple(f"arg{i}" for i in range(p.num_args))
    ranges = tuple(f"arg{i}_{k}" for i in range(p.num_args) for k in ("min", "max"))
    return data + ranges


def quantized_concat_shape(p: QuantizedConcatParams, ins: list, outs: list
                           ) -> tuple[list, list]:
    n = p.num_args
    data = list(ins[:n])
    ranges = [merge_shape(s, (1,)) for s in ins[n:]]
    if any(s is None for s in data):
        return data + ranges, [outs[0], (1,), (1,)]
    nd = len(data[0])
    if nd == 0:
        raise RuleError("zero-dimensional arrays cannot be concatenated")
    if not -nd <= p.dim < nd:
        raise RuleError(f"dim={p.dim} is out of range for {nd}-D data")
    ax = p.dim % nd
    total = 0
    for i, s in enumerate(data):
        if len(s) != nd or any(a != b for k, (a, b) in enumerate(zip(s, data[0])) if k != ax):
            raise RuleError(f"arg{i} has shape {shape_str(s)}; every input must match "
                            f"{shape_str(data[0])} except along dim {p.dim}")
        total += s[ax]
    out = (*data[0][:ax], total, *data[0][ax + 1:])
    return data + ranges, [out, (1,), (1,)]


def quantized_concat_type(p: QuantizedConcatParams, ins: list, outs: list
                          ) -> tuple[list, list]:
    n = p.num_args
    for i, t in enumerate(ins[:n]):
        if t is not None and np.dtype(t) != np.int8:
            raise RuleError(f"arg{i} has dtype {np.dtype(t).name}; quantized_concat takes int8")
    for i, t in enumerate(ins[n:]):
        if t is not None and np.dtype(t) != np.float32:
            raise RuleError(f"range input {i} has dtype {np.dtype(t).name}; it must be float32")
    i8, f = np.dtype("int8"), np.dtype("float32")
    return [i8] * n + [f] * (2 * n), [i8, f, f]



def quantized_concat_reference(p: QuantizedConcatParams, *ins: np.ndarray):
    n = p.num_args
    data, ranges = ins[:n], ins[n:]
    lo = F32(min(0.0, *(float(r.reshape(-1)[0]) for r in ranges[0::2])))
    hi = F32(max(0.0, *(float(r.reshape(-1)[0]) for r in ranges[1::2])))
    mo = F32(max(abs(lo), abs(hi)))
    parts = []
    for i, x in enumerate(data):
        s = maxabs(ranges[2 * i], ranges[2 * i + 1]) / mo if mo else F32(0)
        r = np.clip(np.rint(x.astype(F32) * s), -128, 127)
        parts.append(r.astype(np.int8))
    return np.concatenate(parts, axis=p.dim), np.array([lo], F32), np.array([hi], F32)


def quantized_concat_lowering(call: KernelCall) -> Lowered:
    p: QuantizedConcatParams = call.params
    n = p.num_args
    if call.req == "add":
        raise NoKernelError("quantized_concat writes its outputs; it cannot add to them")
    out_shape = call.out_shapes[0]
    ax = p.dim % len(out_shape)
    outer = int(np.prod(out_shape[:ax]))
    after = int(np.prod(out_shape[ax + 1:]))
    oinner = out_shape[ax] * after
    rng = KernelSpec.make("quantization/qconcat_range.c.j2", num=n)
    launches = [Launch(rng, (), args=(*range(n, 3 * n), 3 * n + 1, 3 * n + 2))]
    spec = KernelSpec.make("quantization/qconcat.c.j2")
    off = 0
    for i in range(n):
        shp = call.in_shapes[i]
        inner = shp[ax] * after
        if size(shp):
            launches.append(Launch(spec, (outer, inner, off, oinner), args=(
                i, n + 2 * i, n + 2 * i + 1, 3 * n + 1, 3 * n + 2, 3 * n)))
        off += inner
    return Lowered(tuple(launches))


QUANTIZED_CONCAT = register(
    OpDef(
        name="_contrib_quantized_concat",
        params=QuantizedConcatParams,
        inputs=quantized_concat_inputs,
        outputs=RANGED_OUTPUTS,
        key_var_num_args="num_args",
        infer_shape=quantized_concat_shape,
        infer_type=quantized_concat_type,
        reference=quantized_concat_reference,
        kernels={DENSE: Kernel(quantized_concat_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Joins int8 inputs along dim, each rescaled to the common range [min(0, mins), "
        "max(0, maxs)] (rounded to nearest even).",
        examples=(
            Example(((2, 3, 4), (2, 2, 4), (1,), (1,), (1,), (1,)), {"num_args": 2, "dim": 1},
                    in_dtypes=("int8", "int8", "float32", "float32", "float32", "float32"),
                    ints={0: (-128, 128), 1: (-128, 128)}),
            Example(((3, 2), (3, 1), (3, 3), (1,), (1,), (1,), (1,), (1,), (1,)),
                    {"num_args": 3, "dim": 1},
                    in_dtypes=("int8",) * 3 + ("float32",) * 6,
                    ints={0: (-128, 128), 1: (-128, 128), 2: (-128, 128)}),
        ),
        bad_params=({}, {"num_args": 0}),
    )
)
