"""Test session set-up: compile every operator example's kernels up front in a few parallel
builds (a cold cache otherwise pays one compiler start per kernel); hypothesis profiles.

Hypothesis runs derandomized by default (the same examples every run, so CI is reproducible);
``HYPOTHESIS_PROFILE=explore`` draws fresh random examples (and more of them) to hunt for bugs.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from nnsym.cuda import runtime

settings.register_profile("default", derandomize=True)
settings.register_profile("explore", derandomize=False, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session", autouse=True)
def _precompiled_kernels():
    from nnsym.testing import precompile_registry

    precompile_registry()


@pytest.fixture(params=[
    "emulate",
    pytest.param("cupy", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not runtime.available(), reason="needs cupy and a CUDA device")]),
])
def gpu_backend(request):
    """The gpu tests' backend, made current for one test: the emulated device, and again a real
    one through cupy where one is available (marked ``gpu``); skipped without gcc and g++ (the
    emulated device's host shim). Modules use it with
    ``pytestmark = pytest.mark.usefixtures("gpu_backend")``."""
    from nnsym.codegen import compiler
    from nnsym.devtools.cuda import shim

    if shim.cxx() is None or compiler.compiler() is None:
        pytest.skip("needs gcc and g++")
    old = runtime._BACKEND
    runtime.use_backend(request.param)
    yield request.param
    runtime._BACKEND = old
