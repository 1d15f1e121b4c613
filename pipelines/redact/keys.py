"""The pseudonym key: where it comes from, and never anywhere else.

``load_key`` returns the HMAC key used for per-tenant pseudonyms:

1. ``CTXLEDGER_PSEUDONYM_KEY`` (hex, or any string of at least 16 bytes) wins;
2. else the key file (default ``~/.config/ctxledger/pseudonym.key``);
3. if that file does not exist it is created with 32 random bytes (directory 0700,
   file 0600) and a warning is logged once per process.

The key is never logged, printed or written to any other place.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

ENV_VAR = "CTXLEDGER_PSEUDONYM_KEY"
MIN_KEY_BYTES = 16
_log = logging.getLogger(__name__)
_warned: set[str] = set()


class PseudonymKeyError(ValueError):
    """The configured pseudonym key is unusable."""


def default_key_path() -> Path:
    """``~/.config/ctxledger/pseudonym.key`` (``$HOME`` at call time)."""
    return Path(os.path.expanduser("~")) / ".config" / "ctxledger" / "pseudonym.key"


def _from_text(raw: str, source: str) -> bytes:
    value = raw.strip()
    if len(value) % 2 == 0 and len(value) >= 2 * MIN_KEY_BYTES:
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass
    key = value.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        raise PseudonymKeyError(f"pseudonym key from {source} is shorter than 16 bytes")
    return key


def load_key(key_file: Path | None = None) -> bytes:
    """The pseudonym HMAC key (see the module docstring for the lookup order)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return _from_text(env, f"${ENV_VAR}")
    path = Path(key_file) if key_file is not None else default_key_path()
    if path.exists():
        data = path.read_bytes()
        if _is_text_key(data):
            return _from_text(data.decode("ascii"), str(path))
        if len(data) < MIN_KEY_BYTES:
            raise PseudonymKeyError(f"pseudonym key file {path} is under 16 bytes")
        return data
    return _create_key_file(path)


def _is_text_key(data: bytes) -> bool:
    """A key file written by hand (hex or a passphrase) rather than random bytes."""
    body = data.strip()
    return bool(body) and all(32 <= b < 127 for b in body)


def _create_key_file(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    key = secrets.token_bytes(32)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:  # created concurrently by another worker
        return load_key(path)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    os.chmod(path, 0o600)
    if str(path) not in _warned:
        _warned.add(str(path))
        _log.warning(
            "created a new pseudonym key at %s; back it up: pseudonyms made with "
            "another key will not match",
            path,
        )
    return key
