"""The ``ctxledger`` command line: run jobs and look into the warehouse.

Every command exits non-zero with a one-line reason on failure (the full traceback
only with ``CTXLEDGER_DEBUG=1``), so schedulers and people both get a clear answer.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxledger.jobs.cli_support import (
    BEAM_COMMAND,
    WAREHOUSE_ENV,
    OneLineErrorsGroup,
    ReadOutput,
    job_progress,
    quiet_beam_import_noise,
    warehouse_default,
    write_records,
)
from ctxledger.jobs.nightly import NightlyResult, run_nightly
from ctxledger.warehouse.catalog import Warehouse, WarehouseError

app = typer.Typer(
    cls=OneLineErrorsGroup,
    help="ctxledger: the data plane behind AI-agent context builders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Pipes and CI logs get a wide console instead of rich's 80-column default.
_WIDTH = None if sys.stdout.isatty() else 160
console = Console(width=_WIDTH)
err_console = Console(stderr=True, width=_WIDTH)

WarehouseOpt = Annotated[
    Path,
    typer.Option(
        "--warehouse",
        "-w",
        envvar=WAREHOUSE_ENV,
        callback=warehouse_default,
        help=f"Warehouse folder (else ${WAREHOUSE_ENV}, else ctxledger.toml's "
        "warehouse, else ./warehouse).",
        show_default=True,
    ),
]
ReadOutputOpt = Annotated[
    ReadOutput,
    typer.Option(
        "--output", "-o", help="table, json (one array) or jsonl (one per line)."
    ),
]


def _catalog_value(value: str | None) -> str | None:
    """Accept ``postgres://`` URLs as well as DuckLake's ``postgres:<keywords>``."""
    from ctxledger.warehouse.catalog_url import catalog_location

    if value is None:
        return None
    try:
        return catalog_location(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


CatalogOpt = Annotated[
    str | None,
    typer.Option(
        help="DuckLake catalog: a file, or postgresql://user@host:port/db "
        "(docs/scale_out.md); default: in --warehouse.",
        callback=_catalog_value,
    ),
]


DataPathOpt = Annotated[
    str | None,
    typer.Option(help="Data path for Parquet files; default: <warehouse>/lake."),
]


KeyFileOpt = Annotated[
    Path | None,
    typer.Option(help="Pseudonym key file (or set CTXLEDGER_PSEUDONYM_KEY)."),
]
DefaultTenantOpt = Annotated[
    str, typer.Option(help="Tenant of files not under a tenant=<id>/ folder.")
]
FormatOpt = Annotated[
    str | None,
    typer.Option("--format", help="Force one reader instead of auto-detection."),
]


AllowWeakKeyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-weak-key",
        help="Accept a pseudonym key under 32 bytes or a key file group/others "
        "can read, with a warning (docs/security.md).",
    ),
]


def _allow_weak_key(allow: bool) -> None:
    """Let ``pipelines.redact.keys.load_key`` accept weak keys in this process
    and in the Beam workers it starts (they inherit the environment)."""
    if allow:
        from ctxledger.pipelines.redact.keys import ALLOW_WEAK_ENV

        os.environ[ALLOW_WEAK_ENV] = "1"


def _print_version(value: bool) -> None:
    """``--version``: the package, policy and detector versions, then exit."""
    if value:
        from ctxledger.jobs.version import version_lines

        for line in version_lines():
            console.print(line, highlight=False, markup=False)
        raise typer.Exit()


VersionOpt = Annotated[
    bool,
    typer.Option(
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the package, policy and detector versions and exit.",
    ),
]


@app.callback()
def _options(
    allow_weak_key: AllowWeakKeyOpt = False, version: VersionOpt = False
) -> None:
    """Options for every command: ``ctxledger --allow-weak-key nightly ...``."""
    _allow_weak_key(allow_weak_key)


def _fail(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=1)


def _usage_error(message: str) -> None:
    """A one-line error with rc 2: the arguments name nothing that exists."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code=2)


def _open(warehouse: Path, catalog: str | None, data_path: str | None) -> Warehouse:
    return Warehouse.open(warehouse, catalog=catalog, data_path=data_path)


@app.command(**BEAM_COMMAND)
def nightly(
    ctx: typer.Context,
    landing: Annotated[
        Path, typer.Option(help="Landing folder with transcript files.")
    ],
    warehouse: WarehouseOpt = Path("warehouse"),
    policy: Annotated[
        Path | None, typer.Option(help="Policy YAML (default: the packaged policy).")
    ] = None,
    tenant: DefaultTenantOpt = "default",
    source_format: FormatOpt = None,
    key_file: KeyFileOpt = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
    consent: Annotated[
        Path | None,
        typer.Option(help="Consent events JSONL file or folder (docs/memory.md)."),
    ] = None,
    system_records: Annotated[
        Path | None,
        typer.Option(help="System records JSONL file or folder (docs/memory.md)."),
    ] = None,
    llm_endpoint: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible endpoint for an extra memory extractor."),
    ] = None,
    llm_model: Annotated[
        str | None, typer.Option(help="Model name for --llm-endpoint.")
    ] = None,
    docs: Annotated[
        Path | None,
        typer.Option(help="Documents folder of the evidence stage (docs/evidence.md)."),
    ] = None,
    allow_weak_key: AllowWeakKeyOpt = False,
) -> None:
    """Ingest and redact new landing files; commit them as one snapshot.

    Beam flags go after ``--``: ``ctxledger nightly --landing L -- --runner=
    PortableRunner --job_endpoint=embed --environment_type=LOOPBACK``.
    """
    if source_format is not None:
        from ctxledger.pipelines.ingest.readers import FORMATS

        if source_format not in FORMATS:
            _fail(
                f"unknown --format {source_format!r}; choose from {', '.join(FORMATS)}"
            )
    _allow_weak_key(allow_weak_key)
    started = time.monotonic()
    with job_progress(console, err_console, "nightly: starting") as progress:
        result = run_nightly(
            landing,
            warehouse,
            policy_file=policy,
            default_tenant=tenant,
            source_format=source_format,
            key_file=key_file,
            catalog=catalog,
            data_path=data_path,
            beam_args=list(ctx.args),
            progress=progress,
            consent=consent,
            system_records=system_records,
            llm_endpoint=llm_endpoint,
            llm_model=llm_model,
            docs=docs,
        )
    _print_nightly(result, time.monotonic() - started)
    with _open(warehouse, catalog, data_path) as wh:
        _print_table_counts(wh)


def _print_nightly(result: NightlyResult, seconds: float) -> None:
    found = result.discovery
    console.print(
        f"landing: {len(found.items)} transcript file(s), "
        f"{result.skipped_known} already processed, {result.files_new} new, "
        f"{len(found.skipped)} skipped "
        "(not a transcript extension)"
    )
    if result.docs_new:
        console.print(f"documents: {result.docs_new} new file(s)")
    if result.retention is not None:
        from ctxledger.warehouse.retention import describe

        console.print(f"retention purge: {describe(result.retention)}")
    if result.manifest is None:
        console.print("[green]nothing new[/]: no snapshot created")
        return
    manifest = result.manifest
    console.print(
        f"[green]committed[/] run {manifest.run_id} as snapshot {manifest.snapshot_id} "
        f"in {seconds:.1f}s (policy {manifest.policy_version})"
    )
    console.print(_stage_table(manifest))


def _stage_table(manifest) -> Table:
    table = Table(title="records per stage (in = out + dead)")
    for column in ("stage", "in", "out", "dead", "balanced"):
        table.add_column(
            column, justify="right" if column in {"in", "out", "dead"} else "left"
        )
    for count in manifest.stage_counts:
        table.add_row(
            count.stage,
            str(count.records_in),
            str(count.records_out),
            str(count.dead),
            "yes" if count.balanced else "[red]NO[/]",
        )
    return table


def _print_table_counts(wh: Warehouse) -> None:
    table = Table(title=f"warehouse {wh.root} (snapshot {wh.current_snapshot()})")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, rows in wh.row_counts().items():
        table.add_row(name, str(rows))
    console.print(table)
    dead = wh.query(
        "SELECT stage, reason_code, count(*) FROM dead_letters "
        "GROUP BY ALL ORDER BY 3 DESC"
    ).fetchall()
    if dead:
        console.print("dead letters: " + ", ".join(f"{s}/{r}: {n}" for s, r, n in dead))


@app.command()
def runs(
    warehouse: WarehouseOpt = Path("warehouse"),
    limit: Annotated[int, typer.Option(help="How many recent runs.")] = 20,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
    output: ReadOutputOpt = ReadOutput.table,
    policy: Annotated[
        Path | None,
        typer.Option(help="Policy to compare history with (default: packaged)."),
    ] = None,
) -> None:
    """Recent runs with their per-stage counts and snapshot ids, and which
    history was redacted by another detector or policy than ``--policy``."""
    from ctxledger.jobs.backfill import stale_history
    from ctxledger.pipelines.redact.registry import load_checked_policy

    current = load_checked_policy(policy).policy_version
    with _open(warehouse, catalog, data_path) as wh:
        stale = stale_history(wh, current)
        rows = wh.query(
            "SELECT r.run_id, r.job, r.status, r.started_at, r.files_new, "
            "r.stage_counts, s.snapshot_id, r.error, "
            + ("r.retention " if _has_column(wh, "runs", "retention") else "NULL ")
            + "FROM runs r LEFT JOIN lake.snapshots() s "
            "ON s.commit_message = 'run ' || r.run_id "
            "ORDER BY r.started_at DESC LIMIT ?",
            [limit],
        ).fetchall()
    if output is not ReadOutput.table:
        keys = ("run_id", "job", "status", "started_at", "files_new", "stage_counts",
                "snapshot_id", "error", "retention")  # fmt: skip
        write_records((dict(zip(keys, row, strict=True)) for row in rows), output)
        return
    table = Table(title="runs")
    for column in (
        "run",
        "job",
        "status",
        "started",
        "files",
        "snapshot",
        "stages in/out/dead",
        "retention purge",
    ):
        table.add_column(column)
    from ctxledger.warehouse.retention import describe

    for run_id, job, status, started, files, counts, snapshot, error, purge in rows:
        stages = "; ".join(
            f"{c['stage']} {c['records_in']}/{c['records_out']}/{c['dead']}"
            for c in counts
        )
        colour = "green" if status == "committed" else "red"
        table.add_row(
            run_id,
            job,
            f"[{colour}]{status}[/]" + (f" ({error})" if error else ""),
            str(started)[:19],
            str(files),
            str(snapshot) if snapshot is not None else "-",
            stages or "-",
            describe(purge),
        )
    console.print(table)
    from ctxledger.jobs.cli_policy import stale_lines

    for line in stale_lines(stale):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _has_column(wh: Warehouse, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` (older warehouses lack newer columns
    until a job opens them for writing)."""
    return bool(
        wh.query(
            "SELECT count(*) FROM information_schema.columns WHERE "
            "table_catalog = 'lake' AND table_name = ? AND column_name = ?",
            [table, column],
        ).fetchone()[0]
    )


@app.command("dead-letters")
def dead_letters(
    warehouse: WarehouseOpt = Path("warehouse"),
    run: Annotated[str | None, typer.Option(help="Only this run id.")] = None,
    examples: Annotated[int, typer.Option(help="Example locations per reason.")] = 3,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
    output: ReadOutputOpt = ReadOutput.table,
) -> None:
    """Dead letters grouped by stage and reason, with example locations."""
    where, params = ("WHERE run_id = ?", [run]) if run else ("", [])
    with _open(warehouse, catalog, data_path) as wh:
        rows = wh.query(
            "SELECT stage, reason_code, count(*) AS n, "
            "list(source_file || '#' || source_offset ORDER BY source_file)"
            f"[1:{int(examples)}] "
            f"FROM dead_letters {where} GROUP BY ALL ORDER BY n DESC",
            params,
        ).fetchall()
    if output is not ReadOutput.table:
        keys = ("stage", "reason_code", "count", "examples")
        write_records((dict(zip(keys, row, strict=True)) for row in rows), output)
        return
    if not rows:
        console.print("[green]no dead letters[/]")
        return
    table = Table(title="dead letters by reason")
    for column in ("stage", "reason", "count", "examples"):
        table.add_column(column)
    for stage, reason, count, where_list in rows:
        table.add_row(stage, reason, str(count), "\n".join(where_list))
    console.print(table)


@app.command()
def sql(
    query: Annotated[
        str | None,
        typer.Argument(help="SQL to run; omit to read statements from stdin."),
    ] = None,
    warehouse: WarehouseOpt = Path("warehouse"),
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="table, csv, json (one array over all statements) or jsonl.",
        ),
    ] = "table",
    snapshot: Annotated[
        int | None, typer.Option(help="Query the warehouse as of this snapshot.")
    ] = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Open the lake read-write with full file access (maintenance).",
        ),
    ] = False,
) -> None:
    """Run SQL against the warehouse (tables are in the default schema).

    Read-only by default (docs/security.md): no writes, no files but the lake's
    own data files, no ATTACH/LOAD/SET; ``--write`` for maintenance. Read-only,
    it reads a private copy of the catalog (docs/analysts.md): a long query
    never makes a nightly, backfill or forget wait.
    Time travel: ``--snapshot N`` or ``SELECT ... FROM messages AT (VERSION => N)``.
    """
    import tempfile

    import duckdb
    from rich.markup import escape

    if output not in {"table", "csv", "json", "jsonl"}:
        _fail("--output must be table, csv, json or jsonl")
    if write and snapshot is not None:
        _fail("--write and --snapshot exclude each other (a snapshot is read-only)")
    statements = (
        [query] if query else [s for s in sys.stdin.read().split(";\n") if s.strip()]
    )
    from ctxledger.warehouse.sql_access import (
        console_lake,
        lake_files,
        lock_down,
        refusal,
    )

    with (
        tempfile.TemporaryDirectory(prefix="ctxledger-sql-") as spill,
        console_lake(warehouse, catalog, data_path, snapshot, write=write) as wh,
    ):
        from ctxledger.warehouse.evidence_api import install_macros

        con = wh.connection()
        try:
            install_macros(con)  # evidence_search(...) and friends
            if not write:
                lock_down(con, lake_files(con, wh.data_path), spill)
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            _fail(escape(f"opening the SQL console: {type(exc).__name__}: {first}"))
        collected: list[dict] = []  # -o json: one array over all statements
        for statement in statements:
            reason = None if write else refusal(con, statement)
            if reason:
                _fail(escape(reason))
            try:
                relation = wh.query(statement)
                if relation is not None and output == "json":
                    collected += _records(relation)
                elif relation is not None:
                    _print_relation(relation, output)
            except duckdb.Error as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                hint = (
                    " (the lake is open read-only; --write for maintenance)"
                    if not write and ("read-only" in first or "Permission" in first)
                    else ""
                )
                _fail(escape(f"{type(exc).__name__}: {first}{hint}"))
        if output == "json":
            write_records(collected, "json")


def _records(relation) -> list[dict]:
    columns = relation.columns
    return [dict(zip(columns, row, strict=True)) for row in relation.fetchall()]


def _print_relation(relation, output: str) -> None:
    if output == "jsonl":
        write_records(_records(relation), "jsonl")
        return
    columns = relation.columns
    rows = relation.fetchall()
    if output == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
        return
    table = Table()
    for column in columns:
        table.add_column(column)
    for row in rows:
        # Text, not markup: stored values like "[ok]" or "[/]" print as they are.
        table.add_row(*(Text("NULL" if v is None else str(v)) for v in row))
    console.print(table)


@app.command()
def verify(
    warehouse: WarehouseOpt = Path("warehouse"),
    summaries: Annotated[
        Path | None,
        typer.Option(help="JSONL of summaries written elsewhere (docs/ledger.md)."),
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Only this session (id or source id).")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    policy_file: Annotated[
        Path | None, typer.Option(help="Policy YAML (default: the packaged policy).")
    ] = None,
    redact: Annotated[
        bool, typer.Option(help="Redact --summaries texts before checking them.")
    ] = True,
    key_file: KeyFileOpt = None,
    output: ReadOutputOpt = ReadOutput.table,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Audit summaries against their sources: missing or altered protected fields,
    unmentioned changed artifacts. Without --summaries: the stored ledger.
    Exits 1 when anything is missing."""
    from ctxledger.jobs.verify import print_report, verify_outside, verify_stored

    with console.status("verifying", spinner="dots") as status:
        if summaries is not None:
            report = verify_outside(
                warehouse, summaries, policy_file=policy_file, tenant=tenant,
                redact=redact, key_file=key_file, catalog=catalog,
                data_path=data_path, progress=status.update,
            )  # fmt: skip
        else:
            report = verify_stored(
                warehouse, session=session, tenant=tenant, policy_file=policy_file,
                catalog=catalog, data_path=data_path, progress=status.update,
            )  # fmt: skip
    print_report(report, console, output.value)
    if report.failed:
        raise typer.Exit(code=1)


@app.command()
def replay(
    session: Annotated[str, typer.Option(help="Session id or source session id.")],
    warehouse: WarehouseOpt = Path("warehouse"),
    policy: Annotated[
        list[str] | None,
        typer.Option(
            help="Context policy (repeatable): full, sliding:N, pinned-user+last:K, "
            "elide-tool-results, ledger. Default: all five kinds."
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    policy_file: Annotated[
        Path | None, typer.Option(help="Policy YAML with the ledger settings.")
    ] = None,
    per_turn: Annotated[bool, typer.Option(help="Also print tokens per turn.")] = False,
    show_turn: Annotated[
        int | None, typer.Option(help="Print each policy's context at this turn.")
    ] = None,
    output: ReadOutputOpt = ReadOutput.table,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Replay context policies over a session: tokens per bucket at each turn and in
    total, and which protected fields each policy still carries at the end."""
    from ctxledger.jobs.replay import print_replay, run_replay

    outcome = run_replay(
        warehouse, session, policy, tenant=tenant, policy_file=policy_file,
        catalog=catalog, data_path=data_path,
    )  # fmt: skip
    print_replay(outcome, console, output.value, per_turn, show_turn)


@app.command()
def forget(
    tenant: Annotated[str, typer.Option(help="Tenant of the subject.")],
    subject: Annotated[str, typer.Option(help="Subject id to erase.")],
    warehouse: WarehouseOpt = Path("warehouse"),
    policy: Annotated[
        Path | None, typer.Option(help="Policy YAML (default: the packaged policy).")
    ] = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Erase a subject: memories, consent, sessions and derived rows, history
    (snapshots, files) included; stores and prints an erasure receipt."""
    from ctxledger.jobs.forget import NothingToEraseError, print_receipt, run_forget

    try:
        with console.status("erasing", spinner="dots"):
            receipt = run_forget(
                warehouse, tenant, subject, policy_file=policy, catalog=catalog,
                data_path=data_path,
            )  # fmt: skip
    except NothingToEraseError as exc:
        _usage_error(str(exc))
    print_receipt(receipt, console)


@app.command()
def memories(
    tenant: Annotated[str, typer.Option(help="Tenant of the subject.")],
    subject: Annotated[str, typer.Option(help="Subject id.")],
    purpose: Annotated[str, typer.Option(help="Purpose, as listed in the policy.")],
    warehouse: WarehouseOpt = Path("warehouse"),
    at: Annotated[
        str | None, typer.Option(help="ISO time to ask about (default: now).")
    ] = None,
    policy: Annotated[
        Path | None, typer.Option(help="Policy YAML (default: the packaged policy).")
    ] = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
    output: ReadOutputOpt = ReadOutput.table,
) -> None:
    """Memories a context builder gets for a subject and purpose."""
    from datetime import datetime

    from ctxledger.jobs.memories import UnknownScopeError, show_memories

    when = datetime.fromisoformat(at) if at else None
    try:
        show_memories(
            warehouse, tenant, subject, purpose, console, at=when,
            policy_file=policy, catalog=catalog, data_path=data_path,
            output=output.value,
        )  # fmt: skip
    except UnknownScopeError as exc:
        _usage_error(str(exc))


@app.command()
def report(
    run: Annotated[str, typer.Option(help="Run id, or 'latest' for the newest run.")],
    html: Annotated[Path, typer.Option(help="HTML file to write.")],
    warehouse: WarehouseOpt = Path("warehouse"),
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Write a self-contained HTML report of one run (no network assets): records
    per stage, dead letters, PII types, memories, ledger checks, embedded vs
    reused chunks and time per stage."""
    from ctxledger.jobs.report import write_report

    written = write_report(warehouse, run, html, catalog=catalog, data_path=data_path)
    page = written.page
    empty = [c.chart_id for c in page.charts if c.empty]
    console.print(
        f"wrote {html} for run {page.header.run_id} ({page.header.status}): "
        f"{len(page.charts)} charts"
        + (f", no data for {', '.join(empty)}" if empty else "")
    )


# Commands kept in their own modules register themselves on ``app``.
import ctxledger.jobs.cli_backfill  # noqa: E402, F401
import ctxledger.jobs.cli_doctor  # noqa: E402, F401
import ctxledger.jobs.cli_embed  # noqa: E402, F401
import ctxledger.jobs.cli_eval  # noqa: E402, F401
import ctxledger.jobs.cli_policy  # noqa: E402, F401
import ctxledger.jobs.cli_serve  # noqa: E402, F401
import ctxledger.jobs.cli_stream  # noqa: E402, F401


def main() -> None:
    """Console entry point: clear one-line errors, tracebacks only when debugging."""
    quiet_beam_import_noise()
    try:
        app()
    except (WarehouseError, FileNotFoundError, ValueError) as exc:
        if os.environ.get("CTXLEDGER_DEBUG"):
            raise
        err_console.print(f"[bold red]error:[/] {exc}")
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        if os.environ.get("CTXLEDGER_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {first}")
        sys.exit(1)


if __name__ == "__main__":
    # Run the imported module's app: command modules registered on that one.
    from ctxledger.jobs.cli import main as _main

    _main()
