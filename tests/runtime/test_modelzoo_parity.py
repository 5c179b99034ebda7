"""Parity with MXNet 1.9.1 on Gluon model-zoo networks, through MXNet's checkpoint files.

The fixtures in ``tests/golden/modelzoo/`` (see its README.md) are three networks exported by
MXNet's Gluon (``HybridBlock.export``): ResNet-18 v1 at 1/8 width, MobileNet v1 and v2 at
multiplier 0.25, all with 10 classes, seeded Xavier weights and seeded random BatchNorm
parameters and statistics, and what MXNet's symbol executor computed on them for a fixed
(2, 3, 64, 64) input: the inference forward, then one training step (training forward, backward
from a fixed head gradient on the network's output): the output, every argument's gradient and
the BatchNorm running statistics after the step. MXNet did this in float32 and in float64.

Each network is loaded with ``nnsym.model.load_checkpoint``, bound with ``simple_bind`` and run
the same way, in float32 and in float64.

float64 is the exact check: outputs and gradients agree with MXNet's to 1e-9 (measured: at most
1.3e-12 of each array's largest value), the running statistics too once MXNet's float momentum
is accounted for (see ``test_batch_norm_momentum_is_a_c_float``).

float32 results carry rounding noise that training-mode BatchNorm amplifies layer by layer
(its gradient subtracts per-channel means of products), so the gradient check is relative to the
exact answer. Errors below are max |a - b| over an array divided by the array's largest exact
value, or by 1e-3 of the network's largest gradient where that is bigger (MobileNet v2 has
BatchNorm betas whose exact gradient is 0: a linear BatchNorm feeding a 1x1 convolution and
another training-mode BatchNorm; both float32 results there are 1e-6-sized noise). Worst array,
measured:

    network            nnsym f32 vs exact   MXNet f32 vs exact   nnsym f32 vs MXNet f32  GRAD_TOL
    resnet18_v1_w0125        6.9e-06             1.2e-05               1.1e-05              1e-4
    mobilenet_v1_w025        8.0e-05             2.2e-04               3.0e-04              3e-4
    mobilenet_v2_w025        3.4e-04             5.2e-03               5.2e-03              1e-3

MXNet's own float32 gradients are further from the exact ones than nnsym's (by 15x on
MobileNet v2's worst array, a BatchNorm beta: nnsym 5e-5 off, MXNet 2.8e-3), so a direct
rtol-1e-4 comparison of the two float32 results would measure MXNet's noise. The float32 test
asserts, per array, that nnsym is within GRAD_TOL of the exact answer and within MXNet float32's
own error plus GRAD_TOL of MXNet's float32 answer (measured slack: at most 8e-5 for v1 and 2e-4
for v2, 1.2e-6 for ResNet). The training output is checked the same way with OUT_TOL (measured
nnsym vs exact at most 1.9e-5), the inference output directly against MXNet's float32 at rtol
1e-4, atol 1e-6 (measured: 3.6e-7 absolute, 2.6e-6 relative), the running statistics after the
step at rtol 1e-4, atol 1e-5 of the largest (measured: 8.1e-6 of the largest).
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnsym import nd, sym
from nnsym.errors import NNSymError
from nnsym.model import (
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointTypeError,
    load_checkpoint,
    load_params,
    save_checkpoint,
)
from nnsym.ndarray import io as ndio
from nnsym.symbol import json_io

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "modelzoo"
MODELS = ["resnet18_v1_w0125", "mobilenet_v1_w025", "mobilenet_v2_w025"]
INPUT_SHAPE = (2, 3, 64, 64)

# float32 tolerances (errors scaled as described above; see the table for the measured ones).
GRAD_TOL = {"resnet18_v1_w0125": 1e-4, "mobilenet_v1_w025": 3e-4, "mobilenet_v2_w025": 1e-3}
OUT_TOL = 1e-4
F64_TOL = 1e-9


def prefix(name: str) -> Path:
    return GOLDEN / name


@functools.cache
def expected(name: str, dtype: str) -> dict[str, np.ndarray]:
    fname = f"{name}-expected.params" if dtype == "float32" else f"{name}-expected64.params"
    data = ndio.load(GOLDEN / fname)
    assert isinstance(data, dict)
    return {k: v.asnumpy() for k, v in data.items()}


def without_dtype_hints(symbol: Any) -> Any:
    """The symbol without its variables' ``__dtype__`` attributes (Gluon's export records
    float32 there). MXNet lets a ``type_dict`` override them; nnsym's type inference refuses a
    given dtype that contradicts one, so the float64 run drops them first."""
    graph = json.loads(symbol.tojson())
    for node in graph["nodes"]:
        node.get("attrs", {}).pop("__dtype__", None)
    return json_io.load_json(json.dumps(graph))


@functools.cache
def run(name: str, dtype: str) -> dict[str, Any]:
    """What the fixture script asked of MXNet, done by nnsym: inference forward, then a training
    forward and a backward from the fixed head gradient."""
    symbol, arg_params, aux_params = load_checkpoint(prefix(name), 0)
    if dtype != "float32":
        symbol = without_dtype_hints(symbol)
    exe = symbol.simple_bind(
        None, grad_req="write", type_dict=dict.fromkeys(symbol.list_inputs(), dtype),
        data=INPUT_SHAPE,
    )
    for k, v in arg_params.items():
        exe.arg_dict[k][:] = v.asnumpy().astype(dtype)
    for k, v in aux_params.items():
        exe.aux_dict[k][:] = v.asnumpy().astype(dtype)
    inputs = expected(name, "float32")
    exe.arg_dict["data"][:] = inputs["data"].astype(dtype)

    res: dict[str, Any] = {"out_infer": exe.forward(is_train=False)[0].asnumpy()}
    res["out_train"] = exe.forward(is_train=True)[0].asnumpy()
    res["aux_after_forward"] = {k: v.asnumpy() for k, v in exe.aux_dict.items()}
    exe.backward(out_grads=[nd.array(inputs["head_grad"].astype(dtype))])
    res["grad"] = {k: v.asnumpy() for k, v in exe.grad_dict.items() if v is not None}
    res["aux_after"] = {k: v.asnumpy() for k, v in exe.aux_dict.items()}
    res["params"] = (arg_params, aux_params)
    res["symbol"] = symbol
    return res


def grads_of(exp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k[len("grad:"):]: v for k, v in exp.items() if k.startswith("grad:")}


def max_error(got: np.ndarray, want: np.ndarray, scale: float) -> float:
    """max |got - want| / scale."""
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / scale)


def scales(exact: dict[str, np.ndarray]) -> dict[str, float]:
    """Per array: its largest |value|, or 1e-3 of the largest over all arrays if that is more."""
    floor = 1e-3 * max(float(np.abs(v).max()) for v in exact.values())
    return {k: max(float(np.abs(v).max()), floor) for k, v in exact.items()}


def assert_grads_close(name: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray],
                       tol: float) -> None:
    assert sorted(got) == sorted(want)
    scale = scales(want)
    errors = {k: max_error(got[k], want[k], scale[k]) for k in want}
    worst = sorted(errors, key=errors.__getitem__, reverse=True)[:3]
    assert all(errors[k] <= tol for k in want), (
        f"{name}: gradients differ beyond {tol:g}: " + ", ".join(f"{k}: {errors[k]:.3g}"
                                                               for k in worst)
    )


# ------------------------------------------------------------------------------------------
# The checkpoints themselves


def test_readme_holds_the_generating_script():
    script = (GOLDEN / "make_fixtures.py").read_text()
    assert f"```python\n{script}```" in (GOLDEN / "README.md").read_text()


@pytest.mark.parametrize("name", MODELS)
def test_load_checkpoint_gives_symbol_and_every_parameter(name):
    symbol, arg_params, aux_params = load_checkpoint(prefix(name), 0)
    assert sorted(arg_params) == sorted(set(symbol.list_arguments()) - {"data"})
    assert sorted(aux_params) == sorted(symbol.list_auxiliary_states())
    arg_shapes, out_shapes, aux_shapes = symbol.infer_shape(data=INPUT_SHAPE)
    shapes = dict(zip(symbol.list_arguments(), arg_shapes))
    shapes.update(zip(symbol.list_auxiliary_states(), aux_shapes))
    for k, v in {**arg_params, **aux_params}.items():
        assert v.shape == tuple(shapes[k]), k
        assert np.dtype(v.dtype) == np.float32, k
    assert [tuple(s) for s in out_shapes] == [(INPUT_SHAPE[0], 10)]


@pytest.mark.parametrize("name", MODELS)
def test_checkpoint_round_trip(name, tmp_path):
    symbol, arg_params, aux_params = load_checkpoint(prefix(name), 0)
    save_checkpoint(tmp_path / name, 3, symbol, arg_params, aux_params)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}-0003.params",
                                                          f"{name}-symbol.json"]
    raw = ndio.load(tmp_path / f"{name}-0003.params")
    assert isinstance(raw, dict)
    # MXNet's order: every arg: entry, then every aux: entry.
    assert list(raw) == [f"arg:{k}" for k in arg_params] + [f"aux:{k}" for k in aux_params]
    symbol2, arg2, aux2 = load_checkpoint(tmp_path / name, 3)
    assert symbol2.tojson() == symbol.tojson()
    for mine, theirs in ((arg2, arg_params), (aux2, aux_params)):
        assert list(mine) == list(theirs)
        for k in mine:
            np.testing.assert_array_equal(mine[k].asnumpy(), theirs[k].asnumpy())


def test_save_checkpoint_is_byte_identical_to_mxnet(tmp_path):
    """``tiny-0003.params`` and ``tiny-symbol.json`` were written by ``mx.model.save_checkpoint``
    (arg entries first, then aux): nnsym writes the same bytes for the same dicts."""
    symbol, arg_params, aux_params = load_checkpoint(GOLDEN / "tiny", 3)
    assert list(arg_params) == ["conv_weight", "conv_bias", "bn_gamma", "bn_beta", "fc_weight",
                                "fc_bias"]
    assert list(aux_params) == ["bn_moving_mean", "bn_moving_var"]
    save_checkpoint(tmp_path / "tiny", 3, symbol, arg_params, aux_params)
    mine = (tmp_path / "tiny-0003.params").read_bytes()
    assert mine == (GOLDEN / "tiny-0003.params").read_bytes()
    assert json.loads((tmp_path / "tiny-symbol.json").read_text()) == json.loads(
        (GOLDEN / "tiny-symbol.json").read_text()
    )


def test_save_checkpoint_without_symbol_and_load_params(tmp_path):
    a = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = nd.array(np.ones(3, dtype=np.float32))
    save_checkpoint(str(tmp_path / "m"), 12, None, {"w": a}, {"s": b})
    assert [p.name for p in tmp_path.iterdir()] == ["m-0012.params"]
    args, auxs = load_params(tmp_path / "m", 12)
    np.testing.assert_array_equal(args["w"].asnumpy(), a.asnumpy())
    np.testing.assert_array_equal(auxs["s"].asnumpy(), b.asnumpy())
    with pytest.raises(CheckpointNotFoundError, match=r"m-symbol\.json"):
        load_checkpoint(tmp_path / "m", 12)


def test_missing_files_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match=r"nothing-symbol\.json") as e:
        load_checkpoint(tmp_path / "nothing", 0)
    assert isinstance(e.value, NNSymError)
    assert isinstance(e.value, FileNotFoundError)
    missing = str(tmp_path / "nothing-symbol.json")
    assert str(e.value) == f"checkpoint file {missing!r}: no such file"
    with pytest.raises(CheckpointNotFoundError, match=r"resnet18_v1_w0125-0007\.params"):
        load_checkpoint(prefix("resnet18_v1_w0125"), 7)
    with pytest.raises(CheckpointNotFoundError, match=r"-0000\.params"):
        load_params(tmp_path / "nothing", 0)


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        (["weight", "bias"], "save_parameters"),  # Gluon's bare names
        (["arg:w", "foo:b"], "'foo:b'"),  # MXNet silently drops unknown prefixes
        (["arg:"], "'arg:'"),
        (["ARG:w"], "'ARG:w'"),
    ],
)
def test_keys_without_arg_or_aux_prefix_are_refused(tmp_path, keys, match):
    ndio.save(tmp_path / "m-0000.params", {k: nd.array(np.zeros(2, np.float32)) for k in keys})
    with pytest.raises(CheckpointError, match=match):
        load_params(tmp_path / "m", 0)


def test_list_and_empty_parameter_files(tmp_path, caplog):
    ndio.save(tmp_path / "m-0000.params", [nd.array(np.zeros(2, np.float32))])
    with pytest.raises(CheckpointError, match="unnamed"):
        load_params(tmp_path / "m", 0)
    ndio.save(tmp_path / "m-0001.params", {})
    with caplog.at_level(logging.WARNING, logger="nnsym.model"):
        assert load_params(tmp_path / "m", 1) == ({}, {})
    assert "is empty" in caplog.text


def test_save_checkpoint_rejects_bad_values(tmp_path):
    w = nd.array(np.zeros(2, np.float32))
    with pytest.raises(CheckpointTypeError, match=r"arg_params\['w'\] must be an NDArray"):
        save_checkpoint(tmp_path / "m", 0, None, {"w": np.zeros(2)}, {})
    with pytest.raises(CheckpointTypeError, match="names must be strings"):
        save_checkpoint(tmp_path / "m", 0, None, {}, {1: w})
    with pytest.raises(CheckpointError, match="empty name"):
        save_checkpoint(tmp_path / "m", 0, None, {"": w}, {})
    with pytest.raises(CheckpointTypeError, match="epoch must be an integer"):
        save_checkpoint(tmp_path / "m", "1", None, {"w": w}, {})
    with pytest.raises(CheckpointTypeError, match="symbol must be a Symbol"):
        save_checkpoint(tmp_path / "m", 0, "net.json", {"w": w}, {})
    assert not list(tmp_path.iterdir())  # nothing half-written


# ------------------------------------------------------------------------------------------
# Parity


@pytest.mark.parametrize("name", MODELS)
def test_inference_forward_matches_mxnet(name):
    got, want = run(name, "float32")["out_infer"], expected(name, "float32")["out_infer"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def check_float32(name: str, got: dict[str, np.ndarray], mx32: dict[str, np.ndarray],
                  mx64: dict[str, np.ndarray], tol: float) -> None:
    """Per array, errors scaled by ``scales`` of the exact (MXNet float64) answer: nnsym's
    float32 is within ``tol`` of the exact answer, and within MXNet float32's own error plus
    ``tol`` of MXNet's float32 answer."""
    assert sorted(got) == sorted(mx32) == sorted(mx64)
    scale = scales(mx64)
    bad = []
    for k in mx64:
        exact = max_error(got[k], mx64[k], scale[k])
        theirs = max_error(mx32[k], mx64[k], scale[k])
        to_mx32 = max_error(got[k], mx32[k], scale[k])
        if exact > tol or to_mx32 > theirs + tol:
            bad.append(f"{k}: {exact:.3g} from float64, {to_mx32:.3g} from MXNet's float32 "
                       f"(which is {theirs:.3g} from float64)")
    assert not bad, f"{name}, tolerance {tol:g}: " + "; ".join(bad[:3])


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_mxnet_float32(name):
    res, exp, exp64 = run(name, "float32"), expected(name, "float32"), expected(name, "float64")
    check_float32(name, {"out_train": res["out_train"]}, {"out_train": exp["out_train"]},
                  {"out_train": exp64["out_train"]}, OUT_TOL)
    # As in MXNet, the running statistics move in the backward pass, not the training forward.
    _, aux_params = res["params"]
    for k, v in res["aux_after_forward"].items():
        np.testing.assert_array_equal(v, aux_params[k].asnumpy(), err_msg=k)
    for k, v in res["aux_after"].items():
        want = exp["aux_after:" + k]
        np.testing.assert_allclose(v, want, rtol=1e-4, atol=1e-5 * np.abs(want).max(),
                                   err_msg=k)
    check_float32(name, res["grad"], grads_of(exp), grads_of(exp64), GRAD_TOL[name])


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_mxnet_float64(name):
    res, exp = run(name, "float64"), expected(name, "float64")
    assert all(v.dtype == np.float64 for v in res["grad"].values())
    for key in ("out_infer", "out_train"):
        np.testing.assert_allclose(res[key], exp[key], rtol=F64_TOL, atol=0, err_msg=key)
    assert_grads_close(name, res["grad"], grads_of(exp), F64_TOL)
    # The running statistics too (momentum a C float, 0.9f, as MXNet's BatchNormParam has it:
    # test_batch_norm_momentum_is_a_c_float below).
    for k, v in res["aux_after"].items():
        want = exp["aux_after:" + k]
        np.testing.assert_allclose(v, want, rtol=F64_TOL, atol=F64_TOL * np.abs(want).max(),
                                   err_msg=k)


# ------------------------------------------------------------------------------------------
# Differences from MXNet these fixtures found, now fixed: BatchNorm's momentum is a C float,
# and a given dtype wins over a variable's __dtype__ attribute


def test_batch_norm_momentum_is_a_c_float():
    # MXNet 1.9.1, float64: x = [1, 2, 3, 6] (4, 1), gamma 1, moving mean 0 and var 1, momentum
    # 0.9, one training forward and backward: moving mean 0.30000007152557373 (= 3 (1 - 0.9f)),
    # moving var 1.2500000596046448 (biased batch variance 3.5).
    s = sym.BatchNorm(sym.Variable("x"), momentum=0.9, fix_gamma=False, name="bn")
    exe = s.simple_bind(None, x=(4, 1), type_dict=dict.fromkeys(s.list_inputs(), "float64"))
    exe.arg_dict["x"][:] = np.array([[1.0], [2.0], [3.0], [6.0]])
    exe.arg_dict["bn_gamma"][:] = 1
    exe.aux_dict["bn_moving_mean"][:] = 0
    exe.aux_dict["bn_moving_var"][:] = 1
    exe.forward(is_train=True)
    exe.backward(out_grads=[nd.array(np.ones((4, 1)))])
    assert exe.aux_dict["bn_moving_mean"].asnumpy()[0] == 0.30000007152557373
    assert exe.aux_dict["bn_moving_var"].asnumpy()[0] == 1.2500000596046448


def test_given_dtype_overrides_dtype_attribute():
    # MXNet 1.9.1: (Variable('x', dtype='float32') * 2).infer_type(x='float64')
    #   -> ([float64], [float64], [])
    x = sym.Variable("x", dtype="float32")
    arg_types, out_types, _ = (x * 2).infer_type(x="float64")
    assert [np.dtype(t) for t in arg_types + out_types] == [np.float64, np.float64]
