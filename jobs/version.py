"""The code version stamped on every run and dead letter."""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata


@lru_cache(maxsize=1)
def code_version() -> str:
    try:
        return f"ctxledger {metadata.version('ctxledger')}"
    except metadata.PackageNotFoundError:
        return "ctxledger dev"
