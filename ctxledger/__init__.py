"""ctxledger: the data plane behind AI-agent context builders.

Every installed import name lives under ``ctxledger.`` (``ctxledger.schemas``,
``ctxledger.warehouse``, ``ctxledger.serving``...; docs/packaging.md), so a user's
own ``schemas/`` or ``jobs/`` folder never shadows ours. The names a context
builder needs are re-exported here and loaded on first use, so ``import
ctxledger`` stays cheap and the CLI does not pay for DuckDB or the read path it
may not need:

- ``ctxledger.Context``: the read path for context builders (``Context.open``).
- ``ctxledger.Warehouse``: the lake itself (catalog, tables, commits).
- ``PackRequest`` (what ``Context.pack`` takes) and what the read path returns:
  ``ContextManifest``, ``ContextItem``, ``DroppedItem``, ``SearchHit``,
  ``MemoryView``, ``ServedMemory``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxledger.schemas.evidence import (
        ContextItem,
        ContextManifest,
        DroppedItem,
        PackRequest,
        SearchHit,
    )
    from ctxledger.serving.context import Context
    from ctxledger.serving.memories import MemoryView, ServedMemory
    from ctxledger.warehouse.catalog import Warehouse

#: Public name -> the module that defines it (imported on first use).
_EXPORTS = {
    "Context": "ctxledger.serving.context",
    "Warehouse": "ctxledger.warehouse.catalog",
    "PackRequest": "ctxledger.schemas.evidence",
    "ContextManifest": "ctxledger.schemas.evidence",
    "ContextItem": "ctxledger.schemas.evidence",
    "DroppedItem": "ctxledger.schemas.evidence",
    "SearchHit": "ctxledger.schemas.evidence",
    "MemoryView": "ctxledger.serving.memories",
    "ServedMemory": "ctxledger.serving.memories",
}

__all__ = [
    "Context",
    "ContextItem",
    "ContextManifest",
    "DroppedItem",
    "MemoryView",
    "PackRequest",
    "SearchHit",
    "ServedMemory",
    "Warehouse",
]


def __getattr__(name: str) -> Any:
    """PEP 562: resolve the re-exports lazily."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
