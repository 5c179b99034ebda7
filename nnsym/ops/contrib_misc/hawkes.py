"""hawkesll: the log likelihood of K independent univariate Hawkes processes (exponential
kernels) observed as ragged (N, T) matrices of interarrival times and marks, and the processes'
memory state at the end of each observation window; its gradient reaches lda, alpha and beta
(the observations and the state get none, as in MXNet)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, merge_shape, register
from nnsym.ir.params import NoParams, Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

Array = np.ndarray
INPUTS = ("lda", "alpha", "beta", "state", "lags", "marks", "valid_length", "max_time")
FLOAT_DTYPES = ("float32", "float64")


def hawkesll_shape(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    lda, alpha, beta, state, lags, marks, vl, mt = ins
    nk = merge_shape(merge_shape(lda, state), outs[1])
    if nk is not None and len(nk) != 2:
        raise RuleError(f"lda has shape {shape_str(nk)}; it must be (N, K)")
    nt = merge_shape(lags, marks)
    if nt is not None and len(nt) != 2:
        raise RuleError(f"lags has shape {shape_str(nt)}; it must be (N, T)")
    n = nk[0] if nk is not None else (nt[0] if nt is not None else None)
    k = nk[1] if nk is not None else None
    try:
        n_vec = merge_shape(merge_shape(merge_shape(vl, mt), outs[0]),
                            None if n is None else (n,))
        k_vec = merge_shape(merge_shape(alpha, beta), None if k is None else (k,))
        if nt is not None and n is not None:
            nt = merge_shape(nt, (n, nt[1]))
    except RuleError:
        raise RuleError(
            f"inconsistent shapes: lda/state {shape_str(nk)}, alpha/beta {shape_str(alpha)}/"
            f"{shape_str(beta)}, lags/marks {shape_str(nt)}, valid_length/max_time "
            f"{shape_str(vl)}/{shape_str(mt)}; they must be (N, K), (K,), (N, T), (N,)"
        ) from None
    return [nk, k_vec, k_vec, nk, nt, nt, n_vec, n_vec], [n_vec, nk]


def hawkesll_type(p: NoParams, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0] if ins[0] is not None else outs[0]
    new = [t if i != 5 else ins[5] for i in range(8)]
    return new, [t, t]


def hawkesll_reference(p: NoParams, lda: Array, alpha: Array, beta: Array, state: Array,
                       lags: Array, marks: Array, vl: Array, mt: Array) -> tuple[Array, Array]:
    n, k = lda.shape
    f = np.float64
    ll = np.zeros(n)
    out_state = np.zeros((n, k))
    for i in range(n):
        last, st, t = np.zeros(k), state[i].astype(f), 0.0
        for j in range(lags.shape[1]):
            if j >= vl[i]:
                break
            c = int(marks[i, j])
            t += float(lags[i, j])
            if not 0 <= c < k:
                continue
            a, b, m = float(alpha[c]), float(beta[c]), float(lda[i, c])
            d = t - last[c]
            e = np.exp(-b * d)
            ll[i] += np.log(m + a * b * st[c] * e) - (m * d + a * st[c] * (1 - e))
            st[c] = 1 + st[c] * e
            last[c] = t
        d = float(mt[i]) - last
        e = np.exp(-beta.astype(f) * d)
        ll[i] -= np.sum(lda[i].astype(f) * d + alpha.astype(f) * st * (1 - e))
        out_state[i] = e * st
    return ll.astype(lda.dtype), out_state.astype(lda.dtype)


def _check(call: KernelCall) -> tuple[str, str]:
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"hawkesll takes {FLOAT_DTYPES}, not {dt}")
    return dt, call.in_dtypes[5].name


def hawkesll_lowering(call: KernelCall) -> Lowered:
    dt, mdt = _check(call)
    n, k = call.in_shapes[0]
    spec = KernelSpec.make("contrib_misc/hawkesll.c.j2", dtype=dt, mark_dtype=mdt, req=call.req)
    return Lowered((Launch(spec, (n, k, call.in_shapes[4][1]), workspace=16 * max(n * k, 1)),))


def hawkesll_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, (ograd_state), the eight inputs, lda_grad, alpha_grad, beta_grad]."""
    dt = call.in_dtypes[0].name
    if dt not in FLOAT_DTYPES:
        raise NoKernelError(f"hawkesll takes {FLOAT_DTYPES}, not {dt}")
    reqs = [call.out_req(i) for i in range(3)]
    if all(r == "null" for r in reqs):
        return Lowered()
    p = call.params
    o = len(_bw_heads(p))
    n, k = call.in_shapes[o]
    spec = KernelSpec.make("contrib_misc/hawkesll_backward.c.j2", dtype=dt,
                           mark_dtype=call.in_dtypes[o + 5].name, req_mu=reqs[0],
                           req_a=reqs[1], req_b=reqs[2], ll_grad=p.ll_grad,
                           state_grad=p.state_grad)
    return Lowered((Launch(spec, (n, k, call.in_shapes[o + 4][1])),))


@dataclass(frozen=True, kw_only=True)
class HawkesBackwardParams(Params):
    ll_grad: bool = field(default=True, doc="The log likelihood's gradient is an input.")
    state_grad: bool = field(
        default=False, doc="The output state's gradient is an input (after the first).")


def _bw_heads(p: HawkesBackwardParams) -> tuple[str, ...]:
    return ("ograd",) * p.ll_grad + ("ograd_state",) * p.state_grad


def _bw_inputs(p: HawkesBackwardParams) -> tuple[str, ...]:
    return (*_bw_heads(p), *INPUTS)


def _bw_rule(p: HawkesBackwardParams, ins: list, outs: list) -> tuple[list, list]:
    o = len(_bw_heads(p))
    return list(ins), [ins[o], ins[o + 1], ins[o + 2]]


def hawkesll_backward_reference(p: HawkesBackwardParams, *arrays: Array) -> tuple[Array, ...]:
    """The kernel's recursion in float64, per mark and sample."""
    heads = len(_bw_heads(p))
    g = arrays[0] if p.ll_grad else None
    gs = arrays[heads - 1] if p.state_grad else None
    lda, alpha, beta, state, lags, marks, vl, mt = (a.astype(np.float64) for a in arrays[heads:])
    n, k = lda.shape
    d_lda, d_a, d_b = np.zeros((n, k)), np.zeros(k), np.zeros(k)
    for c in range(k):
        a, b = alpha[c], beta[c]
        for i in range(n):
            m, last, t, phi, phig = lda[i, c], 0.0, 0.0, state[i, c], 0.0
            mug = ag = bg = 0.0
            for j in range(lags.shape[1]):
                if j >= vl[i]:
                    break
                t += lags[i, j]
                if int(marks[i, j]) != c:
                    continue
                d = t - last
                e = np.exp(-b * d)
                ld = m + a * b * phi * e
                mug += 1 / ld - d
                ag += b * phi * e / ld - phi * (1 - e)
                bg += a * e * (phi * (1 - b * d) + b * phig) / ld - a * (phig * (1 - e)
                                                                          + phi * d * e)
                phig, phi, last = e * (-d * phi + phig), 1 + phi * e, t
            d = mt[i] - last
            e = np.exp(-b * d)
            mug -= d
            ag -= phi * (1 - e)
            bg -= a * (phig * (1 - e) + phi * d * e)
            gi = 0.0 if g is None else float(g[i])
            d_lda[i, c] = gi * mug
            d_a[c] += gi * ag
            d_b[c] += gi * bg + (0.0 if gs is None else gs[i, c] * e * (phig - d * phi))
    dt = arrays[heads].dtype
    return d_lda.astype(dt), d_a.astype(dt), d_b.astype(dt)


BACKWARD_HAWKESLL = register(OpDef(
    name="_contrib_backward_hawkesll",
    params=HawkesBackwardParams,
    inputs=_bw_inputs,
    outputs=("lda_grad", "alpha_grad", "beta_grad"),
    infer_shape=_bw_rule,
    infer_type=_bw_rule,
    kernels={DENSE: Kernel(hawkesll_backward_lowering)},
    reference=hawkesll_backward_reference,
    differentiable=False,
    doc="Gradient of hawkesll for lda, alpha and beta (from the log likelihood's gradient, "
        "and the output state's where given).",
    examples=(Example(((2,), (2, 3), (3,), (3,), (2, 3), (2, 4), (2, 4), (2,), (2,)),
                      ints={4: (0, 2), 5: (1, 2), 6: (0, 3), 7: (0, 5), 8: (4, 7)}, low=0.2,
                      high=1.0),
              Example(((2,), (2, 3), (2, 3), (3,), (3,), (2, 3), (2, 4), (2, 4), (2,), (2,)),
                      {"state_grad": True},
                      ints={5: (0, 2), 6: (1, 2), 7: (0, 3), 8: (0, 5), 9: (4, 7)}, low=0.2,
                      high=1.0)),
))


def hawkesll_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """From the log likelihood's gradient and, where one flows, the output state's (MXNet
    leaves the state's out; it changes only beta's gradient)."""
    g, gs = ograds
    if g is None and gs is None:
        return [None] * 8
    params = HawkesBackwardParams(ll_grad=g is not None, state_grad=gs is not None)
    ins = [*([g] if g is not None else []), *([gs] if gs is not None else []), *node.inputs]
    b = backward_node(BACKWARD_HAWKESLL, node, ins, params=params)
    return [Entry(b, 0), Entry(b, 1), Entry(b, 2), None, None, None, None, None]


HAWKESLL = register(OpDef(
    name="_contrib_hawkesll",
    params=NoParams,
    inputs=INPUTS,
    outputs=("output", "out_state"),
    infer_shape=hawkesll_shape,
    infer_type=hawkesll_type,
    reference=hawkesll_reference,
    kernels={DENSE: Kernel(hawkesll_lowering)},
    grad=hawkesll_grad,
    doc="Log likelihood of K exponential-kernel Hawkes processes per sample, and their state "
        "at max_time.",
    # lda, alpha, beta in [0.2, 1); the state and the observations integer-valued (no
    # gradient flows to them, so finite differences must not move them): marks in [0, K),
    # valid_length <= T, max_time past the last point.
    examples=(
        Example(((2, 3), (3,), (3,), (2, 3), (2, 4), (2, 4), (2,), (2,)),
                ints={3: (0, 2), 4: (1, 2), 5: (0, 3), 6: (0, 5), 7: (4, 7)}, low=0.2, high=1.0),
        Example(((3, 2), (2,), (2,), (3, 2), (3, 5), (3, 5), (3,), (3,)),
                ints={3: (0, 3), 4: (1, 3), 5: (0, 2), 6: (2, 6), 7: (10, 12)}, low=0.2,
                high=1.0, dtype="float64"),
    ),
    bad_params=({"axis": 0},),
))
