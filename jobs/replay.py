"""The ``replay`` job: context policies over one warehouse session, in tokens.

Loads the session's current messages, tool observations and outputs, then runs
``pipelines.ledger.replay`` for each requested policy (the ledger summaries are
built with the policy file's ``ledger`` settings, exactly as the nightly job
builds them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxledger.pipelines.ledger.replay import (
    DEFAULT_POLICIES,
    PolicyResult,
    SessionView,
    parse_policy,
    replay,
)
from ctxledger.pipelines.ledger.store import load_sources, resolve_session
from ctxledger.pipelines.redact.registry import load_checked_policy
from ctxledger.schemas.transcript import Session
from ctxledger.warehouse.catalog import Warehouse


@dataclass
class ReplayOutcome:
    """A session's replay: the session, its prepared view and one result per policy."""

    session: Session
    view: SessionView
    results: list[PolicyResult]


def run_replay(
    warehouse: str | Path,
    session: str,
    policies: list[str] | None = None,
    *,
    tenant: str | None = None,
    policy_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
) -> ReplayOutcome:
    """Replay ``policies`` (default: all five kinds) over one session."""
    parsed = [parse_policy(p) for p in (policies or DEFAULT_POLICIES)]
    settings = load_checked_policy(policy_file).ledger
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        found = resolve_session(wh, session, tenant)
        sources = load_sources(wh, found)
    view = SessionView(sources, settings)
    return ReplayOutcome(found, view, replay(view, parsed))


def print_replay(
    outcome: ReplayOutcome,
    console,
    output: str = "table",
    per_turn: bool = False,
    show_turn: int | None = None,
) -> None:
    """Print token buckets per policy (final turn and session totals), the
    protected fields each policy still carries, and optionally every turn or the
    rendered context at one turn."""
    import json

    from rich.table import Table
    from rich.text import Text

    from ctxledger.pipelines.ledger.replay import BUCKETS, render_context

    session = outcome.session
    if output in {"json", "jsonl"}:  # one array / one object per line
        from ctxledger.jobs.cli_support import write_records

        payloads = []
        for result in outcome.results:
            payload = {
                "session_id": session.session_id,
                "policy": result.policy,
                "final": result.final,
                "session_total": result.session_total,
                "carried": result.carried,
                "missing": result.missing,
                "tools": outcome.view.tool_usage.as_dict(),
            }
            if per_turn:
                payload["per_turn"] = result.per_turn
            payloads.append(json.loads(json.dumps(payload, sort_keys=True)))
        write_records(payloads, output)
        return
    turns = len(outcome.view.messages)
    table = Table(
        title=f"context replay of {session.external_id or session.session_id} "
        f"({turns} turns): tokens at the last turn"
    )
    for column in (
        "policy",
        *BUCKETS,
        "total",
        "session total",
        "protected carried",
        "missing at end",
    ):
        table.add_column(column, justify="left" if column in ("policy",) else "right")
    fields = len(outcome.view.fields)
    for result in outcome.results:
        final = result.final
        table.add_row(
            Text(result.policy),
            *(str(final[b]) for b in BUCKETS),
            str(final["total"]),
            str(result.session_total["total"]),
            f"{len(result.carried)}/{fields}",
            Text("\n".join(result.missing) or "-"),
        )
    console.print(table)
    usage = outcome.view.tool_usage
    if usage.never_called:
        console.print(
            f"defined tools never called: {', '.join(usage.never_called)} "
            f"({usage.never_called_tokens} tokens a turn, "
            f"{usage.never_called_session_tokens} over the session)"
        )
    if per_turn:
        for result in outcome.results:
            detail = Table(title=f"{result.policy}: tokens per turn")
            for column in ("turn", *BUCKETS, "total"):
                detail.add_column(column, justify="right")
            for position, counts in enumerate(result.per_turn):
                turn = outcome.view.messages[position].turn
                detail.add_row(
                    str(turn), *(str(counts[b]) for b in (*BUCKETS, "total"))
                )
            console.print(detail)
    if show_turn is not None:
        positions = [
            i for i, m in enumerate(outcome.view.messages) if m.turn == show_turn
        ]
        if not positions:
            raise ValueError(f"--show-turn {show_turn}: no such turn")
        from ctxledger.pipelines.ledger.replay import parse_policy as _parse

        for result in outcome.results:
            items = outcome.view.context(_parse(result.policy), positions[0])
            console.rule(f"{result.policy} at turn {show_turn}")
            console.print(Text(render_context(items)))
