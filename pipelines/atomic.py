"""Files that are either absent or whole: written under a temporary name,
fsynced, renamed, and the folder fsynced.

Why: a full disk (``ENOSPC``), a crash or a ``kill -9`` half-way through a plain
``open(final, "wb").write(...)`` leaves a truncated file under its final name;
for a content-addressed name (quarantine copies are named by the sha256 of
their bytes) the next run then skips the file because it exists, and the
truncated copy stays for good. Here a failed write removes its temporary file
(no debris) and re-raises; the final name only ever points at complete bytes.
Temporary names start with a dot (``walk_landing`` and the retention sweeps
treat dot-names as in-progress writes).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path

#: Suffix of a temporary file written by ``write_atomic`` / ``atomic_target``.
PARTIAL_SUFFIX = ".partial"


def temp_name(final: Path) -> Path:
    """A fresh hidden temporary name next to ``final``."""
    return final.with_name(f".{final.name}.{uuid.uuid4().hex}{PARTIAL_SUFFIX}")


def fsync_dir(folder: str | Path) -> None:
    """Make a rename or unlink in ``folder`` durable (best effort where the
    file system does not support fsync on a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(final: str | Path, data: bytes, mode: int = 0o600) -> Path:
    """Write ``data`` to ``final`` atomically (temp name, fsync, rename)."""
    final = Path(final)
    tmp = temp_name(final)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)
    return final


def produce_atomic(final: str | Path, write: Callable[[Path], object]) -> Path:
    """Let ``write(tmp)`` create a file at a temporary name, then fsync it and
    rename it to ``final``; on any failure the temporary file is removed."""
    final = Path(final)
    tmp = temp_name(final)
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)
    return final


def sha256_of(path: str | Path, chunk: int = 1 << 20) -> str | None:
    """The sha256 of a regular file's bytes; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
