"""Test session set-up: compile every operator example's kernels up front in a few parallel
builds (a cold cache otherwise pays one compiler start per kernel)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _precompiled_kernels():
    from nnsym.testing import precompile_registry

    precompile_registry()
