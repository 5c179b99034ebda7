"""dot and batch_dot: matrix products with optional transposes (MXNet's N-D semantics), and the
batched GEMM launch they and FullyConnected share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    register,
    same_dtype,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import node_gradient
from nnsym.ops.common.products import transposed_product
from nnsym.ops.common.storage import dense_result
from nnsym.ops.dot.csr import backward_dot_csr, dot_storage
from nnsym.types import DispatchMode, Shape, SType, shape_str

STYPES = ("default", "row_sparse", "csr")


@dataclass(frozen=True, kw_only=True)
class DotParams(Params):
    transpose_a: bool = field(default=False, doc="Transpose the first input before the product.")
    transpose_b: bool = field(default=False, doc="Transpose the second input before the product.")
    forward_stype: str | None = field(
        default=None, choices=STYPES, doc="Storage type of the output (None: inferred)."
    )


def _split_lhs(a: Shape, transpose: bool) -> tuple[int | None, Shape]:
    """(contracted dim, kept dims) of lhs: the last axis, or the first one when transposed."""
    k = a[0] if transpose else a[-1]
    kept = a[1:] if transpose else a[:-1]
    return k, kept if len(a) > 1 else ()


def _split_rhs(b: Shape, transpose: bool) -> tuple[int | None, Shape]:
    """(contracted dim, kept dims) of rhs: the first axis, or the last one when transposed."""
    k = b[-1] if transpose else b[0]
    kept = b[:-1] if transpose else b[1:]
    return k, kept if len(b) > 1 else ()


def dot_shape(p: DotParams, ins: list, outs: list) -> tuple[list, list]:
    """out = lhs's kept axes + rhs's kept axes; two vectors give ``(1,)``.

    With ``transpose_a`` lhs contracts its first axis (the rest is kept, in order), otherwise its
    last; with ``transpose_b`` rhs contracts its last axis, otherwise its first. A 1-D operand
    contributes no axes to the output. Inputs are never filled from the output (as in MXNet).
    """
    a, b = ins
    if a is None or b is None:
        return list(ins), list(outs)
    if len(a) == 0 or len(b) == 0:
        raise RuleError(
            f"dot needs inputs of at least 1 dimension, got {shape_str(a)} X {shape_str(b)}"
        )
    if len(a) == 1 and len(b) == 1:
        if p.transpose_a or p.transpose_b:
            raise RuleError("cannot transpose vectors: both inputs of dot are 1-D")
        ka, kb = a[0], b[0]
        out: Shape = (1,)
    else:
        ka, kept_a = _split_lhs(a, p.transpose_a)
        kb, kept_b = _split_rhs(b, p.transpose_b)
        out = (*kept_a, *kept_b)
    if ka is not None and kb is not None and ka != kb:
        raise RuleError(
            f"dot shape error: {shape_str(a)} X {shape_str(b)} (transpose_a={p.transpose_a}, "
            f"transpose_b={p.transpose_b}) contracts a dimension of {ka} with one of {kb}"
        )
    return list(ins), [out]


def dot_reference(p: DotParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.ndim == 1 and b.ndim == 1:
        return np.array([np.dot(a, b)], dtype=a.dtype)
    ka, kept_a = a.shape[0] if p.transpose_a else a.shape[-1], ()
    if a.ndim > 1:
        kept_a = a.shape[1:] if p.transpose_a else a.shape[:-1]
    m = int(np.prod(kept_a))  # NOTE: explicit sizes, as -1 is ambiguous for empty arrays
    a2 = a.reshape(ka, m).T if p.transpose_a else a.reshape(m, ka)
    kb, kept_b = b.shape[-1] if p.transpose_b else b.shape[0], ()
    if b.ndim > 1:
        kept_b = b.shape[:-1] if p.transpose_b else b.shape[1:]
    n = int(np.prod(kept_b))
    b2 = b.reshape(n, kb).T if p.transpose_b else b.reshape(kb, n)
    return np.asarray((a2 @ b2).reshape(*kept_a, *kept_b), dtype=a.dtype)


# ---------------------------------------------------------------------------------------------
# Dense kernels: every product here (and FullyConnected's, in ``fully_connected.py``) is a
# (batched) row-major GEMM through dot_gemm.c.j2 (``gemm_launch``).

_INT32_MAX = 2**31 - 1


def gemm_launch(
    dtype: np.dtype,
    req: str,
    *,
    batch: int,
    m: int,
    n: int,
    k: int,
    ta: bool,
    tb: bool,
    n_in: int = 2,
    bias: bool = False,
    slots: tuple[int, int, int, int] | None = None,
) -> Launch:
    """One dot_gemm.c.j2 launch: ``C_t = op(A_t) . op(B_t) (+ bias)`` for t < batch.

    A_t is stored ``[m, k]`` (``[k, m]`` when ``ta``) and B_t ``[k, n]`` (``[n, k]`` when ``tb``),
    both dense, one batch after another; C is ``[batch, m, n]``. Also used by FullyConnected.
    ``slots`` says where A, B, C and the workspace are in the kernel's pointer list (default:
    the inputs first, then C, then the workspace).
    """
    dt = np.dtype(dtype)
    if max(m, n, k) > _INT32_MAX:
        raise ValueError(f"matrix dimension over 2**31 - 1 ({m}, {n}, {k}): BLAS uses 32-bit ints")
    lda = m if ta else k
    ldb = k if tb else n
    sa, sb = m * k, k * n
    ws = 0
    tr = dt.name in ("float32", "float64") and transposed_product(m, n, k, tb)
    if dt.name == "float16":
        ws = 4 * (batch * (sa + sb) + m * n)
    elif dt.kind in "iub":
        ws = 8 * (n + k)
    elif tr:
        ws = dt.itemsize * m * n
    sa_, sb_, sc_, sw_ = slots if slots is not None else (0, 1, n_in, n_in + 1)
    spec = KernelSpec.make(
        "dot/dot_gemm.c.j2", dtype=dt.name, req=req, ta=ta, tb=tb, bias=bias, n_in=n_in,
        slot_a=sa_, slot_b=sb_, slot_c=sc_, slot_ws=sw_, tr=tr,
    )
    # NOTE: BLAS rejects a leading dimension of 0 even when that matrix is empty.
    ia = (batch, m, n, k, max(lda, 1), max(ldb, 1), sa, sb)
    return Launch(spec, ia=ia, workspace=ws)


def dot_dims(p: DotParams, a: tuple[int, ...],
             b: tuple[int, ...]) -> tuple[int, int, int, int, bool, bool]:
    """(batch, m, n, k, ta, tb) of dot as one GEMM."""
    if len(a) == 1 and len(b) == 1:
        return 1, 1, 1, a[0], False, False
    ta, tb = p.transpose_a, p.transpose_b
    k = a[0] if ta else a[-1]
    m = size(a[1:] if ta else a[:-1])  # a 1-D operand keeps nothing: 1 row (column)
    n = size(b[:-1] if tb else b[1:])
    return 1, m, n, k, ta, tb


def dot_lowering(call: KernelCall) -> Lowered:
    batch, m, n, k, ta, tb = dot_dims(call.params, *call.in_shapes)
    launch = gemm_launch(call.out_dtypes[0], call.req, batch=batch, m=m, n=n, k=k, ta=ta, tb=tb)
    return Lowered((launch,))


def dot_backward_lowering(dims: Any) -> Any:
    """(lhs grad, rhs grad) of ``C = op(A) . op(B)`` as two GEMMs over the forward operands.
    p = [ograd, lhs, rhs, lhs grad, rhs grad, (workspace)]."""

    def lower(call: KernelCall) -> Lowered:
        _, a, b = call.in_shapes
        batch, m, n, k, ta, tb = dims(call.params, a, b)
        dt = call.out_dtypes[0]
        launches = []
        if call.out_req(0) != "null":
            if not ta:  # dA[m,k] = G[m,n] . op(B)ᵀ
                launches.append(gemm_launch(dt, call.out_req(0), batch=batch, m=m, n=k, k=n,
                                            ta=False, tb=not tb, slots=(0, 2, 3, 5)))
            else:  # dA stored [k,m] = op(B)[k,n] . Gᵀ
                launches.append(gemm_launch(dt, call.out_req(0), batch=batch, m=k, n=m, k=n,
                                            ta=tb, tb=True, slots=(2, 0, 3, 5)))
        if call.out_req(1) != "null":
            if not tb:  # dB[k,n] = op(A)ᵀ[k,m] . G[m,n]
                launches.append(gemm_launch(dt, call.out_req(1), batch=batch, m=k, n=n, k=m,
                                            ta=not ta, tb=False, slots=(1, 0, 4, 5)))
            else:  # dB stored [n,k] = Gᵀ[n,m] . op(A)[m,k]
                launches.append(gemm_launch(dt, call.out_req(1), batch=batch, m=n, n=k, k=m,
                                            ta=True, tb=ta, slots=(0, 1, 4, 5)))
        return Lowered(tuple(launches))

    return lower


def dot_gradient(name: str, dims: Any) -> Any:
    op = register(
        OpDef(
            name=f"_backward_{name}",
            params=DotParams,
            inputs=("ograd", "lhs", "rhs"),
            outputs=("lhs_grad", "rhs_grad"),
            infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0], ins[2] or outs[1]]),
            infer_type=same_dtype,
            kernels={DENSE: Kernel(dot_backward_lowering(dims))},
            stype_rules=BACKWARD_DOT_STYPE_RULES if name == "dot" else (),
            differentiable=False,
            doc=f"Gradient of {name}: two GEMMs.",
        )
    )

    return node_gradient(op, lambda n: n.inputs[:2])


# Storage types of dot (MXNET-FACTS 4.6, CPU): csr lhs with a dense or row_sparse rhs runs
# the csr kernels (row_sparse result when lhs is transposed); dense . csr gives csr; the rest
# falls back to dense (dns . csr.T keeps MXNet's csr target).
_D, _R, _C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR
_EX = DispatchMode.FCOMPUTE_EX
DOT_STYPE_RULES = (
    StypeRule((_C, _D), (_R,), _EX, when=lambda p: p.transpose_a and not p.transpose_b,
              kernel=dot_storage),
    StypeRule((_C, _D), (_D,), _EX, when=lambda p: not p.transpose_a and not p.transpose_b,
              kernel=dot_storage),
    StypeRule((_C, _R), (_R,), _EX, when=lambda p: p.transpose_a and not p.transpose_b,
              kernel=dot_storage),
    StypeRule((_C, _R), (_D,), _EX, when=lambda p: not p.transpose_a and not p.transpose_b,
              kernel=dot_storage),
    StypeRule((_D, _C), (_C,), _EX, when=lambda p: not p.transpose_a and not p.transpose_b,
              kernel=dot_storage),
    StypeRule((_D, _C), (_C,), DispatchMode.FALLBACK),
)

# _backward_dot (ograd, lhs, rhs) -> (lhs_grad, rhs_grad), MXNET-FACTS 4.6: a csr lhs without
# transposes gives a row_sparse rhs gradient (csr.T . ograd, the rows of the columns the batch
# touches) and a dense lhs gradient; the other csr cases have dense gradients, computed by the
# dense kernel on densified operands by design (MXNet's Ex kernels, no fallback warning).
BACKWARD_DOT_STYPE_RULES = (
    StypeRule((_D, _C, _D), (_D, _R), _EX, when=lambda p: not p.transpose_a and not p.transpose_b,
              kernel=backward_dot_csr),
    StypeRule((_D, _C, _R), (_D, _R), _EX, when=lambda p: not p.transpose_a and not p.transpose_b,
              kernel=backward_dot_csr),
    StypeRule((_D, _C, _D), (_D, _D), _EX, when=lambda p: p.transpose_a and not p.transpose_b,
              kernel=dense_result),
    StypeRule((_D, _D, _C), (_D, _D), _EX, when=lambda p: not p.transpose_a and not p.transpose_b,
              kernel=dense_result),
)

DOT = register(
    OpDef(
        name="dot",
        params=DotParams,
        inputs=("lhs", "rhs"),
        infer_shape=dot_shape,
        infer_type=same_dtype,
        reference=dot_reference,
        kernels={DENSE: Kernel(dot_lowering)},
        stype_rules=DOT_STYPE_RULES,
        grad=dot_gradient("dot", dot_dims),
        aliases=("_sparse_dot",),
        sparse=True,
        doc="Dot product: contracts lhs's last (or, transposed, first) axis with rhs's first "
        "(or, transposed, last) axis.",
        examples=(
            Example(((2, 3), (3, 4))),
            Example(((3, 2), (3, 4)), {"transpose_a": True}),
            Example(((2, 3), (4, 3)), {"transpose_b": True}),
            Example(((3, 2), (4, 3)), {"transpose_a": True, "transpose_b": True}),
            Example(((3,), (3,))),
            Example(((2, 3), (3,))),
            Example(((3,), (3, 4)), {"transpose_a": True}),
            Example(((2, 3, 4), (4, 5, 6))),
            Example(((4, 3, 2), (4, 5)), {"transpose_a": True}),
            Example(((2, 3, 4), (5, 6, 4)), {"transpose_b": True}),
            Example(((2, 3), (3, 4)), {"forward_stype": "default"}, dtype="float64"),
        ),
        bad_params=(
            {"transpose_a": "maybe"},
            {"forward_stype": "dense"},
            {"transpose": True},
        ),
    )
)


def batch_dot_shape(p: DotParams, ins: list, outs: list) -> tuple[list, list]:
    """Batched matrix product over the last two axes; the leading axes must agree."""
    a, b = ins
    if a is None or b is None:
        return list(ins), list(outs)
    if len(a) < 3 or len(a) != len(b):
        raise RuleError(
            "batch_dot needs two inputs with the same number (>= 3) of dimensions, got "
            f"{shape_str(a)} X {shape_str(b)}"
        )
    batch = []
    for i, (x, y) in enumerate(zip(a[:-2], b[:-2])):
        if x is not None and y is not None and x != y:
            raise RuleError(
                f"batch_dot: the leading (batch) dimensions must be equal, got {shape_str(a)} X "
                f"{shape_str(b)} (axis {i}: {x} vs {y})"
            )
        batch.append(x if x is not None else y)
    m, ka = (a[-1], a[-2]) if p.transpose_a else (a[-2], a[-1])
    n, kb = (b[-2], b[-1]) if p.transpose_b else (b[-1], b[-2])
    if ka is not None and kb is not None and ka != kb:
        raise RuleError(
            f"batch_dot shape error: {shape_str(a)} X {shape_str(b)} (transpose_a="
            f"{p.transpose_a}, transpose_b={p.transpose_b}) contracts {ka} with {kb}"
        )
    return list(ins), [(*batch, m, n)]


def batch_dot_reference(p: DotParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = np.swapaxes(a, -1, -2) if p.transpose_a else a
    y = np.swapaxes(b, -1, -2) if p.transpose_b else b
    return np.asarray(np.matmul(x, y), dtype=a.dtype)


def batch_dot_dims(p: DotParams, a: tuple[int, ...],
                   b: tuple[int, ...]) -> tuple[int, int, int, int, bool, bool]:
    ta, tb = p.transpose_a, p.transpose_b
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    n = b[-2] if tb else b[-1]
    return size(a[:-2]), m, n, k, ta, tb


def batch_dot_lowering(call: KernelCall) -> Lowered:
    batch, m, n, k, ta, tb = batch_dot_dims(call.params, *call.in_shapes)
    launch = gemm_launch(call.out_dtypes[0], call.req, batch=batch, m=m, n=n, k=k, ta=ta, tb=tb)
    return Lowered((launch,))


BATCH_DOT = register(
    OpDef(
        name="batch_dot",
        params=DotParams,
        inputs=("lhs", "rhs"),
        infer_shape=batch_dot_shape,
        infer_type=same_dtype,
        reference=batch_dot_reference,
        kernels={DENSE: Kernel(batch_dot_lowering)},
        grad=dot_gradient("batch_dot", batch_dot_dims),
        aliases=("_npx_batch_dot",),
        doc="Batched matrix product of two N-D arrays (N >= 3) over their last two axes.",
        examples=(
            Example(((2, 3, 4), (2, 4, 5))),
            Example(((2, 4, 3), (2, 4, 5)), {"transpose_a": True}),
            Example(((2, 3, 4), (2, 5, 4)), {"transpose_b": True}),
            Example(((2, 4, 3), (2, 5, 4)), {"transpose_a": True, "transpose_b": True}),
            Example(((6, 2, 3, 4), (6, 2, 4, 5))),
            Example(((2, 3, 4), (2, 4, 5)), dtype="float64"),
        ),
        bad_params=({"transpose_b": "yes"}, {"forward_stype": "sparse"}, {"axis": 1}),
    )
)
