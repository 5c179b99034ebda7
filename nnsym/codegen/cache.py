"""Content-addressed disk cache of compiled kernels, safe with concurrent processes.

Layout: ``$NNSYM_CACHE_DIR/v1/<key[:2]>/<key>/`` holding ``kernels.c``, ``lib.so`` and
``meta.json`` (the key, the library's sha256, the cdef). An entry is built in a temporary
directory beside its final place and published with one ``os.rename``: readers see all of it or
nothing; a process that loses the race throws its copy away. Entries are never rewritten in
place (a process may have the library mapped); a corrupted entry is moved aside and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMAT = "v1"


def cache_root() -> Path:
    env = os.environ.get("NNSYM_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nnsym"


def cache_key(**parts: Any) -> str:
    """Everything that shapes the artifact goes in, so any change is a new key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def entry_dir(key: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / FORMAT / key[:2] / key


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(final: Path, key: str) -> bool:
    """The entry is complete and its library is the one that was built."""
    try:
        meta = json.loads((final / "meta.json").read_text())
        return bool(meta.get("key") == key and meta.get("sha256") == file_sha256(final / "lib.so"))
    except (OSError, ValueError):
        return False


def build_cached(key: str, build: Callable[[Path], None], root: Path | None = None) -> Path:
    """Return the entry for ``key``, building it (at most once per winner of a race)."""
    final = entry_dir(key, root)
    if final.is_dir():
        if verify(final, key):
            return final
        _move_aside(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:8]}-", dir=final.parent))
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


def info(root: Path | None = None) -> dict[str, Any]:
    base = (root or cache_root()) / FORMAT
    entries = [p for p in base.glob("??/*") if p.is_dir() and not p.name.startswith(".")]
    size = sum(f.stat().st_size for p in entries for f in p.iterdir() if f.is_file())
    return {"path": str(base), "entries": len(entries), "bytes": size}


def clear(root: Path | None = None) -> int:
    base = (root or cache_root()) / FORMAT
    n = sum(1 for p in base.glob("??/*") if p.is_dir())
    if base.exists():
        aside = base.parent / f".clear-{os.getpid()}-{time.time_ns()}"
        base.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)
    return n
