"""Writes legacy_ops.npz: MXNet 1.9.1's numbers for the legacy operators whose aux states the
opcases table cannot feed (BatchNorm_v1, IdentityAttachKLSparseReg) and for Pooling_v1's zero
padding. Run in the MXNet reference venv: ``~/mxref/bin/python make.py [out.npz]``."""

import os
import sys

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

rs = np.random.RandomState(13)
res = {}

# BatchNorm_v1, training then inference; moving statistics after one backward.
x = rs.randn(2, 3, 4, 4).astype("f")
gamma = (rs.rand(3) + 0.5).astype("f")
beta = rs.randn(3).astype("f")
head = rs.rand(2, 3, 4, 4).astype("f")
s = mx.sym.BatchNorm_v1(mx.sym.var("data"), fix_gamma=False, output_mean_var=True, name="bn")
s = mx.sym.Group([s[0], s[1], s[2]])
ex = s.simple_bind(mx.cpu(), data=x.shape)
ex.arg_dict["data"][:] = x
ex.arg_dict["bn_gamma"][:] = gamma
ex.arg_dict["bn_beta"][:] = beta
ex.aux_dict["bn_moving_var"][:] = 1
outs = ex.forward(is_train=True)
ex.backward([mx.nd.array(head), mx.nd.zeros(3), mx.nd.zeros(3)])
res.update(bn_x=x, bn_gamma=gamma, bn_beta=beta, bn_head=head)
for k, o in zip(("out", "mean", "var"), outs):
    res["bn_train_" + k] = o.asnumpy()
res["bn_grad_data"] = ex.grad_dict["data"].asnumpy()
res["bn_grad_gamma"] = ex.grad_dict["bn_gamma"].asnumpy()
res["bn_grad_beta"] = ex.grad_dict["bn_beta"].asnumpy()
res["bn_moving_mean"] = ex.aux_dict["bn_moving_mean"].asnumpy()
res["bn_moving_var"] = ex.aux_dict["bn_moving_var"].asnumpy()
for k, o in zip(("out", "mean", "var"), ex.forward(is_train=False)):
    res["bn_infer_" + k] = o.asnumpy()

# IdentityAttachKLSparseReg on 2-D data (MXNet's backward fails for more dimensions): two steps.
x = rs.rand(4, 3).astype("f")
head = rs.rand(4, 3).astype("f")
s = mx.sym.IdentityAttachKLSparseReg(mx.sym.var("data"), penalty=0.01, momentum=0.8, name="kl")
ex = s.simple_bind(mx.cpu(), data=x.shape)
ex.arg_dict["data"][:] = x
ex.aux_dict["kl_moving_avg"][:] = 0.3
res.update(kl_x=x, kl_head=head)
for step in range(2):
    res[f"kl_out{step}"] = ex.forward(is_train=True)[0].asnumpy()
    ex.backward([mx.nd.array(head)])
    res[f"kl_grad{step}"] = ex.grad_dict["data"].asnumpy()
    res[f"kl_avg{step}"] = ex.aux_dict["kl_moving_avg"].asnumpy()

# Pooling_v1 on negative data: the zero padding wins the max at the border.
x = (rs.randn(1, 2, 5, 5) - 3).astype("f")
head = rs.rand(1, 2, 3, 3).astype("f")
d = mx.nd.array(x)
d.attach_grad()
with mx.autograd.record():
    y = mx.nd.Pooling_v1(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")
y.backward(mx.nd.array(head))
res.update(pool_x=x, pool_head=head, pool_out=y.asnumpy(), pool_grad=d.grad.asnumpy())

np.savez(sys.argv[1] if len(sys.argv) > 1 else "legacy_ops.npz", **res)
