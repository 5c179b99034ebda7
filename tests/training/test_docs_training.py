"""Every python block of docs/training.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "training.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_doc_has_blocks():
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(index, capsys):
    code = compile(BLOCKS[index], f"{DOC.name}[block {index}]", "exec")
    exec(code, {"__name__": f"docs_training_{index}"})
