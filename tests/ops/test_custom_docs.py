"""Every code block of docs/custom_ops.md runs and its asserts hold."""

from __future__ import annotations

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).parents[2] / "docs" / "custom_ops.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_doc_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_doc_block_runs(code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{DOC}:block", "exec"), {"__name__": "__doc__"})
