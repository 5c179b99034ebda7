"""Which C compiler nnsym runs: ``CC`` split like a shell word list, else the defaults, and one
line (a log record, or a warning when CC cannot be used) saying which."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import warnings
from pathlib import Path

import pytest

from nnsym.codegen import compiler

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="needs gcc")


@pytest.fixture
def fresh(monkeypatch):
    """compiler_command() chosen again under the test's environment, and again after it."""
    compiler.compiler_command.cache_clear()
    compiler._warn_no_compiler.cache_clear()
    yield
    compiler.compiler_command.cache_clear()
    compiler._warn_no_compiler.cache_clear()


def _fake_cc(bin_dir: Path, name: str, calls: Path) -> Path:
    """A compiler ``name`` in ``bin_dir`` that records its arguments and runs the real gcc."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexec "{GCC}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _choose(caplog) -> tuple[tuple[str, ...] | None, list[str], list[str]]:
    with warnings.catch_warnings(record=True) as w, caplog.at_level(logging.INFO,
                                                                   "nnsym.codegen"):
        warnings.simplefilter("always")
        cmd = compiler.compiler_command()
    logs = [r.getMessage() for r in caplog.records if r.name == "nnsym.codegen"]
    return cmd, [str(m.message) for m in w], logs


@needs_gcc
def test_cc_with_arguments_is_found_on_path_and_run_with_them(tmp_path, monkeypatch, fresh,
                                                               caplog):
    calls = tmp_path / "calls.txt"
    fake = _fake_cc(tmp_path / "bin", "fakecc", calls)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CC", "fakecc -m64 '-DNNSYM_FAKE=a b'")
    cmd, warned, logs = _choose(caplog)
    assert cmd == (str(fake), "-m64", "-DNNSYM_FAKE=a b")
    assert warned == []
    assert calls.read_text().startswith("-m64 -DNNSYM_FAKE=a b -fPIC -shared")  # the probe
    assert logs == [f"nnsym: the C compiler is CC=\"fakecc -m64 '-DNNSYM_FAKE=a b'\": {fake} -m64 "
                    "'-DNNSYM_FAKE=a b'"]


@needs_gcc
def test_unset_cc_takes_the_first_default_found_and_logs_which(tmp_path, monkeypatch, fresh,
                                                               caplog):
    fake = _fake_cc(tmp_path / "bin", "cc", tmp_path / "calls.txt")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no gcc, no sysconfig compiler
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(compiler.sysconfig, "get_config_var",
                        lambda name: "nosuchcc -pthread" if name == "CC" else None)
    cmd, warned, logs = _choose(caplog)
    assert cmd == (str(fake.resolve()),) and warned == []
    assert logs == [f"nnsym: CC is not set; using cc: {fake.resolve()} (the first found of "
                    "sysconfig's CC 'nosuchcc -pthread', cc, gcc)"]


def test_no_compiler_anywhere_says_what_was_tried(tmp_path, monkeypatch, fresh, caplog):
    monkeypatch.setenv("PATH", str(tmp_path))  # empty
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(compiler.sysconfig, "get_config_var",
                        lambda name: "gcc -pthread" if name == "CC" else None)
    cmd, warned, logs = _choose(caplog)
    assert cmd is None and warned == []
    assert logs == ["nnsym: CC is not set and none of sysconfig's CC 'gcc -pthread', cc, gcc "
                    "is on PATH"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        compiler._warn_no_compiler()
    msg = str(w[0].message)
    assert w[0].category is RuntimeWarning
    assert "tried CC is not set; sysconfig's CC 'gcc -pthread', cc, gcc" in msg
    # a CC that is not found, and no default either: one warning naming it
    monkeypatch.setenv("CC", "ccache gcc")
    compiler.compiler_command.cache_clear()
    cmd, warned, _ = _choose(caplog)
    assert cmd is None and len(warned) == 1
    assert "CC='ccache gcc'" in warned[0] and "'ccache' not found" in warned[0]
    assert "no other C compiler works either" in warned[0]
