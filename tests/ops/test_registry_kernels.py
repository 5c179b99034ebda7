"""Every operator runs imperatively through ``nnsym.nd`` on its generated dense kernel and
matches its numpy reference (float32 rtol 1e-5, float64 rtol 1e-12)."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd
from nnsym.ir.opdef import DENSE
from nnsym.ops import REGISTRY
from nnsym.testing import as_nd, make_inputs, reference_outputs

OPS = sorted(REGISTRY.values(), key=lambda op: op.name)
CASES = [pytest.param(op, ex, id=f"{op.name}-{ex}") for op in OPS for ex in op.examples]
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-13), "float16": (1e-3, 1e-3)}


def test_every_operator_has_a_dense_kernel():
    # value-shaped operators run as storage kernels that size their outputs (tests/dynamic)
    lacking = [op.name for op in OPS if DENSE not in op.kernels and op.python is None
               and not op.value_shaped]
    assert not lacking, f"operators without a dense C kernel: {lacking}"


@pytest.mark.parametrize(("op", "ex"), CASES)
def test_imperative_call_matches_reference(op, ex):
    if op.value_shaped and op.infer_stype is not None:
        pytest.skip("csr inputs only: tests/dynamic")
    if DENSE not in op.kernels and not op.value_shaped:
        pytest.skip("no dense kernel (reported by test_every_operator_has_a_dense_kernel)")
    params, _ = op.parse_params(ex.params)
    inputs = make_inputs(op, ex)
    want = reference_outputs(op, params, inputs)[: op.num_visible(params)]
    got = getattr(nd, op.name)(*[as_nd(a) for a in inputs],
                               **dict(ex.params))
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.asnumpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        if op.random:
            continue  # samples: tests/ops/test_random.py checks their distributions
        rtol, atol = TOL.get(w.dtype.name, (0, 0))
        # Sums (dot, convolution, reductions) may run in another order than numpy's, so an
        # output near zero that comes out of cancelling terms carries an absolute error of
        # the order of the outputs' scale: the absolute tolerance is scaled by it.
        finite = np.abs(w[np.isfinite(w)]) if w.dtype.kind == "f" else np.zeros(0)
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, equal_nan=True)
