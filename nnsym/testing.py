"""Helpers for the table-driven operator tests (also usable by operator authors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.errors import NNSymError
from nnsym.ir.graph import Entry, Graph, GraphAttrs, Node, variable
from nnsym.ir.opdef import DENSE, Example, OpDef
from nnsym.ir.spec import KernelCall
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.ndarray import array as nd_array
from nnsym.ops import REGISTRY
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.runtime.imperative import infer_one


def as_nd(a: Any) -> NDArray:
    """An NDArray of a numpy array in the array's own dtype (``nd.array`` makes float32 of any
    numpy array, as MXNet does)."""
    a = np.asarray(a)
    return nd_array(a, dtype=a.dtype)


def prep_input(kind: str, a: np.ndarray) -> np.ndarray:
    """Moves uniform values into an input domain of ``Example.prep`` (float64 in and out)."""
    n = a.shape[-1]
    if kind == "sym":
        low: np.ndarray = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
        return low
    if kind == "spd":
        spd: np.ndarray = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
        return spd
    if kind == "tri":
        out: np.ndarray = a.copy()
        i = np.arange(n)
        out[..., i, i] = 1 + np.abs(a).sum(axis=-1)
        return out
    raise ValueError(f"unknown input domain {kind!r}")


def make_inputs(op: OpDef, ex: Example, seed: int = 0) -> list[np.ndarray]:
    """Random inputs for an example: uniform in [low, high), integers where ``ex.ints`` says,
    moved into the domain ``ex.prep`` names."""
    rng = np.random.default_rng(seed)
    out = []
    for i, shape in enumerate(ex.shapes):
        if i in ex.ints:
            lo, hi = ex.ints[i]
            a = rng.integers(lo, hi, size=shape).astype(ex.input_dtype(i))
        else:
            a = rng.uniform(ex.low, ex.high, size=shape)
            if i in ex.prep:
                a = prep_input(ex.prep[i], a)
            if np.issubdtype(np.dtype(ex.input_dtype(i)), np.integer):
                a = np.round(a)
            a = a.astype(ex.input_dtype(i))
        out.append(a)
    return out


def single_node_graph(op: OpDef, params: Any, n_inputs: int, name: str = "node") -> Graph:
    ins = tuple(Entry(variable(f"in{i}")) for i in range(n_inputs))
    node = Node(op, name, params, ins)
    return Graph(tuple(Entry(node, i) for i in range(op.num_outputs(params))))


def infer_node(
    op: OpDef,
    params: Any,
    shapes: Sequence[Any],
    dtypes: Sequence[Any] | None = None,
) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Shape and dtype inference of one node from its input shapes (and dtypes).

    Returns ``(in_shapes, out_shapes, in_dtypes, out_dtypes)`` with ``None`` where unknown.
    """
    g = single_node_graph(op, params, len(shapes))
    idx = g.index
    n = idx.num_entries
    var_eids = [idx.entry_id(e) for e in idx.nodes[-1].inputs]
    seeds_s: list[Any] = [None] * n
    seeds_t: list[Any] = [None] * n
    for k, eid in enumerate(var_eids):
        seeds_s[eid] = None if shapes[k] is None else tuple(shapes[k])
        if dtypes is not None and dtypes[k] is not None:
            seeds_t[eid] = np.dtype(dtypes[k])
    gs = infer_shape(Graph(g.outputs, GraphAttrs(shape=tuple(seeds_s))))
    gt = infer_type(Graph(g.outputs, GraphAttrs(dtype=tuple(seeds_t))))
    assert gs.attrs.shape is not None and gt.attrs.dtype is not None
    nid = idx.num_nodes - 1
    outs = list(idx.output_entries(nid))
    return (
        [gs.attrs.shape[e] for e in var_eids],
        [gs.attrs.shape[e] for e in outs],
        [gt.attrs.dtype[e] for e in var_eids],
        [gt.attrs.dtype[e] for e in outs],
    )


def reference_outputs(op: OpDef, params: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    assert op.reference is not None, f"{op.name} has no numpy reference"
    out = op.reference(params, *inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def registry_kernel_specs(reqs: Sequence[str] = ("write", "add")) -> list[Any]:
    """The kernel specs every operator example lowers to (for compiling them in one go)."""
    specs: list[Any] = []
    for op in REGISTRY.values():
        kernel = op.kernels.get(DENSE)
        if kernel is None:
            continue
        for ex in op.examples:
            try:
                params, _ = op.parse_params(ex.params)
                dts = [np.dtype(ex.input_dtype(i)) for i in range(len(ex.shapes))]
                out_s, out_t = infer_one(op, params, ex.shapes, dts, "warm")
                for req in reqs:
                    call = KernelCall(params, tuple(ex.shapes), tuple(dts), tuple(out_s),
                                      tuple(out_t), req)
                    specs.extend(ln.spec for ln in kernel.lower(call).launches)
            except (NNSymError, ValueError, TypeError, KeyError):
                continue
    return specs


def precompile_registry() -> None:
    """Compile every example's kernels in a few large builds (one per core)."""
    if compiler.backend() != "c":
        return
    specs = registry_kernel_specs()
    try:
        # split whatever the load: xdist workers start this together, and the cache's
        # per-key lock then has one of them build each unit while the other waits for it
        compiler.functions(specs, split=True)
    except compiler.CompileError:
        pass  # a broken template then fails in its own tests, one kernel at a time


def reference_as(op: OpDef, params: Any, inputs: Sequence[np.ndarray],
                 out_dtypes: Sequence[Any]) -> list[np.ndarray]:
    """The numpy reference's outputs in the given dtypes; float16 inputs computed in float32
    (as the kernels do); numpy's floating-point warnings silenced (NaN/Inf cases)."""
    up = [a.astype(np.float32) if a.dtype == np.float16 else a for a in inputs]
    with np.errstate(all="ignore"):
        want = reference_outputs(op, params, up)
        return [np.asarray(w).astype(t) for w, t in zip(want, out_dtypes)]


def prefilled(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Random contents for an output accumulated into (grad_req='add' tests)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(0, 20, size=shape).astype(dt)
    return rng.uniform(-1, 1, size=shape).astype(dt)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> None:
    """Same shape and dtype; exactly equal when rtol is 0, else close (NaN equal to NaN)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if rtol == 0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)
