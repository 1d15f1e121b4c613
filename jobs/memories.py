"""``ctxledger memories``: what a context builder would get for a subject.

Runs ``Context.memories`` (the read path a context builder holds) on the latest
committed snapshot, without taking the writer's lock, and prints facts,
hypotheses and conflicts with their provenance. One lookup: it runs the
``memories_served`` SQL macro on the snapshot (``replica=False``) rather than
building a private replica of it first.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text


class UnknownScopeError(LookupError):
    """A tenant or purpose the warehouse and the policy do not know."""


def show_memories(
    warehouse: str | Path,
    tenant_id: str,
    subject_id: str,
    purpose: str,
    console: Console,
    *,
    at: datetime | None = None,
    policy_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    output: str = "table",
) -> None:
    """Print the served memories of one subject for one purpose: a table, or
    (``output`` ``json``/``jsonl``) every served field for a program.
    ``UnknownScopeError`` (naming the known values) for an unknown tenant or
    purpose: an empty answer then means a typo, not "nothing stored"."""
    from ctxledger.serving.context import Context

    with Context.open(
        warehouse,
        catalog=catalog,
        data_path=data_path,
        policy_file=policy_file,
        poll_s=0,
        warm=False,
        blas_threads=None,
        replica=False,
    ) as ctx:
        view = ctx.memories(tenant_id, subject_id, purpose, at)
        problem = None if view.items else ctx.scope_problem(tenant_id, purpose)
    if problem is not None:  # a typo, not "nothing stored" (the CLI exits 2)
        raise UnknownScopeError(problem.message())
    if output != "table":
        from dataclasses import asdict

        from ctxledger.jobs.cli_support import write_records

        write_records((asdict(item) for item in view.items), output)
        return
    if not view.items:
        console.print("no memories served (none stored, expired, or no live basis)")
        return
    table = Table(title=f"memories of {subject_id} for {purpose}")
    for column in ("as", "kind", "source", "text", "provenance", "expires"):
        table.add_column(column)
    for item in view.items:
        prov = item.provenance or {}
        where = (
            f"turn {prov.get('turn')} {prov.get('message_id')}"
            if prov.get("message_id")
            else str(prov.get("input_ref"))
        )
        table.add_row(
            item.served_as,
            item.kind,
            item.source,
            Text(item.text),  # stored text, never rich markup
            Text(where),
            str(item.expires_at)[:10],
        )
    console.print(table)
