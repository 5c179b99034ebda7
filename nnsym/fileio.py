"""Writing files so that a failure never destroys the previous one.

Every file nnsym writes for the user (``nd.save``, ``Symbol.save``, checkpoints, the CLI's
outputs, plots) goes through ``atomic_write``: the bytes go to a temporary file in the target's
directory, which is flushed and fsynced and then renamed over the target (``os.replace``, atomic
on POSIX and Windows). If anything fails on the way (an exception while encoding or writing, a
full disk, an interrupt), the temporary file is removed and the previous file is left as it was.
The new file gets the previous file's permission bits, or the usual ``0o666 & ~umask`` for a new
one. Writing needs permission to create files in the target's directory.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "write_bytes", "write_text"]


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: not every platform or file system allows it)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: str = "wb", encoding: str | None = None
) -> Iterator[IO[Any]]:
    """A file object (``mode`` "wb" or "w") whose contents replace ``path`` when the block ends
    without an exception; on any exception ``path`` is untouched and nothing is left behind.

    A symbolic link at ``path`` stays a link: the file it points to is replaced. Something at
    ``path`` that is not a regular file (``/dev/null``, a named pipe) is written in place.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write writes whole files: mode 'wb' or 'w', not {mode!r}")
    if mode == "w" and encoding is None:
        encoding = "utf-8"
    target = Path(path).resolve()
    try:
        st = target.stat()
    except OSError:
        perms = 0o666 & ~_UMASK
    else:
        if not stat.S_ISREG(st.st_mode):
            # a device (/dev/null), a pipe, a directory: nothing to replace; open it as it is
            # (a directory raises IsADirectoryError)
            with target.open(mode, encoding=encoding) as f:
                yield f
            return
        perms = stat.S_IMODE(st.st_mode)
    # the name stays short of NAME_MAX whatever the target's length
    fd, name = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        tmp.chmod(perms)
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)


def write_bytes(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> None:
    """``Path(path).write_bytes(data)``, atomically (see ``atomic_write``)."""
    with atomic_write(path, "wb") as f:
        f.write(data)


def write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """``Path(path).write_text(text)``, atomically (see ``atomic_write``); returns the path."""
    with atomic_write(path, "w", encoding=encoding) as f:
        f.write(text)
    return Path(path)
