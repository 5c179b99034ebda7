"""quantized_embedding: rows of an int8 weight looked up by (truncated, clipped) indices; the
weight's range passes through. Parameters and shape rule are Embedding's own (taken from the
registry: operator families do not import each other)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, get_op, merge_shape, register
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS

# NOTE: nnsym.ops imports the nn family (Embedding) before this one.
EMBEDDING = get_op("Embedding")
INDEX_DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int32", "int64")


def quantized_embedding_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    assert EMBEDDING.infer_shape is not None
    new_ins, new_outs = EMBEDDING.infer_shape(p, list(ins[:2]), [outs[0]])
    ranges = [merge_shape(s, (1,)) for s in ins[2:]]
    return [*new_ins, *ranges], [new_outs[0], (1,), (1,)]


def quantized_embedding_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    d, w = ins[0], ins[1]
    if d is not None and np.dtype(d).name not in INDEX_DTYPES:
        raise RuleError(f"data has dtype {np.dtype(d).name}; indices must be one of "
                        f"{INDEX_DTYPES}")
    if w is not None and np.dtype(w) != np.int8:
        raise RuleError(f"weight has dtype {np.dtype(w).name}; quantized_embedding takes int8")
    for i in (2, 3):
        if ins[i] is not None and np.dtype(ins[i]) != np.float32:
            raise RuleError(f"input {i} (a range) has dtype {np.dtype(ins[i]).name}; it must be "
                            "float32")
    f, i8 = np.dtype("float32"), np.dtype("int8")
    return [d if d is not None else f, i8, f, f], [i8, f, f]


def quantized_embedding_reference(p: Any, data: np.ndarray, weight: np.ndarray,
                                  lo: np.ndarray, hi: np.ndarray):
    with np.errstate(invalid="ignore"):
        idx = np.nan_to_num(np.trunc(data.astype(np.float64)), nan=0.0)
    idx = np.clip(idx, 0, p.input_dim - 1).astype(np.int64)
    return (weight[idx], np.asarray(lo, np.float32).reshape(1).copy(),
            np.asarray(hi, np.float32).reshape(1).copy())


def quantized_embedding_lowering(call: KernelCall) -> Lowered:
    p: Any = call.params
    dt = call.in_dtypes[0].name
    if dt not in INDEX_DTYPES or call.in_dtypes[1].name != "int8":
        raise NoKernelError(f"quantized_embedding has kernels for int8 weights and indices of "
                            f"{INDEX_DTYPES}, not {call.in_dtypes[1].name} and {dt}")
    if call.req == "add":
        raise NoKernelError("quantized_embedding writes its outputs; it cannot add to them")
    spec = KernelSpec.make("quantization/qembed.c.j2", idtype=dt)
    return Lowered((Launch(spec, (size(call.in_shapes[0]), p.input_dim, p.output_dim)),))


QUANTIZED_EMBEDDING = register(
    OpDef(
        name="_contrib_quantized_embedding",
        params=EMBEDDING.params,
        inputs=("data", "weight", "min_weight", "max_weight"),
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_embedding_shape,
        infer_type=quantized_embedding_type,
        reference=quantized_embedding_reference,
        kernels={DENSE: Kernel(quantized_embedding_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Looks up rows of an int8 weight (indices truncated and clipped to [0, input_dim)); "
        "the weight's range passes through.",
        examples=(
            Example(((2, 3), (5, 4), (1,), (1,)), {"input_dim": 5, "output_dim": 4},
                    in_dtypes=("float32", "int8", "float32", "float32"), low=-1.0, high=6.0,
                    ints={1: (-128, 128)}),
            Example(((4,), (3, 2), (1,), (1,)), {"input_dim": 3, "output_dim": 2},
                    in_dtypes=("int32", "int8", "float32", "float32"),
                    ints={0: (0, 3), 1: (-128, 128)}),
        ),
        bad_params=({"input_dim": 5}, {"input_dim": 0, "output_dim": 2}),
    )
)
