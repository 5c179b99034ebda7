"""Executor.profile: the kernels of one run, timed in place, with the run's own results."""

from __future__ import annotations

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError


def _net():
    x = sym.Variable("data")
    h = sym.FullyConnected(x, num_hidden=16, name="fc1")
    h = sym.Activation(h, act_type="tanh", name="act1")
    return sym.FullyConnected(h, num_hidden=4, name="fc2")


def _bind(rng):
    exe = _net().simple_bind(data=(5, 8), grad_req="write")
    for a in exe.arg_dict.values():
        a[:] = rng.standard_normal(a.shape).astype(np.float32)
    return exe


def test_profile_names_every_kernel_and_matches_a_plain_run():
    rng = np.random.default_rng(0)
    exe = _bind(rng)
    head = nd.array(rng.standard_normal((5, 4)).astype(np.float32))
    exe.forward(is_train=True)
    exe.backward(head)
    want_out = exe.outputs[0].asnumpy().copy()
    want_grads = {k: v.asnumpy().copy() for k, v in exe.grad_dict.items()}
    for a in exe.grad_dict.values():
        a[:] = 0

    prof = exe.profile(is_train=True, backward=True, out_grads=head)

    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), want_out)
    for k, v in want_grads.items():
        np.testing.assert_array_equal(exe.grad_dict[k].asnumpy(), v)
    names = {name for name, _, _ in prof}
    ops = {op for _, op, _ in prof}
    # fused kernels are named by the nodes they compute (NNSYM_FUSION=0: one kernel each)
    assert "fc1+act1" in names or {"fc1", "act1"} <= names
    assert {"fc2", "fc1_backward", "act1_backward", "fc2_backward"} <= names
    assert {"FullyConnected", "_backward_FullyConnected", "_backward_Activation"} <= ops
    assert all(t >= 0 for _, _, t in prof)
    assert "?" not in names


def test_profile_forward_only_times_only_the_forward():
    rng = np.random.default_rng(1)
    exe = _bind(rng)
    fwd = exe.profile()
    both = exe.profile(is_train=True, backward=True,
                       out_grads=nd.array(np.ones((5, 4), np.float32)))
    assert 0 < len(fwd) < len(both)
    assert not any(op.startswith("_backward") for _, op, _ in fwd)
    x = exe.arg_dict["data"].asnumpy()
    w1, b1 = exe.arg_dict["fc1_weight"].asnumpy(), exe.arg_dict["fc1_bias"].asnumpy()
    w2, b2 = exe.arg_dict["fc2_weight"].asnumpy(), exe.arg_dict["fc2_bias"].asnumpy()
    exe.profile()
    ref = np.tanh(x @ w1.T + b1) @ w2.T + b2
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), ref, rtol=1e-5, atol=1e-5)


def test_profile_backward_needs_the_head_gradients():
    exe = _bind(np.random.default_rng(2))
    with pytest.raises(NNSymError, match="head gradient"):
        exe.profile(is_train=True, backward=True)


def test_profile_names_python_steps_by_their_node():
    """A node with sparse storage runs as a Python step: its entry carries its node's name."""
    x, w = sym.Variable("x", stype="csr"), sym.Variable("w")
    loss = sym.MakeLoss(sym.sum(sym.square(sym.dot(x, w, name="d"))), name="l")
    exe = loss.simple_bind(x=(6, 5), w=(5, 3), stype_dict={"x": "csr"},
                           grad_req={"x": "null", "w": "write"})
    dense = np.eye(6, 5, dtype=np.float32)
    exe.arg_dict["x"][:] = nd.array(dense).tostype("csr")
    exe.arg_dict["w"][:] = np.ones((5, 3), np.float32)
    prof = exe.profile(is_train=True, backward=True)
    assert ("d", "dot") in [(name, op) for name, op, _ in prof]
    np.testing.assert_allclose(exe.grad_dict["w"].asnumpy(), 2 * dense.T @ (dense @ np.ones(
        (5, 3), np.float32)), rtol=1e-6)
