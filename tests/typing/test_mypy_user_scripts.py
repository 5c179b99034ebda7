"""mypy (strict) on user-style scripts against this checkout: a training script using sym, nd,
simple_bind, Module and optimizer checks clean (its annotated returns would fail
warn_return_any if the API returned Any), and misspelled operators and parameters fail."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")
pytestmark = pytest.mark.xdist_group("typing_mypy")  # one worker runs mypy once for the file

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OK, TYPO = HERE / "user_script_ok.py", HERE / "user_script_typo.py"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict[str, list[str]]:
    """mypy's error lines per script, from one run (nnsym itself is analysed once, silently:
    as a user sees an installed package, errors in it are not the script's)."""
    tmp = tmp_path_factory.mktemp("mypy")
    cfg = tmp / "mypy.ini"
    # NOTE: mypy_path puts this checkout ahead of any installed nnsym (site-packages)
    cfg.write_text(
        "[mypy]\n"
        f"mypy_path = {REPO}\n"
        "strict = True\n"
        f"cache_dir = {tmp / 'cache'}\n"
        "[mypy-nnsym.*]\n"
        "follow_imports = silent\n"
        "[mypy-scipy.*,cffi.*,networkx.*,cupy.*,cupyx.*,onnx.*,onnxruntime.*,mpi4py.*]\n"
        "ignore_missing_imports = True\n"
    )
    # mypy raises the interpreter's recursion limit for good (2**14); later tests on this
    # worker (e.g. the JSON loader's nesting limits) must see the default again
    limit = sys.getrecursionlimit()
    try:
        out, err, _ = mypy_api.run(["--config-file", str(cfg), str(OK), str(TYPO)])
    finally:
        sys.setrecursionlimit(limit)
    assert "nnsym" not in err, err
    assert "checked 2 source files" in out, out
    lines = out.splitlines()
    return {p.name: [ln for ln in lines if Path(ln.split(":")[0]).name == p.name]
            for p in (OK, TYPO)}


def test_user_script_type_checks(report):
    assert report[OK.name] == []


def test_misspelled_names_are_type_errors(report):
    errors = [ln for ln in report[TYPO.name] if ": error:" in ln]
    assert any(re.search(r'has no attribute "FullyConected"; maybe "FullyConnected"', ln)
               for ln in errors), errors
    assert any('Unexpected keyword argument "act_typ" for "Activation"' in ln
               for ln in errors), errors
    assert any('has no attribute "sofmax"' in ln for ln in errors), errors
    assert any('"NDArray" has no attribute "summ"' in ln for ln in errors), errors
    assert len(errors) == 4, errors


def test_user_script_runs(capsys):
    """The typed script is a working program, not just one that type-checks."""
    runpy.run_path(str(OK), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[(4, 8), (16, 8), (16,), (3, 16), (3,), (4,)]"  # infer_shape's arguments
    assert out[1] == "(4, 3)"  # the executor's output
    assert out[-2] == "[1. 1. 1. 1.]"  # softmax rows from Module's forward sum to 1
