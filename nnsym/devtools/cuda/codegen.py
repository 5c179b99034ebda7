"""CUDA code generation beside the C path, for verification: every kernel family has a CUDA
twin (rendered from the same kernel spec by ``nnsym.cuda.source``, which the GPU runtime uses);
this module enumerates the variants, renders them for ``nnsym codegen`` and checks them with
nvcc. The sparse kernels (``nnsym/sparse/templates``) have their twins in
``nnsym.devtools.cuda.sparse``.

Variants are enumerated by lowering every registered operator's examples (plus broadcasting
shape patterns for binary operators) in every dtype, write mode and train/inference mode, and
every backward node their gradients build, exactly as an executor would.

Families whose CUDA kernels reduce in another order than C (``REORDERING``) are compared with
a tolerance; every other family must agree with C bit for bit (``Variant.exact``).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import nnsym.ops  # noqa: F401  (registers every operator)
from nnsym import fileio
from nnsym.codegen.cache import cache_key, cache_root
from nnsym.codegen.render import ENV as C_ENV
from nnsym.cuda.source import (
    NVCC_FLAGS,
    PTX_CHECK_FLAGS,
    cuda_prologue,
    cuda_twin,
    has_twin,
    nvcc,
    nvcc_compile,
    render_spec,
)
from nnsym.errors import NNSymError
from nnsym.ir.graph import Entry, Graph, GraphAttrs, Node, dfs_post_order, variable
from nnsym.ir.opdef import DENSE
from nnsym.ir.spec import CTYPES, REQS, KernelCall, KernelSpec, Launch
from nnsym.ops import REGISTRY, get_op
from nnsym.passes.fuse import fuse_elementwise
from nnsym.passes.infer import infer_shape, infer_type
from nnsym.passes.lower import lower
from nnsym.passes.manager import run_passes
from nnsym.passes.stype import infer_storage_type
from nnsym.runtime.imperative import infer_one

# Short family names of the three elementwise families (the others are named by their C
# template's file stem: "pool_backward", "dot_gemm"...).
SHORT_NAMES: dict[str, str] = {
    "elemwise/elemwise_unary.c.j2": "unary",
    "common/elemwise_binary.c.j2": "binary",
    "common/elemwise_backward.c.j2": "backward",
    "elemwise/fused.c.j2": "fused",
}
ELEMWISE = ("unary", "binary", "backward")
# Families whose CUDA kernels may sum in another order than the C kernel (tree reductions in
# shared memory, GEMM tiles, another BLAS): their host-shim results are compared with a
# tolerance. Every other family must agree with C bit for bit (elementwise, gather and
# scatter-style kernels: each output element is computed in C's order by one thread).
REORDERING: frozenset[str] = frozenset({
    "broadcast_reduce_reduce", "broadcast_reduce_backward", "dot_gemm", "conv_forward",
    "conv_backward", "fc_bias_grad", "deconv_bias", "batch_norm", "batch_norm_backward",
    "softmax", "softmax_backward", "softmax_output_backward", "sparse_defs_square_sum", "lrn",
    "lrn_backward", "interleaved_gemm",
    # long chains of libm calls (log, exp, lgamma; Jacobi sweeps that iterate on them): the
    # device's libm differs from glibc in last bits, which the chains carry on
    "linalg", "pdf",
    # deformable convolution: GEMMs (tiled on the device, BLAS in C) and atomic scatters
    "deformable_conv", "deformable_conv_backward",
})


def family_of(c_template: str) -> str:
    return SHORT_NAMES.get(c_template) or Path(c_template).name[: -len(".c.j2")]


TARGETS = ("c", "cuda")
DTYPES: tuple[str, ...] = tuple(CTYPES)

# Broadcasting shape pairs covering every inner mode with 1, 2 and 3 collapsed dims
# (``nnsym.ops.elemwise.broadcast_rows``); each output has more than 96 elements, so a
# 3 x 32 grid runs every grid-stride loop more than once.
BINARY_SHAPES: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((200,), (200,)),          # nd 1 vv
    ((200,), (1,)),            # nd 1 vs
    ((1,), (200,)),            # nd 1 sv
    ((7, 30), (1, 30)),        # nd 2 vv
    ((7, 30), (7, 1)),         # nd 2 vs
    ((7, 1), (7, 30)),         # nd 2 sv
    ((3, 5, 13), (3, 1, 13)),  # nd 3 vv
    ((3, 5, 13), (1, 5, 1)),   # nd 3 vs
    ((1, 5, 1), (3, 5, 13)),   # nd 3 sv
)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def c_prologue() -> str:
    """The C prologue as a build without libmvec declarations renders it (deterministic)."""
    return C_ENV.get_template("prologue.c.j2").render(vector_math=(), blas_int="int")


# ---------------------------------------------------------------------------------------------
# Variants


@dataclass(frozen=True)
class Variant:
    """One kernel variant: the operator that lowers to it, the C spec, and one launch of it
    (``ia``/``fa``) with the shapes and dtypes of the pointers it receives (inputs, then the
    output)."""
    op: str
    tag: str  # values of the parameters that chose the expression (e.g. act_type), or ""
    spec: KernelSpec
    ia: tuple[int, ...]
    fa: tuple[float, ...]
    ptr_shapes: tuple[tuple[int, ...], ...]
    ptr_dtypes: tuple[str, ...]
    workspace: int = 0  # bytes of the workspace pointer that follows the outputs (0: none)
    name: str = ""

    @property
    def family(self) -> str:
        return family_of(self.spec.template)

    @property
    def cuda_template(self) -> str:
        return cuda_twin(self.spec.template)

    @property
    def exact(self) -> bool:
        """Whether the CUDA kernel must agree with the C kernel bit for bit."""
        return self.family not in REORDERING

    @property
    def ctx(self) -> dict[str, Any]:
        return self.spec.context()

    @property
    def in_dtype(self) -> str:
        c = self.ctx
        dt = c.get("in_dtype") or c.get("dtype")
        return str(dt or (self.ptr_dtypes[0] if self.ptr_dtypes else "none"))

    @property
    def out_dtype(self) -> str:
        c = self.ctx
        dt = c.get("out_dtype") or c.get("dtype")
        return str(dt or (self.ptr_dtypes[-1] if self.ptr_dtypes else "none"))

    @property
    def req(self) -> str:
        return str(self.ctx.get("req", "write"))

    @property
    def expr(self) -> str:
        return str(self.ctx.get("expr", ""))

    @property
    def mode(self) -> str:
        """Binary kernels: ``nd<k>_<inner>``; others ""."""
        c = self.ctx
        return f"nd{c['nd']}_{c['inner']}" if self.family == "binary" else ""

    def base_name(self, with_tag: bool = False) -> str:
        parts = ["nnk", _ident(self.op)]
        if with_tag and self.tag:
            parts.append(self.tag)
        if self.in_dtype == self.out_dtype:
            parts.append(self.in_dtype)
        else:
            parts.append(f"{self.in_dtype}_to_{self.out_dtype}")
        parts.append(self.req)
        if self.mode:
            parts.append(self.mode)
        return "_".join(parts).replace("__", "_")

    def describe(self) -> str:
        """One line naming the variant (operator and parameter names are registry identifiers,
        never user text)."""
        bits = [f"operator {self.op}"]
        if self.tag and self.tag in self.name:
            bits.append(f"({self.tag})")
        bits.append(f"family {self.family}")
        bits.append(f"dtype {self.in_dtype}" + (
            f" -> {self.out_dtype}" if self.in_dtype != self.out_dtype else ""))
        bits.append(f"req {self.req}")
        if self.mode:
            bits.append(f"mode {self.mode}")
        return ", ".join(bits)


def _ident(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return out if _IDENT.match(out) else "op_" + out


def _tag(params: Any) -> str:
    """The values of choice-valued parameters (they select expressions: act_type)."""
    specs = getattr(type(params), "specs", None)
    if specs is None:
        return ""
    vals = []
    for name, fs in specs().items():
        if fs.choices:
            v = getattr(params, name, None)
            if isinstance(v, str) and _IDENT.match(v):
                vals.append(v)
    return "_".join(vals)


def _family_launches(lowered: Any, ins: Sequence[tuple[tuple[int, ...], str]],
                     outs: Sequence[tuple[tuple[int, ...], str]]) -> Iterable[
                         tuple[Launch, tuple[tuple[tuple[int, ...], str], ...]]]:
    ptrs = (*ins, *outs)
    for ln in lowered.launches:
        if not has_twin(ln.spec.template):
            continue
        args = tuple(ptrs) if ln.args is None else tuple(ptrs[k] for k in ln.args)
        yield ln, args


def _grad_nodes(op: Any, params: Any, n_in: int) -> tuple[Any, list[Any], list[Any]]:
    """The forward node, its input variables and the backward nodes its gradient builds."""
    ins = tuple(Entry(variable(f"in{i}")) for i in range(n_in))
    node = Node(op, "fwd", params, ins)
    nout = op.num_outputs(params)
    ograds: list[Any] = [Entry(variable(f"g{k}")) for k in range(nout)]
    res = op.grad(node, ograds)
    heads = [e for e in res if e is not None]
    order = dfs_post_order(heads) if heads else []
    back = [n for n in order if n is not node and n.op is not None]
    return node, ograds, back


def _backward_calls(op: Any, params: Any, shapes: Sequence[tuple[int, ...]], dtype: str,
                    grad: tuple[Any, list[Any], list[Any]]) -> Iterable[
                        tuple[Any, Any, list[tuple[tuple[int, ...], str]],
                              list[tuple[tuple[int, ...], str]]]]:
    """(backward op, params, input (shape, dtype)s, output (shape, dtype)s) of every backward
    node, from shape and dtype inference over forward + backward."""
    node, ograds, back = grad
    if not back:
        return
    outs = [Entry(node, k) for k in range(op.num_outputs(params))]
    heads = tuple(outs) + tuple(Entry(b, k) for b in back for k in range(b.num_outputs()))
    g = Graph(heads)
    idx = g.index
    n = idx.num_entries
    seeds_s: list[Any] = [None] * n
    seeds_t: list[Any] = [None] * n
    for i, e in enumerate(node.inputs):
        eid = idx.entry_id(e)
        seeds_s[eid], seeds_t[eid] = tuple(shapes[i]), np.dtype(dtype)
    # Output gradients: shaped and typed as the outputs (found by forward inference first).

    out_s, out_t = infer_one(op, params, shapes, [np.dtype(dtype)] * len(shapes), "fwd")
    for k, e in enumerate(ograds):
        try:
            eid = idx.entry_id(e)
        except (KeyError, ValueError):
            continue  # a loss head's gradient does not read its output gradient
        seeds_s[eid], seeds_t[eid] = tuple(out_s[k]), out_t[k]
    g = run_passes(Graph(heads, GraphAttrs(shape=tuple(seeds_s), dtype=tuple(seeds_t))),
                   [infer_shape, infer_type])
    sh, dt = g.attrs.shape, g.attrs.dtype
    assert sh is not None and dt is not None
    for b in back:
        nid = idx.node_id(b)
        eids = [*idx.input_entries[nid], *idx.output_entries(nid)]
        shapes_b = [sh[e] for e in eids]
        if any(s is None or None in s for s in shapes_b):
            continue
        typed = [(tuple(int(d or 0) for d in s or ()), np.dtype(dt[e]).name)
                 for s, e in zip(shapes_b, eids)]
        k = len(idx.input_entries[nid])
        yield b.op, b.params, typed[:k], typed[k:]


def _lower(op: Any, params: Any, ins: Sequence[tuple[tuple[int, ...], str]],
           outs: Sequence[tuple[tuple[int, ...], str]], req: str, is_train: bool = False) -> Any:
    kernel = op.kernels.get(DENSE)
    if kernel is None:
        return None
    call = KernelCall(params, tuple(tuple(s) for s, _ in ins),
                      tuple(np.dtype(t) for _, t in ins), tuple(tuple(s) for s, _ in outs),
                      tuple(np.dtype(t) for _, t in outs), req, is_train=is_train)
    return kernel.lower(call)


_SKIP = (ValueError, TypeError, KeyError, AssertionError, IndexError, ZeroDivisionError)


def _is_family_op(op: Any) -> bool:
    """Whether an operator's examples (forward or gradient) reach a family with a CUDA twin."""
    for ex in op.examples:
        try:
            params, _ = op.parse_params(ex.params)
            dts = [np.dtype(ex.input_dtype(i)) for i in range(len(ex.shapes))]
            out_s, out_t = infer_one(op, params, ex.shapes, dts, "probe")
            ins = [(tuple(s), ex.input_dtype(i)) for i, s in enumerate(ex.shapes)]
            outs = [(tuple(s), np.dtype(t).name) for s, t in zip(out_s, out_t)]
            low = _lower(op, params, ins, outs, "write")
            if low is not None and any(_family_launches(low, ins, outs)):
                return True
            if op.grad is not None:
                grad = _grad_nodes(op, params, len(ex.shapes))
                for bop, bp, bins, bouts in _backward_calls(op, params, ex.shapes, ex.dtype,
                                                           grad):
                    blow = _lower(bop, bp, bins, bouts, "write")
                    if blow is not None and any(_family_launches(blow, bins, bouts)):
                        return True
        except (NNSymError, *_SKIP):
            continue
    return False


@functools.lru_cache(maxsize=1)
def all_variants() -> tuple[Variant, ...]:
    """Every variant of the families with CUDA twins, sorted by name (names unique)."""
    found: dict[tuple[str, KernelSpec], Variant] = {}

    def add(opname: str, tag: str, launch: Launch,
            ptrs: Sequence[tuple[tuple[int, ...], str]]) -> None:
        key = (opname, launch.spec)
        if key not in found:
            found[key] = Variant(opname, tag, launch.spec, tuple(launch.ia), tuple(launch.fa),
                                 tuple(tuple(s) for s, _ in ptrs), tuple(t for _, t in ptrs),
                                 int(launch.workspace))

    for name in sorted(REGISTRY):
        op = REGISTRY[name]
        if not op.examples or not _is_family_op(op):
            continue
        combos: list[tuple[Any, tuple[tuple[int, ...], ...], tuple[str, ...] | None]] = []
        if op.num_inputs(op.parse_params(op.examples[0].params)[0]) == 2:
            # first, so a variant's recorded launch is a large one where possible
            combos += [(op.examples[0].params, pair, None) for pair in BINARY_SHAPES]
        combos += [(ex.params, tuple(tuple(s) for s in ex.shapes), ex.in_dtypes)
                   for ex in op.examples]
        for raw, shapes, in_dtypes in combos:
            try:
                params, _ = op.parse_params(raw)
                grad = _grad_nodes(op, params, len(shapes)) if op.grad is not None else None
            except (NNSymError, *_SKIP):
                continue
            tag = _tag(params)
            # an example with per-input dtypes (quantized data with float32 ranges) runs as given
            sweeps = ([(in_dtypes[0], list(in_dtypes))] if in_dtypes
                      else [(dt, [dt] * len(shapes)) for dt in DTYPES])
            for dt, in_dts in sweeps:
                try:
                    out_s, out_t = infer_one(op, params, shapes, [np.dtype(t) for t in in_dts],
                                             "fwd")
                except (NNSymError, *_SKIP):
                    continue
                ins = [(s, t) for s, t in zip(shapes, in_dts)]
                outs = [(tuple(s), np.dtype(t).name) for s, t in zip(out_s, out_t)]
                back: list[Any] = []
                if grad is not None:
                    try:
                        back = list(_backward_calls(op, params, shapes, dt, grad))
                    except (NNSymError, *_SKIP):
                        back = []
                for req in REQS:
                    for is_train in (False, True):
                        try:
                            low = _lower(op, params, ins, outs, req, is_train)
                        except (NNSymError, *_SKIP):
                            low = None
                        if low is not None:
                            for ln, ptrs in _family_launches(low, ins, outs):
                                add(op.name, tag, ln, ptrs)
                    for bop, bp, bins, bouts in back:
                        for is_train in (False, True):  # BatchNorm's training gradient
                            try:
                                blow = _lower(bop, bp, bins, bouts, req, is_train)
                            except (NNSymError, *_SKIP):
                                continue
                            if blow is None:
                                continue
                            for ln, ptrs in _family_launches(blow, bins, bouts):
                                add(bop.name, _tag(bp), ln, ptrs)
    for v in fused_variants():
        found[(v.op + v.tag, v.spec)] = v
    return _named(found.values())


# Chains the fusion pass turns into one kernel each (nnsym/passes/fuse.py), as
# (tag, input shapes, [(operator, parameters, operand indices)]): operand k below the input
# count is input k, else the result of step k - inputs.
FusedChain = tuple[str, tuple[tuple[int, ...], ...],
                   tuple[tuple[str, dict[str, Any], tuple[int, ...]], ...]]
FUSED_CHAINS: tuple[FusedChain, ...] = (
    ("map", ((200,), (200,)),
     (("relu", {}, (0,)), ("_mul_scalar", {"scalar": 0.5}, (2,)), ("tanh", {}, (1,)),
      ("elemwise_add", {}, (3, 4)),
      ("_contrib_quadratic", {"a": 1.5, "b": -0.5, "c": 0.25}, (5,)))),
    ("params", ((200,), (200,)),
     (("broadcast_mul", {}, (0, 1)), ("clip", {"a_min": -1.0, "a_max": 1.0}, (2,)),
      ("_maximum", {}, (3, 0)), ("_rminus_scalar", {"scalar": 2.0}, (4,)))),
    ("backward", ((200,), (200,)),
     (("_backward_sigmoid", {}, (0, 1)), ("_mul_scalar", {"scalar": -1.5}, (2,)),
      ("elemwise_mul", {}, (3, 1)))),
    ("broadcast", ((4, 7, 9), (1, 7, 1), (4, 1, 9)),
     (("sigmoid", {}, (0,)), ("broadcast_add", {}, (3, 1)), ("broadcast_mul", {}, (4, 2)),
      ("negative", {}, (5,)))),
)
FUSED_DTYPES = ("float32", "float64", "float16", "int32")


def fused_variants() -> list[Variant]:
    """The fused kernels of ``FUSED_CHAINS``, in every dtype the chain's operators take and
    both write modes."""
    out: list[Variant] = []
    for tag, shapes, chain in FUSED_CHAINS:
        nin = len(shapes)
        for dt in FUSED_DTYPES:
            xs = [variable(f"in{i}") for i in range(nin)]
            ents: list[Entry] = [Entry(x) for x in xs]
            for k, (opname, raw, operands) in enumerate(chain):
                op = get_op(opname)
                params, _ = op.parse_params(raw)
                ents.append(Entry(Node(op, f"s{k}", params, tuple(ents[j] for j in operands))))
            bare = Graph((ents[-1],))
            seed_s: list[Any] = [None] * bare.index.num_entries
            seed_t: list[Any] = [None] * bare.index.num_entries
            for x, shp in zip(xs, shapes):
                eid = bare.index.row_ptr[bare.index.node_id(x)]
                seed_s[eid], seed_t[eid] = shp, np.dtype(dt)
            g = Graph(bare.outputs, GraphAttrs(shape=tuple(seed_s), dtype=tuple(seed_t)))
            try:
                g = run_passes(g, [infer_shape, infer_type, infer_storage_type,
                                   fuse_elementwise()])
            except (NNSymError, *_SKIP):
                continue
            idx = g.index
            fused = [nid for nid, nd in enumerate(idx.nodes)
                     if nd.op is not None and nd.op.name == "_fused_elemwise"]
            if len(fused) != 1 or len(idx.nodes) != nin + 1:
                continue  # not one kernel for the whole chain
            node = idx.nodes[fused[0]]
            assert node.op is not None and g.attrs.dtype is not None
            assert g.attrs.shape is not None
            ins = idx.input_entries[fused[0]]
            in_s = [tuple(int(d or 0) for d in g.attrs.shape[e]) for e in ins]  # type: ignore[union-attr]
            in_dt = [np.dtype(g.attrs.dtype[e]) for e in ins]
            o = idx.row_ptr[fused[0]]
            out_s = tuple(int(d or 0) for d in g.attrs.shape[o])  # type: ignore[union-attr]
            out_dt = np.dtype(g.attrs.dtype[o])
            for req in REQS:
                try:
                    nl = lower(node.op, node.params, in_s, in_dt, [out_s], [out_dt], [req])
                except (NNSymError, *_SKIP):
                    continue
                for ln in nl.lowered.launches:
                    out.append(Variant("_fused_elemwise", tag, ln.spec, tuple(ln.ia),
                                       tuple(ln.fa), (*in_s, out_s),
                                       tuple(np.dtype(t).name for t in [*in_dt, out_dt])))
    return out


def _named(vs: Iterable[Variant]) -> tuple[Variant, ...]:
    """Give every variant a unique C identifier from operator, dtypes, req and mode; where
    those coincide (an expression chosen by a parameter: Activation's act_type) the choice
    parameters' values join the name, and where even they do, the spec's hash."""
    by_base: dict[str, list[Variant]] = {}
    for v in vs:
        by_base.setdefault(v.base_name(), []).append(v)
    out: list[Variant] = []
    for base, group in by_base.items():
        if len(group) == 1:
            out.append(_with_name(group[0], base))
            continue
        by_tag: dict[str, list[Variant]] = {}
        for v in group:
            by_tag.setdefault(v.base_name(with_tag=True), []).append(v)
        for tagged, same in by_tag.items():
            for v in same:
                out.append(_with_name(v, tagged if len(same) == 1
                                      else f"{tagged}_{v.spec.name[4:12]}"))
    out.sort(key=lambda v: v.name)
    return tuple(out)


def _with_name(v: Variant, name: str) -> Variant:
    assert _IDENT.match(name), name
    return Variant(v.op, v.tag, v.spec, v.ia, v.fa, v.ptr_shapes, v.ptr_dtypes, v.workspace,
                   name)


def variants(op: str | None = None, family: str | None = None) -> list[Variant]:
    """The variants (of one operator, canonical name or alias; of one family)."""
    vs: Iterable[Variant] = all_variants()
    if op is not None:
        canonical = get_op(op).name
        vs = [v for v in vs if v.op == canonical]
    if family is not None:
        vs = [v for v in vs if v.family == family]
    return list(vs)


# ---------------------------------------------------------------------------------------------
# Rendering


def render_kernel(v: Variant, target: str, name: str | None = None) -> str:
    """The kernel of a variant alone (``target`` c or cuda), named ``name`` (default its own)."""
    kname = name or v.name
    if target == "c":
        return C_ENV.get_template(v.spec.template).render(name=kname, **v.ctx)
    if target == "cuda":
        return render_spec(v.spec, kname)
    raise ValueError(f"target must be one of {TARGETS}, not {target!r}")


def prologue(target: str) -> str:
    if target == "c":
        return c_prologue()
    if target == "cuda":
        return cuda_prologue()
    raise ValueError(f"target must be one of {TARGETS}, not {target!r}")


def header(v: Variant, target: str) -> str:
    return f"/* nnsym {target} kernel {v.name}: {v.describe()} */\n"


def render_source(v: Variant, target: str) -> str:
    """A self-contained file: a comment naming the variant, the prologue, the kernel."""
    return "\n".join([header(v, target), prologue(target), render_kernel(v, target)])


def render_unit(vs: Sequence[Variant], target: str) -> str:
    """Several kernels in one translation unit (one prologue)."""
    parts = [prologue(target)]
    for v in vs:
        parts.append(header(v, target))
        parts.append(render_kernel(v, target))
    return "\n".join(parts)


def suffix(target: str) -> str:
    return {"c": ".c", "cuda": ".cu"}[target]


# ---------------------------------------------------------------------------------------------
# nvcc compile check (no GPU needed)

ARCHS = ("sm_80", "sm_90")
CHECK_FORMAT = "cuda-check-v2"


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str:
    cc = nvcc()
    if cc is None:
        raise FileNotFoundError("nvcc is not on PATH")
    r = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
    return f"{cc}|{r.stdout.strip()}"


@dataclass(frozen=True)
class CheckResult:
    """One nvcc run (or cache hit) over a translation unit of kernels for one arch."""
    arch: str
    names: tuple[str, ...]
    ok: bool
    cached: bool
    seconds: float
    log: str = ""


def unique_specs(vs: Iterable[Variant]) -> list[Variant]:
    """One variant per distinct kernel spec (operators sharing an expression share kernels)."""
    seen: set[KernelSpec] = set()
    out = []
    for v in vs:
        if v.spec not in seen:
            seen.add(v.spec)
            out.append(v)
    return out


def covering(vs: Iterable[Variant], always: Iterable[str] = ()) -> list[Variant]:
    """A deterministic subset of the distinct kernels of ``vs`` for quick checks (about a sixth
    of them): every (family, template, expression) once, and every (family, template, input
    and output dtype, req, binary mode, broadcast form, algorithm) once; plus the variants
    named in ``always``."""
    keep = set(always)
    keys: set[tuple[str, ...]] = set()
    exprs: set[tuple[str, ...]] = set()
    out = []
    for v in sorted(unique_specs(vs), key=lambda v: v.name):
        tpl = v.spec.template
        k = (v.family, tpl, v.in_dtype, v.out_dtype, v.req, str(v.mode),
             str(v.ctx.get("inner")), str(v.ctx.get("algo")))
        e = (v.family, tpl, str(v.mode), v.expr)
        if k not in keys or e not in exprs or v.name in keep:
            keys.add(k)
            exprs.add(e)
            out.append(v)
    return out


def nvcc_check(vs: Sequence[Variant], archs: Sequence[str] = ARCHS, mode: str = "ptx",
               chunk: int = 128, jobs: int | None = None,
               cache_dir: Path | None = None) -> list[CheckResult]:
    """Compile the CUDA kernels of ``vs`` (one per distinct spec) with nvcc for every arch,
    ``chunk`` kernels per translation unit, ``jobs`` nvcc processes at a time. ``mode``:
    ``ptx`` (front end and unoptimised NVVM: every language and type error) or ``cubin``
    (also ptxas, register allocation: ~25-30 ms a kernel). Successful units are remembered
    under the cache directory, keyed by source, nvcc version, arch, mode and flags."""
    cc = nvcc()
    if cc is None:
        raise FileNotFoundError("nvcc is not on PATH")
    if mode not in ("ptx", "cubin"):
        raise ValueError(f"mode must be ptx or cubin, not {mode!r}")
    todo = sorted(unique_specs(vs), key=lambda v: v.name)
    units = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
    root = (cache_dir or cache_root()) / CHECK_FORMAT
    version = nvcc_version()

    def run(unit: list[Variant], arch: str) -> CheckResult:
        source = render_unit(unit, "cuda")
        names = tuple(v.name for v in unit)
        key = cache_key(kind="nvcc-check", source=source, nvcc=version, arch=arch, mode=mode,
                        flags=[*NVCC_FLAGS, *PTX_CHECK_FLAGS])
        marker = root / key[:2] / f"{key}.ok"
        if marker.is_file():
            return CheckResult(arch, names, True, True, 0.0)
        t0 = time.perf_counter()
        ok, log = nvcc_compile(source, arch, mode)
        dt = time.perf_counter() - t0
        if not ok:
            return CheckResult(arch, names, False, False, dt, log)
        marker.parent.mkdir(parents=True, exist_ok=True)
        # atomic: a reader sees a whole marker or none
        fileio.write_text(marker, f"{version}\n{arch} {mode} {len(names)} kernels {dt:.2f} s\n")
        return CheckResult(arch, names, True, False, dt)

    n = jobs or max(1, min(os.cpu_count() or 1, 8))
    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(run, u, a) for u in units for a in archs]
        return [f.result() for f in futures]
