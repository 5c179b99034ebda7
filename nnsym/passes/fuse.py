"""Elementwise fusion: groups of dense elementwise nodes become one fused node each.

A group is a root node plus producers all of whose readers are in the group (so nothing
outside reads an intermediate, and the intermediates disappear from the memory plan); members
share the root's shape and output dtype, and the forward or backward phase. The group's
inputs may broadcast to the root's shape (numpy's rule); its intermediates never do. A node
joins only when its dense kernel is one of the plain elementwise templates
(``scalar_form``): unary, scalar, ``Activation``, ``LeakyReLU`` (where training computes
the same) and binary operators (same-shape and
broadcasting), ``add_n`` of up to 8 inputs (the gradient graph's ``sum_grad``) and the
generated ``_backward_<op>`` nodes. Graph outputs stay materialised (they are roots).
Multi-output nodes are left alone.

Sparse fusion: a group may instead consist of csr (or row_sparse) nodes that keep their input's
pattern, that is, value maps with f(0) == 0 (run by ``map_values``) and ``elemwise_add``/
``_sub``/``_mul`` of two inputs with the same pattern (the union and the intersection of one
pattern are that pattern). Patterns are tracked from the entry they come from: every input of
such a group derives from one sparse entry, so the fused node (dispatched to ``fused_values``)
runs the composed expression once over the stored values and shares the index arrays. Where the
unfused ``elemwise_*`` kernels would store an explicit zero (``A - A``), so does the fused one.

Epilogue fusion: a FullyConnected (float32/float64) or BatchNorm node whose first output is read
only by one elementwise group of the same phase, with that output's shape and dtype, becomes one
node with the group (``epilogue_op``, ``nnsym/ops/elemwise/fused_epilogue.py``): the producer's
kernel writes the group's output buffer, then one fused pass applies the group in place.
FullyConnected's bias (shape ``(num_hidden,)``) moves into that pass. The producer's first output
disappears from the memory plan. Its other outputs (BatchNorm's mean and inverse std, which its
backward reads) stay. The node's ``fused_nodes``/``fused_ops`` attributes list the producer
first, then the group.

``NNSYM_FUSION=0`` turns fusion off in bound graphs (``fusion_enabled``).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnsym.ir.graph import Entry, Graph, GraphAttrs, IndexedGraph, Node, dfs_post_order
from nnsym.ir.opdef import DENSE, get_op
from nnsym.ir.spec import PAR_MIN, KernelCall
from nnsym.ops.common.storage import map_values
from nnsym.ops.elemwise.fused import (
    FusedParams,
    ScalarForm,
    Step,
    fused_op,
    fused_values,
    scalar_form,
)
from nnsym.ops.elemwise.fused_epilogue import EpilogueParams, epilogue_op
from nnsym.passes.manager import GraphPass, graph_pass
from nnsym.types import DispatchMode, SType


def fusion_enabled() -> bool:
    """False where ``NNSYM_FUSION`` is ``0`` (or ``false``/``off``/``no``)."""
    return os.environ.get("NNSYM_FUSION", "1").strip().lower() not in ("0", "false", "off", "no")


def _form(node: Node, nid: int, g: Graph) -> ScalarForm | None:
    """The node's scalar expression where it can be fused, else None."""
    op, idx, a = node.op, g.index, g.attrs
    assert a.shape is not None and a.dtype is not None and a.stype is not None
    assert a.dispatch is not None
    if op is None or op.num_outputs(node.params) != 1 or op.random:
        return None
    if op.pinned_inputs is not None or op.ignored_inputs(node.params) or op.loss:
        return None
    if a.dispatch[nid] != DispatchMode.FCOMPUTE:
        return None
    ins = idx.input_entries[nid]
    out = idx.row_ptr[nid]
    shape = a.shape[out]
    if shape is None or any(d is None for d in shape):
        return None
    if any(a.stype[e] != SType.DEFAULT or not _broadcasts(a.shape[e], shape) for e in ins) or \
            a.stype[out] != SType.DEFAULT:
        return None
    kernel = op.kernels.get(DENSE)
    if kernel is None:
        return None
    dims = tuple(int(d or 0) for d in shape)
    n = 1
    for d in dims:
        n *= d
    if n == 0:
        return None
    in_dtypes = tuple(np.dtype(a.dtype[e]) for e in ins)
    in_shapes = tuple(tuple(int(d or 0) for d in a.shape[e]) for e in ins)  # type: ignore[union-attr]
    call = KernelCall(node.params, in_shapes, in_dtypes, (dims,), (np.dtype(a.dtype[out]),))
    try:
        low = kernel.lower(call)
        # a train-mode operator (LeakyReLU) fuses where training lowers it the same way
        if op.train_mode and kernel.lower(dataclasses.replace(call, is_train=True)) != low:
            return None
    except Exception:  # a node whose kernel refuses this call is simply not fused
        return None
    form = scalar_form(low, n)
    if form is None or len(form.names) != len(ins):
        return None
    return form


# Binary operators whose csr/csr and row_sparse/row_sparse kernels store exactly the union or
# intersection of the operands' patterns (explicit zeros included): same pattern in, same out.
_SAME_PATTERN_BINARY = frozenset({"elemwise_add", "elemwise_sub", "elemwise_mul"})
_SPARSE_PROBE = 64  # elements of the 1-D call whose lowering gives a sparse node's expression


def _sparse_form(node: Node, nid: int, g: Graph) -> ScalarForm | None:
    """The expression a csr/row_sparse node computes on its stored values, where it keeps its
    inputs' (common) pattern, else None."""
    op, idx, a = node.op, g.index, g.attrs
    assert a.dtype is not None and a.stype is not None and a.dispatch is not None
    if op is None or op.num_outputs(node.params) != 1 or op.train_mode or op.random:
        return None
    if op.pinned_inputs is not None or op.ignored_inputs(node.params) or op.loss:
        return None
    if a.dispatch[nid] != DispatchMode.FCOMPUTE_EX or a.stype_kernel is None:
        return None
    ins, out = idx.input_entries[nid], idx.row_ptr[nid]
    st = a.stype[out]
    if st not in (SType.CSR, SType.ROW_SPARSE) or any(a.stype[e] != st for e in ins):
        return None
    kern = a.stype_kernel[nid]
    if not ((len(ins) == 1 and kern is map_values)
            or (len(ins) == 2 and op.name in _SAME_PATTERN_BINARY
                and a.dtype[ins[0]] == a.dtype[ins[1]] == a.dtype[out])):
        return None
    dense = op.kernels.get(DENSE)
    if dense is None:
        return None
    n = _SPARSE_PROBE
    call = KernelCall(node.params, ((n,),) * len(ins),
                      tuple(np.dtype(a.dtype[e]) for e in ins), ((n,),),
                      (np.dtype(a.dtype[out]),))
    try:
        low = dense.lower(call)
    except Exception:  # not fusable under these parameters
        return None
    form = scalar_form(low, n)
    if form is None or len(form.names) != len(ins):
        return None
    return form


def _broadcasts(s: tuple[int | None, ...] | None, out: tuple[int | None, ...]) -> bool:
    """``s`` is known and broadcasts to ``out`` (numpy's rule) without growing a dimension."""
    if s is None or any(d is None for d in s) or len(s) > len(out):
        return False
    return all(d in (1, o) for d, o in zip(s[::-1], out[::-1]))


def fuse_elementwise(forward_outputs: int | None = None) -> GraphPass:
    """The fusion pass. ``forward_outputs``: the first that many graph outputs are the forward
    ones (a bound graph's forward and backward run separately, so groups never mix the phases);
    None: one phase."""

    @graph_pass(requires=("shape", "dtype", "stype", "dispatch"),
                provides=("shape", "dtype", "stype", "dispatch", "stype_kernel"))
    def fuse_elementwise(g: Graph) -> Graph:
        return _fuse(g, forward_outputs)

    return fuse_elementwise


def _fuse(g: Graph, forward_outputs: int | None) -> Graph:
    idx, a = g.index, g.attrs
    assert a.shape is not None and a.dtype is not None and a.stype is not None
    assert a.dispatch is not None
    nodes = idx.nodes
    k = len(g.outputs) if forward_outputs is None else forward_outputs
    fwd = {id(nd) for nd in dfs_post_order(list(g.outputs[:k]))}
    forms = {nid: f for nid, nd in enumerate(nodes) if (f := _form(nd, nid, g)) is not None}
    # Sparse members: the pattern of every entry is the entry it derives from (itself unless a
    # pattern-keeping node made it); a node whose inputs differ in pattern does not fuse.
    pattern = list(range(idx.num_entries))
    for nid, nd in enumerate(nodes):
        if nid in forms or (f := _sparse_form(nd, nid, g)) is None:
            continue
        pats = {pattern[e] for e in idx.input_entries[nid]}
        if len(pats) == 1:
            forms[nid] = f
            pattern[idx.row_ptr[nid]] = pats.pop()

    # Readers per entry (by node id, with multiplicity); graph outputs mark entries as kept.
    readers: dict[int, list[int]] = {}
    for nid in range(len(nodes)):
        for e in idx.input_entries[nid]:
            readers.setdefault(e, []).append(nid)
    is_output = set(idx.outputs)

    group = [-1] * len(nodes)  # node id -> root node id
    for nid in range(len(nodes) - 1, -1, -1):
        if nid not in forms:
            continue
        out = idx.row_ptr[nid]
        rs = readers.get(out, [])
        root = group[rs[0]] if rs else -1
        if (out not in is_output and rs and root >= 0
                and all(group[r] == root for r in rs)
                and (id(nodes[nid]) in fwd) == (id(nodes[root]) in fwd)
                and a.dtype[out] == a.dtype[idx.row_ptr[root]]
                and a.stype[out] == a.stype[idx.row_ptr[root]]
                and (a.stype[out] == SType.DEFAULT  # sparse: one pattern
                     or pattern[out] == pattern[idx.row_ptr[root]])
                and a.shape[out] == a.shape[idx.row_ptr[root]]):  # members: the root's shape
            group[nid] = root
        else:
            group[nid] = nid
    members: dict[int, list[int]] = {}
    for nid, r in enumerate(group):
        if r >= 0:
            members.setdefault(r, []).append(nid)
    # A lone dense node of at least PAR_MIN elements becomes a fused node too: the fused kernel
    # splits over the worker pool (the plain elementwise kernels run on one thread), with the
    # same bits.
    fused_roots = {r for r, ms in members.items()
                   if len(ms) > 1 or (a.stype[idx.row_ptr[r]] == SType.DEFAULT
                                      and _size(a.shape[idx.row_ptr[r]]) >= PAR_MIN)}
    epi = _epilogues(g, members, group, readers, is_output, fwd)  # root -> producer
    epi_producers = set(epi.values())
    if not fused_roots and not epi:
        return g

    new_node: dict[int, Node] = {}  # old node id -> its node in the new graph
    old_of: dict[int, tuple[str, int]] = {}  # id(new node) -> ("node", old nid)

    def entry(e: int) -> Entry:
        nid = _node_of(idx, e)
        return Entry(new_node[nid], e - idx.row_ptr[nid])

    def deps(node: Node) -> tuple[Node, ...]:
        out: list[Node] = []
        for d in node.control_deps:
            nd = new_node.get(idx.node_id(d))
            if nd is not None and all(nd is not x for x in out):
                out.append(nd)
        return tuple(out)

    for nid, node in enumerate(nodes):
        r = group[nid]
        if r >= 0 and (r in fused_roots or r in epi) and r != nid:
            continue  # built with its root
        if nid in epi_producers:
            continue  # built with the root of its epilogue
        if nid in epi:
            prod = epi[nid]
            fused = _epilogue_node(g, prod, members[nid], forms, entry, deps)
            for m in (prod, *members[nid]):
                new_node[m] = fused
            old_of[id(fused)] = ("epilogue", prod)
            continue
        if nid in fused_roots:
            fused = _fused_node(g, members[nid], forms, entry, deps)
            for m in members[nid]:
                new_node[m] = fused
            old_of[id(fused)] = ("fused", nid)
            continue
        ins = tuple(entry(e) for e in idx.input_entries[nid])
        cds = deps(node)
        if all(x.node is y.node and x.index == y.index for x, y in zip(ins, node.inputs)) and \
                len(cds) == len(node.control_deps) and \
                all(x is y for x, y in zip(cds, node.control_deps)):
            new_node[nid] = node
        else:
            new_node[nid] = Node(node.op, node.name, node.params, ins, node.attrs, cds)
        old_of[id(new_node[nid])] = ("node", nid)

    outputs = tuple(entry(e) for e in idx.outputs)
    ng = Graph(outputs)
    nidx = ng.index
    shape, dtype, stype, dispatch = [], [], [], []
    skern: list[Any] = []
    for new_nid, node in enumerate(nidx.nodes):
        _, old = old_of[id(node)]
        for i in range(nidx.row_ptr[new_nid + 1] - nidx.row_ptr[new_nid]):
            e = idx.row_ptr[old] + i
            shape.append(a.shape[e])
            dtype.append(a.dtype[e])
            stype.append(a.stype[e])
        dispatch.append(a.dispatch[old])
        kind, _ = old_of[id(node)]
        if kind == "fused" and a.stype[idx.row_ptr[old]] != SType.DEFAULT:
            skern.append(fused_values)
        else:
            skern.append(a.stype_kernel[old] if a.stype_kernel is not None else None)
    return Graph(outputs, GraphAttrs(shape=tuple(shape), dtype=tuple(dtype), stype=tuple(stype),
                                     dispatch=tuple(dispatch), stype_kernel=tuple(skern)))


# Producers whose first output can take an elementwise epilogue, with the dtypes they allow.
_EPILOGUE_PRODUCERS = {"FullyConnected": ("float32", "float64"),
                       "BatchNorm": ("float16", "float32", "float64")}


def _epilogues(g: Graph, members: dict[int, list[int]], group: list[int],
               readers: dict[int, list[int]], is_output: set[int],
               fwd: set[int]) -> dict[int, int]:
    """Group root -> producer node whose first output only that group reads (see the module
    docstring)."""
    idx, a = g.index, g.attrs
    assert a.shape is not None and a.dtype is not None and a.stype is not None
    assert a.dispatch is not None
    out: dict[int, int] = {}
    for nid, node in enumerate(idx.nodes):
        op = node.op
        if op is None or op.name not in _EPILOGUE_PRODUCERS:
            continue
        if a.dispatch[nid] != DispatchMode.FCOMPUTE or id(node) not in fwd:
            continue
        e = idx.row_ptr[nid]
        ents = [*idx.input_entries[nid], *idx.output_entries(nid)]
        if any(a.stype[x] != SType.DEFAULT for x in ents):
            continue
        if a.dtype[e] is None or np.dtype(a.dtype[e]).name not in _EPILOGUE_PRODUCERS[op.name]:
            continue
        rs = readers.get(e, [])
        if e in is_output or not rs or group[rs[0]] < 0:
            continue
        root = group[rs[0]]
        rout = idx.row_ptr[root]
        if (root in out or any(group[r] != root for r in rs)
                or id(idx.nodes[root]) not in fwd or a.shape[e] != a.shape[rout]
                or a.dtype[e] != a.dtype[rout] or a.stype[rout] != SType.DEFAULT):
            continue
        if op.name == "FullyConnected" and any(a.dtype[x] != a.dtype[e]
                                               for x in idx.input_entries[nid]):
            continue
        out[root] = nid
    return out


def _bias_step(shape: tuple[int, ...], dtype: np.dtype) -> Step | None:
    """``t0 = v0 + v1`` (the GEMM's result plus the bias, broadcast over rows) as the plain
    broadcast_add kernel computes it: the GEMM kernel's own bias loop, in the same type."""
    op = get_op("broadcast_add")
    n = _size(shape)
    bshape = (shape[-1],)
    call = KernelCall(op.parse_params({})[0], (shape, bshape), (dtype, dtype), (shape,),
                      (dtype,))
    try:
        form = scalar_form(op.kernels[DENSE].lower(call), n)
    except Exception:  # no bias step: the GEMM keeps the bias
        return None
    if form is None or len(form.names) != 2:
        return None
    return Step("FullyConnected", form.expr, form.names, form.var_dtype, form.fparams, 0,
                ("v0", "v1"), dtype.name)


def _group_steps(g: Graph, group: Sequence[int], forms: dict[int, ScalarForm], ext: list[int],
                 steps: list[Step], fa: list[float], bound: dict[int, str],
                 v_base: int) -> list[Node]:
    """Append the fused steps of ``group`` (old node ids in topological order) to ``steps``
    and their literals to ``fa``: a member's output is ``t<step>``, an entry in ``bound`` its
    operand, any other input ``v<v_base + position in ext>`` (added to ``ext`` on first use).
    Returns the members' control dependencies."""
    idx, a = g.index, g.attrs
    assert a.dtype is not None
    inside = {idx.row_ptr[m]: j + len(steps) for j, m in enumerate(group)}
    cdeps: list[Node] = []
    for m in group:
        node, f = idx.nodes[m], forms[m]
        ops = []
        for x in idx.input_entries[m]:
            if x in bound:
                ops.append(bound[x])
            elif x in inside:
                ops.append(f"t{inside[x]}")
            else:
                if x not in ext:
                    ext.append(x)
                ops.append(f"v{ext.index(x) + v_base}")
        assert node.op is not None
        steps.append(Step(node.op.name, f.expr, f.names, f.var_dtype, f.fparams, len(fa),
                          tuple(ops), a.dtype[idx.row_ptr[m]].name))  # type: ignore[union-attr]
        fa.extend(f.fa)
        cdeps.extend(node.control_deps)
    return cdeps


def _epilogue_node(g: Graph, prod: int, group: Sequence[int], forms: dict[int, ScalarForm],
                   entry: Callable[[int], Entry],
                   deps: Callable[[Node], tuple[Node, ...]]) -> Node:
    """One node computing the producer ``prod`` and its epilogue ``group`` (old node ids in
    topological order, the root last)."""
    idx, a = g.index, g.attrs
    assert a.dtype is not None and a.shape is not None
    pnode = idx.nodes[prod]
    assert pnode.op is not None
    e = idx.row_ptr[prod]
    dt = np.dtype(a.dtype[e])
    shape = tuple(int(d or 0) for d in a.shape[e])  # type: ignore[union-attr]
    p_ins = list(idx.input_entries[prod])
    pparams = pnode.params
    ext: list[int] = []  # the epilogue's inputs besides v0 (the producer's output)
    steps: list[Step] = []
    fa: list[float] = []
    first = "v0"
    if pnode.op.name == "FullyConnected" and not pparams.no_bias:
        bshape = a.shape[p_ins[2]]
        step = _bias_step(shape, dt) if bshape is not None and tuple(bshape) == (
            shape[-1],) else None
        if step is not None:
            pparams = dataclasses.replace(pparams, no_bias=True)
            ext.append(p_ins.pop())
            steps.append(step)
            first = "t0"
    cdeps: list[Node] = list(pnode.control_deps)
    # v0 is the producer's output; the group's other inputs follow it
    cdeps += _group_steps(g, group, forms, ext, steps, fa, {e: first}, 1)
    root = idx.nodes[group[-1]]
    names = [pnode.name] + [idx.nodes[m].name for m in group]
    ops_ = [pnode.op.name] + [s.op for s in steps[len(steps) - len(group):]]
    in_dtypes = (dt.name,) + tuple(a.dtype[x].name for x in ext)  # type: ignore[union-attr]
    params = EpilogueParams(pnode.op.name, pparams, len(p_ins),
                            FusedParams(tuple(steps), in_dtypes, tuple(fa)))
    hidden = {k: v for k, v in {**pnode.attrs, **root.attrs}.items() if k.startswith("__")}
    attrs = {**hidden, "fused_nodes": ",".join(names), "fused_ops": ",".join(ops_)}
    ins = tuple(entry(x) for x in (*p_ins, *ext))
    skip = {prod, *group}
    dep_src = Node(None, "", None, (), {}, tuple(
        d for d in cdeps if idx.node_id(d) not in skip))
    return Node(epilogue_op(pnode.op.name, len(ext)), root.name, params, ins, attrs,
                deps(dep_src))


def _fused_node(g: Graph, group: Sequence[int], forms: dict[int, ScalarForm],
                entry: Callable[[int], Entry],
                deps: Callable[[Node], tuple[Node, ...]]) -> Node:
    """One node computing ``group`` (old node ids in topological order, the root last)."""
    idx, a = g.index, g.attrs
    assert a.dtype is not None
    ext: list[int] = []  # external input entries, in first-use order
    steps: list[Step] = []
    fa: list[float] = []
    cdeps = _group_steps(g, group, forms, ext, steps, fa, {}, 0)
    root = idx.nodes[group[-1]]
    names = [idx.nodes[m].name for m in group]
    in_dtypes = tuple(a.dtype[e].name for e in ext)  # type: ignore[union-attr]
    params = FusedParams(tuple(steps), in_dtypes, tuple(fa))
    hidden = {k: v for k, v in root.attrs.items() if k.startswith("__")}  # not the params
    attrs = {**hidden, "fused_nodes": ",".join(names),
             "fused_ops": ",".join(s.op for s in steps)}
    ins = tuple(entry(e) for e in ext)
    dep_src = Node(None, "", None, (), {}, tuple(
        d for d in cdeps if idx.node_id(d) not in group))
    return Node(fused_op(len(ext)), root.name, params, ins, attrs, deps(dep_src))


def _size(shape: tuple[int | None, ...] | None) -> int:
    n = 1
    for d in shape or (0,):
        n *= int(d or 0)
    return n


def _node_of(idx: IndexedGraph, eid: int) -> int:
    return bisect.bisect_right(idx.row_ptr, eid) - 1
