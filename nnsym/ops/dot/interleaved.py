"""MXNet's interleaved multi-head attention products (contrib, from its transformer support):
batched GEMMs over strided views of the projections, with no reshape or transpose copies.

Layouts (L: sequence, B: batch, H: heads, D: head size, P = H * D): self-attention takes
``queries_keys_values`` (L, B, 3P) holding per head [q(D), k(D), v(D)]; encoder-decoder
attention takes ``queries`` (Lq, B, P) and ``keys_values`` (Lk, B, 2P) holding per head
[k(D), v(D)]. The scores are (B*H, Lq, Lk) = q k^T / sqrt(D); the attended values are
(Lq, B, P). Every product is a launch of ``dot/interleaved_gemm.c.j2`` (BLAS on the CPU)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

Array = np.ndarray
FLOAT_DTYPES = ("float16", "float32", "float64")
View = tuple[int, int, int]  # element offset, stride per batch item, stride per head


@dataclass(frozen=True, kw_only=True)
class InterleavedParams(Params):
    heads: int = field(lower=1, doc="Number of attention heads.")


def _gemm(call: KernelCall, req: str, slots: tuple[int, int, int], *, ta: bool, tb: bool,
          mnk: tuple[int, int, int], ld: tuple[int, int, int], a: View, b: View, c: View,
          batch: int, alpha: float = 1.0) -> Launch:
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"the interleaved attention products take {FLOAT_DTYPES}, not {dt}")
    spec = KernelSpec.make("dot/interleaved_gemm.c.j2", dtype=dt, req=req, ta=ta, tb=tb,
                           slot_a=slots[0], slot_b=slots[1], slot_c=slots[2])
    ia = (batch, call.params.heads, *mnk, *ld, *a, *b, *c)
    return Launch(spec, ia, (alpha,))


def _launches(*items: tuple[str, Callable[[str], Launch]]) -> Lowered:
    """The launches whose write mode is not 'null' (an output nobody reads)."""
    return Lowered(tuple(make(req) for req, make in items if req != "null"))


def _heads(p: InterleavedParams, proj: int | None, what: str) -> None:
    if proj is not None and proj % p.heads:
        raise RuleError(f"{what} has {proj} features, not a multiple of heads={p.heads}")


def _check3(name: str, s: tuple | None) -> None:
    if s is not None and len(s) != 3:
        raise RuleError(f"{name} has shape {shape_str(s)}; it must be 3-D")


# ---------------------------------------------------------------------------------------------
# numpy references (float64, cast back)


def _split(x: Array, parts: int, heads: int) -> Array:
    """(L, B, parts*P) -> (parts, B, H, L, D)."""
    n, b, f = x.shape
    d = f // parts // heads
    v: Array = np.asarray(x, np.float64).reshape(n, b, heads, parts, d)
    return np.asarray(v.transpose(3, 1, 2, 0, 4))


def _merge(v: Array) -> Array:
    """(B, H, L, D) -> (L, B, H*D)."""
    b, h, n, d = v.shape
    return np.asarray(v.transpose(2, 0, 1, 3)).reshape(n, b, h * d)


def selfatt_qk_reference(p: InterleavedParams, qkv: Array) -> Array:
    q, k, _ = _split(qkv, 3, p.heads)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    return np.asarray(s.reshape(-1, *s.shape[2:]), qkv.dtype)


def selfatt_valatt_reference(p: InterleavedParams, qkv: Array, att: Array) -> Array:
    _, _, v = _split(qkv, 3, p.heads)
    a = att.astype(np.float64).reshape(v.shape[0], p.heads, *att.shape[1:])
    return _merge(a @ v).astype(qkv.dtype)


def encdec_qk_reference(p: InterleavedParams, q: Array, kv: Array) -> Array:
    (qq,) = _split(q, 1, p.heads)
    k, _ = _split(kv, 2, p.heads)
    s = qq @ k.transpose(0, 1, 3, 2) / math.sqrt(qq.shape[-1])
    return np.asarray(s.reshape(-1, *s.shape[2:]), q.dtype)


def encdec_valatt_reference(p: InterleavedParams, kv: Array, att: Array) -> Array:
    _, v = _split(kv, 2, p.heads)
    a = att.astype(np.float64).reshape(v.shape[0], p.heads, *att.shape[1:])
    return _merge(a @ v).astype(kv.dtype)


# ---------------------------------------------------------------------------------------------
# shape rules


def selfatt_qk_shape(p: InterleavedParams, ins: list, outs: list) -> tuple[list, list]:
    qkv = ins[0]
    _check3("queries_keys_values", qkv)
    if qkv is None or None in qkv:
        return list(ins), list(outs)
    n, b, f = qkv
    if f % 3:
        raise RuleError(f"queries_keys_values has {f} features, not 3 * projection size")
    _heads(p, f // 3, "each of q, k, v")
    return [qkv], [(b * p.heads, n, n)]


def selfatt_valatt_shape(p: InterleavedParams, ins: list, outs: list) -> tuple[list, list]:
    qkv, att = ins
    _check3("queries_keys_values", qkv)
    _check3("attention", att)
    if qkv is None or None in qkv:
        return list(ins), list(outs)
    n, b, f = qkv
    if f % 3:
        raise RuleError(f"queries_keys_values has {f} features, not 3 * projection size")
    _heads(p, f // 3, "each of q, k, v")
    want = (b * p.heads, n, n)
    if att is not None and att != want:
        raise RuleError(f"attention has shape {shape_str(att)}; it must be {want} "
                        "(batch * heads, seq, seq)")
    return [qkv, want], [(n, b, f // 3)]


def encdec_qk_shape(p: InterleavedParams, ins: list, outs: list) -> tuple[list, list]:
    q, kv = ins
    _check3("queries", q)
    _check3("keys_values", kv)
    if q is None or kv is None or None in q or None in kv:
        return list(ins), list(outs)
    if kv[2] != 2 * q[2] or kv[1] != q[1]:
        raise RuleError(f"keys_values has shape {shape_str(kv)}; with queries "
                        f"{shape_str(q)} it must be (seq, {q[1]}, {2 * q[2]})")
    _heads(p, q[2], "queries")
    return [q, kv], [(q[1] * p.heads, q[0], kv[0])]


def encdec_valatt_shape(p: InterleavedParams, ins: list, outs: list) -> tuple[list, list]:
    kv, att = ins
    _check3("keys_values", kv)
    _check3("attention", att)
    if kv is None or att is None or None in kv or None in att:
        return list(ins), list(outs)
    n, b, f = kv
    if f % 2:
        raise RuleError(f"keys_values has {f} features, not 2 * projection size")
    _heads(p, f // 2, "each of k, v")
    if att[0] != b * p.heads or att[2] != n:
        raise RuleError(f"attention has shape {shape_str(att)}; it must be "
                        f"({b * p.heads}, query seq, {n})")
    return [kv, att], [(att[1], b, f // 2)]


# ---------------------------------------------------------------------------------------------
# lowerings: p lists are the node's inputs, then its outputs


def _self_dims(call: KernelCall, qkv: int = 0) -> tuple[int, int, int, int, int]:
    n, b, f = call.in_shapes[qkv]
    proj = f // 3
    return n, b, proj, proj // call.params.heads, b * call.params.heads


def selfatt_qk_lowering(call: KernelCall) -> Lowered:
    n, b, proj, d, bh = _self_dims(call)
    h = call.params.heads
    return _launches((call.req, lambda r: _gemm(
        call, r, (0, 0, 1), ta=False, tb=True, mnk=(n, n, d), ld=(3 * b * proj, 3 * b * proj, n),
        a=(0, 3 * proj, 3 * d), b=(d, 3 * proj, 3 * d), c=(0, h * n * n, n * n), batch=bh,
        alpha=1 / math.sqrt(d))))


def selfatt_qk_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, qkv, d_qkv]."""
    n, b, proj, d, bh = _self_dims(call, 1)
    h, r0 = call.params.heads, call.out_req(0)
    lq, sc = 3 * b * proj, 1 / math.sqrt(d)
    g = (0, h * n * n, n * n)
    return _launches(
        (r0, lambda r: _gemm(call, r, (0, 1, 2), ta=False, tb=False, mnk=(n, d, n),
                             ld=(n, lq, lq), a=g, b=(d, 3 * proj, 3 * d),
                             c=(0, 3 * proj, 3 * d), batch=bh, alpha=sc)),
        (r0, lambda r: _gemm(call, r, (0, 1, 2), ta=True, tb=False, mnk=(n, d, n),
                             ld=(n, lq, lq), a=g, b=(0, 3 * proj, 3 * d),
                             c=(d, 3 * proj, 3 * d), batch=bh, alpha=sc)),
        (r0, lambda r: _gemm(call, r, (0, 1, 2), ta=False, tb=False, mnk=(n, d, 0),
                             ld=(1, 1, lq), a=g, b=g, c=(2 * d, 3 * proj, 3 * d), batch=bh)),
    )


def selfatt_valatt_lowering(call: KernelCall) -> Lowered:
    n, b, proj, d, bh = _self_dims(call)
    h = call.params.heads
    return _launches((call.req, lambda r: _gemm(
        call, r, (1, 0, 2), ta=False, tb=False, mnk=(n, d, n), ld=(n, 3 * b * proj, b * proj),
        a=(0, h * n * n, n * n), b=(2 * d, 3 * proj, 3 * d), c=(0, proj, d), batch=bh)))


def selfatt_valatt_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, qkv, attention, d_qkv, d_attention]."""
    n, b, proj, d, bh = _self_dims(call, 1)
    h, r0, r1 = call.params.heads, call.out_req(0), call.out_req(1)
    lq, lg = 3 * b * proj, b * proj
    att = (0, h * n * n, n * n)
    g = (0, proj, d)
    return _launches(
        (r1, lambda r: _gemm(call, r, (0, 1, 4), ta=False, tb=True, mnk=(n, n, d),
                             ld=(lg, lq, n), a=g, b=(2 * d, 3 * proj, 3 * d), c=att, batch=bh)),
        (r0, lambda r: _gemm(call, r, (2, 0, 3), ta=True, tb=False, mnk=(n, d, n),
                             ld=(n, lg, lq), a=att, b=g, c=(2 * d, 3 * proj, 3 * d), batch=bh)),
        (r0, lambda r: _gemm(call, r, (0, 0, 3), ta=False, tb=False, mnk=(n, 2 * d, 0),
                             ld=(1, 1, lq), a=g, b=g, c=(0, 3 * proj, 3 * d), batch=bh)),
    )


def _encdec_dims(call: KernelCall, kv: int) -> tuple[int, int, int, int, int]:
    nk, b, f = call.in_shapes[kv]
    proj = f // 2
    return nk, b, proj, proj // call.params.heads, b * call.params.heads


def encdec_qk_lowering(call: KernelCall) -> Lowered:
    nk, b, proj, d, bh = _encdec_dims(call, 1)
    nq, h = call.in_shapes[0][0], call.params.heads
    return _launches((call.req, lambda r: _gemm(
        call, r, (0, 1, 2), ta=False, tb=True, mnk=(nq, nk, d), ld=(b * proj, 2 * b * proj, nk),
        a=(0, proj, d), b=(0, 2 * proj, 2 * d), c=(0, h * nq * nk, nq * nk), batch=bh,
        alpha=1 / math.sqrt(d))))


def encdec_qk_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, queries, keys_values, d_queries, d_keys_values]."""
    nk, b, proj, d, bh = _encdec_dims(call, 2)
    nq, h, r0, r1 = call.in_shapes[1][0], call.params.heads, call.out_req(0), call.out_req(1)
    lq, lkv, sc = b * proj, 2 * b * proj, 1 / math.sqrt(d)
    g = (0, h * nq * nk, nq * nk)
    return _launches(
        (r0, lambda r: _gemm(call, r, (0, 2, 3), ta=False, tb=False, mnk=(nq, d, nk),
                             ld=(nk, lkv, lq), a=g, b=(0, 2 * proj, 2 * d), c=(0, proj, d),
                             batch=bh, alpha=sc)),
        (r1, lambda r: _gemm(call, r, (0, 1, 4), ta=True, tb=False, mnk=(nk, d, nq),
                             ld=(nk, lq, lkv), a=g, b=(0, proj, d), c=(0, 2 * proj, 2 * d),
                             batch=bh, alpha=sc)),
        (r1, lambda r: _gemm(call, r, (0, 0, 4), ta=False, tb=False, mnk=(nk, d, 0),
                             ld=(1, 1, lkv), a=g, b=g, c=(d, 2 * proj, 2 * d), batch=bh)),
    )


def encdec_valatt_lowering(call: KernelCall) -> Lowered:
    nk, b, proj, d, bh = _encdec_dims(call, 0)
    nq, h = call.in_shapes[1][1], call.params.heads
    return _launches((call.req, lambda r: _gemm(
        call, r, (1, 0, 2), ta=False, tb=False, mnk=(nq, d, nk), ld=(nk, 2 * b * proj, b * proj),
        a=(0, h * nq * nk, nq * nk), b=(d, 2 * proj, 2 * d), c=(0, proj, d), batch=bh)))


def encdec_valatt_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, keys_values, attention, d_keys_values, d_attention]."""
    nk, b, proj, d, bh = _encdec_dims(call, 1)
    nq, h, r0, r1 = call.in_shapes[2][1], call.params.heads, call.out_req(0), call.out_req(1)
    lg, lkv = b * proj, 2 * b * proj
    att = (0, h * nq * nk, nq * nk)
    g = (0, proj, d)
    return _launches(
        (r1, lambda r: _gemm(call, r, (0, 1, 4), ta=False, tb=True, mnk=(nq, nk, d),
                             ld=(lg, lkv, nk), a=g, b=(d, 2 * proj, 2 * d), c=att, batch=bh)),
        (r0, lambda r: _gemm(call, r, (2, 0, 3), ta=True, tb=False, mnk=(nk, d, nq),
                             ld=(nk, lg, lkv), a=att, b=g, c=(d, 2 * proj, 2 * d), batch=bh)),
        (r0, lambda r: _gemm(call, r, (0, 0, 3), ta=False, tb=False, mnk=(nk, d, 0),
                             ld=(1, 1, lkv), a=g, b=g, c=(0, 2 * proj, 2 * d), batch=bh)),
    )


# ---------------------------------------------------------------------------------------------
# registration


def _backward(name: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
              lower: Callable[[KernelCall], Lowered]) -> OpDef:
    n = len(outputs)
    return register(OpDef(
        name=f"_backward_interleaved_matmul_{name}",
        params=InterleavedParams,
        inputs=("ograd", *inputs),
        outputs=outputs,
        infer_shape=lambda p, ins, outs: (list(ins), list(ins[1:1 + n])),
        infer_type=lambda p, ins, outs: (list(ins), [ins[0]] * n),
        kernels={DENSE: Kernel(lower)},
        differentiable=False,
        doc=f"Gradient of interleaved_matmul_{name}.",
    ))


def _grad(bop: OpDef) -> Callable[[Node, list[Entry | None]], list[Entry | None]]:
    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        b = backward_node(bop, node, [g, *node.inputs])
        return [Entry(b, i) for i in range(len(node.inputs))]

    return grad


_SPECS = (
    ("selfatt_qk", ("queries_keys_values",), selfatt_qk_shape, selfatt_qk_reference,
     selfatt_qk_lowering, selfatt_qk_backward_lowering,
     "Self-attention scores q k^T / sqrt(D) per head: (L, B, 3P) -> (B*H, L, L).",
     (Example(((4, 2, 12),), {"heads": 2}), Example(((3, 1, 9),), {"heads": 3}, dtype="float64"),
      Example(((4, 2, 12),), {"heads": 1}, dtype="float16"))),
    ("selfatt_valatt", ("queries_keys_values", "attention"), selfatt_valatt_shape,
     selfatt_valatt_reference, selfatt_valatt_lowering, selfatt_valatt_backward_lowering,
     "Self-attention output attention . v per head: -> (L, B, P).",
     (Example(((4, 2, 12), (4, 4, 4)), {"heads": 2}),
      Example(((3, 1, 9), (3, 3, 3)), {"heads": 3}, dtype="float64"))),
    ("encdec_qk", ("queries", "keys_values"), encdec_qk_shape, encdec_qk_reference,
     encdec_qk_lowering, encdec_qk_backward_lowering,
     "Encoder-decoder scores q k^T / sqrt(D) per head: -> (B*H, Lq, Lk).",
     (Example(((3, 2, 4), (5, 2, 8)), {"heads": 2}),
      Example(((2, 1, 6), (3, 1, 12)), {"heads": 3}, dtype="float64"))),
    ("encdec_valatt", ("keys_values", "attention"), encdec_valatt_shape,
     encdec_valatt_reference, encdec_valatt_lowering, encdec_valatt_backward_lowering,
     "Encoder-decoder output attention . v per head: -> (Lq, B, P).",
     (Example(((5, 2, 8), (4, 3, 5)), {"heads": 2}),
      Example(((3, 1, 12), (3, 2, 3)), {"heads": 3}, dtype="float64"))),
)

INTERLEAVED: dict[str, OpDef] = {}
for _name, _ins, _shape, _ref, _low, _blow, _doc, _exs in _SPECS:
    _bop = _backward(_name, _ins, tuple(f"{i}_grad" for i in _ins), _blow)
    INTERLEAVED[_name] = register(OpDef(
        name=f"_contrib_interleaved_matmul_{_name}",
        params=InterleavedParams,
        inputs=_ins,
        infer_shape=_shape,
        infer_type=same_dtype,
        reference=_ref,
        kernels={DENSE: Kernel(_low)},
        grad=_grad(_bop),
        doc=_doc,
        examples=_exs,
        bad_params=({}, {"heads": 0}, {"heads": 2, "scale": 1.0}),
    ))
