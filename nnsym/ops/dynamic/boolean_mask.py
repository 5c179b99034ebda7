"""boolean_mask(data, index): the rows of data whose index entry is nonzero, in order. The row
count is a value of ``index``, so the operator is value-shaped: its storage kernel sizes the
output on the host. Its gradient has a static shape (data's) and is an ordinary dense kernel."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir import native
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, StypeRule, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import CTYPES, KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import Env, Storage, StorageCall
from nnsym.ops.common.grad import backward_node
from nnsym.ops.common.storage import to_dense
from nnsym.types import DispatchMode, SType, shape_str

Array = np.ndarray


@dataclass(frozen=True, kw_only=True)
class BooleanMaskParams(Params):
    axis: int = field(default=0, doc="The axis to mask along (MXNet 1.9.1 supports 0 only).")

    def __post_init__(self) -> None:
        if self.axis != 0:
            raise ValueError(f"axis={self.axis}: MXNet 1.9.1's boolean_mask supports axis=0 only")


def boolean_mask_shape(p: BooleanMaskParams, ins: list, outs: list) -> tuple[list, list]:
    """Checks data against index; the output's row count is a value, so it stays unknown."""
    data, index = ins
    if index is not None and len(index) != 1:
        raise RuleError(f"index has shape {shape_str(index)}; it must be 1-D")
    if data is not None and len(data) == 0:
        raise RuleError("data is a scalar; it needs an axis to mask")
    if data is not None and index is not None and None not in (data[0], index[0]) \
            and data[0] != index[0]:
        raise RuleError(f"index has {index[0]} entries but data {data[0]} rows "
                        f"(data {shape_str(data)}); they must match")
    if index is None and data is not None:
        index = (data[0],)
    return [data, index], [outs[0]]


def boolean_mask_type(p: BooleanMaskParams, ins: list, outs: list) -> tuple[list, list]:
    data = ins[0] if ins[0] is not None else outs[0]
    return [data, ins[1]], [data]


def boolean_mask_reference(p: BooleanMaskParams, data: Array, index: Array) -> Array:
    return np.ascontiguousarray(data[np.asarray(index) != 0])


_CDEF = """
int64_t nnsym_bmask_count_{S}(const void *index, int64_t n);
void nnsym_bmask_copy_{S}(const void *index, int64_t n, const uint8_t *data, int64_t row_bytes,
                          uint8_t *out);
"""


@functools.cache
def _library(idx_dtype: str) -> Any:
    cdef = _CDEF.format(S=idx_dtype)
    return native.loader().library("dynamic/boolean_mask.c.j2", cdef, idx_dtype=idx_dtype)


def boolean_mask_storage(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """The kept rows: counted, the output sized, then copied (as bytes) in C."""
    data = np.ascontiguousarray(to_dense(ins[0]), dtype=call.out_dtypes[0])
    index = np.ascontiguousarray(to_dense(ins[1]))
    ld = native.loader()
    if not ld.available() or index.dtype.name not in CTYPES:
        return [boolean_mask_reference(call.params, data, index)]
    lib = _library(index.dtype.name)
    n = index.shape[0]
    pi = ld.ptr(index, "void *")
    k = int(getattr(lib, f"nnsym_bmask_count_{index.dtype.name}")(pi, n))
    out = np.empty((k, *data.shape[1:]), data.dtype)
    row_bytes = data.itemsize * size(data.shape[1:])
    if k and row_bytes:
        getattr(lib, f"nnsym_bmask_copy_{index.dtype.name}")(
            pi, n, ld.ptr(data, "uint8_t *"), row_bytes, ld.ptr(out, "uint8_t *"))
    return [out]


# ---- gradient: a dense kernel (the shape is data's) ----


def boolean_mask_backward_shape(p: BooleanMaskParams, ins: list, outs: list
                                ) -> tuple[list, list]:
    og, data, index = ins
    data = data if data is not None else outs[0]
    if index is None and outs[1] is not None:
        index = outs[1]
    if og is not None and data is not None:
        if len(og) != len(data) or og[1:] != data[1:]:
            raise RuleError(f"ograd has shape {shape_str(og)}; its rows must have the shape of "
                            f"data's {shape_str(data)} rows")
        if None not in (og[0], data[0]) and og[0] > data[0]:
            raise RuleError(f"ograd has {og[0]} rows, more than data's {data[0]}")
    (data, index), _ = boolean_mask_shape(p, [data, index], [None])
    return [og, data, index], [data, index]


def boolean_mask_backward_reference(p: BooleanMaskParams, og: Array, data: Array,
                                    index: Array) -> tuple[Array, Array]:
    d = np.zeros(data.shape, og.dtype)
    d[np.asarray(index) != 0] = og
    return d, np.zeros_like(index)


def boolean_mask_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data (shape only), index, data_grad, index_grad]."""
    data = call.in_shapes[1]
    reqs = [call.out_req(k) for k in range(2)]
    if all(q == "null" for q in reqs) or data[0] == 0:
        return Lowered()
    spec = KernelSpec.make("dynamic/boolean_mask_backward.c.j2", dtype=call.out_dtypes[0].name,
                           idx_dtype=call.in_dtypes[2].name, req_data=reqs[0], req_idx=reqs[1])
    ia = (data[0], size(data[1:]), call.in_shapes[0][0])
    return Lowered((Launch(spec, ia, args=(0, 2, 3, 4)),))


BACKWARD_BOOLEAN_MASK = register(OpDef(
    name="_backward_contrib_boolean_mask",
    params=BooleanMaskParams,
    inputs=("ograd", "data", "index"),
    outputs=("data_grad", "index_grad"),
    infer_shape=boolean_mask_backward_shape,
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] if ins[0] is not None else ins[1],
                                                 ins[2]]),
    ignore_inputs=(1,),
    reference=boolean_mask_backward_reference,
    kernels={DENSE: Kernel(boolean_mask_backward_lowering)},
    differentiable=False,
    doc="Gradient of boolean_mask: ograd's rows back to the kept rows of data, 0 elsewhere.",
    # ograd's row count is the number of nonzero index entries: these examples keep every row
    # (index drawn from [1, 3)); tests/dynamic checks real masks.
    examples=(
        Example(((4, 3), (4, 3), (4,)), ints={2: (1, 3)}),
        Example(((3, 2, 2), (3, 2, 2), (3,)), ints={2: (1, 3)}, dtype="float64"),
    ),
))


def boolean_mask_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_BOOLEAN_MASK, node, [g, *node.inputs])
    return [Entry(b, 0), Entry(b, 1)]


BOOLEAN_MASK = register(OpDef(
    name="_contrib_boolean_mask",
    params=BooleanMaskParams,
    inputs=("data", "index"),
    infer_shape=boolean_mask_shape,
    infer_type=boolean_mask_type,
    reference=boolean_mask_reference,
    # any storage types: the kernel reads dense values (sparse inputs densified)
    stype_rules=(StypeRule((None, None), (SType.DEFAULT,), DispatchMode.FCOMPUTE_EX,
                           kernel=boolean_mask_storage),),
    value_shaped=True,
    grad=boolean_mask_grad,
    doc="The rows of data (along axis 0) whose index entry is nonzero; the output's row count "
        "is the number of nonzero entries, known only from the values.",
    examples=(
        Example(((5, 3), (5,)), ints={1: (0, 2)}),
        Example(((4, 2, 3), (4,)), ints={1: (-1, 2)}, dtype="float64"),
        Example(((6,), (6,)), ints={1: (0, 2)}, dtype="int32"),
    ),
    bad_params=({"axis": 1}, {"axis": 0, "mode": 1}),
))
