"""Every code block of docs/onnx.md runs (in a scratch directory) and its asserts hold."""

from __future__ import annotations

import pathlib
import re

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

DOC = pathlib.Path(__file__).parents[2] / "docs" / "onnx.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_doc_has_examples():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_doc_block_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{DOC}:block", "exec"), {"__name__": "__doc__"})
