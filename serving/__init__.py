"""The read path for context builders: ``Context.open(path)`` -> ``memories``,
``search_evidence``, ``pack``, over committed snapshots that never block a
writer; and the HTTP (``serving.http``) and MCP (``serving.mcp``) servers."""

from ctxledger.serving.context import Context

__all__ = ["Context"]
