"""ctxledger: the data plane behind AI-agent context builders.

Every installed import name lives under ``ctxledger.`` (``ctxledger.schemas``,
``ctxledger.warehouse``, ``ctxledger.serving``...; docs/packaging.md), so a user's
own ``schemas/`` or ``jobs/`` folder never shadows ours. The two entry points are
re-exported here and loaded on first use, so ``import ctxledger`` stays cheap
and the CLI does not pay for DuckDB or the read path it may not need:

- ``ctxledger.Context``: the read path for context builders (``Context.open``).
- ``ctxledger.Warehouse``: the lake itself (catalog, tables, commits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxledger.serving.context import Context
    from ctxledger.warehouse.catalog import Warehouse

__all__ = ["Context", "Warehouse"]


def __getattr__(name: str) -> Any:
    """PEP 562: resolve the re-exports lazily."""
    if name == "Context":
        from ctxledger.serving.context import Context

        return Context
    if name == "Warehouse":
        from ctxledger.warehouse.catalog import Warehouse

        return Warehouse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
