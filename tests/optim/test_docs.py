"""Every python block of docs/optimizers.md runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "optimizers.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_block_runs(i: int, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(BLOCKS[i], f"{DOC.name} block {i}", "exec"), {})  # our own documentation
    assert capsys.readouterr().out


def test_there_are_blocks() -> None:
    assert len(BLOCKS) >= 5
