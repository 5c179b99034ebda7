"""Every code block of README.md and docs/*.md runs as written, in a scratch directory.

The conventions (also in docs/architecture.md, "Code blocks in the docs"):

- Every fence names its language. ``python`` blocks run; ``sh``/``bash`` blocks run under
  ``bash -e`` (``nnsym`` and ``python`` are this interpreter); ``text`` (output, diagrams),
  ``c``, ``jinja`` and ``json`` blocks are not code to run.
- A python block is a complete program, run in a fresh namespace, unless the HTML comment
  ``<!-- continued below -->`` stands on the line before it: then it is a fragment and the next
  python block of the same doc runs in the namespace it left (a chain may go on).
- ``<!-- not run: REASON -->`` before a block skips it, with that reason (installs, MPI
  launches, excerpts of nnsym's own source); keep these rare.
- ``<!-- needs: gpu -->`` before a python block: without a usable CUDA device it runs on the
  emulated one (``NNSYM_CUDA=emulate``, ``nnsym.devtools.cuda``; needs g++), in a subprocess.

Blocks of one doc run in order in one scratch directory, so a block may read a file an earlier
block wrote. docs/operators.md is generated and has no code blocks. The slow blocks are the
shell blocks of models.md and onnx.md (each ``nnsym`` command is a new process that imports
nnsym; a few seconds of CPU together); every python block takes under ~1 s once the kernel
cache is warm (porting.md's MobileNet comparison is the slowest).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nnsym.ir import opdef

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = {"python", "sh", "bash"}
OTHER_LANGS = {"text", "c", "jinja", "json"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!--\s*(continued below|not run:\s*(?P<why>.+?)|needs:\s*gpu)\s*-->\s*\Z")


@dataclass
class Block:
    doc: str
    index: int
    lang: str
    code: str
    line: int
    continued: bool = False
    skip: str | None = None
    needs_gpu: bool = False
    prefix: list[Block] = field(default_factory=list)  # the fragments this block continues

    @property
    def id(self) -> str:
        return f"{self.doc}[{self.index}]"


def _blocks(path: Path) -> list[Block]:
    text = path.read_text()
    name = path.name if path.parent == ROOT else f"docs/{path.name}"
    out: list[Block] = []
    for i, m in enumerate(FENCE.finditer(text)):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        b = Block(name, i, m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
        if mark := MARK.search(before):
            b.continued = mark.group(1) == "continued below"
            b.skip = mark.group("why")
            b.needs_gpu = mark.group(1).startswith("needs")
        out.append(b)
    chain: list[Block] = []
    for b in out:
        if b.lang == "python":
            b.prefix = list(chain)
            chain = [*chain, b] if b.continued else []
    return out


ALL = [b for doc in DOCS for b in _blocks(doc)]
RUNNABLE = [b for b in ALL if b.lang in RUN_LANGS and not b.continued]


def test_every_fence_names_a_known_language():
    bad = [f"{b.doc}:{b.line} {b.lang!r}" for b in ALL if b.lang not in RUN_LANGS | OTHER_LANGS]
    assert not bad, f"fences without a known language: {bad}"


def test_fragments_are_continued():
    for doc in DOCS:
        py = [b for b in _blocks(doc) if b.lang == "python"]
        if py:
            assert not py[-1].continued, f"{py[-1].id}: the last python block is a fragment"
    assert not [b.id for b in ALL if b.continued and b.lang != "python"]


def test_docs_have_runnable_blocks():
    """The runner sees the docs (a changed fence syntax would otherwise skip everything)."""
    assert len([b for b in RUNNABLE if b.lang == "python"]) > 70
    assert {"README.md", "docs/porting.md", "docs/models.md"} <= {b.doc for b in RUNNABLE}


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``nnsym`` and ``python`` for the shell blocks: this interpreter and this checkout."""
    d = tmp_path_factory.mktemp("bin")
    for name, cmd in (("nnsym", f'"{sys.executable}" -m nnsym'), ("python", f'"{sys.executable}"')):
        (d / name).write_text(f'#!/bin/sh\nexec {cmd} "$@"\n')
        (d / name).chmod(0o755)
    return d


@pytest.fixture(scope="module")
def doc_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One scratch directory per doc, shared by its blocks in order."""
    root = tmp_path_factory.mktemp("docs")
    return {doc.name: root / doc.stem for doc in DOCS}


def _gpu() -> bool:
    from nnsym.cuda import runtime

    return runtime.available()


# One xdist worker per doc, so its blocks run in order in its one directory.
@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.id, marks=pytest.mark.xdist_group(f"docs:{b.doc}")) for b in RUNNABLE],
)
def test_doc_block_runs(
    block: Block, bin_dir: Path, doc_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    if block.skip:
        pytest.skip(f"{block.id} not run: {block.skip}")
    cwd = doc_dirs[Path(block.doc).name]
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    code = "\n".join(b.code for b in [*block.prefix, block])
    if block.lang == "python" and block.needs_gpu and not _gpu():
        # No device: the emulated one (nnsym.devtools.cuda, through g++), in its own process.
        if shutil.which("g++") is None:
            pytest.skip(f"{block.id} needs a CUDA device or g++ for the emulated one")
        code = f"import nnsym.devtools.cuda\n{code}"
        cmd, env["NNSYM_CUDA"] = [sys.executable, "-c", code], "emulate"
    elif block.lang == "python":
        ns = {"__name__": f"docs_{Path(block.doc).stem}_{block.index}"}
        # A block may register an example operator (adding-an-op.md): the registry is put back
        # afterwards, so later tests in this process see only nnsym's operators.
        saved = dict(opdef._REGISTRY), dict(opdef._ALIASES)
        try:
            for b in [*block.prefix, block]:
                exec(compile(b.code, f"{b.doc}:{b.line} (block {b.index})", "exec"), ns)
        finally:
            for live, old in zip((opdef._REGISTRY, opdef._ALIASES), saved):
                live.clear()
                live.update(old)
        return
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    r = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"{block.id} (line {block.line}) failed:\n{r.stdout}\n{r.stderr}"


def test_porting_mxnet_block_is_the_fixture_script():
    """porting.md's MXNet block (not run here) is the code that made the shipped expected file."""
    script = (ROOT / "tests/golden/modelzoo/make_porting_example.py").read_text()
    made = script.split("# --- docs/porting.md\n", 1)[1].split("# --- end\n", 1)[0]
    mx_blocks = [b.code for b in _blocks(ROOT / "docs/porting.md") if "import mxnet" in b.code]
    assert mx_blocks == [made]
