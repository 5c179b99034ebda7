"""MXNet's DGL graph operators on int64 csr graphs (a stored value is an edge id, its column the
neighbour vertex): neighbour sampling (uniform and weighted), induced subgraphs and compaction
of sampled graphs. Their csr outputs hold as many entries as the values give, they take csr
graphs only and have no dense kernel, so they are value-shaped: host storage kernels that ``nd``
calls run (MXNet 1.9.1 cannot bind them either: its storage-type inference refuses them)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import DTypeError, GraphValueError, StorageTypeError
from nnsym.ir import native
from nnsym.ir.opdef import Example, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.storage import Csr, Env, Storage, StorageCall
from nnsym.ops.common.rng import next_seed
from nnsym.ops.common.storage import to_dense
from nnsym.types import DispatchMode, SType, shape_str

Array = np.ndarray
I64 = np.dtype(np.int64)
EX = DispatchMode.FCOMPUTE_EX


# ---------------------------------------------------------------------------------------------
# The C kernels


_CDEF = """
int64_t nnsym_dgl_subgraph(const int64_t *indptr, const int64_t *indices, const int64_t *eids,
    int64_t n, const int64_t *vids, int64_t len, int64_t *map, int64_t *out_indptr,
    int64_t *out_indices, int64_t *out_eids);
int64_t nnsym_dgl_compact(const int64_t *indices, int64_t nnz, const int64_t *vids,
    int64_t size, int64_t *map, int64_t cols, int64_t *out_indices);
int64_t nnsym_dgl_sample(const int64_t *indptr, const int64_t *indices, const int64_t *eids,
    int64_t n, const float *prob, const int64_t *seeds, int64_t num_seeds, int64_t num_hops,
    int64_t num_neighbor, int64_t max_v, uint64_t seed, int64_t *verts, int64_t *layers,
    int64_t *mark, int64_t *owner, int64_t *nbr_off, int64_t *nbr_cols, int64_t *nbr_eids,
    int64_t *pos, double *w, int64_t *n_exp);
"""


@functools.cache
def _lib() -> Any:
    return native.loader().library("dynamic/dgl_graph.c.j2", _CDEF)


def _p(a: Array | None, ct: str = "int64_t *") -> Any:
    ld = native.loader()
    return ld.NULL if a is None else ld.ptr(a, ct)


def _graph(op: str, s: Storage, what: str) -> Csr:
    """The graph input, checked when the kernel runs (storage-type inference lets symbols
    with unknown storage types through, as for every storage kernel)."""
    if not isinstance(s, Csr):
        raise StorageTypeError(f"{op}: {what} must be a csr matrix, not {_stype(s)} (MXNet "
                               "takes csr graphs only)")
    if s.data.dtype != I64:
        raise DTypeError(f"{op}: {what} must hold int64 edge ids, not {s.data.dtype.name}")
    return s


def _stype(s: Storage) -> str:
    return "default" if isinstance(s, np.ndarray) else s.stype.label


def _ids(op: str, s: Storage, what: str, n: int | None = None) -> Array:
    a = np.ascontiguousarray(to_dense(s))
    if a.dtype != I64:
        raise DTypeError(f"{op}: {what} must be int64 vertex ids, not {a.dtype.name}")
    if n is not None and a.size and (a.min() < 0 or a.max() >= n):
        raise GraphValueError(f"{op}: {what} holds vertex ids outside [0, {n}): "
                              f"{a[(a < 0) | (a >= n)][:5].tolist()}")
    return a


def _canonical(indptr: Array, indices: Array, data: Array, shape: tuple[int, int]) -> Csr:
    """Rows sorted by column (the entries kept with their values)."""
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    order = np.lexsort((indices, rows))
    return Csr(np.ascontiguousarray(data[order]), np.ascontiguousarray(indices[order]),
               indptr, shape)




# ---------------------------------------------------------------------------------------------
# dgl_subgraph


@dataclass(frozen=True, kw_only=True)
class SubgraphParams(Params):
    num_args: int = field(lower=2, doc="Number of inputs: the graph and its vertex arrays.")
    return_mapping: bool = field(doc="Also return each subgraph with its parent's edge ids.")


def _square(s: Any, what: str) -> None:
    if s is not None and (len(s) != 2 or (None not in s and s[0] != s[1])):
        raise RuleError(f"{what} has shape {shape_str(s)}; it must be a square 2-D graph")


def subgraph_shape(p: SubgraphParams, ins: list, outs: list) -> tuple[list, list]:
    _square(ins[0], "graph")
    out = []
    for i, v in enumerate(ins[1:]):
        if v is not None and len(v) != 1:
            raise RuleError(f"varray{i} has shape {shape_str(v)}; it must be 1-D")
        out.append(None if v is None else (v[0], v[0]))
    return list(ins), out * (2 if p.return_mapping else 1)


def _dgl_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    return list(ins), [I64] * len(outs)


def subgraph_reference(p: SubgraphParams, graph: Array, *varrays: Array) -> list[Array]:
    """Dense: row i, column j of a subgraph is the edge varray[i] -> varray[j]; new edge ids
    count the entries in row order from 0 (an edge id 0 reads as no edge here)."""
    news, olds = [], []
    for v in varrays:
        vv = v.astype(np.int64)
        last = {int(x): i for i, x in enumerate(vv)}  # a repeated vertex: its last position
        old = np.zeros((len(vv), len(vv)), graph.dtype)
        for i, r in enumerate(vv):
            for c in np.flatnonzero(graph[r]):
                if int(c) in last:
                    old[i, last[int(c)]] = graph[r, c]
        new = np.zeros_like(old)
        new[old != 0] = np.arange(np.count_nonzero(old))
        news.append(new)
        olds.append(old)
    return news + (olds if p.return_mapping else [])


def subgraph_storage(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    op = call.op.name
    g = _graph(op, ins[0], "graph")
    n = int(g.shape[0])
    lib = _lib()
    news, olds = [], []
    for i, s in enumerate(ins[1:]):
        v = _ids(op, s, f"varray{i}", n)
        m = np.empty(n, I64)
        args = (_p(g.indptr), _p(g.indices), _p(g.data), n, _p(v), len(v), _p(m))
        nnz = int(lib.nnsym_dgl_subgraph(*args, _p(None), _p(None), _p(None)))
        indptr, indices, eids = np.empty(len(v) + 1, I64), np.empty(nnz, I64), np.empty(nnz, I64)
        lib.nnsym_dgl_subgraph(*args, _p(indptr), _p(indices), _p(eids))
        old = _canonical(indptr, indices, eids, (len(v), len(v)))
        news.append(Csr(np.arange(nnz, dtype=I64), old.indices, old.indptr, old.shape))
        olds.append(old)
    return news + (olds if call.params.return_mapping else [])


def _subgraph_stype(p: SubgraphParams, ins: tuple[SType, ...]) -> Any:
    return (SType.CSR,) * ((p.num_args - 1) * (2 if p.return_mapping else 1)), EX, \
        subgraph_storage


DGL_SUBGRAPH = register(OpDef(
    name="_contrib_dgl_subgraph",
    params=SubgraphParams,
    inputs=lambda p: ("graph", *(f"varray{i}" for i in range(p.num_args - 1))),
    outputs=lambda p: tuple(f"output{i}" for i in range(
        (p.num_args - 1) * (2 if p.return_mapping else 1))),
    key_var_num_args="num_args",
    infer_shape=subgraph_shape,
    infer_type=_dgl_type,
    infer_stype=_subgraph_stype,
    reference=subgraph_reference,
    value_shaped=True,
    differentiable=False,
    doc="The subgraph induced by each vertex array: its edges renumbered from 0 (and, with "
        "return_mapping, the same subgraph holding the parent's edge ids).",
    examples=(
        Example(((5, 5), (3,)), {"num_args": 2, "return_mapping": True}, dtype="int64",
                ints={0: (0, 3), 1: (0, 5)}),
        Example(((4, 4), (2,), (3,)), {"num_args": 3, "return_mapping": False}, dtype="int64",
                ints={0: (0, 2), 1: (0, 4), 2: (0, 4)}),
    ),
    bad_params=({"num_args": 2}, {"num_args": 1, "return_mapping": True}),
))


# ---------------------------------------------------------------------------------------------
# dgl_graph_compact


@dataclass(frozen=True, kw_only=True)
class CompactParams(Params):
    num_args: int = field(lower=2, doc="Number of inputs: the graphs, then their vertex ids.")
    return_mapping: bool = field(doc="Also return each compacted graph (same edge ids).")
    graph_sizes: tuple[int, ...] = field(doc="The number of vertices of each graph.")

    def __post_init__(self) -> None:
        if self.num_args % 2:
            raise ValueError(f"num_args={self.num_args}: graphs and vertex arrays come in pairs")
        if len(self.graph_sizes) != self.num_args // 2:
            raise ValueError(f"graph_sizes has {len(self.graph_sizes)} entries for "
                             f"{self.num_args // 2} graphs")


def compact_shape(p: CompactParams, ins: list, outs: list) -> tuple[list, list]:
    k = p.num_args // 2
    out = []
    for i in range(k):
        g, v, size = ins[i], ins[k + i], p.graph_sizes[i]
        if g is not None and (len(g) != 2 or any(d is not None and d < size for d in g)):
            raise RuleError(f"graph{i} has shape {shape_str(g)}; it must be 2-D with at "
                            f"least graph_sizes[{i}]={size} rows and columns")
        if v is not None and (len(v) != 1 or (v[0] is not None and v[0] < size + 1)):
            raise RuleError(f"varray{i} has shape {shape_str(v)}; it must be 1-D with more "
                            f"than graph_sizes[{i}]={size} entries")
        if g is not None and v is not None and None not in (g[0], v[0]) and v[0] != g[0] + 1:
            raise RuleError(f"varray{i} has {v[0]} entries; graph{i} with {g[0]} rows needs "
                            f"{g[0] + 1} (the vertex ids and their count)")
        out.append((size, size))
    return list(ins), out * (2 if p.return_mapping else 1)


def compact_reference(p: CompactParams, *ins: Array) -> list[Array]:
    """Dense: the first graph_sizes[i] rows, column c moved to c's position in the vertex
    array; edges renumbered from 0 in row order (with return_mapping, also the same graph with
    the input's edge ids)."""
    k = p.num_args // 2
    news, olds = [], []
    for i in range(k):
        g, v, size = ins[i], ins[k + i].astype(np.int64), p.graph_sizes[i]
        pos = {int(x): j for j, x in enumerate(v[:size])}
        old = np.zeros((size, size), np.int64)
        for r, c in zip(*np.nonzero(g[:size])):
            old[r, pos[int(c)]] = g[r, c]
        new = np.zeros_like(old)
        new[old != 0] = np.arange(np.count_nonzero(old))
        news.append(new)
        olds.append(old)
    return news + (olds if p.return_mapping else [])


def compact_storage(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    op, p = call.op.name, call.params
    k = p.num_args // 2
    lib = _lib()
    news, olds = [], []
    for i in range(k):
        g = _graph(op, ins[i], f"graph{i}")
        v = _ids(op, ins[k + i], f"varray{i}")
        size, cols = p.graph_sizes[i], int(g.shape[1])
        if int(v[-1]) != size:
            raise GraphValueError(f"{op}: varray{i} ends with the vertex count {int(v[-1])}, "
                                  f"but graph_sizes[{i}] is {size}")
        head = np.ascontiguousarray(v[:size])
        if head.size and (head.min() < 0 or head.max() >= cols):
            raise GraphValueError(f"{op}: varray{i} holds vertex ids outside [0, {cols})")
        nnz = int(g.indptr[size])
        indices, id_map = np.empty(nnz, I64), np.empty(max(cols, 1), I64)
        bad = int(lib.nnsym_dgl_compact(_p(g.indices), nnz, _p(head), size, _p(id_map), cols,
                                        _p(indices)))
        if bad >= 0:
            raise GraphValueError(f"{op}: graph{i} has an edge to vertex {int(g.indices[bad])}, "
                                  f"which is not among the first {size} entries of varray{i}")
        old = _canonical(np.ascontiguousarray(g.indptr[:size + 1]), indices,
                         np.ascontiguousarray(g.data[:nnz]), (size, size))
        news.append(Csr(np.arange(nnz, dtype=I64), old.indices, old.indptr, old.shape))
        olds.append(old)
    return news + (olds if p.return_mapping else [])


def _compact_stype(p: CompactParams, ins: tuple[SType, ...]) -> Any:
    return (SType.CSR,) * (p.num_args // 2 * (2 if p.return_mapping else 1)), EX, \
        compact_storage


DGL_GRAPH_COMPACT = register(OpDef(
    name="_contrib_dgl_graph_compact",
    params=CompactParams,
    inputs=lambda p: (*(f"graph{i}" for i in range(p.num_args // 2)),
                      *(f"varray{i}" for i in range(p.num_args // 2))),
    outputs=lambda p: tuple(f"output{i}" for i in range(
        p.num_args // 2 * (2 if p.return_mapping else 1))),
    key_var_num_args="num_args",
    infer_shape=compact_shape,
    infer_type=_dgl_type,
    infer_stype=_compact_stype,
    reference=compact_reference,
    value_shaped=True,
    differentiable=False,
    doc="A sampled graph reduced to its first graph_sizes[i] rows, its columns renumbered by "
        "their position in the vertex array; edges renumbered from 0 (and, with "
        "return_mapping, the same graph holding the input's edge ids).",
    # a graph without edges: compaction needs every column among the vertices (tests/dynamic)
    examples=(
        Example(((2, 4), (3,)), {"num_args": 2, "graph_sizes": (2,), "return_mapping": False},
                dtype="int64", ints={0: (0, 1), 1: (2, 3)}),
    ),
    bad_params=({"num_args": 3, "graph_sizes": (1,), "return_mapping": False},
                {"num_args": 2, "graph_sizes": (1, 2), "return_mapping": False}),
))


# ---------------------------------------------------------------------------------------------
# dgl_csr_neighbor_uniform_sample / dgl_csr_neighbor_non_uniform_sample


@dataclass(frozen=True, kw_only=True)
class NeighborSampleParams(Params):
    num_args: int = field(lower=2, doc="Number of inputs.")
    num_hops: int = field(default=1, doc="Number of hops.")
    num_neighbor: int = field(default=2, doc="Neighbours sampled per vertex at most.")
    max_num_vertices: int = field(default=100, doc="Vertices per sampled subgraph at most.")


@dataclass(frozen=True, kw_only=True)
class NonUniformSampleParams(NeighborSampleParams):
    num_args: int = field(lower=3, doc="Number of inputs (the graph, the weights, the seeds).")


def _sample_counts(p: NeighborSampleParams, weighted: bool) -> int:
    n = p.num_args - (2 if weighted else 1)
    if n < 1:
        raise RuleError(f"num_args={p.num_args} leaves no seed array")
    return n


def _sample_shape(weighted: bool) -> Any:
    def rule(p: NeighborSampleParams, ins: list, outs: list) -> tuple[list, list]:
        n = _sample_counts(p, weighted)
        _square(ins[0], "csr_matrix")
        if weighted and ins[1] is not None and len(ins[1]) != 1:
            raise RuleError(f"probability has shape {shape_str(ins[1])}; it must be 1-D")
        for i, s in enumerate(ins[-n:]):
            if s is not None and len(s) != 1:
                raise RuleError(f"seed_arrays{i} has shape {shape_str(s)}; it must be 1-D")
        m = p.max_num_vertices
        cols = None if ins[0] is None else ins[0][1]
        groups: list[list[Any]] = [[(m + 1,)] * n, [(m, cols)] * n]
        if weighted:
            groups.append([(m,)] * n)
        groups.append([(m,)] * n)
        return list(ins), [s for grp in groups for s in grp]
    return rule


def _sample_type(weighted: bool) -> Any:
    def rule(p: NeighborSampleParams, ins: list, outs: list) -> tuple[list, list]:
        n = _sample_counts(p, weighted)
        ids, graph = ins[-1], ins[0]
        groups = [[ids] * n, [graph] * n]
        if weighted:
            groups.append([ins[1]] * n)
        groups.append([ids] * n)
        return list(ins), [t for grp in groups for t in grp]
    return rule


def _sample_one(g: Csr, prob: Array | None, seeds: Array, p: NeighborSampleParams,
                seed: int) -> tuple[Array, Csr, Array | None, Array]:
    n, m = int(g.shape[0]), p.max_num_vertices
    cap = max(1, min(m * max(p.num_neighbor, 0), len(g.indices)))
    deg = int(np.diff(g.indptr).max()) if n else 0
    verts, layers, owner = np.empty(m, I64), np.empty(m, I64), np.empty(m, I64)
    off, cols, eids = np.empty(m + 1, I64), np.empty(cap, I64), np.empty(cap, I64)
    n_exp = np.zeros(1, I64)
    # NOTE: scratch arrays are named so they outlive the call (a pointer does not own them)
    mark, pos, w = np.empty(max(n, 1), I64), np.empty(max(deg, 1), I64), np.empty(max(deg, 1))
    nv = int(_lib().nnsym_dgl_sample(
        _p(g.indptr), _p(g.indices), _p(g.data), n, _p(prob, "float *"), _p(seeds), len(seeds),
        p.num_hops, max(p.num_neighbor, 0), m, seed, _p(verts), _p(layers), _p(mark),
        _p(owner), _p(off), _p(cols), _p(eids), _p(pos), _p(w, "double *"), _p(n_exp)))
    ne = int(n_exp[0])
    order = np.argsort(verts[:nv], kind="stable")
    rank = np.empty(nv, I64)
    rank[order] = np.arange(nv)
    ids = np.full(m + 1, -1, I64)
    ids[:nv] = verts[:nv][order]
    ids[m] = nv
    lay = np.full(m, -1, I64)
    lay[:nv] = layers[:nv][order]
    # each expanded vertex's entries go to its row (its rank among the sorted vertices)
    counts = np.zeros(m, I64)
    counts[rank[owner[:ne]]] = np.diff(off[: ne + 1])
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(I64)
    by_row = np.argsort(rank[owner[:ne]], kind="stable")
    take = np.concatenate([np.arange(off[e], off[e + 1]) for e in by_row]) if ne else \
        np.zeros(0, I64)
    csr = Csr(np.ascontiguousarray(eids[take]), np.ascontiguousarray(cols[take]), indptr,
              (m, int(g.shape[1])))
    sub_prob = None
    if prob is not None:
        sub_prob = np.zeros(m, prob.dtype)
        sub_prob[:nv] = prob[ids[:nv]]
    return ids, csr, sub_prob, lay


def _sample_storage(weighted: bool) -> Any:
    def kernel(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
        op, p = call.op.name, call.params
        g = _graph(op, ins[0], "csr_matrix")
        n = int(g.shape[0])
        prob = None
        if weighted:
            prob = np.ascontiguousarray(to_dense(ins[1]))
            if prob.dtype != np.float32:
                raise DTypeError(f"{op}: probability must be float32, not {prob.dtype.name}")
            if prob.shape != (n,):
                raise GraphValueError(f"{op}: probability has shape {prob.shape}; the graph "
                                      f"has {n} vertices")
        k = _sample_counts(p, weighted)
        res = []
        for i, s in enumerate(ins[-k:]):
            seeds = _ids(op, s, f"seed_arrays{i}", n)
            if len(np.unique(seeds)) > p.max_num_vertices:
                raise GraphValueError(f"{op}: seed_arrays{i} has {len(np.unique(seeds))} "
                                      f"vertices, more than max_num_vertices="
                                      f"{p.max_num_vertices}")
            res.append(_sample_one(g, prob, seeds, p, next_seed()))
        groups: list[list[Any]] = [[r[0] for r in res], [r[1] for r in res]]
        if weighted:
            groups.append([r[2] for r in res])
        groups.append([r[3] for r in res])
        return [x for grp in groups for x in grp]
    return kernel


def _sample_stype(weighted: bool) -> Any:
    kernel = _sample_storage(weighted)

    def rule(p: NeighborSampleParams, ins: tuple[SType, ...]) -> Any:
        n = p.num_args - (2 if weighted else 1)
        outs = (SType.DEFAULT,) * n + (SType.CSR,) * n + (SType.DEFAULT,) * (n * (2 if weighted
                                                                               else 1))
        return outs, EX, kernel
    return rule


def _sample_reference(weighted: bool) -> Any:
    """Shapes and dtypes only (the values are samples): the seeds, a graph of the first
    num_neighbor neighbours of each seed, layer 0."""
    def ref(p: NeighborSampleParams, graph: Array, *rest: Array) -> list[Array]:
        k = _sample_counts(p, weighted)
        m = p.max_num_vertices
        seeds = rest[-k:]
        groups: list[list[Array]] = [[], [], [], []] if weighted else [[], [], []]
        for s in seeds:
            ids = np.full(m + 1, -1, s.dtype)
            u = np.unique(s)[:m]
            ids[: len(u)] = u
            ids[m] = len(u)
            groups[0].append(ids)
            groups[1].append(np.zeros((m, graph.shape[1]), graph.dtype))
            if weighted:
                groups[2].append(np.zeros(m, rest[0].dtype))
            groups[-1].append(np.zeros(m, s.dtype))
        return [x for grp in groups for x in grp]
    return ref


def _sample_op(weighted: bool) -> OpDef:
    lead = ("csr_matrix", "probability") if weighted else ("csr_matrix",)
    per = 4 if weighted else 3
    what = "with probability proportional to a weight per vertex" if weighted else "uniformly"
    return OpDef(
        name=f"_contrib_dgl_csr_neighbor_{'non_' if weighted else ''}uniform_sample",
        params=NonUniformSampleParams if weighted else NeighborSampleParams,
        inputs=lambda p: (*lead, *(f"seed_arrays{i}" for i in range(p.num_args - len(lead)))),
        outputs=lambda p: tuple(f"output{i}" for i in range(per * (p.num_args - len(lead)))),
        key_var_num_args="num_args",
        infer_shape=_sample_shape(weighted),
        infer_type=_sample_type(weighted),
        infer_stype=_sample_stype(weighted),
        reference=_sample_reference(weighted),
        value_shaped=True,
        random=True,
        differentiable=False,
        doc=f"Breadth-first neighbour sampling from each seed array, num_neighbor neighbours "
            f"per vertex drawn {what}: the sorted vertex ids (their count last), the sampled "
            f"edges as csr rows of those vertices" + (", their weights" if weighted else "")
            + " and each vertex's hop.",
        examples=(
            Example(((6, 6), *(((6,),) if weighted else ()), (2,)),
                    {"num_args": 3 if weighted else 2, "max_num_vertices": 4},
                    dtype="int64", ints={0: (0, 3), (2 if weighted else 1): (0, 6)},
                    in_dtypes=("int64", "float32", "int64") if weighted else None,
                    low=0.1, high=1.0),
        ),
        bad_params=({"num_args": 1},),
    )


DGL_UNIFORM_SAMPLE = register(_sample_op(False))
DGL_NON_UNIFORM_SAMPLE = register(_sample_op(True))
