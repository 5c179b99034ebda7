"""index_copy: a copy of old_tensor with the rows named by index_vector replaced by new_tensor's
rows; the gradient routes each output row back to the tensor it came from."""

from __future__ import annotations

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import NoParams
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

Array = np.ndarray


def index_copy_shape(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    old, idx, new = ins
    old = merge_shape(old, outs[0])
    if idx is not None and len(idx) != 1:
        raise RuleError(f"index_vector has shape {shape_str(idx)}; it must be 1-D")
    if old is not None and new is not None:
        if len(new) != len(old) or new[1:] != old[1:]:
            raise RuleError(f"new_tensor has shape {shape_str(new)}; its rows must have the "
                            f"shape of old_tensor's {shape_str(old)} rows")
    if new is None and old is not None and idx is not None:
        new = (idx[0], *old[1:])
    if idx is None and new is not None:
        idx = (new[0],)
    if idx is not None and new is not None and idx[0] != new[0]:
        raise RuleError(f"index_vector has {idx[0]} entries but new_tensor {new[0]} rows")
    return [old, idx, new], [old]


def index_copy_type(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    old, idx, new = ins
    t = old if old is not None else (new if new is not None else outs[0])
    if old is not None and new is not None and old != new:
        raise RuleError(f"new_tensor is {new.name} but old_tensor {old.name}; they must match")
    return [t, idx, t], [t]


def _rows(shape: tuple[int, ...]) -> tuple[int, int]:
    return (shape[0], size(shape[1:])) if shape else (1, 1)


def index_copy_reference(p: NoParams, old: Array, idx: Array, new: Array) -> Array:
    out: Array = old.copy()
    for i, r in enumerate(idx.astype(np.int64)):
        if 0 <= r < old.shape[0]:
            out[r] = new[i]
    return out


def index_copy_lowering(call: KernelCall) -> Lowered:
    old = call.in_shapes[0]
    if size(old) == 0:
        return Lowered()
    r, w = _rows(old)
    spec = KernelSpec.make("contrib_misc/index_copy.c.j2", dtype=call.in_dtypes[0].name,
                           idx_dtype=call.in_dtypes[1].name, req=call.req)
    return Lowered((Launch(spec, (r, w, call.in_shapes[1][0])),))


def index_copy_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, old (shape only), index, new (shape only), d_old, d_index, d_new]."""
    r, w = _rows(call.in_shapes[0])
    reqs = [call.out_req(k) for k in range(3)]
    if all(q == "null" for q in reqs):
        return Lowered()
    spec = KernelSpec.make("contrib_misc/index_copy_backward.c.j2",
                           dtype=call.out_dtypes[0].name, idx_dtype=call.out_dtypes[1].name,
                           req_old=reqs[0], req_idx=reqs[1], req_new=reqs[2])
    return Lowered((Launch(spec, (r, w, call.in_shapes[2][0]), args=(0, 2, 4, 5, 6)),))


def index_copy_backward_reference(p: NoParams, og: Array, old: Array, idx: Array,
                                  new: Array) -> tuple[Array, Array, Array]:
    rows = idx.astype(np.int64)
    valid = (rows >= 0) & (rows < og.shape[0])
    d_old = og.copy()
    d_old[rows[valid]] = 0
    d_new = np.zeros_like(new)
    d_new[valid] = og[rows[valid]]
    return d_old, np.zeros_like(idx), d_new


BACKWARD_INDEX_COPY = register(OpDef(
    name="_contrib_backward_index_copy",
    params=NoParams,
    inputs=("ograd", "old_tensor", "index_vector", "new_tensor"),
    outputs=("old_grad", "index_grad", "new_grad"),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1], ins[2], ins[3]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0], ins[2], ins[0]]),
    ignore_inputs=(1, 3),
    reference=index_copy_backward_reference,
    kernels={DENSE: Kernel(index_copy_backward_lowering)},
    differentiable=False,
    doc="Gradient of index_copy: the output gradient's rows back to old_tensor or new_tensor.",
    examples=(
        Example(((5, 3), (5, 3), (2,), (2, 3)), ints={2: (0, 5)}),
        Example(((4, 2, 2), (4, 2, 2), (3,), (3, 2, 2)), ints={2: (-1, 5)}, dtype="float64"),
    ),
))


def index_copy_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_INDEX_COPY, node, [g, *node.inputs])
    return [Entry(b, 0), Entry(b, 1), Entry(b, 2)]


INDEX_COPY = register(OpDef(
    name="_contrib_index_copy",
    params=NoParams,
    inputs=("old_tensor", "index_vector", "new_tensor"),
    infer_shape=index_copy_shape,
    infer_type=index_copy_type,
    reference=index_copy_reference,
    kernels={DENSE: Kernel(index_copy_lowering)},
    grad=index_copy_grad,
    doc="old_tensor with row index_vector[i] replaced by new_tensor[i] (the last i wins where "
        "indices repeat; indices outside the rows write nothing).",
    # One index, or indices the examples draw distinct, so finite differences see the rows
    # that the gradient routes (a row overwritten twice has a zero derivative).
    examples=(
        Example(((5, 3), (1,), (1, 3)), ints={1: (0, 5)}),
        Example(((6, 2, 2), (2,), (2, 2, 2)), ints={1: (0, 6)}, dtype="float64"),
        Example(((4, 3), (3,), (3, 3)), ints={1: (0, 4)}, dtype="float16"),
    ),
    bad_params=({"axis": 0},),
))
