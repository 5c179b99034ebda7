"""The kernel cache and the C compiler under hostile conditions: an unusable NNSYM_CACHE_DIR
(read-only, under a regular file, full), no temporary directory either, a broken or
argument-bearing CC, killed compiles, and ``nnsym cache --check``."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from nnsym.cli import main
from nnsym.codegen import cache, compiler

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

COMPUTE = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("always")
    {prelude}
    import numpy as np
    import nnsym
    from nnsym import nd
    from nnsym.codegen import compiler
    a = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    y = nd.tanh(nd.array(a) * 2.0 + 1.0)
    ok = bool(np.allclose(y.asnumpy(), np.tanh(a * 2.0 + 1.0), rtol=1e-5, atol=1e-6))
    print(json.dumps({{"ok": ok, "backend": compiler.backend(), "stats": compiler.STATS,
                      "cc": compiler.compiler()}}))
    """
)


def child(code: str, cache_dir: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "NNSYM_CACHE_DIR": str(cache_dir), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=300, check=False, cwd=str(ROOT))


def compute(cache_dir: Path | str, prelude: str = "", **env: str) -> tuple[dict, str]:
    r = child(COMPUTE.format(prelude=prelude), cache_dir, **env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def unusable_dirs(tmp_path: Path) -> dict[str, Path]:
    """Cache paths that cannot be created or written (the read-only ones only where the tests do
    not run as root, who writes anyway)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = {"under a regular file": blocker / "cache"}
    if not IS_ROOT:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        out["read-only"] = ro
        out["missing, parent read-only"] = ro / "cache"
    return out


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.is_dir() else []


# --- an unusable cache directory --------------------------------------------------------------

def test_import_succeeds_with_an_unusable_cache_and_creates_nothing_there(tmp_path):
    for what, path in unusable_dirs(tmp_path).items():
        before = tree(path)
        r = child("import nnsym", path)
        assert r.returncode == 0, (what, r.stderr)
        assert "Traceback" not in r.stderr, what
        assert tree(path) == before, what


def test_import_writes_nothing_to_a_writable_cache(tmp_path):
    r = child("import nnsym", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "cache").exists()


def test_unusable_cache_falls_back_to_a_private_temporary_cache(tmp_path):
    for what, path in unusable_dirs(tmp_path).items():
        out, err = compute(path)
        assert out["ok"] and out["backend"] == "c", what
        lines = [ln for ln in err.splitlines() if "CacheWarning" in ln]
        assert len(lines) == 1, (what, err)
        assert "NNSYM_CACHE_DIR" in lines[0] and str(path) in lines[0], lines[0]
        assert "private temporary cache" in lines[0]
        # the warning points at the user's line, not into nnsym
        assert lines[0].startswith("<string>:"), lines[0]
        tmp = lines[0].split("private temporary cache ")[1].split(",")[0]
        assert not Path(tmp).exists(), "the private cache is removed at exit"


def test_no_cache_and_no_temporary_directory_falls_back_to_numpy(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    prelude = f"import tempfile; tempfile.tempdir = {str(blocker / 'tmp')!r}"
    out, err = compute(blocker / "cache", prelude=prelude)
    assert out["ok"] and out["backend"] == "numpy"
    lines = [ln for ln in err.splitlines() if "Warning:" in ln]
    assert len(lines) == 1, err
    assert "NNSYM_CACHE_DIR" in lines[0] and "numpy" in lines[0]
    assert "Traceback" not in err


def test_a_cache_failing_mid_build_moves_to_a_private_cache(tmp_path, monkeypatch):
    bad = tmp_path / "full"
    monkeypatch.setenv("NNSYM_CACHE_DIR", str(bad))
    monkeypatch.setattr(cache, "_ROOTS", {})
    monkeypatch.setattr(cache, "_FALLBACKS", {})
    full = False
    built = []

    def build(tmp: Path) -> None:
        if full and str(tmp).startswith(str(bad)):
            raise OSError(errno.ENOSPC, "No space left on device")
        key = tmp.parent.name * 32
        built.append(key)
        (tmp / "lib.so").write_bytes(b"\x7fELF" + key.encode())
        (tmp / "meta.json").write_text(json.dumps(
            {"key": key, "sha256": cache.file_sha256(tmp / "lib.so")}))

    old = cache.build_cached("cd" * 32, build)  # built while there was room
    assert str(old).startswith(str(bad))
    full = True
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        entry = cache.build_cached("ab" * 32, build)
        assert cache.build_cached("ab" * 32, build) == entry  # found in the fallback now
        assert cache.build_cached("cd" * 32, build) == old  # still served from where it is
    assert built == ["cd" * 32, "ab" * 32]
    assert not str(entry).startswith(str(bad))
    assert cache.verify(entry, "ab" * 32)
    msgs = [str(m.message) for m in w if issubclass(m.category, cache.CacheWarning)]
    assert len(msgs) == 1 and "NNSYM_CACHE_DIR" in msgs[0] and "No space left" in msgs[0]
    shutil.rmtree(cache.cache_root(), ignore_errors=True)


@pytest.mark.parametrize("argv", [
    ["demo"],
    ["infer", str(GOLDEN / "mlp-symbol.json"), "--shape", "data=2,784"],
])
def test_cli_works_with_an_unusable_cache(tmp_path, argv):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = f"import sys; from nnsym.cli import main; sys.exit(main({argv!r}))"
    r = child(code, blocker / "cache")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if argv[0] == "demo":  # runs kernels: the cache is needed, and the warning says why not
        assert "NNSYM_CACHE_DIR" in r.stderr
    else:  # inference compiles nothing, so the cache is never touched
        assert "NNSYM_CACHE_DIR" not in r.stderr


# --- the C compiler ---------------------------------------------------------------------------

def _choose(monkeypatch, value: str) -> tuple[tuple[str, ...] | None, list[str]]:
    monkeypatch.setenv("CC", value)
    compiler.compiler_command.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cmd = compiler.compiler_command()
    finally:
        compiler.compiler_command.cache_clear()
    return cmd, [str(m.message) for m in w if issubclass(m.category, compiler.CompilerWarning)]


@pytest.mark.skipif(compiler.compiler() is None, reason="needs a C compiler")
@pytest.mark.parametrize("value", ["/nonexistent/cc", "false", "gcc --no-such-flag-at-all"])
def test_an_unusable_cc_warns_naming_it_then_uses_the_default(monkeypatch, value):
    cmd, msgs = _choose(monkeypatch, value)
    assert len(msgs) == 1
    assert f"CC={value!r}" in msgs[0]
    assert cmd is not None and cmd == compiler._default_compiler()
    assert "instead" in msgs[0]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_an_argument_bearing_cc_is_split_and_used(tmp_path):
    wrapper = tmp_path / "wrap.sh"
    marker = tmp_path / "called"
    wrapper.write_text(f'#!/bin/sh\necho x >> "{marker}"\nexec gcc "$@"\n')
    out, err = compute(tmp_path / "cache", CC=f"sh {wrapper}")
    assert out["ok"] and out["backend"] == "c"
    assert out["cc"].endswith(f"sh {wrapper}")
    assert "CompilerWarning" not in err
    assert marker.exists() and out["stats"]["compiles"] >= 1


@pytest.mark.skipif(shutil.which("ccache") is None or shutil.which("gcc") is None,
                    reason="needs ccache and gcc")
def test_ccache_gcc(monkeypatch):
    cmd, msgs = _choose(monkeypatch, "ccache gcc")
    assert msgs == [] and cmd is not None and cmd[1:] == ("gcc",)


def test_runtime_is_built_on_first_use_once_across_threads(tmp_path):
    code = textwrap.dedent(
        """
        import threading
        import nnsym
        from nnsym.codegen import compiler
        assert compiler._RUNTIME is None
        got = []
        ts = [threading.Thread(target=lambda: got.append(compiler.runtime())) for _ in range(8)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert len(got) == 8 and all(g is got[0] for g in got)
        print(compiler.get_num_threads())
        """
    )
    r = child(code, tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) >= 1


# --- housekeeping and nnsym cache --check ------------------------------------------------------

def _aged(path: Path, seconds: float) -> Path:
    t = time.time() - seconds
    os.utime(path, (t, t))
    return path


def test_stale_build_directories_are_pruned(tmp_path):
    shard = tmp_path / cache.FORMAT / "ab"
    shard.mkdir(parents=True)
    dead = 999_999_999  # above any pid_max
    me = os.getpid()
    cases = {
        f".tmp-abcdef01-{dead}-x": (120, True),   # its process is gone
        f".tmp-abcdef02-{dead}-x": (5, False),    # too fresh to judge (another pid namespace?)
        f".tmp-abcdef03-{me}-x": (120, False),    # its process is alive
        f".tmp-abcdef04-{me}-x": (2 * 3600, True),  # nobody builds for two hours
        ".tmp-abcdef05-x": (2 * 3600, True),      # the old naming, without a pid
    }
    for name, (age, _) in cases.items():
        (shard / name).mkdir()
        (shard / name / "kernels.c").write_text("int x;")
        _aged(shard / name, age)
    removed = {p.name for p, _ in cache.prune_temp(shard)}
    assert removed == {n for n, (_, stale) in cases.items() if stale}


def test_failed_sources_are_bounded(tmp_path):
    failed = tmp_path / "failed"
    failed.mkdir()
    for i in range(cache.FAILED_KEEP + 10):  # 0000.c the newest
        p = failed / f"{i:04d}.c"
        p.write_text("x")
        _aged(p, 100 + i)
    removed = {p.name for p, _ in cache.prune_failed(tmp_path)}
    assert removed == {f"{i:04d}.c" for i in range(cache.FAILED_KEEP, cache.FAILED_KEEP + 10)}
    _aged(failed / "0003.c", cache.FAILED_MAX_AGE + 10)
    assert [p.name for p, _ in cache.prune_failed(tmp_path)] == ["0003.c"]
    assert len(list(failed.iterdir())) == cache.FAILED_KEEP - 1


def test_cache_check_removes_a_corrupted_entry_and_it_is_rebuilt(tmp_path, capsys):
    first, _ = compute(tmp_path)
    assert first["ok"] and first["stats"]["compiles"] >= 1
    entries = sorted(p for p in (tmp_path / cache.FORMAT).glob("??/*") if p.is_dir())
    assert entries
    victim = entries[0]
    lib = victim / "lib.so"
    lib.write_bytes(lib.read_bytes()[:100])  # truncated
    stale = victim.parent / f".tmp-00000000-{999_999_999}-z"  # a killed compile's
    stale.mkdir()
    _aged(stale, 300)
    probe = tmp_path / ".probe-killed"  # a write check cut short
    probe.write_text("")
    _aged(probe, 300)
    assert main(["cache", "--check", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"removed {probe}: leftover of an interrupted write check" in out
    assert f"removed {victim}: lib.so does not match its checksum" in out
    assert f"removed {stale}: stale build directory" in out
    assert f"{len(entries) - 1} entr" in out and "ok, 3 removed" in out
    assert not victim.exists() and not stale.exists()
    # healthy now: nothing more to remove
    assert main(["cache", "check", "--dir", str(tmp_path)]) == 0
    assert "0 removed" in capsys.readouterr().out
    again, _ = compute(tmp_path)
    assert again["ok"] and again["stats"]["compiles"] == 1
    assert cache.verify(victim, victim.name)


def test_cache_check_on_a_missing_or_blocked_directory(tmp_path, capsys):
    assert main(["cache", "--check", "--dir", str(tmp_path / "none")]) == 0
    assert "0 entries ok, 0 removed" in capsys.readouterr().out
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["cache", "--check", "--dir", str(blocker)]) == 1
    assert "not a directory" in capsys.readouterr().err


def test_cache_info_and_clear_take_dir(tmp_path, capsys):
    compute(tmp_path)
    assert main(["cache", "--info", "--dir", str(tmp_path)]) == 0
    assert str(tmp_path) in capsys.readouterr().out
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "removed" in capsys.readouterr().out
    assert cache.info(tmp_path)["entries"] == 0


def test_concurrent_first_use_in_threads(tmp_path):
    code = textwrap.dedent(
        """
        import threading
        import numpy as np
        from nnsym import nd
        errs = []
        def work(i):
            try:
                a = np.full((3, 5), i, np.float32)
                assert np.allclose((nd.array(a) * 2.0 + 1.0).asnumpy(), a * 2 + 1)
            except Exception as e:
                errs.append(repr(e))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errs, errs
        """
    )
    r = child(code, tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert not list((tmp_path / "cache").rglob(".tmp-*"))


def test_threads_share_the_resolved_root(tmp_path, monkeypatch):
    monkeypatch.setenv("NNSYM_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setattr(cache, "_ROOTS", {})
    got: list[Path] = []
    ts = [threading.Thread(target=lambda: got.append(cache.cache_root())) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == [tmp_path / "c"] * 8
    assert [p.name for p in (tmp_path / "c").iterdir()] == []  # the probe left nothing
