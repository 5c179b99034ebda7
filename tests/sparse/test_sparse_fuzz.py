"""Corrupted sparse arrays through every sparse operator, each chunk of cases in a child
process (``sparse_fuzz.py``): no signal, no hang, no raw (non-NNSymError) exception, no broken
structure accepted and no canonical one refused. A short run is part of the default suite; the
full one (every case, several seeds) is ``slow``. Also: every sparse kernel built with
AddressSanitizer reports nothing on valid and corrupted input (``slow``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("sparse_fuzz.py")
ROOT = Path(__file__).resolve().parents[2]
CHUNK = 400
TIMEOUT = 600


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _run_chunk(seed: int, start: int, stop: int, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, str(DRIVER), str(seed), str(start), str(stop)],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)
    signal = f" (signal {-proc.returncode})" if proc.returncode < 0 else ""
    assert proc.returncode == 0, (
        f"cases {start}..{stop} (seed {seed}) ended with return code {proc.returncode}"
        f"{signal}:\n"
        f"{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fuzz(seeds: list[int], limit: int | None, env: dict[str, str]) -> dict[str, int]:
    total: dict[str, int] = {}
    failures: list[str] = []
    for seed in seeds:
        start, n = 0, None
        while n is None or start < n:
            stop = start + CHUNK if limit is None else min(start + CHUNK, limit)
            res = _run_chunk(seed, start, stop, env)
            n = res["counts"]["total_cases"] if limit is None else min(
                limit, res["counts"]["total_cases"])
            for k, v in res["counts"].items():
                if k != "total_cases":
                    total[k] = total.get(k, 0) + v
            failures += res["failures"]
            start = stop
    print(f"sparse fuzz: {total}")
    assert total["raw"] == 0 and total["wrong"] == 0, "\n".join(failures[:10])
    return total


def test_sparse_fuzz_short():
    total = _fuzz([11], 160, _env())
    assert total["cases"] == 160 and total["rejected"] > 0


@pytest.mark.slow
def test_sparse_fuzz_every_operator():
    total = _fuzz([1, 2, 3], None, _env())
    assert total["cases"] >= 3000


def _asan_runtime() -> str | None:
    try:
        out = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if out and Path(out).is_absolute() and Path(out).exists() else None


@pytest.mark.slow
def test_sparse_kernels_under_address_sanitizer(tmp_path):
    """Every kernel rebuilt with -fsanitize=address (a fresh cache), the whole fuzz run over
    them (valid and corrupted input, every sparse operator) plus the sparse test files:
    AddressSanitizer reports nothing."""
    lib = _asan_runtime()
    if lib is None:
        pytest.skip("gcc's AddressSanitizer runtime is not installed")
    logs = tmp_path / "asan"
    logs.mkdir()
    # huge-shape tests ask for terabytes: numpy gets NULL (MemoryError) as without ASan
    env = _env(NNSYM_SANITIZE="address", LD_PRELOAD=lib, NNSYM_CACHE_DIR=str(tmp_path / "c"),
               ASAN_OPTIONS=f"detect_leaks=0:allocator_may_return_null=1:log_path={logs}/r")
    total = _fuzz([5], None, env)
    assert total["cases"] >= 1000
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "-n", "0",
         str(ROOT / "tests/sparse/test_sparse_safety.py"),
         str(ROOT / "tests/sparse/test_sparse_compute.py"),
         str(ROOT / "tests/sparse/test_sparse_dot_kernels.py"),
         str(ROOT / "tests/sparse/test_sparse_elemwise_kernels.py"),
         str(ROOT / "tests/sparse/test_sparse_optim_kernels.py"),
         str(ROOT / "tests/sparse/test_sparse_executor.py"),
         str(ROOT / "tests/sparse/test_sparse_registered_ops.py")],
        capture_output=True, text=True, timeout=1800, env=env, cwd=ROOT)
    # (a "failed to allocate" warning for the terabyte requests is not a report)
    reports = [t for t in (p.read_text() for p in logs.iterdir()) if "ERROR: Address" in t]
    assert not reports, reports[0][-6000:]
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


@pytest.mark.slow
def test_the_address_sanitizer_harness_sees_an_out_of_bounds_write(tmp_path):
    """The harness above is live: a raw kernel called past the checks with a column id one
    past the end is reported."""
    lib = _asan_runtime()
    if lib is None:
        pytest.skip("gcc's AddressSanitizer runtime is not installed")
    env = _env(NNSYM_SANITIZE="address", LD_PRELOAD=lib, NNSYM_CACHE_DIR=str(tmp_path),
               ASAN_OPTIONS="detect_leaks=0")
    code = ("import numpy as np\n"
            "from nnsym.ops.common import sparse as s\n"
            "s.csr_to_dense(np.ones(3, np.float32), np.array([0, 1, 4]), np.array([0, 1, 2, 3]),"
            " (3, 4))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, env=env)
    assert "heap-buffer-overflow" in proc.stderr, proc.stderr[-3000:]
