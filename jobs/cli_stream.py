"""``ctxledger stream``: watch a landing folder, commit micro-batch snapshots.

Registered on the main Typer app by ``jobs.cli``. Prints one line per committed
micro-batch (run id, files, messages, snapshot id) rather than a spinner: the
job runs for hours and its output usually goes to a log.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ctxledger.jobs.cli import (
    CatalogOpt,
    DataPathOpt,
    DefaultTenantOpt,
    FormatOpt,
    KeyFileOpt,
    WarehouseOpt,
    app,
    console,
    err_console,
)
from ctxledger.jobs.cli_support import BEAM_COMMAND
from ctxledger.jobs.stream import BatchReport, StopFlag, StreamAborted, run_stream


def _print_batch(report: BatchReport) -> None:
    span = f"{report.window_start:%H:%M:%S}-{report.window_end:%H:%M:%S}" + (
        f" ({report.windows} windows)" if report.windows > 1 else ""
    )
    console.print(
        f"[green]committed[/] micro-batch {report.index} window {span} "
        f"run {report.run_id}: {report.files} file(s), {report.messages} "
        f"message(s), snapshot {report.snapshot_id} in {report.seconds:.1f}s"
    )


@app.command(**BEAM_COMMAND)
def stream(
    ctx: typer.Context,
    landing: Annotated[Path, typer.Option(help="Landing folder to watch.")],
    warehouse: WarehouseOpt = Path("warehouse"),
    policy: Annotated[
        Path | None, typer.Option(help="Policy YAML (default: the packaged policy).")
    ] = None,
    window_seconds: Annotated[
        float,
        typer.Option(
            help="Fixed window length; closed windows become one micro-batch "
            "(several together when catching up)."
        ),
    ] = 10.0,
    poll_seconds: Annotated[
        float,
        typer.Option(
            help="How often the folder is listed; a file is read once it "
            "is unchanged over two listings."
        ),
    ] = 1.0,  # fmt: skip
    tenant: DefaultTenantOpt = "default",
    source_format: FormatOpt = None,
    key_file: KeyFileOpt = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Watch a landing folder and commit new files as micro-batch snapshots.

    Each closed window's settled files run through the nightly stage graph as one
    Beam pipeline and one DuckLake snapshot. SIGINT/SIGTERM drain (commit what was
    picked up) and exit 0; a second signal aborts (exit 130). Beam flags go
    after ``--``, as for nightly. See docs/streaming.md.
    """
    if source_format is not None:
        from ctxledger.pipelines.ingest.readers import FORMATS

        if source_format not in FORMATS:
            err_console.print(
                f"[bold red]error:[/] unknown --format {source_format!r}; "
                f"choose from {', '.join(FORMATS)}"
            )
            raise typer.Exit(code=1)
    stop = StopFlag()
    stop.install()
    console.print(f"stream: {landing} -> {warehouse}; SIGINT/SIGTERM drains and stops")
    try:
        result = run_stream(
            landing,
            warehouse,
            policy_file=policy,
            default_tenant=tenant,
            source_format=source_format,
            key_file=key_file,
            catalog=catalog,
            data_path=data_path,
            window_seconds=window_seconds,
            poll_seconds=poll_seconds,
            beam_args=list(ctx.args),
            stop=stop,
            progress=lambda msg: console.print(f"[dim]{msg}[/]"),
            on_commit=_print_batch,
        )
    except StreamAborted as exc:
        err_console.print(f"[bold red]aborted:[/] {exc}; uncommitted files stay "
                          "in the landing folder for the next start")  # fmt: skip
        sys.stdout.flush()
        sys.stderr.flush()
        # Hard: do not wait for the micro-batch thread (its commit is atomic).
        os._exit(130)
    finally:
        stop.restore()
    console.print(
        f"[green]stopped[/] ({result.stopped_by}): {len(result.batches)} "
        f"micro-batch(es), {result.files} file(s), {result.messages} message(s) "
        f"committed; {result.skipped_known} already-committed file(s) skipped"
        + (
            f"; {result.left_unsettled} file(s) still being written left for the "
            "next start"
            if result.left_unsettled
            else ""
        )
    )
