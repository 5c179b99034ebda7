"""Content-addressed disk cache of compiled kernels, safe with concurrent processes.

Layout: ``$NNSYM_CACHE_DIR/v1/<key[:2]>/<key>/`` holding ``kernels.c``, ``lib.so`` and
``meta.json`` (the key, the library's sha256, the cdef). An entry is built in a temporary
directory beside its final place and published with one ``os.rename``: readers see all of it or
nothing; a process that loses the race throws its copy away. Entries are never rewritten in
place (a process may have the library mapped); a corrupted entry is moved aside and rebuilt.

The directory is ``$NNSYM_CACHE_DIR`` (default ``$XDG_CACHE_HOME/nnsym``, ``~/.cache/nnsym``),
checked on first use, not at import. Where it cannot be created or written (read-only, full,
a path through a regular file) a private temporary directory, removed at exit, stands in with
one :class:`CacheWarning`; where not even that can be made, :class:`CacheUnavailableError`
(the compiler then falls back to the numpy backend, with one warning).

Housekeeping: the build directories (``.tmp-<key>-<pid>-*``) of a killed compile are removed
when their process is gone or they are older than ``STALE_SECONDS`` (checked beside each new
build and by :func:`check`); ``failed/`` (sources the compiler rejected) keeps at most
``FAILED_KEEP`` files, none older than ``FAILED_MAX_AGE``. :func:`check` verifies every entry
(``nnsym cache --check``).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnsym.errors import NNSymError, warn

try:
    import fcntl
except ImportError:  # Windows: builds run unlocked (see _key_lock)
    fcntl = None  # type: ignore[assignment]

FORMAT = "v1"
# A build directory is abandoned when its process is gone and it is older than STALE_DEAD_SECONDS
# (a pid from another pid namespace sharing the cache may look dead), or whatever its pid says
# when it is older than STALE_SECONDS (no build takes that long).
STALE_DEAD_SECONDS = 60.0
STALE_SECONDS = 3600.0
# Processes sharing a cache build one key once: the others wait on the key's lock file
# (``.lock-<key>``) for at most this long, then build it themselves.
BUILD_WAIT_SECONDS = 900.0
FAILED_KEEP = 50  # newest sources kept in failed/
FAILED_MAX_AGE = 7 * 86400.0
# Errors that say "this directory cannot hold the cache" (rather than "this build failed").
_UNUSABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR,
             errno.EEXIST, errno.ENOENT, errno.ELOOP, errno.ENAMETOOLONG}


class CacheWarning(UserWarning):
    """The kernel cache directory could not be used as configured; the message says what nnsym
    does instead."""


class CacheUnavailableError(NNSymError):
    """No directory at all can hold compiled kernels (nor a private temporary one)."""


def configured_root() -> Path:
    """The cache directory as configured: ``$NNSYM_CACHE_DIR``, else ``$XDG_CACHE_HOME/nnsym``,
    else ``~/.cache/nnsym``. Nothing is checked or created."""
    env = os.environ.get("NNSYM_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nnsym"


_ROOT_LOCK = threading.Lock()
_ROOTS: dict[Path, Path | CacheUnavailableError] = {}  # configured -> the one in use
_FALLBACKS: dict[Path, Path] = {}  # private temporary cache -> the configured one it replaces


def cache_root() -> Path:
    """The directory in use: the configured one when it can be created and written (checked
    once per process), else a private temporary cache (one :class:`CacheWarning`); raises
    :class:`CacheUnavailableError` when neither can be had."""
    configured = configured_root()
    root = _ROOTS.get(configured)
    if root is None:
        with _ROOT_LOCK:
            root = _ROOTS.get(configured)
            if root is None:
                try:
                    _probe(configured)
                    root = configured
                except OSError as e:
                    root = _fallback(configured, e)
                _ROOTS[configured] = root
    if isinstance(root, CacheUnavailableError):
        raise root
    return root


def _probe(root: Path) -> None:
    """Create ``root`` and write a byte in it (a read-only or full disk fails here)."""
    root.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".probe-", dir=root)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
        Path(name).unlink()


def _describe(e: OSError) -> str:
    return f"{type(e).__name__}: {e.strerror or e}" + (f": {e.filename}" if e.filename else "")


def _fallback(configured: Path, problem: OSError) -> Path | CacheUnavailableError:
    """A private temporary cache standing in for ``configured`` (removed at exit), with one
    warning; the error to raise where not even that can be made. Called under ``_ROOT_LOCK``."""
    why = (f"the kernel cache directory {configured} (NNSYM_CACHE_DIR) cannot be used "
           f"({_describe(problem)})")
    try:
        tmp = Path(tempfile.mkdtemp(prefix="nnsym-cache-"))
    except OSError as e:
        return CacheUnavailableError(
            f"{why}, and no private temporary cache could be made either ({_describe(e)}); "
            "set NNSYM_CACHE_DIR to a writable directory")
    atexit.register(shutil.rmtree, tmp, True)
    _FALLBACKS[tmp] = configured
    warn(f"nnsym: {why}; compiled kernels go to a private temporary cache {tmp}, removed "
              "at exit (set NNSYM_CACHE_DIR to a writable directory to keep them)", CacheWarning)
    return tmp


def _demote(used: Path, problem: OSError) -> Path | None:
    """``used`` failed during a build: the private temporary cache that replaces it from now on,
    or None when ``used`` is one already (or the default moved on meanwhile)."""
    if used in _FALLBACKS:
        return None
    with _ROOT_LOCK:
        for configured, root in _ROOTS.items():
            if root == used:
                new = _fallback(configured, problem)
                _ROOTS[configured] = new
                if isinstance(new, CacheUnavailableError):
                    raise new from None
                return new
    return None


def cache_key(**parts: Any) -> str:
    """Everything that shapes the artifact goes in, so any change is a new key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def entry_dir(key: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / FORMAT / key[:2] / key


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(final: Path, key: str) -> bool:
    """The entry is complete and its library is the one that was built."""
    return entry_problem(final, key) is None


def entry_problem(final: Path, key: str | None = None) -> str | None:
    """What is wrong with an entry (None: nothing): its ``meta.json`` names ``key`` (default:
    the directory's name) and the sha256 of its ``lib.so``."""
    key = key or final.name
    try:
        meta = json.loads((final / "meta.json").read_text())
    except (OSError, ValueError) as e:
        return f"meta.json unreadable ({type(e).__name__})"
    if not isinstance(meta, dict) or meta.get("key") != key:
        return "meta.json names another key"
    try:
        if meta.get("sha256") != file_sha256(final / "lib.so"):
            return "lib.so does not match its checksum"
    except OSError as e:
        return f"lib.so unreadable ({type(e).__name__})"
    return None


def build_cached(key: str, build: Callable[[Path], None], root: Path | None = None) -> Path:
    """Return the entry for ``key``, building it (at most once per winner of a race). Without
    ``root``, a default cache that turns out unwritable mid-way (full, made read-only) is
    replaced by a private temporary one (one warning) and the build runs again there; entries
    already in the configured directory are still used from there (a read-only shared cache)."""
    if root is not None:
        return _build_in(key, build, root)
    used = cache_root()
    origin = _FALLBACKS.get(used)
    if origin is not None:  # entries the configured directory holds still serve, read-only
        final = entry_dir(key, origin)
        if final.is_dir() and verify(final, key):
            return final
    try:
        return _build_in(key, build, used)
    except OSError as e:
        under = bool(e.filename) and str(e.filename).startswith(str(used))
        if not (under or e.errno in _UNUSABLE):
            raise
        fallback = _demote(used, e)
        if fallback is None:
            raise
        return _build_in(key, build, fallback)


def _build_in(key: str, build: Callable[[Path], None], root: Path) -> Path:
    final = entry_dir(key, root)
    if final.is_dir() and verify(final, key):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _key_lock(final.parent / f".lock-{key}"):
        # another process (an xdist worker, a second training script) may have built it
        # while this one waited
        if final.is_dir():
            if verify(final, key):
                return final
            _move_aside(final)
        return _build_locked(key, build, final)


@contextlib.contextmanager
def _key_lock(path: Path) -> Iterator[None]:
    """Hold ``path``'s exclusive ``flock`` (waiting at most ``BUILD_WAIT_SECONDS``); without
    ``fcntl`` (Windows), or when the lock file cannot be opened, run unlocked: a duplicate
    build is harmless, as entries are renamed into place atomically."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        fd = -1
    if fd < 0 or fcntl is None:
        yield
        return
    try:
        deadline = time.monotonic() + BUILD_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break  # the holder seems stuck: build anyway
                time.sleep(0.02)
            except OSError:
                break  # a file system without locks
        yield
    finally:
        os.close(fd)  # releases the lock


def _build_locked(key: str, build: Callable[[Path], None], final: Path) -> Path:
    prune_temp(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:8]}-{os.getpid()}-", dir=final.parent))
    try:
        build(tmp)
        try:
            tmp.rename(final)
        except OSError:
            if not (final.is_dir() and verify(final, key)):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _move_aside(final: Path) -> None:
    """Take a bad entry out of the way without touching a file another process may map."""
    bad = final.parent / f".bad-{final.name[:8]}-{os.getpid()}-{time.time_ns()}"
    try:
        final.rename(bad)
    except OSError:
        return  # another process moved it already
    shutil.rmtree(bad, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def is_stale(path: Path, now: float | None = None) -> bool:
    """A ``.tmp-<key>-<pid>-*`` build directory nobody will finish (see ``STALE_SECONDS``)."""
    age = _age(path, now or time.time())
    if age > STALE_SECONDS:
        return True
    parts = path.name.split("-")
    pid = parts[2] if len(parts) > 3 else ""
    return pid.isdigit() and age > STALE_DEAD_SECONDS and not _pid_alive(int(pid))


def _age(path: Path, now: float) -> float:
    try:
        return now - path.lstat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
        return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_dir())
    except OSError:
        return 0


def _remove(path: Path) -> int:
    """Remove a file or directory; the bytes it held (raises OSError where it cannot)."""
    n = _size(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    return n


def prune_temp(parent: Path) -> list[tuple[Path, int]]:
    """Remove the stale build directories in ``parent`` (one ``<key[:2]>`` directory)."""
    removed = []
    try:
        names = [p for p in parent.iterdir() if p.name.startswith(".tmp-")]
    except OSError:
        return []
    for p in names:
        if is_stale(p):
            try:
                removed.append((p, _remove(p)))
            except OSError:
                pass  # another process removed or finished it
    return removed


def prune_failed(root: Path | None = None) -> list[tuple[Path, int]]:
    """Keep ``failed/`` to the newest ``FAILED_KEEP`` sources, none older than
    ``FAILED_MAX_AGE``."""
    failed = (root or cache_root()) / "failed"
    try:
        files = sorted(((p.stat().st_mtime, p) for p in failed.iterdir()), reverse=True)
    except OSError:
        return []
    now = time.time()
    removed = []
    for i, (mtime, p) in enumerate(files):
        if i >= FAILED_KEEP or now - mtime > FAILED_MAX_AGE:
            try:
                removed.append((p, _remove(p)))
            except OSError:
                pass
    return removed


@dataclass
class CheckReport:
    """What :func:`check` found: entries that verified, what it removed (path, reason, bytes)
    and what it could not fix."""

    path: Path
    ok: int = 0
    removed: list[tuple[Path, str, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int:
        return sum(n for _, _, n in self.removed)

    @property
    def healthy(self) -> bool:
        return not self.problems


def check(root: Path | None = None) -> CheckReport:
    """Verify every entry of the cache at ``root`` (default: the configured directory) and
    remove the broken ones, stale build directories, leftovers of interrupted removals and
    old ``failed/`` sources."""
    root = root or configured_root()
    report = CheckReport(root)

    def drop(p: Path, reason: str) -> None:
        try:
            report.removed.append((p, reason, _remove(p)))
        except OSError as e:
            report.problems.append(f"{p}: {reason}, and it cannot be removed ({_describe(e)})")

    if root.exists() and not root.is_dir():
        report.problems.append(f"{root} is not a directory")
        return report
    base = root / FORMAT
    now = time.time()
    try:
        shards = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        for p in root.glob(".clear-*"):
            drop(p, "leftover of an interrupted clear")
        for p in root.glob(".probe-*"):
            if _age(p, now) > STALE_DEAD_SECONDS:
                drop(p, "leftover of an interrupted write check")
        for shard in shards:
            for p in sorted(shard.iterdir()):
                if p.name.startswith(".tmp-"):
                    if is_stale(p, now):
                        drop(p, "stale build directory")
                elif p.name.startswith(".bad-"):
                    drop(p, "leftover of a corrupted entry")
                elif p.name.startswith(".lock-"):
                    if _age(p, now) > STALE_SECONDS:
                        drop(p, "old build lock file")
                elif p.is_dir():
                    why = entry_problem(p)
                    if why is None and p.name[:2] != shard.name:
                        why = "entry in the wrong shard"
                    if why is None:
                        report.ok += 1
                    else:
                        drop(p, why)
    except OSError as e:
        report.problems.append(f"cannot read {base}: {_describe(e)}")
    report.removed += [(p, "old failed build source", n) for p, n in prune_failed(root)]
    return report


def info(root: Path | None = None) -> dict[str, Any]:
    base = (root or configured_root()) / FORMAT
    entries = [p for p in base.glob("??/*") if p.is_dir() and not p.name.startswith(".")]
    size = sum(f.stat().st_size for p in entries for f in p.iterdir() if f.is_file())
    return {"path": str(base), "entries": len(entries), "bytes": size}


def clear(root: Path | None = None) -> int:
    base = (root or configured_root()) / FORMAT
    n = sum(1 for p in base.glob("??/*") if p.is_dir() and not p.name.startswith("."))
    if base.exists():
        aside = base.parent / f".clear-{os.getpid()}-{time.time_ns()}"
        base.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)
    return n
