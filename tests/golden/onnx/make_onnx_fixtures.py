"""Make the ONNX fixtures with MXNet 1.9.1's own exporter (run in the reference venv):

    MXNET_SUBGRAPH_BACKEND=NONE PYTHONPATH=<dir with onnx==1.14.1, protobuf==3.20.3> \
        ~/mxref/bin/python \
        tests/golden/onnx/make_onnx_fixtures.py

Writes <name>.onnx (exported by mx.onnx.export_model) and <name>.npz (the input and MXNet's
forward output) for a few small nets. Never imported by the tests. The heads are softmax, not
SoftmaxOutput: MXNet 1.9.1's exporter fails on SoftmaxOutput with its label (IndexError).
"""
import os

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def nets():
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.FullyConnected(h, num_hidden=4, name="fc2")
    yield "mlp", mx.sym.softmax(h, name="softmax"), (3, 20)

    data = mx.sym.Variable("data")
    c = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv1")
    b = mx.sym.BatchNorm(c, fix_gamma=False, eps=1e-3, name="bn1")
    r = mx.sym.Activation(b, act_type="relu", name="relu1")
    p = mx.sym.Pooling(r, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    f = mx.sym.Flatten(p, name="flat")
    fc = mx.sym.FullyConnected(f, num_hidden=5, name="fc")
    yield "convnet", mx.sym.softmax(fc, name="softmax"), (2, 3, 8, 8)

    data = mx.sym.Variable("data")
    c1 = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), no_bias=True,
                            name="conv1")
    a1 = mx.sym.LeakyReLU(c1, act_type="leaky", slope=0.1, name="lrelu")
    c2 = mx.sym.Convolution(a1, kernel=(1, 1), num_filter=4, num_group=2, name="conv2")
    s = mx.sym.elemwise_add(c2, a1, name="add")
    cat = mx.sym.Concat(s, a1, dim=1, name="cat")
    p = mx.sym.Pooling(cat, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="pool")
    g = mx.sym.Pooling(p, global_pool=True, pool_type="avg", kernel=(1, 1), name="gpool")
    f = mx.sym.Flatten(g, name="flat")
    t = mx.sym.tanh(mx.sym.FullyConnected(f, num_hidden=6, name="fc"), name="tanh")
    yield "mixed", mx.sym.softmax(t * 2.0 + 1.0, axis=-1, name="out"), (2, 3, 8, 8)


def main():
    rng = np.random.RandomState(0)
    for name, sym, shape in nets():
        arg_shapes, _, aux_shapes = sym.infer_shape(data=shape)
        args = {}
        for n, s in zip(sym.list_arguments(), arg_shapes):
            if n == "data" or n.endswith("_label"):
                continue
            if n.endswith("gamma"):
                args[n] = mx.nd.array(rng.uniform(0.5, 1.5, s))
            else:
                args[n] = mx.nd.array(rng.normal(0, 0.4, s))
        aux = {n: mx.nd.array(rng.uniform(0.5, 1.5, s) if "var" in n else rng.normal(0, .1, s))
               for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        exe = sym.simple_bind(mx.cpu(), grad_req="null", data=shape)
        for n, v in args.items():
            exe.arg_dict[n][:] = v
        for n, v in aux.items():
            exe.aux_dict[n][:] = v
        exe.arg_dict["data"][:] = x
        out = exe.forward(is_train=False)[0].asnumpy()
        path = os.path.join(HERE, name + ".onnx")
        mx.onnx.export_model(sym, [args, aux], [shape], np.float32, path)
        np.savez(os.path.join(HERE, name + ".npz"), data=x, output=out)
        print(name, out.shape, os.path.getsize(path))


if __name__ == "__main__":
    main()
