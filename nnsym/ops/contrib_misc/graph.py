"""edge_id: the value stored in a csr adjacency matrix at each (u[i], v[i]), or -1 (MXNet's DGL
support operator)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    merge_shape,
    register,
)
from nnsym.ir.params import NoParams
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import Csr, Env, Storage, StorageCall
from nnsym.types import DispatchMode, SType, shape_str

Array = np.ndarray


def edge_id_shape(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    data, u, v = ins
    if data is not None and len(data) != 2:
        raise RuleError(f"data has shape {shape_str(data)}; it must be a 2-D adjacency matrix")
    try:
        q = merge_shape(merge_shape(u, v), outs[0])
    except RuleError:
        raise RuleError(f"u has shape {shape_str(u)} and v {shape_str(v)}; they must be equal "
                        "1-D shapes") from None
    if q is not None and len(q) != 1:
        raise RuleError(f"u and v have shape {shape_str(q)}; they must be 1-D")
    return [data, q, q], [q]


def edge_id_type(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    data, u, v = ins
    t = data if data is not None else outs[0]
    return [t, u if u is not None else v, v if v is not None else u], [t]


def _lookup(dense_or_csr: Any, u: Array, v: Array, dtype: np.dtype) -> Array:
    out = np.full(u.shape, -1, dtype)
    r, c = u.astype(np.int64), v.astype(np.int64)
    rows, cols = dense_or_csr.shape
    ok = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    for i in np.flatnonzero(ok):
        if isinstance(dense_or_csr, Csr):
            lo, hi = dense_or_csr.indptr[r[i]], dense_or_csr.indptr[r[i] + 1]
            k = lo + np.searchsorted(dense_or_csr.indices[lo:hi], c[i])
            if k < hi and dense_or_csr.indices[k] == c[i]:
                out[i] = dense_or_csr.data[k]
        elif dense_or_csr[r[i], c[i]] != 0:
            out[i] = dense_or_csr[r[i], c[i]]
    return out


def edge_id_reference(p: NoParams, data: Array, u: Array, v: Array) -> Array:
    return _lookup(data, u, v, data.dtype)


def edge_id_csr(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """Looks each (u, v) up among the stored entries of its row (binary search)."""
    a, u, v = ins
    assert isinstance(a, Csr) and isinstance(u, np.ndarray) and isinstance(v, np.ndarray)
    return [_lookup(a, u, v, call.out_dtypes[0])]


def edge_id_lowering(call: KernelCall) -> Lowered:
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    r, c = call.in_shapes[0]
    spec = KernelSpec.make("contrib_misc/edge_id.c.j2", dtype=call.in_dtypes[0].name,
                           idx_dtype=call.in_dtypes[1].name, req=call.req)
    return Lowered((Launch(spec, (r, c, n)),))


EDGE_ID = register(OpDef(
    name="_contrib_edge_id",
    params=NoParams,
    inputs=("data", "u", "v"),
    infer_shape=edge_id_shape,
    infer_type=edge_id_type,
    reference=edge_id_reference,
    kernels={DENSE: Kernel(edge_id_lowering)},
    stype_rules=(StypeRule((SType.CSR, SType.DEFAULT, SType.DEFAULT), (SType.DEFAULT,),
                           DispatchMode.FCOMPUTE_EX, kernel=edge_id_csr),),
    doc="data[u[i], v[i]] where a csr adjacency matrix stores that entry, else -1.",
    examples=(
        Example(((4, 5), (6,), (6,)), ints={0: (0, 3), 1: (0, 4), 2: (0, 5)}),
        Example(((3, 3), (4,), (4,)), ints={0: (0, 2), 1: (-1, 4), 2: (0, 3)}, dtype="float64"),
    ),
    bad_params=({"axis": 0},),
))


# ---------------------------------------------------------------------------------------------
# dgl_adjacency


def dgl_adjacency_type(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    """A float32 result; MXNet takes int64 edge ids only, nnsym any dtype."""
    return list(ins), [np.dtype(np.float32)]


def dgl_adjacency_csr(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """The same sparsity pattern with every stored value 1.0 (float32)."""
    a = ins[0]
    assert isinstance(a, Csr)
    return [Csr(np.ones(len(a.indices), np.float32), a.indices.copy(), a.indptr.copy(),
                tuple(a.shape))]


def dgl_adjacency_lowering(call: KernelCall) -> Lowered:
    n = size(call.out_shapes[0])
    if n == 0:
        return Lowered()
    spec = KernelSpec.make("contrib_misc/nonzero_mask.c.j2", dtype=call.in_dtypes[0].name,
                           req=call.req)
    return Lowered((Launch(spec, (n,)),))


def _adjacency_shape(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    s = merge_shape(ins[0], outs[0])
    if s is not None and len(s) != 2:
        raise RuleError(f"data has shape {shape_str(s)}; it must be a 2-D graph matrix")
    return [s], [s]


DGL_ADJACENCY = register(OpDef(
    name="_contrib_dgl_adjacency",
    params=NoParams,
    infer_shape=_adjacency_shape,
    infer_type=dgl_adjacency_type,
    reference=lambda p, x: (x != 0).astype(np.float32),
    kernels={DENSE: Kernel(dgl_adjacency_lowering)},
    stype_rules=(StypeRule((SType.CSR,), (SType.CSR,), DispatchMode.FCOMPUTE_EX,
                           kernel=dgl_adjacency_csr),),
    doc="The adjacency matrix of a graph given by edge ids: 1.0 (float32) at every edge.",
    examples=(Example(((4, 5),), dtype="int64", ints={0: (0, 3)}),),
    bad_params=({"axis": 0},),
))
