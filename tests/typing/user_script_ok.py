"""A user's training script, type-checked by test_mypy_user_scripts.py (mypy --strict): every
annotated return below fails mypy's warn_return_any if nnsym's API returns Any there."""

from __future__ import annotations

import numpy as np

import nnsym as mx
from nnsym.executor import Executor


def mlp(num_classes: int = 3) -> mx.sym.Symbol:
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu")
    fc2 = mx.sym.FullyConnected(data=act, num_hidden=num_classes, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def shapes(net: mx.sym.Symbol) -> list[tuple[int, ...]]:
    arg_shapes, _, _ = net.infer_shape(data=(4, 8))
    if arg_shapes is None:  # MXNet's answer when some shape cannot be inferred
        raise ValueError("incomplete shapes")
    return arg_shapes


def bind(net: mx.sym.Symbol) -> Executor:
    return net.simple_bind(mx.cpu(), data=(4, 8), softmax_label=(4,))


def step(exe: Executor, lr: float) -> mx.nd.NDArray:
    outs = exe.forward(is_train=True)
    exe.backward()
    for name, grad in exe.grad_dict.items():
        if grad is not None and name != "data":
            w = exe.arg_dict[name]
            w -= lr * grad
    return outs[0]


def imperative(x: mx.nd.NDArray) -> np.ndarray:
    y = mx.nd.relu(x) * 2 + mx.nd.ones(x.shape)
    z = mx.nd.dot(y, y.T).sum(axis=1, keepdims=True).exp().log()  # fluent methods
    return z.asnumpy()


def module_fit(net: mx.sym.Symbol) -> list[mx.nd.NDArray]:
    mod = mx.mod.Module(net, data_names=("data",), label_names=("softmax_label",))
    mod.bind(data_shapes=[("data", (4, 8))], label_shapes=[("softmax_label", (4,))])
    mod.init_params(initializer=mx.init.Xavier())
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, rescale_grad=1 / 4)
    mod.init_optimizer(optimizer=opt)
    batch = mx.io.DataBatch(data=[mx.nd.ones((4, 8))], label=[mx.nd.zeros((4,))])
    mod.forward(batch, is_train=True)
    mod.backward()
    mod.update()
    return mod.get_outputs()


def main() -> None:
    net = mlp()
    print(shapes(net))
    exe = bind(net)
    exe.arg_dict["data"][:] = np.ones((4, 8), np.float32)
    print(step(exe, 0.1).shape)
    print(imperative(mx.nd.array(np.eye(3, dtype=np.float32))))
    print(module_fit(net)[0].asnumpy().sum(axis=1).round(5))
    sampled: mx.nd.NDArray = mx.nd.random.uniform(0, 1, shape=(2, 2))
    print(sampled.shape, mx.sym.contrib.quadratic(mx.sym.var("q"), a=1.0).name)


if __name__ == "__main__":
    main()
