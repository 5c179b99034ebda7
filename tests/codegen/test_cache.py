"""The kernel disk cache across processes: warm starts compile nothing, racing processes all
succeed, and a corrupted entry is detected and rebuilt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nnsym.codegen import cache

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    t0 = time.perf_counter()
    from nnsym import nd
    from nnsym.codegen import compiler
    x = nd.array(np.linspace(-3, 3, 64, dtype=np.float32))
    y = nd.tanh(nd.exp(x) * 0.5 + 1.0)
    ok = bool(np.allclose(y.asnumpy(), np.tanh(np.exp(x.asnumpy()) * 0.5 + 1.0), rtol=1e-6))
    print(json.dumps({"ok": ok, "stats": compiler.STATS}))
    """
)


def run(cache_dir: Path) -> dict:
    env = {**os.environ, "NNSYM_CACHE_DIR": str(cache_dir)}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    first = run(tmp_path)
    assert first["ok"] and first["stats"]["compiles"] >= 1
    second = run(tmp_path)
    assert second["ok"]
    assert second["stats"]["compiles"] == 0
    assert second["stats"]["disk_hits"] == first["stats"]["compiles"]


def test_three_processes_racing_on_an_empty_cache(tmp_path):
    env = {**os.environ, "NNSYM_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] for r in results)
    # the others wait on each key's lock file and load that build: not every process compiles
    # everything (exactly once per key is checked deterministically below)
    compiles = [r["stats"]["compiles"] for r in results]
    assert max(compiles) >= 1 and sum(compiles) < len(results) * max(compiles), compiles
    leftovers = [p for p in (tmp_path / cache.FORMAT).rglob(".tmp-*")]
    assert leftovers == []
    assert run(tmp_path)["stats"]["compiles"] == 0


def test_corrupted_entry_is_detected_and_rebuilt(tmp_path):
    assert run(tmp_path)["ok"]
    libs = list((tmp_path / cache.FORMAT).rglob("lib.so"))
    assert libs
    for lib in libs:
        data = lib.read_bytes()
        lib.unlink()  # never rewrite in place: a new file at the same path
        lib.write_bytes(data[: len(data) // 2])
    again = run(tmp_path)
    assert again["ok"] and again["stats"]["compiles"] == len(libs)
    for lib in (tmp_path / cache.FORMAT).rglob("lib.so"):
        meta = json.loads((lib.parent / "meta.json").read_text())
        assert meta["sha256"] == cache.file_sha256(lib)


def test_info_and_clear(tmp_path):
    run(tmp_path)
    info = cache.info(tmp_path)
    assert info["entries"] >= 1 and info["bytes"] > 0
    assert cache.clear(tmp_path) == info["entries"]
    assert cache.info(tmp_path)["entries"] == 0


def test_cache_key_covers_every_part():
    base = {"source": "a", "flags": ["-O3"], "compiler": "gcc 12"}
    k = cache.cache_key(**base)
    for part, other in (("source", "b"), ("flags", ["-O2"]), ("compiler", "gcc 13")):
        assert cache.cache_key(**{**base, part: other}) != k


@pytest.mark.parametrize("cmd", [["cache", "info"], ["cache", "clear"]])
def test_cli_cache_commands(tmp_path, cmd):
    run(tmp_path)
    env = {**os.environ, "NNSYM_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "nnsym", *cmd], capture_output=True, text=True,
                       env=env, check=True)
    assert str(tmp_path) in r.stdout


def test_racing_builds_of_one_key_build_it_once(tmp_path):
    """Builders of the same key wait on its lock file: one builds, the others find its entry
    (threads here; flock locks open file descriptions, so they exclude each other like
    processes do)."""
    import threading
    import time

    key = cache.cache_key(test="racing")
    calls = []
    start = threading.Barrier(4)

    def build(tmp: Path) -> None:
        calls.append(tmp)
        time.sleep(0.3)  # long enough for every racer to reach the lock
        (tmp / "lib.so").write_bytes(b"x")
        (tmp / "meta.json").write_text(json.dumps(
            {"key": key, "sha256": cache.file_sha256(tmp / "lib.so")}))

    got = []

    def race() -> None:
        start.wait()
        got.append(cache._build_in(key, build, tmp_path))

    threads = [threading.Thread(target=race) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(got) == 4 and len(set(got)) == 1 and cache.verify(got[0], key)
