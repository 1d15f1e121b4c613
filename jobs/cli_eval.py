"""``ctxledger eval`` and ``ctxledger sources``: context-builder evaluation
and the source registry (docs/eval_cases.md, docs/sources.md).

Registered on the main Typer app by ``jobs.cli`` (kept apart so each job's
command and its printing live together).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ctxledger.jobs.cli import (
    CatalogOpt,
    DataPathOpt,
    ReadOutputOpt,
    WarehouseOpt,
    _fail,
    app,
    console,
    err_console,
)
from ctxledger.jobs.cli_support import ReadOutput, write_records

PolicyOpt = Annotated[
    Path | None, typer.Option(help="Policy YAML (default: the packaged policy).")
]
#: ``--json``: the old spelling of ``-o json``, kept working but hidden.
JsonAliasOpt = Annotated[
    bool, typer.Option("--json", hidden=True, help="Deprecated: use -o json.")
]


def _output(output: ReadOutput, as_json: bool) -> ReadOutput:
    """``-o``, or ``json`` for the deprecated ``--json`` (with a warning)."""
    if as_json:
        err_console.print("warning: --json is deprecated; use -o json", markup=False)
        return ReadOutput.json
    return output


def _policy(path: Path | None):
    from ctxledger.pipelines.redact.registry import load_checked_policy  # noqa: PLC0415

    return load_checked_policy(path)


@app.command("eval")
def eval_cases(
    cases: Annotated[
        Path, typer.Option(help="Cases YAML (eval/cases/seed.yaml).", exists=True)
    ],
    warehouse: WarehouseOpt = Path("warehouse"),
    docs: Annotated[
        Path | None,
        typer.Option(help="Ingest this documents folder first (a nightly run)."),
    ] = None,
    tools: Annotated[
        Path | None, typer.Option(help="Tool catalogue (default: tools.yaml beside).")
    ] = None,
    registry: Annotated[
        Path | None,
        typer.Option(
            help="Source registry (default: sources.yaml beside, else the warehouse's)."
        ),
    ] = None,
    ablate: Annotated[
        bool, typer.Option("--ablate", help="Also run ablations and perturbations.")
    ] = False,
    output: ReadOutputOpt = ReadOutput.table,
    as_json: JsonAliasOpt = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Write eval.json (and ablation.html) into this folder."),
    ] = None,
    policy: PolicyOpt = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Run context-builder cases: pass/fail per case and check; exit 1 on a
    failure. ``-o json``: the whole report; ``-o jsonl``: one line per case."""
    from ctxledger.jobs.eval_cases import (  # noqa: PLC0415
        ablate as run_ablation,
    )
    from ctxledger.jobs.eval_cases import (  # noqa: PLC0415
        load_case_set,
        report_json,
        run_cases,
        write_outputs,
    )
    from ctxledger.warehouse.catalog import Warehouse  # noqa: PLC0415

    if docs is not None:
        from ctxledger.jobs.nightly import run_nightly  # noqa: PLC0415

        with tempfile.TemporaryDirectory() as landing:
            run_nightly(
                landing,
                warehouse,
                docs=docs,
                policy_file=policy,
                catalog=catalog,
                data_path=data_path,
            )
    output = _output(output, as_json)
    as_json = output is not ReadOutput.table
    case_set = load_case_set(cases, tools, registry)
    pol = _policy(policy)
    wh = Warehouse.open(warehouse, catalog=catalog, data_path=data_path, read_only=True)
    try:
        if "evidence_chunks" not in wh.existing_tables():
            _fail(f"{warehouse} holds no evidence: run with --docs DIR first")
        rows = None
        if ablate:
            report, rows = run_ablation(wh, case_set, pol)
        else:
            report = run_cases(wh, case_set, pol)
    finally:
        wh.close()
    if out is not None:
        for path in write_outputs(out, report, rows):
            if not as_json:
                console.print(f"wrote {path}")
    if output is ReadOutput.json:
        print(report_json(report, rows))
    elif output is ReadOutput.jsonl:
        write_records((r.model_dump(mode="json") for r in report.results), "jsonl")
    else:
        table = Table(title=f"eval {cases} (registry {report.registry_version})")
        for column in ("case", "check", "result", "reason"):
            table.add_column(column)
        for result in report.results:
            for check in result.checks:
                table.add_row(
                    result.name,
                    check.check,
                    "[green]pass[/]" if check.passed else "[red]FAIL[/]",
                    check.reason,
                )
        console.print(table)
        console.print(
            f"{report.passed}/{len(report.results)} cases passed; "
            f"{report.tokens} tokens offered"
        )
        if rows is not None:
            ab = Table(title="ablations and perturbations")
            for column in (
                "perturbation",
                "target",
                "pass rate",
                "tokens",
                "turned red",
                "note",
            ):
                ab.add_column(column)
            for r in rows:
                ab.add_row(
                    r.perturbation,
                    r.target,
                    f"{r.pass_rate:.2f} ({r.pass_rate_delta:+.2f})",
                    f"{r.tokens} ({r.tokens_delta:+d})",
                    "[red]" + ", ".join(r.turned_red) + "[/]" if r.turned_red else "",
                    r.note,
                )
            console.print(ab)
    if report.passed < len(report.results):
        raise typer.Exit(code=1)


@app.command("sources")
def sources(
    warehouse: WarehouseOpt = Path("warehouse"),
    sync: Annotated[
        bool,
        typer.Option(
            "--sync",
            help="Store the registry (--registry, else the "
            "policy's) as the active version.",
        ),
    ] = False,
    registry: Annotated[
        Path | None, typer.Option(help="Registry YAML for --sync.", exists=True)
    ] = None,
    unregistered: Annotated[
        bool,
        typer.Option(
            "--unregistered", help="List rows that fell through to the default source."
        ),
    ] = False,
    output: ReadOutputOpt = ReadOutput.table,
    as_json: JsonAliasOpt = False,
    policy: PolicyOpt = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """The source registry: list the active sources, store a new version, or
    list what fell through to the default source. ``-o json|jsonl``: one
    record per source (with its registry version) or per fall-through row."""
    from ctxledger.schemas.sources import load_registry  # noqa: PLC0415
    from ctxledger.warehouse.catalog import Warehouse  # noqa: PLC0415
    from ctxledger.warehouse.sources import (  # noqa: PLC0415
        active_registry,
        row_sources,
        sync_registry,
    )

    output = _output(output, as_json)
    pol = _policy(policy)
    if sync:
        chosen = load_registry(registry) if registry else pol.sources
        wh = Warehouse.open(warehouse, catalog=catalog, data_path=data_path)
        try:
            added = sync_registry(wh, chosen)
        finally:
            wh.close()
        console.print(
            f"registry {chosen.registry_version}: "
            + (f"{added} source(s) stored" if added else "already stored")
        )
        return
    wh = Warehouse.open(warehouse, catalog=catalog, data_path=data_path, read_only=True)
    try:
        active = active_registry(wh, pol)
        rows = row_sources(wh, active) if unregistered else []
    finally:
        wh.close()
    if unregistered:
        rows = [r for r in rows if r["source_id"] == active.default_source]
        if output is not ReadOutput.table:
            write_records(rows, output.value)
            return
        table = Table(title=f"rows in the default source {active.default_source!r}")
        for column in ("table", "kind", "key", "rows"):
            table.add_column(column)
        for r in rows:
            table.add_row(r["table"], r["kind"], str(r["key"]), str(r["rows"]))
        console.print(table)
        return
    specs = list(active.by_id.values())
    if output is not ReadOutput.table:
        version = {"registry_version": active.registry_version}
        write_records(
            ({**version, **s.model_dump(mode="json")} for s in specs), output.value
        )
        return
    table = Table(title=f"sources (registry {active.registry_version})")
    for column in (
        "source",
        "kind",
        "match",
        "owner",
        "authority",
        "sensitivity",
        "injection",
        "invalidated",
    ):
        table.add_column(column)
    for s in specs:
        table.add_row(
            s.source_id,
            s.kind or "*",
            ", ".join(s.match),
            s.owner,
            "" if s.authority is None else f"{s.authority:g}",
            s.sensitivity,
            s.injection_risk,
            "yes" if s.invalidated else "",
        )
    console.print(table)


__all__ = ["eval_cases", "sources"]
