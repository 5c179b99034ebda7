"""calibrate_entropy: the KL-divergence threshold search over a histogram (MXNet's entropy
calibration), with MXNet 1.9.1's float32 arithmetic and integer truncations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size

F32 = np.float32
EPS = F32(0.0001)
FLT_MAX = np.finfo(F32).max


@dataclass(frozen=True, kw_only=True)
class CalibrateEntropyParams(Params):
    num_quantized_bins: int = field(default=255, lower=1, doc="The number of quantized bins.")


def _check_bins(n_hist: int, n_edges: int, nq: int) -> None:
    if n_edges != n_hist + 1:
        raise RuleError(f"hist_edges has {n_edges} elements; hist has {n_hist}, so it needs "
                        f"{n_hist + 1}")
    if n_hist % 2 == 0:
        raise RuleError(f"hist has {n_hist} bins; calibrate_entropy needs an odd number (a "
                        "zero-centred histogram; MXNet reads past hist_edges otherwise)")
    if n_hist // 2 < nq // 2:
        raise RuleError(f"hist has {n_hist} bins, fewer than num_quantized_bins={nq}")


def calibrate_entropy_shape(p: CalibrateEntropyParams, ins: list, outs: list
                            ) -> tuple[list, list]:
    h, e = ins
    if h is not None and e is not None and None not in h and None not in e:
        _check_bins(int(np.prod(h)), int(np.prod(e)), p.num_quantized_bins)
    return [h, e], [(1,), (1,)]


def calibrate_entropy_type(p: Params, ins: list, outs: list) -> tuple[list, list]:
    for name, t in zip(("hist", "hist_edges"), ins, strict=True):
        if t is not None and np.dtype(t) != np.float32:
            raise RuleError(f"{name} has dtype {np.dtype(t).name}; calibrate_entropy takes "
                            "float32")
    f = np.dtype("float32")
    return [f, f], [f, f]


def _seq_sum(v: np.ndarray) -> np.float32:
    """A left-to-right float32 sum (std::accumulate), not numpy's pairwise one."""
    r: np.float32 = F32(np.cumsum(v, dtype=F32)[-1]) if v.size else F32(0)
    return r


def _smooth(p: np.ndarray) -> np.ndarray | None:
    zeros = p == 0
    nz = int(zeros.sum())
    nnz = p.size - nz
    if not nnz:
        return None
    eps1 = F32(F32(EPS * F32(nz)) / F32(nnz))
    if eps1 >= 1.0:
        return None
    d = (EPS * zeros.astype(F32)).astype(F32) - (eps1 * (~zeros).astype(F32)).astype(F32)
    out: np.ndarray = (p + d.astype(F32)).astype(F32)
    return out


def _divergence(hist: np.ndarray, zero: int, i: int, nq: int) -> np.float32:
    """The divergence of window i; NaN where MXNet fails a check (all-zero counts, a
    non-positive smoothed bin)."""
    start, stop = zero - i, zero + i + 1
    m = stop - start
    p = np.zeros(m, F32)
    if m == 1:  # the first and last bins are one: every count, in order
        p[0] = _seq_sum(hist)
    else:
        # NOTE: as in MXNet, the last window bin starts from its own count and then takes the
        # outer ones; the first holds the outer ones only (its own count goes there too)
        p[0] = _seq_sum(hist[: start + 1])
        p[1:] = hist[start + 1: stop]
        p[-1] = _seq_sum(hist[stop - 1:])
    sliced = np.zeros(m, np.int64)
    if m > 1:
        sliced[1:] = hist[start + 1: stop].astype(np.int64)  # size_t truncation
    merged = m // nq
    qb = np.array([F32(int(sliced[j * merged:(j + 1) * merged].sum())) for j in range(nq)], F32)
    qb[-1] = F32(qb[-1] + F32(int(sliced[nq * merged:].sum())))
    q = np.zeros(m, F32)
    for j in range(nq):
        s0 = j * merged
        s1 = m if j == nq - 1 else (j + 1) * merged
        norm = int(np.count_nonzero(sliced[s0:s1]))
        if norm:
            seg = p[s0:s1] != 0
            q[s0:s1][seg] = F32(qb[j] / F32(norm))
    ps, qs = _smooth(p), _smooth(q)
    nan: np.float32 = F32(np.nan)
    if qs is None:
        inf: np.float32 = F32(np.inf)
        return inf
    if ps is None:
        return nan
    ps = (ps / _seq_sum(ps)).astype(F32)
    qs = (qs / _seq_sum(qs)).astype(F32)
    if not ((ps > 0).all() and (qs > 0).all()):
        return nan
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (ps * np.log((ps / qs).astype(np.float64)).astype(F32)).astype(F32)
    return _seq_sum(terms)


def calibrate_entropy_reference(p: CalibrateEntropyParams, hist: np.ndarray,
                                edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = hist.astype(F32).reshape(-1)
    e = edges.astype(F32).reshape(-1)
    nq = p.num_quantized_bins
    try:
        _check_bins(h.size, e.size, nq)
    except RuleError as err:
        raise ValueError(str(err)) from None
    zero = h.size // 2
    best, best_i = F32(FLT_MAX), 0
    for k, i in enumerate(range(nq // 2, zero + 1)):
        d = _divergence(h, zero, i, nq)
        if np.isnan(d):
            return np.array([np.nan], F32), np.array([np.nan], F32)
        if d < best:
            best, best_i = d, k
    thr = e[zero + nq // 2 + best_i + 1]
    return np.array([thr], F32), np.array([best], F32)


def calibrate_entropy_lowering(call: KernelCall) -> Lowered:
    if call.req == "add":
        raise NoKernelError("calibrate_entropy writes its outputs; it cannot add to them")
    nb = size(call.in_shapes[0])
    p: CalibrateEntropyParams = call.params
    nq = p.num_quantized_bins
    # workspace: p, q (float32) and the truncated counts (int64) of the widest window
    ws = nb * (4 + 4 + 8) + 4 * nq + 64
    spec = KernelSpec.make("quantization/calibrate.c.j2", nq=nq)
    return Lowered((Launch(spec, (nb,), workspace=ws),))


CALIBRATE_ENTROPY = register(
    OpDef(
        name="_contrib_calibrate_entropy",
        params=CalibrateEntropyParams,
        inputs=("hist", "hist_edges"),
        outputs=("threshold", "divergence"),
        infer_shape=calibrate_entropy_shape,
        infer_type=calibrate_entropy_type,
        reference=calibrate_entropy_reference,
        kernels={DENSE: Kernel(calibrate_entropy_lowering)},
        differentiable=False,
        doc="Searches the threshold whose quantized histogram (num_quantized_bins bins) has "
        "the smallest KL divergence from the clipped one; outputs the threshold and divergence.",
        examples=(
            Example(((21,), (22,)), {"num_quantized_bins": 5}, low=0.0, high=1.0,
                    ints={0: (0, 40)}),
            Example(((41,), (42,)), {"num_quantized_bins": 7}, low=-3.0, high=3.0,
                    ints={0: (1, 100)}),
        ),
        bad_params=({"num_quantized_bins": 0},),
    )
)
