"""Write MXNet 1.9.1's results for custom operators (run in ~/mxref; see README.md).

Two graphs, with the same props tests/ops/test_custom_op.py registers (op_types
``test_softmax`` and ``test_sumprod``): an MLP head FullyConnected -> Custom softmax (a loss,
need_top_grad=False), and a two-input, two-output Custom with an auxiliary state. Saved: each
symbol's JSON as MXNet writes it, and inputs, outputs, gradients and aux states (npz).
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402


class Softmax(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        y = np.exp(x - x.max(axis=1).reshape((x.shape[0], 1)))
        y /= y.sum(axis=1).reshape((x.shape[0], 1))
        self.assign(out_data[0], req[0], mx.nd.array(y))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].asnumpy().ravel().astype(int)
        y = out_data[0].asnumpy()
        y[np.arange(label.shape[0]), label] -= 1.0
        self.assign(in_grad[0], req[0], mx.nd.array(y))


@mx.operator.register("test_softmax")
class SoftmaxProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return Softmax()


class SumProd(mx.operator.CustomOp):
    def __init__(self, k):
        self.k = k

    def forward(self, is_train, req, in_data, out_data, aux):
        a, b = in_data
        self.assign(out_data[0], req[0], a + self.k * b)
        self.assign(out_data[1], req[1], a * b)
        if is_train:
            aux[0][:] += 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        gs, gp = out_grad
        a, b = in_data
        self.assign(in_grad[0], req[0], gs + gp * b)
        self.assign(in_grad[1], req[1], self.k * gs + gp * a)


@mx.operator.register("test_sumprod")
class SumProdProp(mx.operator.CustomOpProp):
    def __init__(self, k="1"):
        super().__init__(need_top_grad=True)
        self.k = float(k)

    def list_arguments(self):
        return ["a", "b"]

    def list_outputs(self):
        return ["sum", "prod"]

    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return [in_shape[0], in_shape[0]], [in_shape[0], in_shape[0]], [(1,)]

    def create_operator(self, ctx, shapes, dtypes):
        return SumProd(self.k)


def main(out: Path) -> None:
    rng = np.random.RandomState(7)
    arrays = {}
    # 1. FullyConnected -> Custom softmax, backward without head gradients
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    mlp = mx.sym.Custom(fc, op_type="test_softmax", name="softmax")
    (out / "mlp-symbol.json").write_text(mlp.tojson())
    x = rng.randn(4, 5).astype(np.float32)
    label = np.array([0, 2, 1, 2], np.float32)
    w = rng.randn(3, 5).astype(np.float32)
    bias = rng.randn(3).astype(np.float32)
    ex = mlp.simple_bind(mx.cpu(), data=(4, 5), grad_req={"data": "write", "fc_weight": "write",
                                                          "fc_bias": "write",
                                                          "softmax_label": "null"})
    for k, v in {"data": x, "fc_weight": w, "fc_bias": bias, "softmax_label": label}.items():
        ex.arg_dict[k][:] = v
        arrays[f"mlp_{k}"] = v
    ex.forward(is_train=True)
    ex.backward()
    arrays["mlp_output"] = ex.outputs[0].asnumpy()
    for k in ("data", "fc_weight", "fc_bias"):
        arrays[f"mlp_grad_{k}"] = ex.grad_dict[k].asnumpy()
    # 2. two inputs, two outputs and an aux state, with head gradients
    sp = mx.sym.Custom(mx.sym.var("a"), mx.sym.var("b"), op_type="test_sumprod", k=0.5,
                       name="sp")
    (out / "sumprod-symbol.json").write_text(sp.tojson())
    a, b = rng.randn(2, 3).astype(np.float32), rng.randn(2, 3).astype(np.float32)
    hs, hp = rng.randn(2, 3).astype(np.float32), rng.randn(2, 3).astype(np.float32)
    ex = sp.simple_bind(mx.cpu(), a=(2, 3), b=(2, 3))
    ex.arg_dict["a"][:], ex.arg_dict["b"][:] = a, b
    ex.aux_dict["sp_count"][:] = 3
    ex.forward(is_train=True)
    ex.backward([mx.nd.array(hs), mx.nd.array(hp)])
    arrays.update(sp_a=a, sp_b=b, sp_head_sum=hs, sp_head_prod=hp,
                  sp_sum=ex.outputs[0].asnumpy(), sp_prod=ex.outputs[1].asnumpy(),
                  sp_grad_a=ex.grad_dict["a"].asnumpy(), sp_grad_b=ex.grad_dict["b"].asnumpy(),
                  sp_count=ex.aux_dict["sp_count"].asnumpy())
    with open(out / "custom.npz", "wb") as f:
        np.savez(f, **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
