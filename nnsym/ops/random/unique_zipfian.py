"""_sample_unique_zipfian: num_sampled distinct classes per row, drawn from an approximately
log-uniform (Zipfian) distribution over [0, range_max) without replacement, and the number of
draws each row took. Counter-based draws (``nnsym_uniform`` of the run seed), one row per
thread, so values do not depend on how rows are split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, fixed_out_dtype, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import no_gradient
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class UniqueZipfianParams(Params):
    range_max: int = field(lower=1, doc="Number of classes: samples lie in [0, range_max).")
    shape: tuple[int, ...] | None = field(
        default=None, doc="(batch_size, num_sampled) of the samples.")


def unique_zipfian_shape(p: UniqueZipfianParams, ins: list, outs: list) -> tuple[list, list]:
    if p.shape is None or len(p.shape) != 2:
        raise RuleError(f"shape={shape_str(p.shape)} must be (batch_size, num_sampled)")
    b, n = p.shape
    if n > p.range_max:
        raise RuleError(f"num_sampled={n} distinct classes cannot be drawn from "
                        f"range_max={p.range_max}")
    return [], [(b, n), (b,)]


def unique_zipfian_reference(p: UniqueZipfianParams) -> tuple[np.ndarray, np.ndarray]:
    """Samples of the same distribution (numpy's generator, not the kernel's draws)."""
    assert p.shape is not None
    b, n = p.shape
    rng = np.random.default_rng(0)
    out = np.zeros((b, n), np.int64)
    trials = np.zeros(b, np.int64)
    for r in range(b):
        seen: list[int] = []
        while len(seen) < n:
            trials[r] += 1
            x = min(max(int(np.exp(rng.random() * np.log(p.range_max + 1))) - 1, 0),
                    p.range_max - 1)
            if x not in seen:
                seen.append(x)
        out[r] = seen
    return out, trials


def unique_zipfian_lowering(call: KernelCall) -> Lowered:
    b, n = call.out_shapes[0]
    if b == 0:
        return Lowered()
    spec = KernelSpec.make("random/unique_zipfian.c.j2")
    return Lowered((Launch(spec, (b, n, call.params.range_max), (0.0,), seed_slot=0),))


UNIQUE_ZIPFIAN = register(OpDef(
    name="_sample_unique_zipfian",
    params=UniqueZipfianParams,
    inputs=(),
    outputs=("samples", "trials"),
    infer_shape=unique_zipfian_shape,
    infer_type=fixed_out_dtype(lambda p: np.int64),
    reference=unique_zipfian_reference,
    kernels={DENSE: Kernel(unique_zipfian_lowering)},
    grad=no_gradient,
    differentiable=False,
    random=True,
    doc="num_sampled distinct approximately log-uniform classes in [0, range_max) per row, "
        "and the draws each row took.",
    examples=(Example((), {"range_max": 50, "shape": (3, 8)}),
              Example((), {"range_max": 5, "shape": (2, 5)})),
    bad_params=({"shape": (2, 3)}, {"range_max": 0, "shape": (2, 3)}),
))
