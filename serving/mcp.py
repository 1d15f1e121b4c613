"""``ctxledger mcp``: the read path as MCP tools over stdio (official ``mcp`` SDK).

Tools ``memories``, ``search`` and ``pack`` take the same arguments as the HTTP
API (``serving.http``) and return the same JSON. A stdio server has one
client, so its principal is fixed at start: the bearer token (the
``CTXLEDGER_TOKEN`` environment variable) looked up in the token file. A tool
call naming another tenant, or a subject the token may not read, fails with a
"403" tool error, as the HTTP API does. Arguments are bounded as the HTTP
bodies are (``window_tokens`` and the other numbers: a "422" naming the
field). ``principal_groups`` is honoured, never ignored: a call may narrow
the token's groups to some of them; naming a group the token lacks is a 403.
"""

# No ``from __future__ import annotations``: the MCP SDK reads the tools'
# annotations at runtime to publish their schemas.

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from ctxledger.schemas.evidence import MAX_REQUEST_CANDIDATES, MAX_REQUEST_TOKENS
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

# The HTTP bodies' bounds, published in the tools' input schemas and checked
# by the SDK before a tool runs (its error names the argument).
Tokens = Annotated[int, Field(ge=0, le=MAX_REQUEST_TOKENS)]
Window = Annotated[int, Field(gt=0, le=MAX_REQUEST_TOKENS)]
TopK = Annotated[int, Field(ge=1, le=100)]
Candidates = Annotated[int, Field(ge=1, le=MAX_REQUEST_CANDIDATES)]
Groups = Annotated[
    list[str] | None,
    Field(
        description="Narrow the token's principal groups to these (each must "
        "be one of the token's; another is refused with a 403)."
    ),
]


class ForbiddenError(ToolError):
    """A tool call the token may not make (the HTTP API's 403); a ``ToolError``
    so the SDK passes its message to the client (other errors it hides)."""


class NotFoundError(ToolError):
    """An unknown tenant or purpose (the HTTP API's 404)."""


class InvalidArgumentsError(ToolError):
    """Arguments outside the schema (the HTTP API's 422), the field named."""


def _checked(model, **fields):
    """``model(**fields)``, its validation errors as a "422" tool error that
    names each field (never the value)."""
    try:
        return model(**fields)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidArgumentsError(f"422: {where}") from None


def narrowed(principal: Principal, groups: list[str] | None) -> Principal:
    """``principal`` with its groups narrowed to ``groups`` (None: as is);
    a group the token does not hold is a 403."""
    if groups is None:
        return principal
    foreign = sorted(set(groups) - set(principal.groups))
    if foreign:
        raise ForbiddenError(
            f"403: this token does not hold principal group(s) {foreign}"
        )
    return principal.model_copy(update={"groups": tuple(dict.fromkeys(groups))})


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

    def scoped(tenant_id: str | None, subject_id: str | None, caller=principal):
        from ctxledger.serving.auth import AuthError

        try:
            return (
                tenant_for(caller, tenant_id),
                subject_for(caller, subject_id, operators),
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
        if not view.items:
            problem = context.scope_problem(tenant, purpose)
            if problem is not None:  # the HTTP API's 404, no other tenant named
                named = problem.field != "tenant"
                raise NotFoundError(f"404: {problem.message(named)}")
        return memories_response(view, snap)

    @server.tool()
    def search(
        query: str,
        k: TopK = 5,
        subject_id: str | None = None,
        tenant_id: str | None = None,
        as_of: datetime | None = None,
        candidates: Candidates = 20,
        principal_groups: Groups = None,
        kinds: list[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        context_turns: int = 0,
    ) -> SearchResponse:
        """Hybrid (BM25 + vector) search within the token's scope: ``kinds``
        ``evidence`` (chunks, the default) and/or ``messages`` (the subject's
        conversation turns, with ``since``/``until`` and ``context_turns``)."""
        caller = narrowed(principal, principal_groups)
        tenant, subject = scoped(tenant_id, subject_id, caller)
        body = _checked(
            SearchBody, query=query, k=k, as_of=as_of, candidates=candidates,
            kinds=kinds or ["evidence"], since=since, until=until,
            context_turns=context_turns,
        )  # fmt: skip
        hits, turns, snap = [], [], None
        if "evidence" in body.kinds:
            hits, snap = context.search_at(
                tenant, caller.groups, body.query, body.k, body.as_of,
                body.candidates, subject,
            )  # fmt: skip
        if "messages" in body.kinds:
            if subject is None:
                raise InvalidArgumentsError("422: searching messages needs subject_id")
            turns, snap = context.search_messages_at(
                tenant, subject, body.query, body.k, since=body.since,
                until=body.until, context_turns=body.context_turns,
            )  # fmt: skip
        return SearchResponse(snapshot_id=snap, hits=hits, turns=turns)

    @server.tool()
    def pack(
        query: str,
        window_tokens: Window,
        subject_id: str | None = None,
        purpose: str | None = None,
        tenant_id: str | None = None,
        max_output_tokens: Tokens = 0,
        overhead_tokens: Tokens = 0,
        mandatory: list[str] | None = None,
        include_dropped_content: bool = False,
        principal_groups: Groups = None,
    ) -> PackResponse:
        """A context pack for ``query`` within ``window_tokens``, with the
        manifest of what was selected and dropped (and why). Dropped items
        are listed by id, kind, source, token count, scores and reason;
        ``include_dropped_content`` adds each one's full item with its text."""
        caller = narrowed(principal, principal_groups)
        scoped(tenant_id, subject_id, caller)
        body = _checked(
            PackBody,
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
        manifest, snap = context.pack_at(pack_request(body, caller, operators))
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
