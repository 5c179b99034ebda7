"""Sparse elementwise fusion (nnsym/passes/fuse.py): chains of pattern-keeping nodes on one csr
or row_sparse entry run as one pass over the stored values. Checked against the same graphs
bound with fusion off and against scipy.sparse / numpy on the dense values; what must not fuse
(two different patterns, a value map with f(0) != 0, a dense operand).

Tolerance: none; the fused program stores each step in that node's output type, as the
unfused kernels do."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from nnsym import cpu, nd, sym
from nnsym.executor.executor import Executor


def csr(rng: np.random.Generator, shape: tuple[int, int], density: float,
        dtype: str = "float32") -> sp.csr_matrix:
    m = sp.random(*shape, density=density, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.uniform(-2, 2, n))
    m.sum_duplicates()
    return m.astype(dtype)


def rsp(rng: np.random.Generator, shape: tuple[int, int], rows: int,
        dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    ids = np.sort(rng.choice(shape[0], rows, replace=False)).astype(np.int64)
    return rng.uniform(-2, 2, (rows, shape[1])).astype(dtype), ids


def to_nd(m: sp.csr_matrix):
    return nd.sparse.csr_matrix((m.data, m.indices, m.indptr), shape=m.shape, dtype=m.dtype)


def bind(net, args: dict, fusion: bool) -> Executor:
    return Executor(net, cpu(), [args[n] for n in net.list_arguments()], None, "null",
                    fusion=fusion)


def fused_nodes(ex: Executor) -> list:
    return [n for n in ex._idx.nodes if n.op is not None and n.op.name == "_fused_elemwise"]


def both(net, args: dict):
    """(fused executor, fused outputs, unfused outputs) as scipy/numpy values."""
    fx, ux = bind(net, args, True), bind(net, args, False)
    fo, uo = fx.forward(), ux.forward()
    return fx, fo, uo


def test_w5_chain_is_one_pass_over_the_values():
    rng = np.random.default_rng(0)
    m = csr(rng, (300, 500), 0.02)
    a = sym.Variable("A", stype="csr")
    net = a * a * 1.5 + a * 2.0
    fx, fo, uo = both(net, {"A": to_nd(m)})
    fused = fused_nodes(fx)
    assert len(fused) == 1 and fused[0].attrs["fused_ops"].split(",") == [
        "elemwise_mul", "_mul_scalar", "_mul_scalar", "elemwise_add"]
    out = fo[0]
    assert out.stype == "csr" and uo[0].stype == "csr"
    ref = (m.multiply(m) * np.float32(1.5) + m * np.float32(2.0)).toarray()
    np.testing.assert_array_equal(out.asnumpy(), uo[0].asnumpy())
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=1e-6)
    # the result keeps A's pattern
    np.testing.assert_array_equal(out.indices.asnumpy(), m.indices)
    np.testing.assert_array_equal(out.indptr.asnumpy(), m.indptr)
    assert "_fused_elemwise" in fx.debug_str()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_csr_unary_and_scalar_chains_match_unfused(dtype):
    rng = np.random.default_rng(1)
    m = csr(rng, (64, 80), 0.1, dtype)
    a = sym.Variable("A", stype="csr")
    nets = [
        sym.sqrt(sym.abs(a) * 3.0) - sym.sin(a),
        sym.square(sym.tanh(a)) + a / 4.0,
        sym.relu(a * -2.0) * a,
        sym.negative(sym.sign(a)) * sym.abs(a) - a,
    ]
    for net in nets:
        fx, fo, uo = both(net, {"A": to_nd(m)})
        assert len(fused_nodes(fx)) == 1, net.tojson()
        assert fo[0].stype == uo[0].stype == "csr"
        np.testing.assert_array_equal(fo[0].asnumpy(), uo[0].asnumpy())


def test_row_sparse_chain_matches_unfused_and_numpy():
    rng = np.random.default_rng(2)
    vals, ids = rsp(rng, (40, 6), 9)
    x = nd.sparse.row_sparse_array((vals, ids), shape=(40, 6))
    w = sym.Variable("w", stype="row_sparse")
    net = (w * w - w * 0.5) * 2.0 + sym.abs(w)
    fx, fo, uo = both(net, {"w": x})
    assert len(fused_nodes(fx)) == 1
    assert fo[0].stype == "row_sparse"
    np.testing.assert_array_equal(fo[0].asnumpy(), uo[0].asnumpy())
    dense = np.zeros((40, 6), np.float32)
    dense[ids] = vals
    ref = (dense * dense - dense * np.float32(0.5)) * np.float32(2) + np.abs(dense)
    np.testing.assert_allclose(fo[0].asnumpy(), ref, rtol=1e-6)
    np.testing.assert_array_equal(fo[0].indices.asnumpy(), ids)


def test_two_patterns_do_not_fuse_together():
    rng = np.random.default_rng(3)
    m1, m2 = csr(rng, (30, 40), 0.1), csr(rng, (30, 40), 0.1)
    a, b = sym.Variable("A", stype="csr"), sym.Variable("B", stype="csr")
    net = (a * 2.0) + (b * 3.0)  # the union of two patterns: the add runs on its own
    fx, fo, uo = both(net, {"A": to_nd(m1), "B": to_nd(m2)})
    assert not fused_nodes(fx)
    np.testing.assert_array_equal(fo[0].asnumpy(), uo[0].asnumpy())
    np.testing.assert_allclose(fo[0].asnumpy(), (m1 * 2 + m2 * 3).toarray(), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::nnsym.ops.common.stype.StorageFallbackWarning")
def test_nonzero_at_zero_and_dense_operands_stay_apart():
    rng = np.random.default_rng(4)
    m = csr(rng, (20, 30), 0.1)
    a, d = sym.Variable("A", stype="csr"), sym.Variable("D")
    dv = rng.standard_normal((20, 30)).astype(np.float32)
    # exp(0) == 1: a dense result; the csr * dense product keeps the csr pattern but reads a
    # dense operand, so it is not a values-only pass either
    for net in (sym.exp(a * 2.0) * 3.0, (a * 2.0) * d):
        fx, fo, uo = both(net, {"A": to_nd(m), "D": nd.array(dv)})
        assert not fused_nodes(fx)
        np.testing.assert_array_equal(fo[0].asnumpy(), uo[0].asnumpy())


def test_subtracting_a_pattern_from_itself_keeps_explicit_zeros_like_unfused():
    rng = np.random.default_rng(5)
    m = csr(rng, (10, 12), 0.3)
    a = sym.Variable("A", stype="csr")
    fx, fo, uo = both((a * 2.0) - (a + a), {"A": to_nd(m)})
    assert len(fused_nodes(fx)) == 1
    assert fo[0].data.shape == uo[0].data.shape == (m.nnz,)
    np.testing.assert_array_equal(fo[0].asnumpy(), np.zeros((10, 12), np.float32))


def test_empty_pattern_and_repeated_forwards():
    a = sym.Variable("A", stype="csr")
    net = a * a * 2.0 + a
    empty = sp.csr_matrix((5, 7), dtype=np.float32)
    _, fo, uo = both(net, {"A": to_nd(empty)})
    assert fo[0].stype == uo[0].stype == "csr" and fo[0].data.shape == (0,)
    np.testing.assert_array_equal(fo[0].asnumpy(), np.zeros((5, 7), np.float32))
    rng = np.random.default_rng(6)
    m = csr(rng, (5, 7), 0.4)
    ex = bind(net, {"A": to_nd(m)}, True)
    first = ex.forward()[0].asnumpy().copy()
    second = ex.forward()[0].asnumpy()
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, (m.multiply(m) * 2 + m).toarray(), rtol=1e-6)
