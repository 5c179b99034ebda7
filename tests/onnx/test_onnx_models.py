"""ONNX acceptance: the MLP, the conv net with BatchNorm, the bundled MobileNet checkpoint and
ResNet-18 export and run in onnxruntime with nnsym's outputs, and import back with the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import nnsym  # noqa: E402
from nnsym import symbol as S  # noqa: E402
from nnsym.cli import demo_symbols, main  # noqa: E402
from nnsym.model import load_checkpoint, save_checkpoint  # noqa: E402
from nnsym.ndarray.ndarray import array as nd_array  # noqa: E402
from nnsym.onnx import OnnxError, export_model, get_model_metadata, import_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MOBILENET = ROOT / "nnsym" / "examples" / "mobilenet_v1_w025"
RESNET = ROOT / "tests" / "golden" / "resnet18_v1-symbol.json"


def random_params(sym, shapes, seed=0):
    """Weights scaled by fan-in (activations stay O(1) through deep nets); positive variances."""
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    label = f"{sym.outputs[0].node.name}_label"
    args = {}
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name in shapes or name == label:
            continue
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if name.endswith("gamma"):
            v = rng.uniform(0.5, 1.5, shape)
        elif len(shape) > 1:
            v = rng.normal(0, 1 / np.sqrt(fan_in), shape)
        else:
            v = rng.uniform(-0.1, 0.1, shape)
        args[name] = v.astype(np.float32)
    aux = {n: (rng.uniform(0.5, 1.5, s) if "var" in n else rng.uniform(-0.1, 0.1, s))
           .astype(np.float32) for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    return args, aux


def nnsym_forward(sym, args, aux, data):
    exe = sym.simple_bind(grad_req="null", data=data.shape)
    for k, v in args.items():
        exe.arg_dict[k][:] = np.asarray(v.asnumpy() if hasattr(v, "asnumpy") else v)
    for k, v in aux.items():
        exe.aux_dict[k][:] = np.asarray(v.asnumpy() if hasattr(v, "asnumpy") else v)
    exe.arg_dict["data"][:] = data
    return exe.forward(is_train=False)[0].asnumpy()


def ort_run(path, data):
    return ort.InferenceSession(str(path)).run(None, {"data": data})[0]


def _models():
    demo = demo_symbols()
    yield "mlp", demo["mlp"][0], (4, 784)
    yield "convnet", demo["convnet"][0], (2, 3, 32, 32)
    yield "mobilenet", None, (1, 3, 224, 224)
    yield "resnet18", S.load(RESNET), (1, 3, 224, 224)


@pytest.mark.parametrize("name,sym,shape", list(_models()), ids=[m[0] for m in _models()])
def test_model_exports_runs_and_imports_back(tmp_path, name, sym, shape):
    if sym is None:
        sym, args, aux = load_checkpoint(MOBILENET, 0)
    else:
        args, aux = random_params(sym, {"data": shape})
    data = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    want = nnsym_forward(sym, args, aux, data)
    path = export_model(sym, [args, aux], [shape], np.float32, tmp_path / f"{name}.onnx")
    onnx.checker.check_model(onnx.load(path))
    got = ort_run(path, data)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)

    sym2, args2, aux2 = import_model(path)
    assert set(aux2) == set(aux)  # BatchNorm's moving statistics are auxiliary states again
    back = nnsym_forward(sym2, args2, aux2, data)
    np.testing.assert_allclose(back, got, rtol=1e-4, atol=1e-5 * scale)


def test_fix_gamma_exports_gamma_as_one(tmp_path):
    x = S.Variable("data")
    y = S.BatchNorm(x, fix_gamma=True, name="bn")
    args = {"bn_gamma": np.full(3, 5.0, np.float32), "bn_beta": np.zeros(3, np.float32)}
    aux = {"bn_moving_mean": np.zeros(3, np.float32), "bn_moving_var": np.ones(3, np.float32)}
    data = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    path = export_model(y, [args, aux], [data.shape], np.float32, tmp_path / "bn.onnx")
    got = ort_run(path, data)
    np.testing.assert_allclose(got, data / np.sqrt(1 + 1e-3), rtol=1e-5)  # gamma 1, not 5


def test_dynamic_batch(tmp_path):
    sym, _ = demo_symbols()["mlp"]
    args, aux = random_params(sym, {"data": (4, 784)})
    path = export_model(sym, [args, aux], [(4, 784)], np.float32, tmp_path / "d.onnx",
                        dynamic=True, dynamic_input_shapes=[(None, 784)])
    meta = get_model_metadata(path)
    assert meta["input_tensor_data"][0][1][1] == 784
    assert isinstance(meta["input_tensor_data"][0][1][0], str)  # symbolic batch dimension
    data = np.random.default_rng(2).uniform(-1, 1, (3, 784)).astype(np.float32)
    np.testing.assert_allclose(ort_run(path, data), nnsym_forward(sym, args, aux, data),
                               rtol=1e-4, atol=1e-6)


def test_run_shape_inference_annotates_intermediates(tmp_path):
    sym, _ = demo_symbols()["convnet"]
    args, aux = random_params(sym, {"data": (2, 3, 32, 32)})
    plain = onnx.load(export_model(sym, [args, aux], [(2, 3, 32, 32)], np.float32,
                                   tmp_path / "a.onnx"))
    inferred = onnx.load(export_model(sym, [args, aux], [(2, 3, 32, 32)], np.float32,
                                      tmp_path / "b.onnx", run_shape_inference=True))
    assert not plain.graph.value_info
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in inferred.graph.value_info}
    assert shapes["pool1"] == [2, 8, 16, 16]


def test_dropout_at_inference(tmp_path):
    x = S.Variable("data")
    path = export_model(S.Dropout(x, p=0.5, name="d"), {}, [(2, 3)], np.float32,
                        tmp_path / "d.onnx")
    data = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(ort_run(path, data), data)  # identity at inference
    with pytest.raises(OnnxError, match=r"node 'd'.*mode 'always'"):
        export_model(S.Dropout(x, p=0.5, mode="always", name="d"), {}, [(2, 3)], np.float32,
                     tmp_path / "e.onnx")


def test_reshape_special_codes_are_resolved(tmp_path):
    x = S.Variable("data")
    y = S.Reshape(x, shape=(-3, -2), name="r")  # MXNet-only codes: merge two dims, copy rest
    path = export_model(y, {}, [(2, 3, 4, 5)], np.float32, tmp_path / "r.onnx")
    data = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    assert ort_run(path, data).shape == (6, 4, 5)
    np.testing.assert_array_equal(ort_run(path, data), data.reshape(6, 4, 5))


def test_params_from_files_and_prefixed_keys(tmp_path):
    sym, args, aux = load_checkpoint(MOBILENET, 0)
    prefixed = {**{f"arg:{k}": v for k, v in args.items()},
                **{f"aux:{k}": v for k, v in aux.items()}}
    a = export_model(sym, prefixed, [(1, 3, 224, 224)], np.float32, tmp_path / "a.onnx")
    b = export_model(str(MOBILENET) + "-symbol.json", str(MOBILENET) + "-0000.params",
                     input_shape=[(1, 3, 224, 224)], onnx_file_path=tmp_path / "b.onnx")
    data = np.random.default_rng(3).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(a, data), ort_run(b, data))


def test_cli_export_onnx(tmp_path, capsys):
    out = tmp_path / "m.onnx"
    assert main(["export-onnx", str(MOBILENET), "0", "--shape", "data=1,3,224,224",
                 "--out", str(out)]) == 0
    assert "opset 18" in capsys.readouterr().out
    sym, args, aux = load_checkpoint(MOBILENET, 0)
    data = np.random.default_rng(4).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    np.testing.assert_allclose(ort_run(out, data), nnsym_forward(sym, args, aux, data),
                               rtol=1e-4, atol=1e-6)
    assert main(["export-onnx", str(MOBILENET), "0", "--shape", "x=1,3,224,224",
                 "--out", str(tmp_path / "bad.onnx")]) == 1
    err = capsys.readouterr().err
    assert "data inputs are ['data']" in err and not (tmp_path / "bad.onnx").exists()


def test_cli_export_of_a_saved_checkpoint(tmp_path):
    sym, _ = demo_symbols()["convnet"]
    args, aux = random_params(sym, {"data": (2, 3, 32, 32)})
    save_checkpoint(str(tmp_path / "net"), 3, sym,
                    {k: nd_array(v) for k, v in args.items()},
                    {k: nd_array(v) for k, v in aux.items()})
    out = tmp_path / "net.onnx"
    assert main(["export-onnx", str(tmp_path / "net"), "3", "--shape", "data=2,3,32,32",
                 "--out", str(out)]) == 0
    data = np.random.default_rng(5).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
    np.testing.assert_allclose(ort_run(out, data), nnsym_forward(sym, args, aux, data),
                               rtol=1e-4, atol=1e-6)


def test_bad_arguments_raise_clear_errors(tmp_path):
    sym, _ = demo_symbols()["mlp"]
    args, aux = random_params(sym, {"data": (4, 784)})
    with pytest.raises(OnnxError, match="input shape"):
        export_model(sym, [args, aux], [(4, 784), (1,)], np.float32, tmp_path / "x.onnx")
    with pytest.raises(OnnxError, match="params must be"):
        export_model(sym, 3, [(4, 784)], np.float32, tmp_path / "x.onnx")
    with pytest.raises(OnnxError, match="dynamic=True"):
        export_model(sym, [args, aux], [(4, 784)], np.float32, tmp_path / "x.onnx",
                     dynamic_input_shapes=[(None, 784)])
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"\x00\x01not a protobuf")
    with pytest.raises(OnnxError, match="not a readable ONNX model"):
        import_model(bad)
    assert issubclass(OnnxError, nnsym.errors.NNSymError)


def test_missing_onnx_names_the_extra(monkeypatch):
    import importlib

    from nnsym.onnx import OnnxMissingError, _lazy

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "onnx":
            raise ImportError("No module named 'onnx'")
        return real(name, *a, **k)

    monkeypatch.setattr(_lazy.importlib, "import_module", fake)
    with pytest.raises(OnnxMissingError, match=r"nnsym\[onnx\]"):
        _lazy.onnx()


def test_group_outputs_keep_their_names(tmp_path):
    x = S.Variable("data")
    a = S.Activation(x, act_type="tanh", name="t")
    parts = S.SliceChannel(a, num_outputs=2, axis=1, name="split")
    g = S.Group([parts[1], S.sum(a, axis=1, name="s")])
    path = export_model(g, {}, [(2, 4)], np.float32, tmp_path / "g.onnx")
    sess = ort.InferenceSession(str(path))
    assert [o.name for o in sess.get_outputs()] == ["split1", "s"]
    data = np.random.default_rng(6).normal(size=(2, 4)).astype(np.float32)
    second, total = sess.run(None, {"data": data})
    np.testing.assert_allclose(second, np.tanh(data)[:, 2:], rtol=1e-6)
    np.testing.assert_allclose(total, np.tanh(data).sum(axis=1), rtol=1e-5)
    sym2, _, _ = import_model(path)
    assert sym2.list_outputs() == ["split_output1", "s_output"]
