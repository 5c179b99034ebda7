"""Import of ONNX graphs written the way other exporters write them (PyTorch, tf2onnx): Gemm
without transB, MatMul, Constant nodes, Reshape with a constant shape, Clip with inputs...
nnsym runs the imported symbol; onnxruntime runs the file; the outputs agree."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nnsym.onnx import OnnxError, import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _init(name, shape, scale=0.3):
    return numpy_helper.from_array(RNG.normal(0, scale, shape).astype(np.float32), name)


def _model(nodes, inits, in_shape, out_name="y", opset=13):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.ValueInfoProto(name=out_name)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _compare(tmp_path, model, in_shape, rtol=1e-4, atol=1e-5):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = RNG.uniform(-1, 1, in_shape).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    sym, args, aux = import_model(path)
    exe = sym.simple_bind(grad_req="null", x=in_shape)
    for k, v in args.items():
        exe.arg_dict[k][:] = v
    for k, v in aux.items():
        exe.aux_dict[k][:] = v
    exe.arg_dict["x"][:] = x
    got = exe.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return sym, args, aux


def test_torch_style_conv_net(tmp_path):
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
          strides=[1, 1]),
        n("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["bn1"], epsilon=1e-5),
        n("Relu", ["bn1"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "w2"], ["c2"], kernel_shape=[3, 3], group=2, dilations=[1, 1]),
        n("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], strides=[1, 1], pads=[1, 1, 1, 1],
          count_include_pad=0),
        n("Clip", ["p2", "lo", "hi"], ["cl"]),
        n("GlobalAveragePool", ["cl"], ["gp"]),
        n("Flatten", ["gp"], ["f"], axis=1),
        n("Gemm", ["f", "wfc", "bfc"], ["fc"], transB=0),  # weight stored (in, out)
        n("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
        n("Mul", ["fc", "two"], ["mul"]),
        n("Softmax", ["mul"], ["y"], axis=-1),
    ]
    inits = [_init("w1", (4, 3, 3, 3)), _init("b1", (4,)), _init("w2", (6, 2, 3, 3)),
             numpy_helper.from_array(RNG.uniform(0.5, 1.5, 4).astype(np.float32), "g1"),
             _init("be1", (4,)), _init("m1", (4,), 0.1),
             numpy_helper.from_array(RNG.uniform(0.5, 1.5, 4).astype(np.float32), "v1"),
             numpy_helper.from_array(np.array(-0.2, np.float32), "lo"),
             numpy_helper.from_array(np.array(0.3, np.float32), "hi"),
             _init("wfc", (6, 5)), _init("bfc", (5,))]
    _, args, aux = _compare(tmp_path, _model(nodes, inits, (2, 3, 8, 8)), (2, 3, 8, 8))
    assert set(aux) == {"m1", "v1"}
    assert "lo" not in args and "hi" not in args  # Clip's bounds became parameters of clip


def test_mlp_with_matmul_reshape_transpose_concat(tmp_path):
    n = helper.make_node
    nodes = [
        n("Reshape", ["x", "shape"], ["flat"]),
        n("MatMul", ["flat", "w"], ["mm"]),
        n("Add", ["mm", "b"], ["h"]),
        n("Sigmoid", ["h"], ["s"]),
        n("Dropout", ["s"], ["d"]),
        n("Identity", ["d"], ["i"]),
        n("Transpose", ["i"], ["t"], perm=[1, 0]),
        n("Concat", ["t", "t"], ["cat"], axis=0),
        n("Sub", ["cat", "b2"], ["sub"]),
        n("Div", ["sub", "b3"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([0, -1], np.int64), "shape"),
             _init("w", (12, 7)), _init("b", (7,)), _init("b2", (14, 1)),
             numpy_helper.from_array(RNG.uniform(1, 2, (1, 4)).astype(np.float32), "b3")]
    _compare(tmp_path, _model(nodes, inits, (4, 3, 4)), (4, 3, 4))


def test_unknown_operator_and_dynamic_attributes_are_named(tmp_path):
    n = helper.make_node
    model = _model([n("Hardmax", ["x"], ["y"])], [], (2, 3))
    onnx.save(model, str(tmp_path / "a.onnx"))
    with pytest.raises(OnnxError, match=r"\(Hardmax\): this ONNX operator has no nnsym"):
        import_model(tmp_path / "a.onnx")
    model = _model([n("Reshape", ["x", "s"], ["y"])], [], (2, 3))
    model.graph.input.append(helper.make_tensor_value_info("s", TensorProto.INT64, [2]))
    onnx.save(model, str(tmp_path / "b.onnx"))
    with pytest.raises(OnnxError, match=r"target shape.*must be a constant"):
        import_model(tmp_path / "b.onnx")


@pytest.mark.parametrize("name", ["mlp", "convnet", "mixed"])
def test_mxnet_exported_models_import_and_match_mxnet(name):
    """Files written by MXNet 1.9.1's own exporter (opset 19, shape arithmetic around every
    FullyConnected: Shape/Slice/Concat feeding Reshape) give MXNet's outputs in nnsym."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "golden" / "onnx"
    ref = np.load(fixtures / f"{name}.npz")
    sym, args, aux = import_model(fixtures / f"{name}.onnx")
    exe = sym.simple_bind(grad_req="null", data=ref["data"].shape)
    for k, v in {**args, **aux}.items():
        (exe.aux_dict if k in aux else exe.arg_dict)[k][:] = v
    exe.arg_dict["data"][:] = ref["data"]
    got = exe.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(got, ref["output"], rtol=1e-5, atol=1e-6)
    if name == "convnet":
        assert set(aux) == {"bn1_moving_mean", "bn1_moving_var"}


def test_huge_constants_are_not_built(tmp_path):
    n = helper.make_node
    big = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "shape")
    model = _model([n("ConstantOfShape", ["shape"], ["c"]), n("Add", ["x", "c"], ["y"])],
                   [big], (2, 3))
    onnx.save(model, str(tmp_path / "big.onnx"))
    with pytest.raises(OnnxError, match="too large"):
        import_model(tmp_path / "big.onnx")
