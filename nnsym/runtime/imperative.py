"""Run one operator on arrays: a one-node graph through the same inference passes, lowered to
generated kernels, compiled once and cached per call signature (repeat calls pay no inference,
lowering or compilation: one dictionary lookup, then the kernel calls).

The numpy backend (``NNSYM_BACKEND=numpy``, or no C compiler) runs each operator's reference.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.errors import NoKernelError, ShapeError, node_error
from nnsym.ir.graph import Entry, Graph, GraphAttrs, Node, variable
from nnsym.ir.opdef import DENSE, OpDef
from nnsym.ir.spec import Lowered
from nnsym.ops.common.rng import next_seed
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.passes.lower import lower
from nnsym.passes.manager import run_passes
from nnsym.types import shape_str

FFI = compiler.FFI
# cffi's backend entry points, called directly on the hot path (the FFI methods add a layer).
_from_buffer = FFI._backend.from_buffer
_newp = FFI._backend.newp
_CHAR_ARR = FFI.typeof("char[]")
_VOIDP_ARR = FFI.typeof("void *[]")


@dataclass
class CompiledCall:
    """Everything decided for one (operator, parameters, input shapes/dtypes, write mode)."""

    op: OpDef
    params: Any
    out_shapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[np.dtype, ...]
    lowered: Lowered | None  # None on the numpy backend
    funcs: list[Any]
    ia: list[Any]
    fa: list[Any]
    n_in: int
    single: tuple[Any, Any, Any] | None = None  # the one launch, when there is one and no workspace

    def __post_init__(self) -> None:
        if self.lowered is not None and len(self.funcs) == 1 and not (
            self.lowered.launches[0].workspace or self.lowered.launches[0].seed_slot is not None
            or self.lowered.launches[0].args is not None
        ):
            self.single = (self.funcs[0], self.ia[0], self.fa[0])
        self.out_specs = list(zip(self.out_shapes, self.out_dtypes))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
            req: str = "write") -> None:
        """Run on C-contiguous arrays of the compiled shapes and dtypes (checked by callers)."""
        if self.lowered is None:
            _run_reference(self, inputs, outputs, req)
            return
        bufs = [_from_buffer(_CHAR_ARR, a, False) for a in inputs]
        for o in outputs:
            bufs.append(_from_buffer(_CHAR_ARR, o, True))
        self.launch(bufs)

    def launch(self, bufs: list[Any]) -> None:
        """Run the kernels on cffi buffers of the inputs then the outputs."""
        if self.single is not None:
            fn, ia, fa = self.single
            fn(_newp(_VOIDP_ARR, bufs), ia, fa)
            return
        assert self.lowered is not None
        for launch, fn, ia, fa in zip(self.lowered.launches, self.funcs, self.ia, self.fa):
            if launch.seed_slot is not None:
                fa[launch.seed_slot] = float(next_seed())
            mine = bufs if launch.args is None else [bufs[i] for i in launch.args]
            if launch.workspace:
                ws = np.empty(launch.workspace, np.uint8)
                fn(_newp(_VOIDP_ARR, [*mine, _from_buffer(_CHAR_ARR, ws, True)]), ia, fa)
            else:
                fn(_newp(_VOIDP_ARR, mine), ia, fa)

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Allocate the outputs and run (the imperative fast path)."""
        outs = [np.empty(s, t) for s, t in self.out_specs]
        if self.views:
            for oi, ii in self.views.items():
                outs[oi] = inputs[ii].reshape(self.out_shapes[oi])
            self.run(inputs, [o for i, o in enumerate(outs) if i not in self.views])
        else:
            self.run(inputs, outs)
        return outs

    @property
    def views(self) -> Any:
        return self.lowered.views if self.lowered is not None else {}


def _run_reference(call: CompiledCall, inputs: Sequence[np.ndarray],
                   outputs: Sequence[np.ndarray], req: str) -> None:
    assert call.op.reference is not None
    res = call.op.reference(call.params, *inputs)
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    for o, r in zip(outputs, res):
        if req == "add":
            o += np.asarray(r, dtype=o.dtype)
        else:
            o[...] = r


_CACHE: dict[Any, CompiledCall] = {}
_LOCK = threading.Lock()


def infer_one(op: OpDef, params: Any, shapes: Sequence[tuple[int, ...]],
              dtypes: Sequence[np.dtype], name: str) -> tuple[list[Any], list[Any]]:
    """Output shapes and dtypes of one node through the same passes a graph goes through."""
    ins = tuple(Entry(variable(f"{name}_in{i}")) for i in range(len(shapes)))
    node = Node(op, name, params, ins)
    outs = tuple(Entry(node, i) for i in range(op.num_outputs(params)))
    g = Graph(outs)
    n = g.index.num_entries
    seeds_s: list[Any] = [None] * n
    seeds_t: list[Any] = [None] * n
    for i, e in enumerate(ins):
        eid = g.index.entry_id(e)
        seeds_s[eid], seeds_t[eid] = tuple(shapes[i]), np.dtype(dtypes[i])
    g = run_passes(Graph(outs, GraphAttrs(shape=tuple(seeds_s), dtype=tuple(seeds_t))),
                   [infer_shape, infer_type])
    assert g.attrs.shape is not None and g.attrs.dtype is not None
    eids = [g.index.entry_id(e) for e in outs]
    out_s = [g.attrs.shape[e] for e in eids]
    out_t = [g.attrs.dtype[e] for e in eids]
    for i, (s, t) in enumerate(zip(out_s, out_t)):
        # NOTE: a value-shaped operator's kernel sizes its outputs; only its dtypes must be known
        undecided = s is None or any(d is None for d in s)
        if (undecided and not op.value_shaped) or t is None:
            raise node_error(
                ShapeError, name, op.name,
                f"cannot decide output {i} (shape {shape_str(s)}, dtype {t})",
                [(f"in{i}", f"{shapes[i]} {np.dtype(dtypes[i]).name}") for i in range(len(shapes))],
            )
    return out_s, out_t


def compile_call(op: OpDef, params: Any, shapes: Sequence[tuple[int, ...]],
                 dtypes: Sequence[np.dtype], req: str = "write",
                 name: str | None = None) -> CompiledCall:
    """Infer, lower and compile one operator call (uncached; see ``get_call``)."""
    name = name or op.name.lower()
    out_s, out_t = infer_one(op, params, shapes, dtypes, name)
    backend = compiler.backend()
    kernel = op.kernels.get(DENSE)
    if backend == "numpy" or kernel is None:
        if backend == "c" and kernel is None:
            raise NoKernelError(
                f"operator {op.name} has no dense C kernel yet; set NNSYM_BACKEND=numpy to run "
                "its numpy reference"
            )
        if op.reference is None:
            raise NoKernelError(f"operator {op.name} has no numpy reference")
        return CompiledCall(op, params, tuple(out_s), tuple(out_t), None, [], [], [], len(shapes))
    lowered = lower(op, params, shapes, dtypes, out_s, out_t, [req] * len(out_s)).lowered
    funcs = compiler.functions([ln.spec for ln in lowered.launches])
    ia = [FFI.new("int64_t[]", list(ln.ia) or [0]) for ln in lowered.launches]
    fa = [FFI.new("double[]", list(ln.fa) or [0.0]) for ln in lowered.launches]
    return CompiledCall(op, params, tuple(out_s), tuple(out_t), lowered, funcs, ia, fa,
                        len(shapes))


def get_call(op: OpDef, raw_params: tuple[tuple[str, Any], ...],
             shapes: tuple[tuple[int, ...], ...], dtypes: tuple[np.dtype, ...],
             req: str = "write") -> CompiledCall:
    """The cached compiled call for a signature; params given as MXNet-style keyword items."""
    key = (op.name, raw_params, shapes, dtypes, req, compiler.backend())  # backend: memoised
    call = _CACHE.get(key)
    if call is None:
        params, _ = op.parse_params(dict(raw_params))
        call = compile_call(op, params, shapes, dtypes, req)
        with _LOCK:
            _CACHE[key] = call
    return call


def _run(call: CompiledCall, ins: list[np.ndarray], req: str,
         outputs: Sequence[np.ndarray] | None) -> list[np.ndarray]:
    """Run a compiled call into ``outputs`` (fresh arrays where None); every output returned."""
    if outputs is None:
        outs = [np.empty(s, t) for s, t in zip(call.out_shapes, call.out_dtypes)]
    else:
        outs = list(outputs)
    views = call.lowered.views if call.lowered is not None else {}
    for oi, ii in views.items():
        outs[oi] = ins[ii].reshape(call.out_shapes[oi])
    call.run(ins, [o for i, o in enumerate(outs) if i not in views] if views else outs, req)
    return outs


def run_parsed(op: OpDef, params: Any, inputs: Sequence[np.ndarray],
               outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """:func:`run_op` with parsed (hashable) parameters, for operators whose parameters a pass
    builds (fused nodes); compiled calls are cached by the parameters' value."""
    ins = [np.ascontiguousarray(a) for a in inputs]
    shapes, dtypes = tuple(a.shape for a in ins), tuple(a.dtype for a in ins)
    key = ("parsed", op.name, params, shapes, dtypes, compiler.backend())
    call = _CACHE.get(key)
    if call is None:
        call = compile_call(op, params, shapes, dtypes, "write")
        with _LOCK:
            _CACHE[key] = call
    return _run(call, ins, "write", outputs)


def run_op(op: OpDef, params: dict[str, Any], inputs: Sequence[np.ndarray],
           req: str = "write", outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
    """Run ``op`` on numpy arrays (C-contiguous copies are made where needed); returns every
    output, hidden ones too. ``outputs`` (with ``req='add'``: accumulated into)."""
    ins = [np.ascontiguousarray(a) for a in inputs]
    call = get_call(op, _freeze(params), tuple(a.shape for a in ins),
                    tuple(a.dtype for a in ins), req)
    return _run(call, ins, req, outputs)


def _freeze(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, _hashable(v)) for k, v in params.items()))


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type):
        return np.dtype(v).name
    return v
