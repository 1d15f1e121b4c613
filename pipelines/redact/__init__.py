"""The redact stage: PII and secret detection with keyed per-tenant pseudonyms.

Pure logic (no Beam). ``Redactor`` (``engine``) is the entry point; ``transforms``
holds the Beam wrapper. Importing this package is cheap: presidio and spaCy load
only in ``Redactor.setup()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxledger.pipelines.redact.engine import Redaction, Redactor
    from ctxledger.pipelines.redact.keys import load_key

__all__ = ["Redaction", "Redactor", "load_key"]


def __getattr__(name: str) -> Any:
    if name in ("Redaction", "Redactor"):
        from ctxledger.pipelines.redact import engine

        return getattr(engine, name)
    if name == "load_key":
        from ctxledger.pipelines.redact.keys import load_key

        return load_key
    raise AttributeError(name)
