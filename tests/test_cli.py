"""The ``nnsym`` command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nnsym import sym
from nnsym.cli import main

GOLDEN = Path(__file__).parent / "golden"


def test_infer_prints_table_and_writes_inferred_json(tmp_path, capsys):
    out = tmp_path / "inferred.json"
    rc = main(
        [
            "infer",
            str(GOLDEN / "resnet18_v1-symbol.json"),
            "--shape",
            "data=1,3,224,224",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "resnetv10_dense0_fwd" in text and "(1, 1000)" in text and "float32" in text
    doc = json.loads(out.read_text())
    head = doc["nodes"][doc["heads"][0][0]]
    assert head["attrs"]["__inferred_shape__"] == "[(1, 1000)]"
    # what nnsym wrote loads back, inferred keys dropped
    assert sym.load(out).tojson() == sym.load(GOLDEN / "resnet18_v1-symbol.json").tojson()


def test_infer_with_dtype(capsys):
    rc = main(
        [
            "infer",
            str(GOLDEN / "convbn-symbol.json"),
            "--shape",
            "data=2,3,32,32",
            "--dtype",
            "data=float16",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in text.splitlines() if ln.strip()}
    assert "float16" in lines["conv1"] and "float32" in lines["bn1_moving_mean"]


def test_infer_reports_unknown_inputs(capsys):
    assert main(["infer", str(GOLDEN / "mlp-symbol.json")]) == 0
    assert "shapes still unknown" in capsys.readouterr().out


def test_errors_are_reported_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": []}')
    assert main(["infer", str(bad)]) == 1
    assert "GraphFormatError" in capsys.readouterr().err
    assert (
        main(
            [
                "infer",
                str(GOLDEN / "mlp-symbol.json"),
                "--shape",
                "data=4,7",
                "--shape",
                "fc1_weight=128,8",
            ]
        )
        == 1
    )
    assert "ShapeError" in capsys.readouterr().err


def test_bad_shape_argument_is_a_usage_error():
    with pytest.raises(SystemExit) as info:
        main(["infer", "x.json", "--shape", "data"])
    assert info.value.code == 2


def test_demo_runs_and_writes_json(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "fc1_weight" in text and "(64, 10)" in text
    # each net ran forward through the generated kernels and agreed with the numpy references
    diffs = re.findall(r"largest difference from the numpy references ([0-9.e+-]+)", text)
    assert len(diffs) == 2 and all(float(d) < 1e-5 for d in diffs)
    assert text.count("rows sum to 1.0000") == 2
    # Module.fit's epoch lines for the MLP and the sparse linear classifier, and a Speedometer
    assert text.count("Epoch[4] Train-accuracy=") == 2
    assert "samples/sec" in text
    assert "row_sparse weight gradient" in text
    assert "mobilenet0_dense0_fwd_output: (1, 10) float32" in text  # the bundled checkpoint
    for name in ("mlp", "convnet"):
        s = sym.load(tmp_path / f"{name}-symbol.json")
        assert s.list_outputs() == ["softmax_output"]


def test_demo_training_learns():
    from nnsym.cli import demo_train

    hist = demo_train(epochs=3)
    losses, accs = zip(*hist)
    assert losses[0] > losses[1] > losses[2]
    assert accs[-1] > 0.4 and accs[-1] > accs[0]  # chance is 0.1


def test_sparse_demo_training_learns():
    from nnsym.cli import demo_train_sparse

    hist = demo_train_sparse(epochs=3)
    losses, accs = zip(*hist)
    assert losses[0] > losses[1] > losses[2]
    assert accs[-1] > 0.7 and accs[-1] > accs[0]  # chance is 0.25


def test_module_help():
    r = subprocess.run(
        [sys.executable, "-m", "nnsym", "--help"], capture_output=True, text=True, check=True
    )
    assert "infer" in r.stdout and "demo" in r.stdout
    assert "exit status:" in r.stdout and "2    usage" in r.stdout and "--version" in r.stdout


def test_plot_writes_dot_source_without_graphviz(tmp_path, capsys, monkeypatch):
    import shutil

    from nnsym.visualization import dot_program

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: None if n == "dot" else
                        real_which(n, *a, **k))
    assert dot_program() is None
    model = Path(__file__).parent / "golden" / "resnet18_v1-symbol.json"
    out = tmp_path / "r18.svg"
    assert main(["plot", str(model), "--shape", "data=1,3,64,64", "-o", str(out),
                 "--summary"]) == 0
    text = capsys.readouterr().out
    assert "Total params: 11689512" in text
    assert f"dot -Tsvg {tmp_path / 'r18.dot'} -o {out}" in text
    dot = (tmp_path / "r18.dot").read_text()
    assert dot.startswith("digraph") and "64x16x16" in dot  # shapes on the edges


def test_run_checkpoint_matches_mxnet_output(tmp_path, capsys):
    """nnsym run on the model-zoo ResNet-18 checkpoint with MXNet's input: the saved output is
    MXNet 1.9.1's inference output (tests/golden/modelzoo/README.md)."""
    import numpy as np

    from nnsym import nd

    prefix = Path(__file__).parent / "golden" / "modelzoo" / "resnet18_v1_w0125"
    expected = nd.load(f"{prefix}-expected.params")
    x = tmp_path / "x.npy"
    np.save(x, expected["data"].asnumpy())
    out = tmp_path / "out.params"
    assert main(["run", str(prefix), "0", "--input", f"data={x}", "--repeat", "2",
                 "--save", str(out)]) == 0
    text = capsys.readouterr().out
    assert "resnetv10_dense0_fwd_output: (2, 10) float32" in text and "ms per run" in text
    got = nd.load(out)["resnetv10_dense0_fwd_output"].asnumpy()
    np.testing.assert_allclose(got, expected["out_infer"].asnumpy(), rtol=1e-4, atol=1e-6)
    # infer takes a checkpoint prefix too; a missing input shape is a clear error
    assert main(["infer", str(prefix), "--shape", "data=2,3,64,64"]) == 0
    assert "(2, 10)" in capsys.readouterr().out
    assert main(["run", str(prefix), "0"]) == 1
    assert "give the shapes of the inputs ['data']" in capsys.readouterr().err


def test_codegen_writes_one_kernel_per_file(tmp_path, capsys):
    assert main(["codegen", "--target", "cuda", "--out", str(tmp_path), "--op", "tanh"]) == 0
    files = sorted(tmp_path.glob("*.cu"))
    assert files and any("float32_write" in f.name for f in files)
    text = next(f for f in files if "float32_write" in f.name).read_text()
    assert "__global__" in text and "tanh" in text
    assert main(["codegen", "--target", "c", "--out", str(tmp_path / "c"), "--op", "tanh"]) == 0
    assert sorted((tmp_path / "c").glob("*.c"))


def test_ops_lists_every_registered_operator(capsys):
    from nnsym.ops import REGISTRY

    assert main(["ops"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:]}
    assert set(rows) == set(REGISTRY)
    assert "csr" in rows["dot"] and "row_sparse" in rows["dot"] and "gpu" in rows["dot"]
    assert rows["Reshape"].split("  ")[-1].strip().startswith("cpu")


def test_ops_missing_lists_mxnet_operators_nnsym_lacks(capsys):
    from nnsym.ir.opdef import all_names, mxnet_operator_names

    assert main(["ops", "--missing"]) == 0
    missing = capsys.readouterr().out.split()
    assert missing and not set(missing) & set(all_names())
    assert set(missing) <= mxnet_operator_names()
    assert "CTCLoss" in missing or "CTCLoss" in all_names()


def test_unknown_operator_in_json_says_whether_mxnet_has_it():
    from nnsym.errors import GraphFormatError

    doc = json.loads(sym.relu(sym.var("x")).tojson())
    doc["nodes"][1]["op"] = "NoSuchOp"
    with pytest.raises(GraphFormatError, match=r"MXNet 1\.9\.1 has no operator of that name"):
        sym.load_json(json.dumps(doc))
    doc["nodes"][1]["op"] = "_contrib_quantized_rnn"  # an MXNet operator nnsym lacks
    with pytest.raises(GraphFormatError, match=r"an MXNet 1\.9\.1 operator that nnsym does not"):
        sym.load_json(json.dumps(doc))


def test_operators_doc_is_current():
    """docs/operators.md is `nnsym ops --markdown` of this registry (regenerate it after adding
    an operator)."""
    from nnsym.cli import ops_markdown

    doc = Path(__file__).resolve().parents[1] / "docs" / "operators.md"
    assert doc.read_text() == ops_markdown() + "\n", \
        "docs/operators.md is stale: run `nnsym ops --markdown > docs/operators.md`"


# --- Unix conventions, through the real command (python -m nnsym) in a subprocess -----------

REPO = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                     else "")
    env.update(extra)
    return env


def _nnsym(*args: str, stdin: bytes | None = None, cwd: Path | None = None):
    return subprocess.run([sys.executable, "-m", "nnsym", *args], input=stdin,
                          capture_output=True, env=_env(), cwd=cwd, timeout=300, check=False)


def test_version_prints_the_package_version():
    import importlib.metadata

    import nnsym

    r = _nnsym("--version")
    assert r.returncode == 0 and r.stderr == b""
    try:
        want = importlib.metadata.version("nnsym")
    except importlib.metadata.PackageNotFoundError:
        want = nnsym.__version__
    assert r.stdout.decode().strip() == f"nnsym {want}"


def test_infer_piped_to_head_exits_0_quietly_and_still_writes_its_json(tmp_path):
    """`nnsym infer ... | head -1` through a real pipe: the table (~150 KB, more than a pipe
    holds) meets a closed pipe; nnsym exits 0, prints nothing on stderr, and the --json file is
    written whole."""
    x = sym.var("data")
    for i in range(3000):
        x = sym.relu(x, name=f"relu{i}")
    model = tmp_path / "chain-symbol.json"
    model.write_text(x.tojson())
    out = tmp_path / "inferred.json"
    nn = subprocess.Popen([sys.executable, "-m", "nnsym", "infer", str(model), "--shape",
                           "data=2,3", "--json", str(out)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=_env())
    head = subprocess.Popen(["head", "-1"], stdin=nn.stdout, stdout=subprocess.PIPE)
    assert nn.stdout is not None and nn.stderr is not None
    nn.stdout.close()  # head holds the only read end now
    first, _ = head.communicate(timeout=300)
    err = nn.stderr.read()
    assert nn.wait(timeout=300) == 0, err
    assert err == b""
    assert first.decode().split() == ["node", "op", "output", "shape", "dtype"]
    doc = json.loads(out.read_text())
    assert len(doc["nodes"]) == 3001
    assert doc["nodes"][-1]["attrs"]["__inferred_shape__"] == "[(2, 3)]"


def test_dash_reads_the_model_from_stdin_and_writes_json_to_stdout(tmp_path):
    text = (GOLDEN / "mlp-symbol.json").read_bytes()
    r = _nnsym("infer", "-", "--shape", "data=4,7", "--json", "-", stdin=text, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # only the JSON is on stdout
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["fc1_weight"]["attrs"]["__inferred_shape__"] == "[(128, 7)]"
    assert by_name["softmax"]["attrs"]["__inferred_shape__"] == "[(4, 10)]"
    assert "fc1_weight" in r.stderr.decode()  # the table went to stderr
    assert not (tmp_path / "-").exists()


def test_errors_are_one_line_exit_1_and_traceback_only_with_debug(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": []}')
    for args, what in ((["infer", str(tmp_path / "missing.json")], "FileNotFoundError"),
                       (["infer", "-"], "GraphFormatError: <stdin>")):
        r = _nnsym(*args, stdin=b"not json")
        lines = r.stderr.decode().splitlines()
        assert r.returncode == 1 and len(lines) == 1, r.stderr
        assert lines[0].startswith(f"nnsym: error: {what}") and r.stdout == b""
    r = _nnsym("infer", str(bad), "--debug")
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("nnsym: error: GraphFormatError")


def test_usage_errors_exit_2_and_help_documents_the_exit_codes():
    r = _nnsym("infer", "x.json", "--shape", "data")
    assert r.returncode == 2
    assert r.stderr.decode().splitlines()[-1].startswith("nnsym infer: error: ")
    r = _nnsym("infer", "--help")  # (the top-level --help: test_module_help)
    text = r.stdout.decode()
    assert r.returncode == 0
    assert "exit status:" in text and "0    success" in text and "1    failure" in text
    assert "2    usage" in text and "--debug" in text


def test_run_reads_its_input_from_stdin_and_saves_outputs_to_stdout(tmp_path):
    import io

    import numpy as np

    from nnsym import nd

    prefix = Path(__file__).parent / "golden" / "modelzoo" / "resnet18_v1_w0125"
    expected = nd.load(f"{prefix}-expected.params")
    buf = io.BytesIO()
    np.save(buf, expected["data"].asnumpy())
    r = _nnsym("run", str(prefix), "0", "--input", "data=-", "--repeat", "1", "--save", "-",
               stdin=buf.getvalue())
    assert r.returncode == 0, r.stderr
    assert "resnetv10_dense0_fwd_output: (2, 10)" in r.stderr.decode()
    got = nd.load_frombuffer(r.stdout)
    assert isinstance(got, dict)
    np.testing.assert_allclose(got["resnetv10_dense0_fwd_output"].asnumpy(),
                               expected["out_infer"].asnumpy(), rtol=1e-4, atol=1e-6)


def test_plot_reads_stdin_and_writes_stdout():
    from nnsym import visualization as viz

    text = (GOLDEN / "mlp-symbol.json").read_bytes()
    r = _nnsym("plot", "-", "--shape", "data=4,7", "-o", "-", "--format", "svg", stdin=text)
    assert r.returncode == 0, r.stderr
    want = viz.plot_network(sym.load_json(text), title="stdin", shape={"data": (4, 7)})
    if viz.dot_program() is None:
        assert r.stdout.decode() == want.source
    else:
        assert r.stdout == want.pipe("svg")


def test_export_onnx_writes_stdout():
    onnx = pytest.importorskip("onnx")
    prefix = Path(__file__).parent / "golden" / "modelzoo" / "resnet18_v1_w0125"
    r = _nnsym("export-onnx", str(prefix), "0", "--shape", "data=1,3,64,64", "--out", "-")
    assert r.returncode == 0, r.stderr
    model = onnx.load_from_string(r.stdout)
    assert [i.name for i in model.graph.input][:1] == ["data"]
    assert "standard output" in r.stderr.decode()


@pytest.mark.parametrize("argv", [["codegen", "--target", "c", "--out", "-"],
                                  ["demo", "--out", "-"], ["cache", "info", "--dir", "-"]])
def test_directory_arguments_refuse_dash(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "'-' (standard input or output) cannot hold several files" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_ops_markdown_piped_to_head_exits_0_quietly():
    """The closed-pipe handling is the command line's, not infer's: `nnsym ops --markdown`
    (a few hundred KB) into `head -1`."""
    nn = subprocess.Popen([sys.executable, "-m", "nnsym", "ops", "--markdown"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    head = subprocess.Popen(["head", "-1"], stdin=nn.stdout, stdout=subprocess.PIPE)
    assert nn.stdout is not None and nn.stderr is not None
    nn.stdout.close()
    first, _ = head.communicate(timeout=300)
    err = nn.stderr.read()
    assert nn.wait(timeout=300) == 0 and err == b""
    assert first == b"# Operators\n"


def test_launch_reads_the_hosts_file_from_stdin(monkeypatch):
    import io

    from nnsym import cli

    seen = {}

    def fake_launch(n, command, hosts=None, timeout=None):
        seen.update(n=n, command=command, hosts=Path(hosts).read_text())
        return 0

    monkeypatch.setattr(cli, "launch", fake_launch)
    monkeypatch.setattr(sys, "stdin", io.StringIO("node1:2\nnode2:2\n"))
    assert main(["launch", "-n", "4", "--hosts", "-", "python", "train.py"]) == 0
    assert seen == {"n": 4, "command": ["python", "train.py"], "hosts": "node1:2\nnode2:2\n"}
