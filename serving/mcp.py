"""``ctxledger mcp``: the read path as MCP tools over stdio (official ``mcp`` SDK).

Tools ``memories``, ``search`` and ``pack`` take the same arguments as the HTTP
API (``serving.http``) and return the same JSON. A stdio server has one
client, so its principal is fixed at start: the bearer token (the
``CTXLEDGER_TOKEN`` environment variable) looked up in the token file. A tool
call naming another tenant, or a subject the token may not read, fails with a
"403" tool error, as the HTTP API does.
"""

# No ``from __future__ import annotations``: the MCP SDK reads the tools'
# annotations at runtime to publish their schemas.

from datetime import datetime

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ctxledger.serving.auth import Principal, subject_for, tenant_for
from ctxledger.serving.context import Context
from ctxledger.serving.http import (
    MemoriesResponse,
    PackBody,
    PackResponse,
    SearchBody,
    SearchResponse,
    memories_response,
    pack_request,
)


class ForbiddenError(ToolError):
    """A tool call the token may not make (the HTTP API's 403); a ``ToolError``
    so the SDK passes its message to the client (other errors it hides)."""


def create_server(context: Context, principal: Principal) -> MCPServer:
    """An MCP server exposing ``context`` to ``principal``."""
    server = MCPServer(
        "ctxledger",
        instructions=(
            "Memories, evidence search and context packs from a ctxledger "
            f"warehouse, for tenant {principal.tenant}."
        ),
    )
    operators = tuple(context.policy.evidence.artifacts.operator_groups)

    def scoped(tenant_id: str | None, subject_id: str | None):
        from ctxledger.serving.auth import AuthError

        try:
            return (
                tenant_for(principal, tenant_id),
                subject_for(principal, subject_id, operators),
            )
        except AuthError as exc:
            raise ForbiddenError(f"{exc.status}: {exc.message}") from None

    @server.tool()
    def memories(
        subject_id: str,
        purpose: str,
        tenant_id: str | None = None,
        at: datetime | None = None,
    ) -> MemoriesResponse:
        """Memories of one subject a context builder may use for ``purpose``:
        facts, hypotheses (model inferences) and conflicts to confirm."""
        tenant, subject = scoped(tenant_id, subject_id)
        view, snap = context.memories_at(tenant, subject or subject_id, purpose, at)
        return memories_response(view, snap)

    @server.tool()
    def search(
        query: str,
        k: int = 5,
        subject_id: str | None = None,
        tenant_id: str | None = None,
        as_of: datetime | None = None,
        candidates: int = 20,
        kinds: list[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        context_turns: int = 0,
    ) -> SearchResponse:
        """Hybrid (BM25 + vector) search within the token's scope: ``kinds``
        ``evidence`` (chunks, the default) and/or ``messages`` (the subject's
        conversation turns, with ``since``/``until`` and ``context_turns``)."""
        body = SearchBody(
            query=query,
            k=k,
            subject_id=subject_id,
            tenant_id=tenant_id,
            as_of=as_of,
            candidates=candidates,
            kinds=kinds or ["evidence"],
            since=since,
            until=until,
            context_turns=context_turns,
        )
        tenant, subject = scoped(tenant_id, subject_id)
        hits, turns, snap = [], [], None
        if "evidence" in body.kinds:
            hits, snap = context.search_at(
                tenant, principal.groups, query, k, as_of, candidates, subject
            )
        if "messages" in body.kinds:
            if subject is None:
                raise ToolError("searching messages needs subject_id")
            turns, snap = context.search_messages_at(
                tenant,
                subject,
                query,
                k,
                since=since,
                until=until,
                context_turns=context_turns,
            )
        return SearchResponse(snapshot_id=snap, hits=hits, turns=turns)

    @server.tool()
    def pack(
        query: str,
        window_tokens: int,
        subject_id: str | None = None,
        purpose: str | None = None,
        tenant_id: str | None = None,
        max_output_tokens: int = 0,
        overhead_tokens: int = 0,
        mandatory: list[str] | None = None,
        include_dropped_content: bool = False,
    ) -> PackResponse:
        """A context pack for ``query`` within ``window_tokens``, with the
        manifest of what was selected and dropped (and why). Dropped items
        are listed by id, kind, source, token count, scores and reason;
        ``include_dropped_content`` adds each one's full item with its text."""
        scoped(tenant_id, subject_id)
        body = PackBody(
            query=query,
            window_tokens=window_tokens,
            subject_id=subject_id,
            purpose=purpose,
            tenant_id=tenant_id,
            max_output_tokens=max_output_tokens,
            overhead_tokens=overhead_tokens,
            mandatory=mandatory or [],
            include_dropped_content=include_dropped_content,
        )
        manifest, snap = context.pack_at(pack_request(body, principal, operators))
        return PackResponse(snapshot_id=snap, manifest=manifest)

    return server


def run_stdio(context: Context, principal: Principal) -> None:
    """Serve MCP on stdin/stdout until the client closes it (or stops the
    process: SIGTERM exits through the caller's cleanup, see
    ``serving.http.serve``)."""
    import signal
    import sys

    def _exit(signum: int, _frame: object) -> None:
        sys.exit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        create_server(context, principal).run("stdio")
    finally:
        signal.signal(signal.SIGTERM, previous)
