"""Shared fixtures of the sparse tests."""

from __future__ import annotations

import pytest


def use_backend(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Switch this process to the ``c`` (generated kernels) or ``numpy`` backend."""
    from nnsym.codegen import compiler

    if name == "numpy":
        monkeypatch.setenv("NNSYM_BACKEND", "numpy")
    else:
        monkeypatch.delenv("NNSYM_BACKEND", raising=False)
    compiler.reset_backend()


@pytest.fixture
def switch_backend(monkeypatch):
    """``switch_backend(name)`` inside a test; the environment is restored afterwards."""
    from nnsym.codegen import compiler

    yield lambda name: use_backend(monkeypatch, name)
    monkeypatch.undo()
    compiler.reset_backend()


@pytest.fixture(params=["c", "numpy"])
def backend(request, monkeypatch):
    """Both implementations of the storage-specialised paths: the generated C kernels of
    nnsym.sparse and the numpy/scipy path of the numpy backend."""
    from nnsym.codegen import compiler

    use_backend(monkeypatch, request.param)
    yield request.param
    monkeypatch.undo()
    compiler.reset_backend()
