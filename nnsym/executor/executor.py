"""The graph executor: ``Symbol.bind`` / ``simple_bind`` build one, ``forward`` and ``backward``
run it.

Everything is decided at bind time: the gradient graph, shapes and dtypes (the inference
passes), write modes, the memory plan (storage ids, in-place sharing), every node's kernels
(compiled in one build), and every array. Forward and backward are then each a flat list of
prebound kernel calls (function, pointer array, integer and double arguments): no inference,
allocation or dictionary lookups per call.
"""

from __future__ import annotations

import copy as _copy
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.context import Context, cpu
from nnsym.cuda.runtime import backend
from nnsym.errors import NNSymError, ShapeError
from nnsym.executor.debug import debug_str
from nnsym.ir.graph import Entry, Graph, GraphAttrs, Node, dfs_post_order, variable
from nnsym.ir.json import graph_to_json
from nnsym.ir.opdef import PythonCompute, get_op
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ndarray.gpu import GPUNDArray
from nnsym.ndarray.ndarray import NDArray, allocate, invoke
from nnsym.ndarray.sparse import (
    BaseSparseNDArray,
    CSRNDArray,
    _assign,
    deliver,
    record,
    wrap,
    zeros,
)
from nnsym.ops.common.rng import next_seed
from nnsym.ops.common.stype import Decision, on_fallback
from nnsym.passes.fuse import fuse_elementwise, fusion_enabled
from nnsym.passes.gradient import gradient
from nnsym.passes.infer import infer_shape, infer_type, require_static_shapes
from nnsym.passes.lower import dense_kernel, lower
from nnsym.passes.manager import run_passes
from nnsym.passes.memory import MemoryPlan, entry_readers, plan_memory
from nnsym.passes.stype import infer_storage_type
from nnsym.runtime import dispatch
from nnsym.types import DispatchMode, SType, shape_str

GRAD_REQS = ("null", "write", "add")
FFI = compiler.FFI


class BindError(NNSymError, ValueError, TypeError):
    """Arrays, gradient requests or head gradients that do not fit the symbol. MXNet raises a
    TypeError or a ValueError for these, so this is both."""


class BindShapeError(BindError, ShapeError):
    """An array given to the executor (argument, gradient, head gradient, forward keyword, or
    one too large to allocate) whose shape does not fit."""


class ExecutorStateError(NNSymError, RuntimeError):
    """The executor used out of order: backward before any forward."""


def _what_is(v: Any) -> str:
    """A value's type for a message, with the fix for numpy arrays."""
    if isinstance(v, np.ndarray):
        return "a numpy.ndarray (wrap it with nnsym.nd.array)"
    return f"a {type(v).__name__}"


def _as_list(what: str, names: list[str], given: Any, allow_none: bool) -> list[Any]:
    """Arrays by position (a list of exactly ``len(names)``) or by name (a dict); every value
    an NDArray (or None where ``allow_none``)."""
    if given is None:
        return [None] * len(names)
    if isinstance(given, Mapping):
        unknown = set(given) - set(names)
        if unknown:
            raise BindError(f"{what}: unknown name(s) {sorted(unknown)}; expected {names}")
        out = [given.get(n) for n in names]
    elif isinstance(given, (list, tuple)):
        out = list(given)
        if len(out) != len(names):
            raise BindError(f"{what}: {len(out)} arrays given for {len(names)} names {names}")
    else:
        raise BindError(f"{what}: expected a list of NDArrays or a dict of name to NDArray, "
                        f"got {_what_is(given)}")
    for n, v in zip(names, out):
        if v is None:
            if not allow_none:
                raise BindError(f"key `{n}` is missing in `{what}`")
        elif not isinstance(v, NDArray):
            raise BindError(f"{what}: {n!r} must be an NDArray, got {_what_is(v)}")
    return out


def _reqs(grad_req: Any, names: list[str], grads: list[Any]) -> list[str]:
    if isinstance(grad_req, str):
        reqs = [grad_req] * len(names)
    elif isinstance(grad_req, Mapping):
        unknown = [k for k in grad_req if k not in names]
        if unknown:
            raise BindError(f"grad_req: unknown argument name(s) {unknown}; arguments: {names}")
        reqs = [grad_req.get(n, "null") for n in names]
    elif isinstance(grad_req, (list, tuple)):
        reqs = list(grad_req)
        if len(reqs) != len(names):
            raise BindError(f"grad_req: {len(reqs)} values for {len(names)} arguments")
    else:
        raise BindError(f"grad_req: expected 'write', 'add' or 'null', a list or a dict of "
                        f"argument name to one of them, got {_what_is(grad_req)}")
    for n, r in zip(names, reqs):
        if r not in GRAD_REQS:
            raise BindError(f"grad_req {r!r} for {n!r}: expected one of {GRAD_REQS}")
    return [("null" if g is None else r) for r, g in zip(reqs, grads)]


class Executor:
    """A bound symbol: arrays for arguments, gradients, auxiliary states and outputs, and the
    prebound kernel calls of forward and backward."""

    def __init__(self, symbol: Any, ctx: Context | None, args: Any, args_grad: Any = None,
                 grad_req: Any = "write", aux_states: Any = None,
                 shared_pools: list[np.ndarray] | None = None,
                 infer_grad_stypes: frozenset[str] = frozenset(), fusion: bool | None = None):
        """``infer_grad_stypes``: names of arguments whose gradient arrays the executor may
        replace by zeros of the inferred gradient storage type (simple_bind's own arrays).
        ``fusion``: fuse elementwise nodes into one kernel per group (default: on unless
        ``NNSYM_FUSION=0``)."""
        self._fusion = fusion_enabled() if fusion is None else bool(fusion)
        self._symbol = symbol
        self._infer_grad_stypes = infer_grad_stypes
        self._ctx = ctx or cpu()
        self._gpu: Any = None  # the CUDA backend when bound on a gpu context
        if self._ctx.device_type == "gpu":
            self._gpu = backend()
        elif self._ctx.device_type != "cpu":
            raise NNSymError(f"cannot bind on {self._ctx}: use a cpu or gpu context")
        elif compiler.backend() != "c":
            raise NNSymError(
                "binding a graph needs generated kernels, and this process runs the numpy "
                "backend (NNSYM_BACKEND=numpy or no C compiler): install gcc (or set CC) and "
                "unset NNSYM_BACKEND; imperative nnsym.nd calls work either way"
            )
        arg_names = symbol.list_arguments()
        aux_names = symbol.list_auxiliary_states()
        self.arg_arrays: list[NDArray] = _as_list("args", arg_names, args, False)
        grads = _as_list("args_grad", arg_names, args_grad, True)
        self.aux_arrays: list[NDArray] = _as_list("aux_states", aux_names, aux_states, False)
        on_gpu = [a for a in [*self.arg_arrays, *self.aux_arrays, *grads] if a is not None
                   and a.context.device_type == "gpu"]
        if self._gpu is not None and (len(on_gpu) != len(
                [a for a in [*self.arg_arrays, *self.aux_arrays, *grads] if a is not None])
                or any(a.context != self._ctx for a in on_gpu)):
            raise BindError(f"binding on {self._ctx}: every argument, auxiliary state and "
                            "gradient array must be on that device (as_in_context)")
        if self._gpu is None and on_gpu:
            raise BindError(f"binding on {self._ctx}: arrays on {on_gpu[0].context} given; "
                            "bind on that gpu context or copy them to the cpu")
        self._reqs = _reqs(grad_req, arg_names, grads)
        # An array given for a 'null' argument stays in grad_arrays/grad_dict, untouched (as
        # MXNet keeps the user's array); nothing writes it.
        self.grad_arrays: list[NDArray | None] = list(grads)
        self._build(shared_pools)

    # ------------------------------------------------------------------ building
    def _build(self, shared_pools: list[np.ndarray] | None) -> None:
        sym = self._symbol
        sidx = sym.index
        arg_nodes = [i for i in sidx.input_nodes if i not in sidx.mutable_input_nodes]
        aux_nodes = [i for i in sidx.input_nodes if i in sidx.mutable_input_nodes]
        outputs = list(sym.outputs)

        # Forward inference from the bound arrays (head gradients take the outputs' shapes).
        seeds_s: list[Any] = [None] * sidx.num_entries
        seeds_t: list[Any] = [None] * sidx.num_entries
        for nid, arr in zip(arg_nodes + aux_nodes, self.arg_arrays + self.aux_arrays):
            seeds_s[sidx.row_ptr[nid]] = tuple(arr.shape)
            seeds_t[sidx.row_ptr[nid]] = np.dtype(arr.dtype)
        fg = run_passes(sym.graph(shape=tuple(seeds_s), dtype=tuple(seeds_t)),
                        [require_static_shapes, infer_shape, infer_type])
        assert fg.attrs.shape is not None and fg.attrs.dtype is not None
        out_shapes = [fg.attrs.shape[e] for e in sidx.outputs]
        out_dtypes = [fg.attrs.dtype[e] for e in sidx.outputs]

        # The gradient graph.
        xs = [Entry(sidx.nodes[nid]) for nid, r in zip(arg_nodes, self._reqs) if r != "null"]
        self._head_nodes: list[Node | None] = []
        heads: list[Entry | None] = []
        for i, e in enumerate(outputs):
            if xs and not (e.node.op is not None and e.node.op.is_loss(e.node.params)):
                h = variable(f"_head_grad_{i}")
                self._head_nodes.append(h)
                heads.append(Entry(h))
            else:
                self._head_nodes.append(None)
                heads.append(None)
        grads = gradient(outputs, xs, heads) if xs else []
        grads = self._own_gradient_entries(grads)
        g = Graph(tuple(outputs + grads))
        idx = g.index
        self._idx = idx
        self._num_fwd_outputs = len(outputs)

        # Whole-graph inference, seeded with everything known.
        n = idx.num_entries
        s_seed: list[Any] = [None] * n
        t_seed: list[Any] = [None] * n
        var_ids = {id(sidx.nodes[nid]): a for nid, a in
                   zip(arg_nodes + aux_nodes, self.arg_arrays + self.aux_arrays)}
        for nid in idx.input_nodes:
            node = idx.nodes[nid]
            eid = idx.row_ptr[nid]
            if id(node) in var_ids:
                a = var_ids[id(node)]
                s_seed[eid], t_seed[eid] = tuple(a.shape), np.dtype(a.dtype)
            elif node in self._head_nodes:
                k = self._head_nodes.index(node)
                s_seed[eid], t_seed[eid] = out_shapes[k], out_dtypes[k]
        g = run_passes(Graph(g.outputs, GraphAttrs(shape=tuple(s_seed), dtype=tuple(t_seed))),
                       [infer_shape, infer_type])
        assert g.attrs.shape is not None and g.attrs.dtype is not None
        shapes: list[tuple[int, ...]] = []
        for eid, s in enumerate(g.attrs.shape):
            if s is None or any(d is None for d in s):
                raise ShapeError(f"cannot bind: entry {eid} has undecided shape {shape_str(s)}")
            shapes.append(tuple(int(d or 0) for d in s))
        dtypes = [np.dtype(t) for t in g.attrs.dtype]
        self._shapes, self._dtypes = shapes, dtypes

        # Variables an operator pins to a constant (BatchNorm's gamma with fix_gamma).
        self._pinned: list[tuple[NDArray, float]] = []
        for node in sidx.nodes:
            pin = node.op.pinned_inputs if node.op is not None else None
            for k, value in (pin(node.params) if pin is not None else {}).items():
                src = node.inputs[k].node
                if src.op is None and id(src) in var_ids:
                    self._pinned.append((var_ids[id(src)], float(value)))

        # Storage types and dispatch modes, seeded by the bound arrays' storage types. Nodes
        # with a sparse input or output, or not dispatched to the dense kernel, run as Python
        # steps between the packed kernel lists (``_sparse_step``); a dense graph has none.
        st_seed: list[SType | None] = [None] * n
        for nid in idx.input_nodes:
            node = idx.nodes[nid]
            if id(node) in var_ids:
                st_seed[idx.row_ptr[nid]] = SType.parse(var_ids[id(node)].stype)
        sg = run_passes(Graph(g.outputs, GraphAttrs(stype=tuple(st_seed))), [infer_storage_type])
        assert sg.attrs.stype is not None and sg.attrs.dispatch is not None
        stypes = [st or SType.DEFAULT for st in sg.attrs.stype]
        modes = list(sg.attrs.dispatch)
        assert sg.attrs.stype_kernel is not None
        stype_kernels = sg.attrs.stype_kernel
        if self._fusion:
            # Elementwise fusion (nnsym/passes/fuse.py): a new graph, the same attributes for
            # the entries that remain; forward and backward groups stay apart.
            fused = run_passes(
                Graph(g.outputs, GraphAttrs(shape=tuple(shapes), dtype=tuple(dtypes),
                                            stype=sg.attrs.stype, dispatch=sg.attrs.dispatch,
                                            stype_kernel=stype_kernels)),
                [fuse_elementwise(len(outputs))])
            if fused.outputs != g.outputs:
                g = fused
                idx = self._idx = g.index
                n = idx.num_entries
                outputs = list(g.outputs[: len(outputs)])
                grads = list(g.outputs[len(outputs):])
                fa = g.attrs
                assert fa.shape is not None and fa.dtype is not None and fa.stype is not None
                assert fa.dispatch is not None and fa.stype_kernel is not None
                shapes = [tuple(int(d or 0) for d in s) for s in fa.shape]  # type: ignore[union-attr]
                dtypes = [np.dtype(t) for t in fa.dtype]
                self._shapes, self._dtypes = shapes, dtypes
                stypes = [st or SType.DEFAULT for st in fa.stype]
                modes = list(fa.dispatch)
                stype_kernels = fa.stype_kernel
        sparse_eids = frozenset(e for e in range(n) if stypes[e] != SType.DEFAULT)
        py_nodes = {
            nid for nid, node in enumerate(idx.nodes) if node.op is not None and (
                modes[nid] != DispatchMode.FCOMPUTE
                or any(e in sparse_eids for e in idx.input_entries[nid])
                or any(e in sparse_eids for e in idx.output_entries(nid)))
        }
        self._stypes, self._modes = stypes, modes
        if self._gpu is not None and py_nodes:
            bad = idx.nodes[min(py_nodes)]
            if isinstance(stype_kernels[min(py_nodes)], PythonCompute):
                raise NNSymError(f"node {bad.name!r} ({bad.op.name if bad.op else '?'}) is "
                                 f"Python code, which runs on the cpu only; bind on the cpu")
            raise NNSymError(
                f"node {bad.name!r} ({bad.op.name if bad.op else '?'}): sparse storage "
                f"or storage-type dispatch is not supported on {self._ctx} yet; bind on the cpu")

        # Write modes: gradient outputs take the user's request, everything else writes.
        grad_eids = [idx.entry_id(e) for e in grads]
        user_req = [r for r in self._reqs if r != "null"]
        external = dict(zip(grad_eids, user_req))
        fwd_nodes = {id(nd) for nd in dfs_post_order(outputs)}
        producer = {o: nid for nid in range(idx.num_nodes) for o in idx.output_entries(nid)}
        arg_pos = [k for k, r in enumerate(self._reqs) if r != "null"]
        for eid, k in zip(grad_eids, arg_pos):
            gnd = self.grad_arrays[k]
            assert gnd is not None
            names = sym.list_arguments()
            if gnd.stype != stypes[eid].label and names[k] in self._infer_grad_stypes:
                self.grad_arrays[k] = gnd = _zeros(stypes[eid], shapes[eid], dtypes[eid],
                                                   self._ctx)
        # Gradient arrays a kernel cannot write (a sparse array for a dense entry) receive a
        # planned entry's value after its node ran: a delivery step.
        deliver: dict[int, tuple[NDArray, str]] = {}
        for eid, k in zip(grad_eids, arg_pos):
            gnd = self.grad_arrays[k]
            assert gnd is not None
            if producer[eid] not in py_nodes and gnd.stype != "default":
                deliver[eid] = (gnd, external.pop(eid))

        # Outputs nobody reads get 'null' (MXNet's kNullOp): backward nodes skip computing
        # them (the data gradient of a first layer); a node none of whose outputs is read
        # does not run at all.
        readers = entry_readers(idx)
        py_reqs: dict[int, tuple[str, ...]] = {}
        lowered: dict[int, tuple[KernelCall, Lowered]] = {}
        train_lowered: dict[int, Lowered] = {}  # training forms of train-mode operators
        views: dict[int, dict[int, int]] = {}
        for nid, node in enumerate(idx.nodes):
            if node.op is None:
                continue
            if not isinstance(stype_kernels[nid], PythonCompute):
                dense_kernel(node.op, node.name)
            ins = idx.input_entries[nid]
            outs = list(idx.output_entries(nid))
            reqs = tuple(external.get(o, "write" if readers[o] or o in deliver else "null")
                         for o in outs)
            if all(r == "null" for r in reqs):
                continue
            if nid in py_nodes:
                py_reqs[nid] = reqs
                continue
            nl = lower(node.op, node.params, [shapes[e] for e in ins], [dtypes[e] for e in ins],
                       [shapes[e] for e in outs], [dtypes[e] for e in outs], reqs,
                       node=node.name, train_form=True)
            low = nl.lowered
            lowered[nid] = (nl.call, low)
            if nl.train is not None:
                train_lowered[nid] = nl.train
            if low.views:
                views[nid] = dict(low.views)
        self._plan = plan_memory(idx, shapes, dtypes, set(external), views, sparse_eids)
        self._graph = Graph(g.outputs, GraphAttrs(
            shape=tuple(shapes), dtype=tuple(dtypes), stype=tuple(stypes), dispatch=tuple(modes),
            storage_id=self._plan.storage_id, inplace=self._plan.inplace))

        # Arrays: the caller's for variables and gradient outputs, pool views for the rest.
        arrays: list[np.ndarray | None] = [None] * n
        for nid in idx.input_nodes:
            node = idx.nodes[nid]
            eid = idx.row_ptr[nid]
            if id(node) in var_ids and stypes[eid] == SType.DEFAULT:
                arrays[eid] = var_ids[id(node)]._data
        self._head_arrays: list[NDArray | None] = []  # None: a loss output, or no gradient
        in_graph = {id(nd) for nd in idx.nodes}
        for hn in self._head_nodes:
            if hn is not None and id(hn) in in_graph:
                eid = idx.row_ptr[idx.node_id(hn)]
                head = _host(np.zeros, f"the head gradient of output {len(self._head_arrays)}",
                             shapes[eid], dtypes[eid])
                if self._gpu is not None:
                    head = self._gpu.from_host(head)
                arrays[eid] = head
                self._head_arrays.append(self._nd(head))
            else:
                self._head_arrays.append(None)
        wanted = [(name, gnd) for name, gnd, r in
                  zip(sym.list_arguments(), self.grad_arrays, self._reqs) if r != "null"]
        arg_shapes = {n: tuple(a.shape) for n, a in zip(sym.list_arguments(), self.arg_arrays)}
        for eid, (name, gnd) in zip(grad_eids, wanted):
            assert gnd is not None
            # A gradient computed in another shape of the same size is written through a view
            # of the gradient array, which has the argument's shape: FullyConnected's bias
            # gradient is (num_hidden,) also for a (num_hidden, 1) bias, as in MXNet.
            view = (eid in external and gnd.stype == "default"
                    and tuple(gnd.shape) == arg_shapes.get(name)
                    and math.prod(gnd.shape) == math.prod(shapes[eid]))
            if (tuple(gnd.shape) != shapes[eid] and not view) \
                    or np.dtype(gnd.dtype) != dtypes[eid]:
                raise (BindShapeError if tuple(gnd.shape) != shapes[eid] else BindError)(
                    f"gradient array for {name!r} has shape {gnd.shape} "
                    f"{np.dtype(gnd.dtype).name}; the argument needs {shapes[eid]} "
                    f"{dtypes[eid].name}"
                )
            if eid in external and gnd.stype == "default":
                arrays[eid] = gnd._data.reshape(shapes[eid]) if view else gnd._data
        users: dict[int, list[str]] = {}
        for nid in range(idx.num_nodes):
            for o in idx.output_entries(nid):
                users.setdefault(self._plan.storage_id[o], []).append(idx.nodes[nid].name)
        self._pools = (_pools(self._plan.block_bytes, shared_pools, users) if self._gpu is None
                       else [self._gpu.empty((max(b, 1),), np.dtype(np.uint8))
                             for b in self._plan.block_bytes])
        for nid, node in enumerate(idx.nodes):
            if node.op is None:
                continue
            ins = idx.input_entries[nid]
            for oi, o in enumerate(idx.output_entries(nid)):
                b = self._plan.storage_id[o]
                if o in self._plan.views:
                    src = arrays[ins[views[nid][oi]]]
                    assert src is not None
                    arrays[o] = src.reshape(shapes[o])
                elif b >= 0:
                    cnt = int(np.prod(shapes[o], dtype=np.int64))
                    if self._gpu is not None:
                        arrays[o] = self._gpu.view(self._pools[b], dtypes[o], shapes[o])
                    else:
                        arrays[o] = np.frombuffer(self._pools[b], dtypes[o],
                                                  cnt).reshape(shapes[o])
        self._arrays = arrays

        # Kernels: one build for all, then prebound calls.
        specs = [ln.spec for _, low in lowered.values() for ln in low.launches]
        specs += [ln.spec for low in train_lowered.values() for ln in low.launches]
        if self._gpu is not None:
            fn_of = self._gpu.functions(specs) if specs else {}
        else:
            fn_of = {sp.name: fn for sp, fn in zip(specs, compiler.functions(specs))}
        # One workspace for every launch: launches run one after another (a kernel's workspace is
        # scratch for that launch only), so the largest need is enough; it is allocated and
        # first touched at bind, not in the first step.
        ws_bytes = max([int(ln.workspace) for _, low in lowered.values()
                        for ln in low.launches]
                       + [int(ln.workspace) for low in train_lowered.values()
                          for ln in low.launches] + [0])
        self._workspaces: list[Any] = []

        def workspace() -> Any:
            if not self._workspaces:
                if self._gpu is not None:
                    self._workspaces.append(self._gpu.empty((ws_bytes,), np.dtype(np.uint8)))
                else:
                    self._workspaces.append(_host(np.zeros, "the kernels' workspace",
                                                  (ws_bytes,), np.dtype(np.uint8)))
                    self._workspaces[0].fill(0)  # touch its pages now
            return self._workspaces[0]
        self._keep: list[Any] = []
        # per prebound cpu call (its pointer array's address): (node name, operator), for
        # profile()
        self._labels: dict[int, tuple[str, str]] = {}
        self._seeds: list[tuple[Any, int]] = []  # (fa, slot) to reseed before every run

        def prebind(nid: int, low: Lowered, target: list[Any]) -> None:
            ins = idx.input_entries[nid]
            outs = [o for oi, o in enumerate(idx.output_entries(nid))
                    if oi not in views.get(nid, {})]
            ptrs = [arrays[e] for e in ins] + [arrays[o] for o in outs]
            if self._gpu is not None:
                be = self._gpu
                work = max([int(np.prod(shapes[o], dtype=np.int64)) for o in outs] + [1])
                for ln in low.launches:
                    mine_g = ptrs if ln.args is None else [ptrs[i] for i in ln.args]
                    addrs = [be.ptr(a) for a in mine_g]
                    if ln.workspace:
                        addrs.append(be.ptr(workspace()))
                    fa_l = list(ln.fa)
                    if ln.seed_slot is not None:
                        self._seeds.append((fa_l, ln.seed_slot))
                    target.append(_GpuLaunch(be, fn_of[ln.spec.name], addrs, list(ln.ia),
                                             fa_l, work, ln.seed_slot is not None))
                return
            for ln in low.launches:
                fn = fn_of[ln.spec.name]
                mine = ptrs if ln.args is None else [ptrs[i] for i in ln.args]
                p_list = [FFI.cast("void *", a.ctypes.data) for a in mine]  # type: ignore[union-attr]
                if ln.workspace:
                    p_list.append(FFI.cast("void *", workspace().ctypes.data))
                p = FFI.new("void *[]", p_list)
                ia = FFI.new("int64_t[]", list(ln.ia) or [0])
                fa = FFI.new("double[]", list(ln.fa) or [0.0])
                self._keep.append((p, ia, fa))
                node = idx.nodes[nid]
                label = "+".join(node.attrs["fused_nodes"].split(",")) \
                    if "fused_nodes" in node.attrs else node.name
                self._labels[int(FFI.cast("uintptr_t", p))] = (
                    label, node.op.name if node.op is not None else "null")
                if ln.seed_slot is not None:
                    self._seeds.append((fa, ln.seed_slot))
                target.append((fn, p, ia, fa))

        # NDArrays of the entries the Python steps read and write: the caller's arrays for
        # variables, a persistent sparse array per sparse entry (its contents replaced each
        # run), views of the planned arrays for dense entries.
        objs: dict[int, NDArray] = {}
        for nid in idx.input_nodes:
            node = idx.nodes[nid]
            if id(node) in var_ids:
                objs[idx.row_ptr[nid]] = var_ids[id(node)]
        for eid, k in zip(grad_eids, arg_pos):
            if eid not in deliver and producer[eid] in py_nodes:
                gnd = self.grad_arrays[k]
                assert gnd is not None
                objs[eid] = gnd

        def obj(e: int) -> NDArray:
            if e not in objs:
                if stypes[e] != SType.DEFAULT:
                    objs[e] = _zeros(stypes[e], shapes[e], dtypes[e], self._ctx)
                else:
                    planned = arrays[e]
                    assert planned is not None, f"entry {e} has no array"
                    objs[e] = NDArray(planned, self._ctx)
            return objs[e]

        # items: prebound kernel calls (fn, p, ia, fa) or Python steps (callables)
        bwd_calls: list[Any] = []
        infer_list: list[Any] = []
        train_list: list[Any] = []
        bwd_train: list[Any] = []
        states: dict[int, Any] = {}  # per Python-step node: its state (a custom op's operator)
        for nid, node in enumerate(idx.nodes):
            forward = id(node) in fwd_nodes
            mine: list[Any] = []
            kern = stype_kernels[nid]
            if nid in py_reqs and isinstance(kern, PythonCompute):
                # Python code over NDArrays (custom operators), as the storage pass decided: a
                # step with is_train False (inference) and one with True (training).
                assert node.op is not None
                ins_e, outs_e = idx.input_entries[nid], list(idx.output_entries(nid))
                if kern.uses_forward_state:
                    fwd = node.control_deps[0] if node.control_deps else None
                    if fwd is None or id(fwd) not in states:
                        raise NNSymError(f"node {node.name!r} ({node.op.name}): its forward "
                                         "node did not run, so there is no state to use")
                    state = states[id(fwd)]
                else:
                    state = states[id(node)] = kern.create_state(
                        node.name, node.params, self._ctx, [shapes[e] for e in ins_e],
                        [dtypes[e] for e in ins_e])
                args = (kern, node, state, py_reqs[nid], [obj(e) for e in ins_e],
                        [obj(o) for o in outs_e])
                (infer_list if forward else bwd_calls).append(_python_step(*args, not forward))
                (train_list if forward else bwd_train).append(_python_step(*args, True))
                continue
            if nid in lowered:
                prebind(nid, lowered[nid][1], mine)
            elif nid in py_reqs:
                assert node.op is not None
                if node.op.train_mode or node.op.num_visible(node.params) != \
                        node.op.num_outputs(node.params):
                    raise NNSymError(
                        f"node {node.name!r} ({node.op.name}): storage types "
                        f"{[stypes[e].label for e in idx.input_entries[nid]]} need the "
                        "storage-type dispatch, which bound graphs do not support for "
                        "operators with hidden outputs or a training mode")
                mine.append(_sparse_step(
                    node, [obj(e) for e in idx.input_entries[nid]],
                    [obj(o) for o in idx.output_entries(nid)], py_reqs[nid],
                    [shapes[o] for o in idx.output_entries(nid)],
                    [dtypes[o] for o in idx.output_entries(nid)],
                    tuple(stypes[e] for e in idx.input_entries[nid]),
                    Decision(tuple(stypes[o] for o in idx.output_entries(nid)),
                             modes[nid] or DispatchMode.FALLBACK, stype_kernels[nid])))
            else:
                continue
            for o in idx.output_entries(nid):
                if o in deliver:
                    planned = arrays[o]
                    assert planned is not None
                    mine.append(_delivery(self._nd(planned), *deliver[o]))
            (infer_list if forward else bwd_calls).extend(mine)
            if nid in train_lowered:
                prebind(nid, train_lowered[nid], train_list if forward else bwd_train)
            else:
                (train_list if forward else bwd_train).extend(mine)
        # Runs of kernel calls as arrays for one foreign call each (nnsym_run_list), Python
        # steps between them; a dense graph is one run. The backward lists differ where a
        # backward operator has a training form (BatchNorm's).
        self._run = compiler.runner() if self._gpu is None else None
        pack = _segments if self._gpu is None else list
        packed = {name: pack(calls) for name, calls in (
            ("infer", infer_list), ("train", train_list), ("bwd", bwd_calls),
            ("bwd_train", bwd_train))}
        # Per run kind, one callable doing the whole run (a dense cpu graph: one foreign call
        # with its arguments bound), so forward/backward spend no Python on dispatch.
        # (the callables hold the packed segments, and so the argument arrays they point to)
        self._go = {name: self._runner(segs) for name, segs in packed.items()}
        self._out_names = sym.list_outputs()
        self._last_train: bool | None = None  # None: no forward yet
        self._monitor: tuple[Any, bool, Any] | None = None  # (callback, monitor_all, active)
        self._monitor_exec: Executor | None = None
        self._monitor_names: list[tuple[str, bool]] = []  # (output name, is an argument)
        self.outputs = [obj(e) if stypes[e] != SType.DEFAULT else self._nd(arrays[e])
                        for e in idx.outputs[: len(outputs)]]

    def _nd(self, data: Any) -> NDArray:
        """An NDArray over planned memory of this executor's device."""
        if self._gpu is not None:
            return GPUNDArray(data, self._ctx)
        return NDArray(data, self._ctx)

    def _own_gradient_entries(self, grads: list[Entry]) -> list[Entry]:
        """Each gradient output must be a node output this executor can write into the caller's
        array: a variable (a head gradient passed straight through), an entry already claimed
        by another argument, or a view gets a ``_copy`` node (MXNet does the same)."""
        copy_op = get_op("_copy")
        params, _ = copy_op.parse_params({})
        seen: set[tuple[int, int]] = set()
        out = []
        names = [n for n, r in zip(self._symbol.list_arguments(), self._reqs) if r != "null"]
        for name, e in zip(names, grads):
            key = (id(e.node), e.index)
            if e.node.op is None or key in seen or e.node.op.inplace_identity:
                e = Entry(Node(copy_op, f"{name}_grad_copy", params, (e,)), 0)
                key = (id(e.node), 0)
            seen.add(key)
            out.append(e)
        return out

    # ------------------------------------------------------------------ running
    def forward(self, is_train: bool = False, **kwargs: NDArray | np.ndarray) -> list[NDArray]:
        """Run forward; keyword arrays are copied into the arguments first. Returns ``outputs``
        (the same storage every call: copy what must outlive the next forward)."""
        if kwargs:
            names = self._symbol.list_arguments()
            for k, v in kwargs.items():
                if k not in names:
                    raise BindError(f"forward: Unknown argument {k!r}; arguments: {names}")
                if not isinstance(v, (NDArray, np.ndarray)):
                    raise BindError(f"forward: argument {k!r} must be an NDArray or a numpy "
                                    f"array, got {_what_is(v)}")
                dst = self.arg_arrays[names.index(k)]
                if tuple(v.shape) != tuple(dst.shape):
                    raise BindShapeError(f"forward: Shape not match! Argument {k}, need: "
                                         f"{dst.shape}, received: {tuple(v.shape)}")
                if self._gpu is not None:
                    (v if isinstance(v, NDArray) else NDArray(np.asarray(v))).copyto(dst)
                elif dst.stype != "default" or (isinstance(v, NDArray) and v.stype != "default"):
                    _assign(dst, v if isinstance(v, NDArray) else NDArray(np.asarray(v)))
                else:
                    dst._data[...] = (v if not isinstance(v, NDArray) else v.asnumpy()
                                      if v.context.device_type == "gpu" else v._data)
        self._start_run(is_train)
        self._go["train" if is_train else "infer"]()
        if self._monitor is not None:
            self._run_monitor(is_train)
        return list(self.outputs)

    def profile(self, is_train: bool = False, backward: bool = False,
                out_grads: NDArray | Sequence[NDArray | None] | Mapping[str, NDArray]
                | None = None) -> list[tuple[str, str, float]]:
        """Run forward (and with ``backward``, backward with ``out_grads`` as in
        :meth:`backward`) once, timing every kernel call: ``[(node name, operator, seconds)]``
        in run order. A fused kernel is named by the nodes it computes (``fc1+relu1``,
        operator ``_fused_FullyConnected``); a Python step (a custom operator, a node with
        sparse storage) by its node; a delivery into a sparse gradient array is named
        ``"(python)"``. Where a node lowers to several kernels, each is an entry. The outputs
        and gradients are those of an ordinary run. An nnsym addition for finding where a
        bound graph spends its time; cpu contexts only."""
        if self._gpu is not None or self._run is None:
            raise NNSymError(f"Executor.profile: only cpu executors can be profiled, not "
                             f"{self._ctx}")
        if backward:
            self._set_heads(out_grads)
        timed = compiler.runtime().nnsym_run_list_timed
        out: list[tuple[str, str, float]] = []

        def run(segments: list[Any]) -> None:
            for seg in segments:
                if type(seg) is tuple:
                    n, fns, ps, ias, fas = seg
                    ns = FFI.new("int64_t[]", max(1, n))
                    timed(n, fns, ps, ias, fas, ns)
                    for i in range(n):
                        name, op = self._labels.get(int(FFI.cast("uintptr_t", ps[i])),
                                                    ("?", "?"))
                        out.append((name, op, ns[i] * 1e-9))
                else:
                    t0 = time.perf_counter()
                    seg()
                    name, op = seg.label if isinstance(seg, _Step) else ("(python)", "(python)")
                    out.append((name, op, time.perf_counter() - t0))

        self._start_run(is_train)
        run(self._segments_of("train" if is_train else "infer"))
        if backward:
            run(self._segments_of("bwd_train" if is_train else "bwd"))
        return out

    def _start_run(self, is_train: bool) -> None:
        """What every forward does before its kernels: refill the pinned arguments, note the
        mode for backward, draw the random operators' seeds."""
        for arr, value in self._pinned:
            if self._gpu is None:
                arr._data.fill(value)
            else:
                arr[:] = value
        self._last_train = is_train
        # every run draws new random values (Dropout in training or mode='always', RReLU, the
        # random operators), as MXNet's generators advance on every forward
        for fa, slot in self._seeds:
            fa[slot] = float(next_seed())

    def _segments_of(self, kind: str) -> list[Any]:
        """The packed segments behind ``self._go[kind]`` (see _runner)."""
        go = self._go[kind]
        return list(go.args[0]) if go.func == self._exec else [go.args]

    def set_monitor_callback(self, callback: Callable[[str, NDArray], Any] | None,
                             monitor_all: bool = False,
                             active: Callable[[], bool] | None = None) -> None:
        """After each forward, call ``callback(name, array)`` for every node output of the
        graph (MXNet's names, e.g. ``fc1_output``), and with ``monitor_all`` for every
        argument too. ``active`` (nnsym's addition): a zero-argument callable saying whether
        to collect after this forward (a Monitor between its tic and toc); the outputs are
        then recomputed by a second executor over ``get_internals()`` that shares the
        arguments (auxiliary states are copied, so the moving statistics move once; a random
        operator draws its own values there)."""
        self._monitor = None if callback is None else (callback, bool(monitor_all), active)

    def _run_monitor(self, is_train: bool) -> None:
        assert self._monitor is not None
        callback, monitor_all, active = self._monitor
        if active is not None and not active():
            return
        if self._monitor_exec is None:
            internals = self._symbol.get_internals()
            names = internals.list_arguments()
            args = dict(zip(self._symbol.list_arguments(), self.arg_arrays))
            aux = [a.copy() for a in self.aux_arrays]
            self._monitor_exec = Executor(internals, self._ctx, [args[n] for n in names],
                                          None, "null", aux)
            inputs = set(args) | set(self._symbol.list_auxiliary_states())
            self._monitor_names = [(n, n in inputs) for n in internals.list_outputs()]
        else:
            for mine, theirs in zip(self._monitor_exec.aux_arrays, self.aux_arrays):
                theirs.copyto(mine)
        outs = self._monitor_exec.forward(is_train=is_train)
        for (name, is_input), arr in zip(self._monitor_names, outs):
            if monitor_all or not is_input:
                callback(name, arr)

    def _runner(self, segments: list[Any]) -> functools.partial[Any]:
        """A callable running ``segments``: the foreign call itself, its arguments bound, where
        they are one run of kernels on the cpu (_segments_of reads them back)."""
        run = self._run
        if run is not None and len(segments) == 1 and type(segments[0]) is tuple:
            return functools.partial(run, *segments[0])
        return functools.partial(self._exec, segments)

    def _exec(self, segments: list[Any]) -> None:
        if self._gpu is not None:
            for item in segments:
                item()
            return
        run = self._run
        assert run is not None
        for seg in segments:
            if type(seg) is tuple:
                run(*seg)
            else:
                seg()

    def backward(self, out_grads: NDArray | Sequence[NDArray | None] | Mapping[str, NDArray]
                 | None = None, is_train: bool = True) -> None:
        """Run backward: gradients written into (or, for grad_req 'add', added to) grad_arrays.
        ``out_grads``: head gradients for the non-loss outputs (an NDArray, a list or a dict
        by output name)."""
        self._set_heads(out_grads)
        if self._last_train is None:
            raise ExecutorStateError(
                "backward called before forward: run forward(is_train=True) first (the "
                "gradients are computed from the values forward leaves behind)")
        self._go["bwd_train" if self._last_train else "bwd"]()

    def _set_heads(self, out_grads: NDArray | Sequence[NDArray | None] | Mapping[str, NDArray]
                   | None) -> None:
        """Copy the head gradients of the non-loss outputs into their planned arrays."""
        names = self._out_names
        heads = _head_list(out_grads, names)
        for k, h in enumerate(self._head_arrays):
            if h is None:
                continue
            given = None if heads is None else heads[k]
            if given is None:
                raise BindError(
                    f"output {names[k]!r} is not a loss: its head gradient is required when "
                    "calling backward (or make it a loss with MakeLoss)"
                )
            src = given if given.stype == "default" else given.tostype("default")
            if tuple(src.shape) != h.shape:
                raise BindShapeError(f"head gradient for {names[k]!r} has shape "
                                     f"{tuple(src.shape)}, the output has {h.shape}")
            if self._gpu is not None:
                h[:] = src
            else:
                h._data[...] = src.asnumpy() if src.context.device_type == "gpu" else src._data

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **kwargs: Any) -> Executor:
        """A new executor for new input shapes, sharing this one's parameters: an argument whose
        new shape fits in its old memory becomes a view of it (writes to either are seen by
        both); a larger one is refused unless ``allow_up_sizing`` (then it is a new array); an
        argument not given whose shape changes is refused unless ``partial_shaping``. The two
        executors must not run at the same time."""
        if self._gpu is not None:
            raise NNSymError(f"Executor.reshape is not supported on {self._ctx} yet: bind the "
                             "symbol again with the new shapes")
        sym = self._symbol
        names = sym.list_arguments()
        unknown = set(kwargs) - set(names)
        if unknown:
            raise BindError(f"reshape: unknown argument(s) {sorted(unknown)}; arguments: {names}")
        arg_s, _, aux_s = sym._infer("shape", (), kwargs)
        aux_names = sym.list_auxiliary_states()
        for n, sh in zip(names + aux_names, arg_s + aux_s):
            if sh is None or any(d is None for d in sh):
                raise ShapeError(f"reshape: cannot decide the shape of {n!r} from {kwargs}")

        def fit(name: str, old: NDArray | None, shape: tuple[int, ...], given: bool) -> Any:
            if old is None or tuple(old.shape) == shape:
                return old
            if old.stype != "default":
                raise BindError(f"reshape: {name!r} is a {old.stype} array; sparse arguments "
                                "and gradients keep their shape")
            if not given and not partial_shaping:
                raise BindError(
                    f"Shape of unspecified arg: {name} changed ({old.shape} -> {shape}); give its "
                    "shape or set partial_shaping=True"
                )
            n = int(np.prod(shape, dtype=np.int64))
            if n <= old.size:
                return NDArray(old._data.reshape(-1)[:n].reshape(shape), old.context)
            if not allow_up_sizing:
                raise BindError(
                    f"New shape of arg: {name} {shape} is larger than the original {old.shape}; "
                    "binding a big executor and sizing it down is cheaper than the reverse. "
                    "Set allow_up_sizing=True to allow it"
                )
            return NDArray(_host(np.zeros, f"argument {name!r}", shape, old._data.dtype),
                           old.context)

        args = [fit(n, a, tuple(int(d) for d in sh), n in kwargs)
                for n, a, sh in zip(names, self.arg_arrays, arg_s)]
        grads = [fit(n, g, tuple(int(d) for d in sh), n in kwargs)
                 for n, g, sh in zip(names, self.grad_arrays, arg_s)]
        aux = [fit(n, a, tuple(int(d) for d in sh), True)
               for n, a, sh in zip(aux_names, self.aux_arrays, aux_s)]
        return Executor(sym, self._ctx, args, grads, self._reqs, aux,
                        infer_grad_stypes=self._infer_grad_stypes, fusion=self._fusion)

    # ------------------------------------------------------------------ parameters
    def copy_params_from(self, arg_params: Mapping[str, Any],
                         aux_params: Mapping[str, Any] | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copy ``arg_params``/``aux_params`` (name -> NDArray) into the bound arrays, cast to
        each array's dtype as MXNet does. A name the symbol lacks raises ``BindError`` unless
        ``allow_extra_params``; a shape that differs raises ``BindShapeError``."""
        for what, given, have in (("arguments", arg_params, self.arg_dict),
                                  ("auxiliary states", aux_params, self.aux_dict)):
            if given is None:
                continue
            if not isinstance(given, Mapping):
                raise BindError(f"copy_params_from: the {what} must be a dict of name -> "
                                f"NDArray, got {_what_is(given)}")
            for name, array in given.items():
                dst = have.get(name)
                if dst is None:
                    if allow_extra_params:
                        continue
                    raise BindError(f'copy_params_from: found name "{name}" that is not in the '
                                    f"{what} ({sorted(have)}); pass allow_extra_params=True to "
                                    "skip it")
                if not isinstance(array, NDArray):
                    raise BindError(f"copy_params_from: {name!r} must be an NDArray, got "
                                    f"{_what_is(array)}")
                if tuple(array.shape) != tuple(dst.shape):
                    raise BindShapeError(
                        f"copy_params_from: {name!r} has shape {shape_str(array.shape)}, but "
                        f"the executor's array is {shape_str(dst.shape)}")
                src = array if array.dtype == dst.dtype else array.astype(dst.dtype)
                src.copyto(dst)

    def get_optimized_symbol(self) -> Any:
        """The symbol this executor runs, as a new Symbol. nnsym applies no subgraph backend,
        so this is the bound forward graph (as MXNet gives with MXNET_SUBGRAPH_BACKEND=NONE);
        elementwise fusion happens below the symbol level and does not show here."""
        return _copy.copy(self._symbol)

    # ------------------------------------------------------------------ views of the state
    @property
    def arg_dict(self) -> dict[str, NDArray]:
        return _named(self._symbol.list_arguments(), self.arg_arrays)

    @property
    def grad_dict(self) -> dict[str, NDArray | None]:
        return _named(self._symbol.list_arguments(), self.grad_arrays)

    @property
    def aux_dict(self) -> dict[str, NDArray]:
        return _named(self._symbol.list_auxiliary_states(), self.aux_arrays)

    @property
    def output_dict(self) -> dict[str, NDArray]:
        return _named(self._symbol.list_outputs(), self.outputs)

    @property
    def plan(self) -> MemoryPlan:
        return self._plan

    def tojson(self) -> str:
        """The bound graph (forward and backward) as MXNet symbol JSON with every decided
        attribute per node: shapes, dtypes, storage ids (-1 the caller's variable arrays, -2 the
        caller's gradient arrays, else a pool block) and in-place input indices (-1: none)."""
        return graph_to_json(self._graph, inferred=True)

    def debug_str(self) -> str:
        """The bound graph (forward and backward) in MXNet's layout, then the planned total."""
        return debug_str(self._idx, self._plan, self._stypes, self._modes)


def _head_list(out_grads: Any, names: list[str]) -> list[NDArray | None] | None:
    """``backward``'s head gradients, one per output (None: not given), from an NDArray, a
    list or a dict by output name."""
    if out_grads is None:
        return None
    if isinstance(out_grads, NDArray):
        out_grads = [out_grads]
    if isinstance(out_grads, Mapping):
        unknown = [k for k in out_grads if k not in names]
        if unknown:
            raise BindError(f"backward: out_grads names unknown output(s) {unknown}; outputs: "
                            f"{names}")
        heads = [out_grads.get(n) for n in names]
    elif isinstance(out_grads, (list, tuple)):
        heads = list(out_grads)
        if len(heads) != len(names):
            raise BindError(f"backward: {len(heads)} head gradients for {len(names)} "
                            f"outputs {names}")
    else:
        raise BindError(f"backward: out_grads must be an NDArray, a list of NDArrays or a dict "
                        f"of output name to NDArray, got {_what_is(out_grads)}")
    for n, h in zip(names, heads):
        if h is not None and not isinstance(h, NDArray):
            raise BindError(f"backward: the head gradient for {n!r} must be an NDArray, got "
                            f"{_what_is(h)}")
    return heads


class _GpuLaunch:
    """One prebound CUDA kernel launch of a gpu executor (a Python step): p/ia/fa are copied to
    the device once, at bind; a seeded launch (Dropout) copies its fa again before each run,
    since the executor writes a fresh seed into it."""
    __slots__ = ("bound", "fa", "seeded")

    def __init__(self, be: Any, fn: Any, addrs: list[int], ia: list[int], fa: list[float],
                 work: int, seeded: bool):
        self.bound = be.prepare(fn, addrs, ia, fa, work)
        self.fa, self.seeded = fa, seeded

    def __call__(self) -> None:
        self.bound.run(self.fa if self.seeded else None)


def _segments(items: Sequence[Any]) -> list[Any]:
    """Consecutive kernel calls packed for nnsym_run_list (a tuple each), Python steps as they
    are; an empty list stays one empty run (nothing to do, as before)."""
    out: list[Any] = []
    run: list[tuple[Any, Any, Any, Any]] = []
    for it in items:
        if callable(it):
            if run:
                out.append(_pack(run))
                run = []
            out.append(it)
        else:
            run.append(it)
    if run or not out:
        out.append(_pack(run))
    return out


def _zeros(st: SType, shape: tuple[int, ...], dtype: np.dtype, ctx: Context) -> NDArray:
    if st == SType.DEFAULT:
        return NDArray(_host(np.zeros, "a gradient array", shape, dtype), ctx)
    return zeros(st.label, shape, ctx, dtype)


def _store(target: NDArray, value: NDArray, req: str) -> None:
    """``target`` receives ``value`` (write) or ``target + value`` (add), keeping its storage
    type; a sparse value of the target's type is taken over without a copy (it is a fresh
    result no one else holds)."""
    if req == "add":
        if type(target) is NDArray and type(value) is NDArray:
            target._data += value._data
            return
        value = invoke("elemwise_add", [target, value], {})[0]
    if (isinstance(target, BaseSparseNDArray) and type(value) is type(target)
            and value._dt == target._dt):
        assert isinstance(value, BaseSparseNDArray)
        aux = value._shared_aux()
        target._values, target._indices = value._values, aux[0]
        if isinstance(target, CSRNDArray):
            target._indptr = aux[1]
        target._aux_exposed = False
        return
    _assign(target, value)


def _sparse_step(node: Node, ins: list[NDArray], outs: list[NDArray], reqs: tuple[str, ...],
                 out_shapes: list[tuple[int, ...]], out_dtypes: list[np.dtype],
                 in_stypes: tuple[SType, ...], dec: Decision) -> Any:
    """One node with sparse storage as a Python step: the decision the storage pass made
    (``dec``: the storage kernel, or the dense kernel on densified inputs with the outputs cast
    to their storage types), run by the runtime's dispatch; results stored into the entries'
    arrays by write mode."""
    op, p = node.op, node.params
    assert op is not None
    raw = p.to_attrs()
    if dec.dispatch == DispatchMode.FALLBACK:
        on_fallback(op, raw, in_stypes, dec.outs)  # once, at bind time (MXNet warns in the pass)
    needed = [r != "null" for r in reqs]
    # Targets for the kernel: where it may write directly (write mode, the decided storage
    # type); None for outputs nobody reads. Any other needed output makes the kernel compute
    # everything into fresh arrays.
    direct = [o if r == "write" and o.stype == st.label else None
              for o, r, st in zip(outs, reqs, dec.outs)]
    use_direct = dec.dispatch == DispatchMode.FCOMPUTE_EX and \
        all(d is not None or not k for d, k in zip(direct, needed))
    skip = [not k for k in needed]
    shapes, dtypes = list(out_shapes), list(out_dtypes)
    ctx = ins[0].context

    where = f"node '{node.name}' ({op.name})"
    in_names = list(op.input_names(p)) + [str(i) for i in range(len(op.input_names(p)), len(ins))]

    def run() -> None:
        targets = [None if d is None else record(d, where) for d in direct] if use_direct else []
        recs = [record(a, f"{where} input '{n}'") for a, n in zip(ins, in_names)]
        res = dispatch.run(op, p, raw, dec, recs, shapes, dtypes, targets,
                           skip)
        for t, r, req in zip(outs, res, reqs):
            if req == "null" or r is None:
                continue
            if req == "write" and use_direct and deliver(t, r, ins):
                continue
            _store(t, wrap(r, ctx, ins), req)

    return _Step(run, node.name, op.name)


def _python_step(kern: PythonCompute, node: Node, state: Any, reqs: tuple[str, ...],
                 ins: list[NDArray], outs: list[NDArray], is_train: bool) -> Any:
    """A node whose operator is Python code (a custom operator) as a step over NDArray views of
    the executor's arrays."""
    name, params = node.name, node.params

    def run() -> None:
        kern.run(name, params, state, is_train, reqs, ins, outs)

    return _Step(run, name, node.op.name if node.op is not None else "null")


class _Step:
    """A Python step of a bound graph, named (for Executor.profile) by its node and operator."""

    __slots__ = ("label", "run")

    def __init__(self, run: Callable[[], None], name: str, op: str) -> None:
        self.run, self.label = run, (name, op)

    def __call__(self) -> None:
        self.run()


def _delivery(src: NDArray, target: NDArray, req: str) -> Any:
    """A step that stores a planned (dense) gradient into the caller's sparse gradient array."""

    def step() -> None:
        _store(target, src, req)

    return step


def _pack(calls: Sequence[tuple[Any, Any, Any, Any]]) -> tuple[Any, ...]:
    """Prebound calls as nnsym_run_list's arguments (n, functions, pointer arrays, ia, fa)."""
    n = len(calls)
    fns = FFI.new("nnsym_kernel_t[]", [FFI.cast("nnsym_kernel_t", c[0]) for c in calls] or 1)
    ps = FFI.new("void *const *[]", [c[1] for c in calls] or 1)
    ias = FFI.new("const int64_t *[]", [c[2] for c in calls] or 1)
    fas = FFI.new("const double *[]", [c[3] for c in calls] or 1)
    return (n, fns, ps, ias, fas)


def _host(make: Any, what: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A host array for the executor; one numpy cannot allocate is a BindShapeError naming
    ``what`` and the byte size."""
    try:
        return allocate(make, tuple(shape), np.dtype(dtype))
    except ShapeError as e:
        raise BindShapeError(f"cannot bind: {what}: {e}") from None


def _pools(block_bytes: Sequence[int], shared: list[np.ndarray] | None,
           users: Mapping[int, list[str]] | None = None) -> list[np.ndarray]:
    """A byte array per planned block. With ``shared`` (another executor's pool list), each
    block, largest first, takes an unused shared array that is large enough; new arrays are
    appended to ``shared``, so executors bound one after another share one pool. ``users``:
    per block the nodes whose outputs live there (for the message when it cannot be had)."""
    out: list[np.ndarray | None] = [None] * len(block_bytes)
    free = list(shared) if shared is not None else []
    for b in sorted(range(len(block_bytes)), key=lambda i: -block_bytes[i]):
        need = max(block_bytes[b], 1)
        fits = [k for k, a in enumerate(free) if a.nbytes >= need]
        if fits:
            out[b] = free.pop(min(fits, key=lambda k: free[k].nbytes))
        else:
            names = (users or {}).get(b, [])
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            new = _host(np.empty, f"memory block {b} for the outputs of nodes "
                        f"{names[:3]}{more}", (need,), np.dtype(np.uint8))
            # touched now, as the workspace: the first step would fault in every block anyway
            # (~1.6 GB/s here), so the pages are faulted at bind rather than during that step
            new.fill(0)
            out[b] = new
            if shared is not None:
                shared.append(new)
    return [a for a in out if a is not None]


def _named(names: Sequence[str], arrays: Sequence[Any]) -> dict[str, Any]:
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if list(names).count(n) > 1})
        raise ValueError(f"duplicate names {dup}: use the array lists instead")
    return dict(zip(names, arrays))


__all__ = ["BindError", "BindShapeError", "Executor", "ExecutorStateError"]
