"""``ctxledger backfill``: re-derive history under a new policy, print the diff.

Registered on the main Typer app by ``jobs.cli`` (kept apart so each job's
command and its printing live together).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ctxledger.jobs.backfill import BackfillResult, run_backfill
from ctxledger.jobs.cli import (
    CatalogOpt,
    DataPathOpt,
    KeyFileOpt,
    WarehouseOpt,
    app,
    console,
    err_console,
)
from ctxledger.jobs.cli_support import BEAM_COMMAND, job_progress


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"not an ISO date: {value!r}") from exc


@app.command(**BEAM_COMMAND)
def backfill(
    ctx: typer.Context,
    policy: Annotated[Path, typer.Option(help="The new policy YAML.", exists=True)],
    warehouse: WarehouseOpt = Path("warehouse"),
    since: Annotated[
        str | None,
        typer.Option(
            help="Only landing files first processed on/after this ISO date.",
            callback=_since,
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    landing: Annotated[
        Path | None,
        typer.Option(
            help="Where the raw landing files are now (default: where their "
            "runs read them)."
        ),
    ] = None,
    skip_missing: Annotated[
        bool,
        typer.Option(
            "--skip-missing",
            help="Keep sessions whose raw files are gone as they are.",
        ),
    ] = False,
    stale: Annotated[
        bool,
        typer.Option(
            "--stale",
            help="Only files last derived under another policy version (another "
            "detector or policy; see `ctxledger runs`).",
        ),
    ] = False,
    key_file: KeyFileOpt = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Reprocess history under a new policy; commit what changed as one snapshot.

    Prints the diff against the previous snapshot and stores it in
    ``backfill_diffs`` (docs/backfill.md shows how to check it with
    ``AT (VERSION => n)``). Beam flags go after ``--``.
    """
    started = time.monotonic()
    with job_progress(console, err_console, "backfill: starting") as progress:
        result = run_backfill(
            warehouse,
            policy_file=policy,
            since=since,
            tenant=tenant,
            landing=landing,
            skip_missing=skip_missing,
            stale=stale,
            key_file=key_file,
            catalog=catalog,
            data_path=data_path,
            beam_args=list(ctx.args),
            progress=progress,
        )
    print_backfill(result, time.monotonic() - started)


def print_backfill(result: BackfillResult, seconds: float) -> None:
    """The backfill's scope, outcome and diff, for people and logs."""
    plan = result.plan
    console.print(
        f"backfill from snapshot {plan.base_snapshot} under policy "
        f"{result.policy_version}: {len(plan.items)} file(s), "
        f"{len(plan.sessions)} session(s) in {seconds:.1f}s"
    )
    if plan.missing:
        console.print(
            f"[yellow]skipped[/] {len(plan.missing)} missing file(s); "
            f"{plan.skipped_sessions} session(s) kept as they were"
        )
    if not plan.items and result.run_id is None:
        console.print("[green]nothing to backfill[/]: no landing file in scope")
        return
    changed = [
        c
        for c in result.changes
        if c.added or c.removed or c.updated or c.before != c.after
    ]
    if result.snapshot_id is not None and not changed:
        console.print(
            f"run {result.run_id} committed snapshot {result.snapshot_id}: "
            "no row differs; the files now count as derived by this version"
        )
        return
    if not result.changes:
        console.print("[green]no changes[/]: history already matches this policy")
        return
    console.print(f"run {result.run_id} committed snapshot {result.snapshot_id}")
    table = Table(title="diff against snapshot " + str(plan.base_snapshot))
    for column in ("section", "item", "before", "after", "added", "removed"):
        table.add_column(
            column, justify="left" if column in {"section", "item"} else "right"
        )
    table.add_column("updated", justify="right")
    table.add_column("unchanged", justify="right")
    for c in result.changes:
        figures = (c.before, c.after, c.added, c.removed, c.updated, c.unchanged)
        if c.section != "tables" and not any(figures):
            continue
        table.add_row(c.section, c.item, *(str(f) for f in figures))
    console.print(table)
