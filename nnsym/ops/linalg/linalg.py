"""The ``_linalg_*`` operators: products, triangular products and solves, Cholesky, LQ and
symmetric eigen factorizations, inverse and determinants, diagonal and triangle packing.

Every operator works on the trailing two axes (``gemm``/``gemm2``: the rows at ``axis``, the
columns last) and batches over the others. The kernels are generated C loops, one batch item per
iteration, computing in double on a per-item workspace (``linalg.c.j2``, routines in
``linalg_body.j2``; the CUDA twin runs one item per thread): no LAPACK or BLAS is called, which
keeps the C and CUDA results equal and suits the small matrices these operators batch over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node, zeros_like
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

FLOAT_DTYPES = ("float32", "float64")


# ---------------------------------------------------------------------------------------------
# Parameters


@dataclass(frozen=True, kw_only=True)
class GemmParams(Params):
    transpose_a: bool = field(default=False, doc="Multiply with the transpose of A.")
    transpose_b: bool = field(default=False, doc="Multiply with the transpose of B.")
    alpha: float = field(default=1.0, doc="Scalar factor of the product.")
    beta: float = field(default=1.0, doc="Scalar factor of C.")
    axis: int = field(default=-2, doc="Axis of the matrix rows (the columns are the last axis).")


@dataclass(frozen=True, kw_only=True)
class Gemm2Params(Params):
    transpose_a: bool = field(default=False, doc="Multiply with the transpose of A.")
    transpose_b: bool = field(default=False, doc="Multiply with the transpose of B.")
    alpha: float = field(default=1.0, doc="Scalar factor of the product.")
    axis: int = field(default=-2, doc="Axis of the matrix rows (the columns are the last axis).")


@dataclass(frozen=True, kw_only=True)
class LowerParams(Params):
    lower: bool = field(default=True, doc="Use the lower triangle (else the upper).")


@dataclass(frozen=True, kw_only=True)
class TriParams(Params):
    transpose: bool = field(default=False, doc="Use the transpose of the triangular matrix A.")
    rightside: bool = field(default=False, doc="Multiply (solve) with A on the right of B.")
    lower: bool = field(default=True, doc="A is lower triangular (else upper).")
    alpha: float = field(default=1.0, doc="Scalar factor of the result.")


@dataclass(frozen=True, kw_only=True)
class OffsetParams(Params):
    offset: int = field(default=0, doc="Diagonal offset (positive: above the main diagonal).")


@dataclass(frozen=True, kw_only=True)
class TrianParams(Params):
    offset: int = field(default=0, doc="Diagonal offset (positive: above the main diagonal).")
    lower: bool = field(
        default=True, doc="Lower triangle (else upper); only relevant when offset is 0."
    )


@dataclass(frozen=True, kw_only=True)
class SyrkParams(Params):
    transpose: bool = field(default=False, doc="Compute alpha * A^T A (else alpha * A A^T).")
    alpha: float = field(default=1.0, doc="Scalar factor of the product.")


# ---------------------------------------------------------------------------------------------
# Shapes


def _known(*shapes: Any) -> bool:
    return all(s is not None and all(d is not None for d in s) for s in shapes)


def _matrices(s: tuple, what: str = "A") -> tuple[tuple, int, int]:
    if len(s) < 2:
        raise RuleError(f"{what} must have at least 2 dimensions, not shape {shape_str(s)}")
    return tuple(s[:-2]), s[-2], s[-1]


def _square(s: tuple, what: str = "A") -> tuple[tuple, int]:
    batch, r, c = _matrices(s, what)
    if r != c:
        raise RuleError(f"{what} must hold square matrices, not shape {shape_str(s)}")
    return batch, r


def _same_batch(batch: tuple, s: tuple, what: str) -> None:
    if tuple(s[:-2]) != batch:
        raise RuleError(f"{what}'s batch axes {shape_str(s[:-2])} differ from {shape_str(batch)}")


def _gemm_dims(s: tuple, axis: int) -> tuple[tuple, int, int, int]:
    """(batch dims, rows, cols, normalized row axis) of a gemm operand."""
    if len(s) < 2:
        raise RuleError(f"gemm operands need at least 2 dimensions, not shape {shape_str(s)}")
    a = axis % len(s) if -len(s) <= axis < len(s) else None
    if a is None or a == len(s) - 1:
        raise RuleError(f"axis {axis} is not a row axis for shape {shape_str(s)}")
    batch = tuple(d for i, d in enumerate(s) if i not in (a, len(s) - 1))
    return batch, s[a], s[-1], a


def _gemm_out(p: Any, a: tuple, b: tuple) -> tuple:
    ba, ra, ca, ax = _gemm_dims(a, p.axis)
    bb, rb, cb, _ = _gemm_dims(b, p.axis)
    if len(a) != len(b) or ba != bb:
        raise RuleError(f"A {shape_str(a)} and B {shape_str(b)} differ in their batch axes")
    m, k = (ca, ra) if p.transpose_a else (ra, ca)
    k2, n = (cb, rb) if p.transpose_b else (rb, cb)
    if k != k2:
        raise RuleError(f"the contracted dimensions differ: {k} (A) vs {k2} (B)")
    out = list(a)
    out[ax], out[-1] = m, n
    return tuple(out)


def gemm_shape(p: GemmParams, ins: list, outs: list) -> tuple[list, list]:
    a, b, c = ins
    if not _known(a, b):
        return list(ins), [outs[0] if outs[0] is not None else c]
    out = _gemm_out(p, a, b)
    if c is not None and _known(c) and tuple(c) != out:
        raise RuleError(f"C has shape {shape_str(c)}, the product {shape_str(out)}")
    return [a, b, out], [out]


def gemm2_shape(p: Gemm2Params, ins: list, outs: list) -> tuple[list, list]:
    a, b = ins
    if not _known(a, b):
        return list(ins), list(outs)
    return [a, b], [_gemm_out(p, a, b)]


def _unary_shape(fn: Callable[[Any, tuple], Sequence[tuple]]) -> Callable[..., Any]:
    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        if not _known(ins[0]):
            return list(ins), list(outs)
        return [ins[0]], list(fn(p, tuple(ins[0])))

    return rule


def _square_same(p: Any, s: tuple) -> list[tuple]:
    _square(s)
    return [s]


def _square_scalar(p: Any, s: tuple) -> list[tuple]:
    batch, _ = _square(s)
    return [batch or (1,)]


def _tri_shape(p: TriParams, ins: list, outs: list) -> tuple[list, list]:
    a, b = ins
    if not _known(a, b):
        return list(ins), list(outs)
    batch, n = _square(a)
    _, br, bc = _matrices(b, "B")
    _same_batch(batch, b, "B")
    if (bc if p.rightside else br) != n:
        raise RuleError(f"B {shape_str(b)} does not fit the {n} x {n} matrices of A "
                        f"(rightside={p.rightside})")
    return [a, b], [b]


def _diag_len(n: int, offset: int) -> int:
    if abs(offset) >= n:
        raise RuleError(f"offset {offset} is out of range for {n} x {n} matrices")
    return n - abs(offset)


def _extractdiag(p: OffsetParams, s: tuple) -> list[tuple]:
    batch, n = _square(s)
    return [(*batch, _diag_len(n, p.offset))]


def _makediag(p: OffsetParams, s: tuple) -> list[tuple]:
    if len(s) < 1:
        raise RuleError("A must have at least 1 dimension")
    n = s[-1] + abs(p.offset)
    return [(*s[:-1], n, n)]


def _trian_len(n: int, offset: int) -> int:
    m = _diag_len(n, offset)
    return m * (m + 1) // 2


def _extracttrian(p: TrianParams, s: tuple) -> list[tuple]:
    batch, n = _square(s)
    return [(*batch, _trian_len(n, p.offset))]


def _maketrian(p: TrianParams, s: tuple) -> list[tuple]:
    if len(s) < 1:
        raise RuleError("A must have at least 1 dimension")
    length = s[-1]
    m = int((np.sqrt(8 * length + 1) - 1) / 2 + 0.5)
    if m * (m + 1) // 2 != length:
        raise RuleError(f"{length} is not a triangular number m(m+1)/2")
    n = m + abs(p.offset)
    return [(*s[:-1], n, n)]


def _syrk(p: SyrkParams, s: tuple) -> list[tuple]:
    batch, r, c = _matrices(s)
    m = c if p.transpose else r
    return [(*batch, m, m)]


def _gelqf(p: Any, s: tuple) -> list[tuple]:
    batch, r, c = _matrices(s)
    if r > c:
        raise RuleError(f"gelqf needs rows <= columns, not shape {shape_str(s)}")
    return [s, (*batch, r, r)]


def _syevd(p: Any, s: tuple) -> list[tuple]:
    batch, n = _square(s)
    return [s, (*batch, n)]


def _slogdet(p: Any, s: tuple) -> list[tuple]:
    out = _square_scalar(p, s)[0]
    return [out, out]


# ---------------------------------------------------------------------------------------------
# Lowering: every pointer is a batch of R x C matrices (vectors 1 x n, scalars 1 x 1)


def _strides(s: Sequence[int]) -> list[int]:
    return [size(s[i + 1:]) for i in range(len(s))]


def _view(s: tuple, nb: int, row_axis: int | None = None) -> tuple[int, ...]:
    """(rows, cols, row stride, col stride, batch strides...) of one tensor whose first ``nb``
    axes (all but ``row_axis`` and the last, for gemm) are the batch."""
    st = _strides(s)
    if row_axis is not None and row_axis != len(s) - 2:
        bs = [st[i] for i in range(len(s)) if i not in (row_axis, len(s) - 1)]
        return (s[row_axis], s[-1], st[row_axis], 1, *bs)
    tail = len(s) - nb
    if tail == 2:
        r, c, rs = s[-2], s[-1], st[-2]
    elif tail == 1:
        r, c, rs = 1, s[-1], s[-1]
    else:
        r, c, rs = 1, 1, 1
    return (r, c, rs, 1, *st[:nb])


@dataclass(frozen=True)
class Plan:
    """How a linalg kernel sees a node: the routine, its flags and scalars, the batch, the row
    axis (gemm), which pointers it gets and the extra scratch doubles per item."""

    kind: str
    flags: tuple[int, int, int, int] = (0, 0, 0, 0)
    fa: tuple[float, ...] = ()
    batch: tuple[int, ...] = ()
    row_axis: int | None = None
    scratch: int = 0


def _launch(call: KernelCall, plan: Plan, nin: int) -> Lowered:
    dt = call.in_dtypes[0]
    if dt.name not in FLOAT_DTYPES:
        raise NoKernelError(f"the linalg operators have kernels for {FLOAT_DTYPES}, not {dt.name}")
    shapes = [*call.in_shapes, *call.out_shapes]
    nb = len(plan.batch)
    nbatch = size(plan.batch)
    if nbatch == 0 or any(size(s) == 0 for s in shapes):
        return Lowered()
    views: list[int] = []
    mats = 0
    for s in shapes:
        ra = None if plan.row_axis is None else plan.row_axis % len(s)
        v = _view(tuple(s), nb, ra)
        views.extend(v)
        mats += v[0] * v[1]
    w = mats + plan.scratch
    reqs = tuple(call.out_req(i) for i in range(len(call.out_shapes)))
    spec = KernelSpec.make("linalg/linalg.c.j2", dtype=dt.name, kind=plan.kind, nin=nin,
                           nout=len(call.out_shapes), reqs=reqs, flags=plan.flags)
    ia = (nbatch, nb, w, *plan.batch, *views)
    return Lowered((Launch(spec, ia, tuple(float(x) for x in plan.fa), workspace=8 * nbatch * w),))


def _batch(s: tuple) -> tuple[int, ...]:
    return tuple(s[:-2])


# ---------------------------------------------------------------------------------------------
# References (numpy, float64 inside)


def _f(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _tri(a: np.ndarray, lower: bool) -> np.ndarray:
    return np.tril(a) if lower else np.triu(a)


def _gemm_move(a: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(a, axis % a.ndim, -2)


def _gemm_ref(p: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> Any:
    x, y = _gemm_move(_f(a), p.axis), _gemm_move(_f(b), p.axis)
    ax = p.axis % a.ndim
    out = p.alpha * ((_t(x) if p.transpose_a else x) @ (_t(y) if p.transpose_b else y))
    if c is not None:
        out = out + p.beta * _gemm_move(_f(c), p.axis)
    return np.moveaxis(out, -2, ax).astype(a.dtype)


def _potrf_ref(p: LowerParams, a: np.ndarray) -> np.ndarray:
    x = _f(a)
    sym_ = np.tril(x) + _t(np.tril(x, -1)) if p.lower else np.triu(x) + _t(np.triu(x, 1))
    low = np.linalg.cholesky(sym_)
    return (low if p.lower else _t(low)).astype(a.dtype)


def _potri_ref(p: LowerParams, a: np.ndarray) -> np.ndarray:
    low = np.tril(_f(a)) if p.lower else _t(np.triu(_f(a)))
    return np.linalg.inv(low @ _t(low)).astype(a.dtype)


def _opa(p: TriParams, a: np.ndarray) -> np.ndarray:
    x = _tri(_f(a), p.lower)
    return _t(x) if p.transpose else x


def _trmm_ref(p: TriParams, a: np.ndarray, b: np.ndarray) -> Any:
    x = _opa(p, a)
    out = _f(b) @ x if p.rightside else x @ _f(b)
    return (p.alpha * out).astype(b.dtype)


def _trsm_ref(p: TriParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    xi = np.linalg.inv(_opa(p, a))
    out = _f(b) @ xi if p.rightside else xi @ _f(b)
    return (p.alpha * out).astype(b.dtype)


def _out_scalar(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    return v.reshape(a.shape[:-2] or (1,)).astype(a.dtype)


def _diag_index(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(n - abs(k))
    return (i, i + k) if k >= 0 else (i - k, i)


def _extractdiag_ref(p: OffsetParams, a: np.ndarray) -> Any:
    r, c = _diag_index(a.shape[-1], p.offset)
    return a[..., r, c].copy()


def _makediag_ref(p: OffsetParams, a: np.ndarray) -> np.ndarray:
    n = a.shape[-1] + abs(p.offset)
    out = np.zeros((*a.shape[:-1], n, n), a.dtype)
    r, c = _diag_index(n, p.offset)
    out[..., r, c] = a
    return out


def _trian_index(n: int, offset: int, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """Row-major lower-triangle positions from diagonal -k (k >= 0); transposed for upper."""
    upper = offset > 0 or (offset == 0 and not lower)
    k = offset if upper else -offset
    rows, cols = [], []
    for i in range(k, n):
        for j in range(i - k + 1):
            rows.append(i)
            cols.append(j)
    r, c = np.array(rows, np.int64), np.array(cols, np.int64)
    return (c, r) if upper else (r, c)


def _extracttrian_ref(p: TrianParams, a: np.ndarray) -> Any:
    r, c = _trian_index(a.shape[-1], p.offset, p.lower)
    return a[..., r, c].copy()


def _maketrian_ref(p: TrianParams, a: np.ndarray) -> np.ndarray:
    n = _maketrian(p, a.shape)[0][-1]
    out = np.zeros((*a.shape[:-1], n, n), a.dtype)
    r, c = _trian_index(n, p.offset, p.lower)
    out[..., r, c] = a
    return out


def _syrk_ref(p: SyrkParams, a: np.ndarray) -> Any:
    x = _f(a)
    return (p.alpha * (_t(x) @ x if p.transpose else x @ _t(x))).astype(a.dtype)


def _gelqf_one(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    q, r = np.linalg.qr(a.T)  # A^T = Q R -> A = R^T Q^T; signs as LAPACK's gelqf (Householder)
    return q.T, r.T


def _gelqf_ref(p: Any, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = _f(a)
    flat = x.reshape(-1, *x.shape[-2:])
    qs, ls = zip(*(_gelqf_one(m) for m in flat), strict=True)
    q = np.stack(qs).reshape(x.shape)
    low = np.stack(ls).reshape(*x.shape[:-1], x.shape[-2])
    return q.astype(a.dtype), low.astype(a.dtype)


def _syevd_ref(p: Any, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.tril(_f(a))
    x = x + _t(np.tril(x, -1))
    lam, v = np.linalg.eigh(x)
    u = _t(v)
    big = np.take_along_axis(u, np.argmax(np.abs(u), axis=-1)[..., None], axis=-1)
    u = u * np.where(big < 0, -1.0, 1.0)
    return u.astype(a.dtype), lam.astype(a.dtype)


def _slogdet_ref(p: Any, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sign, logabs = np.linalg.slogdet(_f(a))
    return _out_scalar(sign, a), _out_scalar(logabs, a)


# ---------------------------------------------------------------------------------------------
# Registration: each operator and its _backward_ operator


def _flags(p: Any) -> tuple[int, int, int, int]:
    ta = getattr(p, "transpose_a", getattr(p, "transpose", False))
    return (int(ta), int(getattr(p, "transpose_b", False)), int(getattr(p, "lower", True)),
            int(getattr(p, "rightside", False)))


def _fa(p: Any) -> tuple[float, ...]:
    if hasattr(p, "beta"):
        return (p.alpha, p.beta)
    if hasattr(p, "alpha"):
        return (p.alpha,)
    if hasattr(p, "offset"):
        return (float(p.offset),)
    return ()


Scratch = Callable[[KernelCall], int]


def _lowering(kind: str, nin: int, scratch: Scratch, batch_of: int = 0,
              gemm: bool = False) -> Callable[[KernelCall], Lowered]:
    def lower(call: KernelCall) -> Lowered:
        p = call.params
        s = tuple(call.in_shapes[batch_of])
        if gemm:
            batch, _, _, _ = _gemm_dims(s, p.axis)
            plan = Plan(kind, _flags(p), _fa(p), batch, p.axis, 0)
        else:
            batch = _batch(s) if kind not in ("makediag", "maketrian") else tuple(s[:-1])
            plan = Plan(kind, _flags(p), _fa(p), batch, None, scratch(call))
        return _launch(call, plan, nin)

    return lower


def _n(call: KernelCall, i: int = 0) -> int:
    return int(call.in_shapes[i][-1])


def _zero(call: KernelCall) -> int:
    return 0


def _register_pair(
    name: str,
    params: type[Params],
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    shape: Callable[..., Any],
    reference: Callable[..., Any],
    doc: str,
    examples: tuple[Example, ...],
    scratch: Scratch,
    bwd_reads: Callable[[Node], list[Entry]],
    bwd_scratch: Scratch,
    bwd_batch_of: int,
    bad_params: tuple[dict[str, Any], ...] = (),
    gemm: bool = False,
) -> OpDef:
    """``_linalg_<name>`` and ``_backward_linalg_<name>``: the backward operator takes the head
    gradients of every output (zeros where none flows), then ``bwd_reads(node)``."""
    nout, nin = len(outputs), len(inputs)
    bname = f"_backward_linalg_{name}"

    def btype(p: Any, ins: list, outs: list) -> tuple[list, list]:
        t = next((v for v in ins if v is not None), None)
        return [t] * len(ins), [t] * nin

    back = register(OpDef(
        name=bname,
        params=params,
        inputs=tuple(f"in{i}" for i in range(nout + len(bwd_reads_names[name]))),
        outputs=tuple(f"{n}_grad" for n in inputs),
        infer_shape=lambda p, ins, outs: (list(ins), list(_bwd_out_shapes(name, ins, nin))),
        infer_type=btype,
        kernels={DENSE: Kernel(_lowering(f"{name}_bwd", nout + len(bwd_reads_names[name]),
                                         bwd_scratch, bwd_batch_of, gemm))},
        differentiable=False,
        doc=f"Gradient of linalg_{name}.",
    ))

    def grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
        heads = [g if g is not None else zeros_like(Entry(node, i)) for i, g in enumerate(ograds)]
        b = backward_node(back, node, [*heads, *bwd_reads(node)])
        return [Entry(b, i) for i in range(nin)]

    return register(OpDef(
        name=f"_linalg_{name}",
        aliases=() if name == "syevd" else (f"linalg_{name}",),  # MXNet has no linalg_syevd
        params=params,
        inputs=inputs,
        outputs=outputs,
        infer_shape=shape,
        infer_type=same_dtype,
        reference=reference,
        kernels={DENSE: Kernel(_lowering(name, nin, scratch, 0, gemm))},
        grad=grad,
        doc=doc,
        examples=examples,
        bad_params=bad_params,
    ))


# Which forward entries each backward operator reads after the head gradients, by name:
# "in<i>" a forward input, "out<k>" a forward output.
bwd_reads_names: dict[str, tuple[str, ...]] = {
    "gemm": ("in0", "in1"), "gemm2": ("in0", "in1"), "potrf": ("out0",),
    "potri": ("in0", "out0"), "trmm": ("in0", "in1"), "trsm": ("in0", "in1"),
    "sumlogdiag": ("in0",), "extractdiag": ("in0",), "makediag": ("in0",),
    "extracttrian": ("in0",), "maketrian": ("in0",), "syrk": ("in0",),
    "gelqf": ("out0", "out1"), "syevd": ("out0", "out1"), "inverse": ("out0",),
    "det": ("in0",), "slogdet": ("in0",),
}
# Which read entry has the shape of each forward input's gradient (indices into the reads).
_grad_like: dict[str, tuple[int, ...]] = {
    "gemm": (0, 1, -1), "gemm2": (0, 1), "potrf": (0,), "potri": (0,), "trmm": (0, 1),
    "trsm": (0, 1), "sumlogdiag": (0,), "extractdiag": (0,), "makediag": (0,),
    "extracttrian": (0,), "maketrian": (0,), "syrk": (0,), "syevd": (0,), "inverse": (0,),
    "det": (0,), "slogdet": (0,), "gelqf": (0,),
}


def _bwd_out_shapes(name: str, ins: list, nin: int) -> list[Any]:
    nreads = len(bwd_reads_names[name])
    reads = ins[len(ins) - nreads:]
    heads = ins[:len(ins) - nreads]
    out = []
    for j in _grad_like[name]:
        out.append(heads[0] if j == -1 else reads[j])  # gemm's dC: the head's shape
    return out


def _reads(names: tuple[str, ...]) -> Callable[[Node], list[Entry]]:
    def reads(node: Node) -> list[Entry]:
        return [node.inputs[int(n[2:])] if n.startswith("in") else Entry(node, int(n[3:]))
                for n in names]

    return reads


def _sq(k: int, extra: int = 0, i: int = 0) -> Scratch:
    return lambda call: k * _n(call, i) ** 2 + extra * _n(call, i)


def _trx(i: int) -> Scratch:
    def f(call: KernelCall) -> int:
        n, b = _n(call, i), call.in_shapes[i + 1]
        return 3 * n * n + n + 2 * int(b[-1]) * int(b[-2])

    return f


def _gelqf_scratch(call: KernelCall) -> int:
    m, n = int(call.in_shapes[0][-2]), int(call.in_shapes[0][-1])
    return m * n + n


def _gelqf_bwd_scratch(call: KernelCall) -> int:
    m, n = int(call.in_shapes[1][-1]), int(call.in_shapes[0][-1])
    return 4 * m * m + m + m * n


SPD, TRI, SYM = {0: "spd"}, {0: "tri"}, {0: "sym"}
_F64 = "float64"

_OPS: list[tuple[Any, ...]] = [
    # name, params, inputs, outputs, shape rule, reference, doc, examples, scratch,
    # backward scratch, backward batch input, bad params
    ("gemm", GemmParams, ("A", "B", "C"), ("output",), gemm_shape, _gemm_ref,
     "alpha * op(A) op(B) + beta * C over the batch axes.",
     (Example(((2, 3, 4), (2, 4, 5), (2, 3, 5)), {"alpha": 1.5, "beta": 0.5}),
      Example(((4, 3), (5, 4), (3, 5)), {"transpose_a": True, "transpose_b": True}),
      Example(((3, 2, 4), (4, 2, 5), (3, 2, 5)), {"axis": -3}, dtype=_F64)),
     _zero, _zero, 0, ({"alpha": "x"}, {"transpose": True})),
    ("gemm2", Gemm2Params, ("A", "B"), ("output",), gemm2_shape, _gemm_ref,
     "alpha * op(A) op(B) over the batch axes.",
     (Example(((2, 3, 4), (2, 4, 5)), {"alpha": 2.0}),
      Example(((4, 3), (4, 5)), {"transpose_a": True}, dtype=_F64),
      Example(((3, 4), (5, 4)), {"transpose_b": True})),
     _zero, _zero, 0, ({"beta": 1.0},)),
    ("potrf", LowerParams, ("A",), ("output",), _unary_shape(_square_same), _potrf_ref,
     "Cholesky factor of symmetric positive-definite matrices (A = L L^T, or U^T U).",
     (Example(((2, 3, 3),), prep=SPD), Example(((4, 4),), {"lower": False}, _F64, prep=SPD)),
     _sq(2), _sq(5, 1), 0, ({"lower": "maybe"},)),
    ("potri", LowerParams, ("A",), ("output",), _unary_shape(_square_same), _potri_ref,
     "Inverse (L L^T)^-1 of a matrix from its Cholesky factor L (or (U^T U)^-1).",
     (Example(((2, 3, 3),), prep=TRI), Example(((3, 3),), {"lower": False}, _F64, prep=TRI)),
     _sq(3, 1), _sq(4, 0, 1), 0, ()),
    ("trmm", TriParams, ("A", "B"), ("output",), _tri_shape, _trmm_ref,
     "alpha * op(A) B (or alpha * B op(A)) with A triangular.",
     (Example(((2, 3, 3), (2, 3, 4)), {"alpha": 2.0}),
      Example(((3, 3), (4, 3)), {"rightside": True, "transpose": True, "lower": False}, _F64)),
     _trx(0), _trx(1), 1, ()),
    ("trsm", TriParams, ("A", "B"), ("output",), _tri_shape, _trsm_ref,
     "Solves op(A) X = alpha * B (or X op(A) = alpha * B) with A triangular.",
     (Example(((2, 3, 3), (2, 3, 4)), {"alpha": 0.5}, prep=TRI),
      Example(((3, 3), (4, 3)), {"rightside": True, "transpose": True, "lower": False}, _F64,
              prep=TRI)),
     _trx(0), _trx(1), 1, ()),
    ("sumlogdiag", NoParams, ("A",), ("output",), _unary_shape(_square_scalar),
     lambda p, a: _out_scalar(np.log(np.diagonal(_f(a), axis1=-2, axis2=-1)).sum(-1), a),
     "Sum of the logarithms of the diagonal elements.",
     (Example(((2, 3, 3),), prep=TRI), Example(((4, 4),), dtype=_F64, prep=TRI)),
     _zero, _zero, 1, ()),
    ("extractdiag", OffsetParams, ("A",), ("output",), _unary_shape(_extractdiag),
     _extractdiag_ref, "The diagonal at the given offset, as a vector.",
     (Example(((2, 3, 3),)), Example(((4, 4),), {"offset": -1}, _F64),
      Example(((4, 4),), {"offset": 2})),
     _zero, _zero, 1, ({"offset": "x"},)),
    ("makediag", OffsetParams, ("A",), ("output",), _unary_shape(_makediag), _makediag_ref,
     "Square matrices with the vector on the diagonal at the given offset.",
     (Example(((2, 3),)), Example(((4,),), {"offset": 1}, _F64), Example(((3,),), {"offset": -2})),
     _zero, _zero, 0, ()),
    ("extracttrian", TrianParams, ("A",), ("output",), _unary_shape(_extracttrian),
     _extracttrian_ref, "The triangle from the given diagonal on, packed into a vector.",
     (Example(((2, 3, 3),)), Example(((4, 4),), {"lower": False}, _F64),
      Example(((4, 4),), {"offset": 1}), Example(((4, 4),), {"offset": -2})),
     _zero, _zero, 1, ()),
    ("maketrian", TrianParams, ("A",), ("output",), _unary_shape(_maketrian), _maketrian_ref,
     "Triangular matrices from packed vectors (the inverse of extracttrian).",
     (Example(((2, 6),)), Example(((6,),), {"lower": False}, _F64),
      Example(((3,),), {"offset": 1}), Example(((6,),), {"offset": -1})),
     _zero, _zero, 0, ()),
    ("syrk", SyrkParams, ("A",), ("output",), _unary_shape(_syrk), _syrk_ref,
     "alpha * A A^T (or alpha * A^T A).",
     (Example(((2, 3, 4),), {"alpha": 0.5}), Example(((3, 4),), {"transpose": True}, _F64)),
     _zero, lambda call: _n(call) ** 2, 0, ()),
    ("gelqf", NoParams, ("A",), ("Q", "L"), _unary_shape(_gelqf), _gelqf_ref,
     "LQ factorization A = L Q (L lower triangular, Q row-orthonormal).",
     (Example(((2, 2, 3),)), Example(((3, 4),), dtype=_F64)),
     _gelqf_scratch, _gelqf_bwd_scratch, 0, ()),
    ("syevd", NoParams, ("A",), ("U", "L"), _unary_shape(_syevd), _syevd_ref,
     "Eigendecomposition U A = diag(L) U of symmetric matrices (eigenvalues ascending).",
     (Example(((2, 3, 3),), prep=SYM), Example(((4, 4),), dtype=_F64, prep=SYM)),
     lambda call: _n(call) ** 2, _sq(2), 0, ()),
    ("inverse", NoParams, ("A",), ("output",), _unary_shape(_square_same),
     lambda p, a: np.linalg.inv(_f(a)).astype(a.dtype), "Matrix inverse.",
     (Example(((2, 3, 3),), prep=TRI), Example(((4, 4),), dtype=_F64, prep=TRI)),
     _sq(1, 1), _sq(1), 0, ()),
    ("det", NoParams, ("A",), ("output",), _unary_shape(_square_scalar),
     lambda p, a: _out_scalar(np.linalg.det(_f(a)), a), "Determinant.",
     (Example(((2, 3, 3),), prep=TRI), Example(((4, 4),), dtype=_F64, prep=TRI)),
     _sq(2, 1), _sq(2, 1, 1), 1, ()),
    ("slogdet", NoParams, ("A",), ("sign", "logabsdet"), _unary_shape(_slogdet), _slogdet_ref,
     "Sign and log of the absolute value of the determinant.",
     (Example(((2, 3, 3),), prep=TRI), Example(((4, 4),), dtype=_F64, prep=TRI)),
     _sq(2, 1), _sq(2, 1, 2), 2, ()),
]

LINALG: dict[str, OpDef] = {}
for (_name, _params, _inputs, _outputs, _shape, _ref, _doc, _examples, _scr, _bscr, _bb,
     _bad) in _OPS:
    LINALG[_name] = _register_pair(
        _name, _params, _inputs, _outputs, _shape, _ref, _doc, _examples, _scr,
        _reads(bwd_reads_names[_name]), _bscr, _bb, _bad, gemm=_name in ("gemm", "gemm2"))


# ---------------------------------------------------------------------------------------------
# khatri_rao: the column-wise Kronecker product of matrices with equal column counts


@dataclass(frozen=True, kw_only=True)
class KhatriRaoParams(Params):
    num_args: int = field(lower=1, doc="Number of input matrices.")


def khatri_rao_shape(p: KhatriRaoParams, ins: list, outs: list) -> tuple[list, list]:
    if not _known(*ins):
        return list(ins), list(outs)
    if any(len(s) != 2 for s in ins):
        raise RuleError(f"khatri_rao takes matrices, not shapes {[shape_str(s) for s in ins]}")
    cols = {s[1] for s in ins}
    if len(cols) != 1:
        raise RuleError(f"the inputs' column counts differ: {[s[1] for s in ins]}")
    return list(ins), [(size([s[0] for s in ins]), cols.pop())]


def khatri_rao_reference(p: KhatriRaoParams, *mats: np.ndarray) -> np.ndarray:
    out = _f(mats[0])
    for m in mats[1:]:
        out = (out[:, None, :] * _f(m)[None, :, :]).reshape(-1, m.shape[1])
    return out.astype(mats[0].dtype)


def khatri_rao_lowering(call: KernelCall) -> Lowered:
    return _launch(call, Plan("khatri_rao"), len(call.in_shapes))


KHATRI_RAO = register(OpDef(
    name="khatri_rao",
    params=KhatriRaoParams,
    inputs=lambda p: tuple(f"arg{i}" for i in range(p.num_args)),
    key_var_num_args="num_args",
    infer_shape=khatri_rao_shape,
    infer_type=same_dtype,
    reference=khatri_rao_reference,
    kernels={DENSE: Kernel(khatri_rao_lowering)},
    doc="Column-wise Khatri-Rao product (no gradient, as MXNet).",
    examples=(
        Example(((2, 3), (4, 3)), {"num_args": 2}),
        Example(((2, 2), (3, 2), (2, 2)), {"num_args": 3}, dtype="float64"),
        Example(((3, 4),), {"num_args": 1}),
    ),
    bad_params=({}, {"num_args": 0}),
))
