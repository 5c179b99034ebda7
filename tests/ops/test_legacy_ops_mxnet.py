"""Legacy operators against numbers MXNet 1.9.1 wrote (tests/golden/legacy_ops): BatchNorm_v1's
variance output and moving statistics, IdentityAttachKLSparseReg's penalty and moving average,
and Pooling_v1's zero padding, which the table of operator cases cannot show."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nnsym as mx

GOLD = np.load(Path(__file__).parents[1] / "golden" / "legacy_ops" / "legacy_ops.npz")


def close(a: object, name: str) -> None:
    np.testing.assert_allclose(np.asarray(a), GOLD[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_batch_norm_v1_outputs_the_variance_and_moves_the_statistics() -> None:
    s = mx.sym.BatchNorm_v1(mx.sym.var("data"), fix_gamma=False, output_mean_var=True, name="bn")
    s = mx.sym.Group([s[0], s[1], s[2]])
    ex = s.simple_bind(mx.cpu(), data=GOLD["bn_x"].shape)
    ex.arg_dict["data"][:] = GOLD["bn_x"]
    ex.arg_dict["bn_gamma"][:] = GOLD["bn_gamma"]
    ex.arg_dict["bn_beta"][:] = GOLD["bn_beta"]
    ex.aux_dict["bn_moving_var"][:] = 1
    outs = ex.forward(is_train=True)
    for k, o in zip(("out", "mean", "var"), outs):
        close(o.asnumpy(), "bn_train_" + k)
    ex.backward([mx.nd.array(GOLD["bn_head"]), mx.nd.zeros((3,)), mx.nd.zeros((3,))])
    close(ex.grad_dict["data"].asnumpy(), "bn_grad_data")
    close(ex.grad_dict["bn_gamma"].asnumpy(), "bn_grad_gamma")
    close(ex.grad_dict["bn_beta"].asnumpy(), "bn_grad_beta")
    close(ex.aux_dict["bn_moving_mean"].asnumpy(), "bn_moving_mean")
    close(ex.aux_dict["bn_moving_var"].asnumpy(), "bn_moving_var")
    for k, o in zip(("out", "mean", "var"), ex.forward(is_train=False)):
        close(o.asnumpy(), "bn_infer_" + k)


def test_kl_sparse_reg_penalty_and_moving_average_over_two_steps() -> None:
    s = mx.sym.IdentityAttachKLSparseReg(mx.sym.var("data"), penalty=0.01, momentum=0.8,
                                         name="kl")
    ex = s.simple_bind(mx.cpu(), data=GOLD["kl_x"].shape)
    ex.arg_dict["data"][:] = GOLD["kl_x"]
    ex.aux_dict["kl_moving_avg"][:] = 0.3
    for step in range(2):
        close(ex.forward(is_train=True)[0].asnumpy(), f"kl_out{step}")
        ex.backward([mx.nd.array(GOLD["kl_head"])])
        close(ex.grad_dict["data"].asnumpy(), f"kl_grad{step}")
        close(ex.aux_dict["kl_moving_avg"].asnumpy(), f"kl_avg{step}")


def test_pooling_v1_max_sees_the_zero_padding() -> None:
    s = mx.sym.Pooling_v1(mx.sym.var("data"), kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                          pool_type="max")
    ex = s.simple_bind(mx.cpu(), data=GOLD["pool_x"].shape)
    ex.arg_dict["data"][:] = GOLD["pool_x"]
    out = ex.forward(is_train=True)[0].asnumpy()
    close(out, "pool_out")
    assert (out[..., 0, :] == 0).all()  # every border window holds a padding zero
    ex.backward([mx.nd.array(GOLD["pool_head"])])
    close(ex.grad_dict["data"].asnumpy(), "pool_grad")


@pytest.mark.parametrize("params", [{"kernel": (2, 2, 2)}, {"kernel": (2, 2), "p_value": 2}])
def test_pooling_v1_refuses_what_it_lacks(params: dict) -> None:
    with pytest.raises(mx.errors.NNSymError):
        mx.sym.Pooling_v1(mx.sym.var("data"), **params)
