"""The pseudonym key: where it comes from, and never anywhere else.

``load_key`` returns the HMAC key used for per-tenant pseudonyms:

1. ``CTXLEDGER_PSEUDONYM_KEY`` (hex, or any string) wins;
2. else the key file (default ``~/.config/ctxledger/pseudonym.key``);
3. if that file does not exist it is created with 32 random bytes (directory 0700,
   file 0600) and a warning is logged once per process.

A pseudonym is only as private as the key: anyone who reads the key can test
guesses (``HMAC(key, "mia@example.com")``) against the warehouse. So a key under
32 bytes (``MIN_KEY_BYTES``; 256 bits, the HMAC-SHA256 block's security) and a
key file that group or others may access (mode beyond 0600) are refused, unless
the caller allows weak keys (``--allow-weak-key`` or ``CTXLEDGER_ALLOW_WEAK_KEY=1``,
for tests and migrations), which logs a warning instead. Keys under 16 bytes are
refused always.

The key is never logged, printed or written to any other place.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

ENV_VAR = "CTXLEDGER_PSEUDONYM_KEY"
#: Set to ``1`` to accept (with a warning) short keys and readable key files.
ALLOW_WEAK_ENV = "CTXLEDGER_ALLOW_WEAK_KEY"
MIN_KEY_BYTES = 32
#: Below this no key is accepted, weak keys allowed or not.
ABSOLUTE_MIN_KEY_BYTES = 16
_log = logging.getLogger(__name__)
_warned: set[str] = set()


class PseudonymKeyError(ValueError):
    """The configured pseudonym key is unusable."""


def default_key_path() -> Path:
    """``~/.config/ctxledger/pseudonym.key`` (``$HOME`` at call time)."""
    return Path(os.path.expanduser("~")) / ".config" / "ctxledger" / "pseudonym.key"


def weak_keys_allowed() -> bool:
    """Whether ``CTXLEDGER_ALLOW_WEAK_KEY`` is set (the CLI's ``--allow-weak-key``
    sets it, so Beam workers that load the key themselves inherit it)."""
    return os.environ.get(ALLOW_WEAK_ENV, "").strip().lower() in {"1", "true", "yes"}


def _weak(problem: str, allow_weak: bool) -> None:
    """Refuse a weak key, or warn once about it when weak keys are allowed."""
    if not allow_weak:
        raise PseudonymKeyError(
            f"{problem}; pass --allow-weak-key (or set {ALLOW_WEAK_ENV}=1) to "
            "use it anyway"
        )
    if problem not in _warned:
        _warned.add(problem)
        _log.warning("weak pseudonym key accepted: %s", problem)


def _checked(key: bytes, source: str, allow_weak: bool) -> bytes:
    if len(key) < ABSOLUTE_MIN_KEY_BYTES:
        raise PseudonymKeyError(
            f"pseudonym key from {source} is shorter than "
            f"{ABSOLUTE_MIN_KEY_BYTES} bytes"
        )
    if len(key) < MIN_KEY_BYTES:
        _weak(
            f"pseudonym key from {source} is {len(key)} bytes, under {MIN_KEY_BYTES}",
            allow_weak,
        )
    return key


def _from_text(raw: str, source: str, allow_weak: bool) -> bytes:
    value = raw.strip()
    if len(value) % 2 == 0 and len(value) >= 2 * ABSOLUTE_MIN_KEY_BYTES:
        try:
            return _checked(bytes.fromhex(value), source, allow_weak)
        except ValueError as exc:
            if isinstance(exc, PseudonymKeyError):
                raise
    return _checked(value.encode("utf-8"), source, allow_weak)


def load_key(key_file: Path | None = None, *, allow_weak: bool | None = None) -> bytes:
    """The pseudonym HMAC key (see the module docstring for the lookup order and
    the checks). ``allow_weak``: None reads ``CTXLEDGER_ALLOW_WEAK_KEY``."""
    if allow_weak is None:
        allow_weak = weak_keys_allowed()
    env = os.environ.get(ENV_VAR)
    if env:
        return _from_text(env, f"${ENV_VAR}", allow_weak)
    path = Path(key_file) if key_file is not None else default_key_path()
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            _weak(
                f"pseudonym key file {path} has mode {mode:04o}: group or others "
                "may read it (chmod 600 it)",
                allow_weak,
            )
        data = path.read_bytes()
        if _is_text_key(data):
            return _from_text(data.decode("ascii"), str(path), allow_weak)
        return _checked(data, str(path), allow_weak)
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
