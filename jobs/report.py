"""``ctxledger report``: gather one run's facts from the warehouse, write HTML.

Every number comes from SQL over the tables the run committed, read *as of the
run's own snapshot* (DuckLake time travel) so a later run, the memory lifecycle
or a backfill does not change what the report says about this run. When that
snapshot no longer exists (``forget`` and retention expire old snapshots), the
current state is read instead and the page says so. Rendering is in
``jobs.report_html``.

Where each chart's facts live:

* records per stage: ``runs.stage_counts`` (the commit step's conservation check);
* dead letters by reason: ``dead_letters`` rows of the run;
* PII entities by type: ``messages.pii`` findings of the run's messages;
* memories by source and purpose: ``memories`` rows of the run;
* ledger verified vs drifted: ``compression_ledger`` rows of the run (``verified``,
  ``rebuild_required``);
* chunks embedded vs reused: ``evidence_chunks.embedding_reused`` of the run's
  chunks (the same facts as the ``evidence`` Beam counters, but committed);
* time per stage: ``runs.stage_timings`` (``pipelines.timing``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from ctxledger.jobs.report_html import (
    BLUE,
    GREEN,
    GREY,
    ORANGE,
    PURPLE,
    RED,
    TEAL,
    YELLOW,
    Chart,
    ReportPage,
    RunHeader,
    Series,
    render_page,
)
from ctxledger.warehouse.catalog import Warehouse, WarehouseError

#: Most categories a chart lists; the rest are summed into one "other" row.
MAX_ROWS = 15

SOURCE_COLOURS = {
    "user_stated": BLUE,
    "system_record": TEAL,
    "model_inferred": PURPLE,
}
_EXTRA_COLOURS = (ORANGE, YELLOW, GREY, RED, GREEN)


@dataclass(frozen=True)
class RunReport:
    """A written report: the page's model and where it went."""

    page: ReportPage
    path: Path | None = None


def resolve_run(wh: Warehouse, run: str) -> str:
    """``run`` itself when the warehouse has it; ``latest``: the newest run."""
    if run == "latest":
        row = wh.query(
            "SELECT run_id FROM runs ORDER BY started_at DESC, finished_at DESC, "
            "run_id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise ValueError("the warehouse has no runs yet")
        return row[0]
    if wh.query("SELECT 1 FROM runs WHERE run_id = ?", [run]).fetchone() is None:
        raise ValueError(
            f"no run {run!r} in the warehouse (see `ctxledger runs`, or --run latest)"
        )
    return run


class _Reader:
    """SQL over one warehouse connection that tolerates older warehouses: a
    table or column that does not exist yet reads as no rows."""

    def __init__(self, wh: Warehouse):
        self.wh = wh
        self.tables = wh.existing_tables()

    def rows(self, table: str, sql: str, params: Sequence[Any]) -> list[tuple]:
        if table not in self.tables:
            return []
        try:
            return self.wh.query(sql, list(params)).fetchall()
        except duckdb.BinderException:
            return []

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        relation = self.wh.query("SELECT * FROM runs WHERE run_id = ?", [run_id])
        row = relation.fetchone()
        return None if row is None else dict(zip(relation.columns, row, strict=True))


def top_rows(rows: list[tuple[str, float]], what: str) -> list[tuple[str, float]]:
    """At most ``MAX_ROWS`` rows, the rest summed into an ``other`` row."""
    if len(rows) <= MAX_ROWS:
        return rows
    kept, rest = rows[: MAX_ROWS - 1], rows[MAX_ROWS - 1 :]
    return [*kept, (f"other ({len(rest)} {what})", sum(v for _, v in rest))]


def stages_chart(run: dict[str, Any]) -> Chart:
    counts = run.get("stage_counts") or []
    unbalanced = [
        c["stage"] for c in counts if c["records_in"] != c["records_out"] + c["dead"]
    ]
    note = "Each stage counts in its own unit; in = out + dead for every stage."
    if unbalanced:
        note = f"Unbalanced stages (in != out + dead): {', '.join(unbalanced)}."
    return Chart(
        chart_id="stages",
        title="Records per stage",
        series=(Series("in", BLUE), Series("out", GREEN), Series("dead", RED)),
        rows=tuple(
            (c["stage"], (c["records_in"], c["records_out"], c["dead"])) for c in counts
        ),
        category_label="stage",
        value_label="records (each stage's own unit)",
        empty_message=(
            "No stage counts: the run failed before its commit step."
            if run.get("status") == "failed"
            else "No stage counts recorded for this run."
        ),
        note=note,
    )


def dead_letters_chart(reader: _Reader, run_id: str) -> Chart:
    rows = reader.rows(
        "dead_letters",
        "SELECT reason_code || ' (' || stage || ')', count(*) AS n "
        "FROM dead_letters WHERE run_id = ? GROUP BY ALL ORDER BY n DESC, 1",
        [run_id],
    )
    total = sum(n for _, n in rows)
    return Chart(
        chart_id="dead-letters",
        title="Dead letters by reason",
        series=(Series("dead letters", RED),),
        rows=tuple((label, (n,)) for label, n in top_rows(rows, "reasons")),
        category_label="reason (stage)",
        value_label="dead letters",
        empty_message="No dead letters in this run.",
        note=f"{total:,} dead letter(s); ctxledger dead-letters --run <run id> "
        "lists where each one came from."
        if rows
        else "",
    )


def pii_chart(reader: _Reader, run_id: str) -> Chart:
    rows = reader.rows(
        "messages",
        "SELECT f.entity_type, count(*) AS n FROM ("
        "  SELECT unnest(pii) AS f FROM messages WHERE run_id = ?"
        ") GROUP BY ALL ORDER BY n DESC, 1",
        [run_id],
    )
    return Chart(
        chart_id="pii",
        title="PII entities redacted in messages, by type",
        series=(Series("entities", ORANGE),),
        rows=tuple((label, (n,)) for label, n in top_rows(rows, "types")),
        category_label="entity type",
        value_label="entities replaced (types only, never values)",
        empty_message="No PII found in this run's messages.",
    )


def memories_chart(reader: _Reader, run_id: str) -> Chart:
    rows = reader.rows(
        "memories",
        "SELECT purpose, source, count(*) FROM memories WHERE run_id = ? "
        "GROUP BY ALL ORDER BY 1, 2",
        [run_id],
    )
    sources = sorted(
        {s for _, s, _ in rows},
        key=lambda s: (list(SOURCE_COLOURS).index(s) if s in SOURCE_COLOURS else 9, s),
    )
    extra = iter(_EXTRA_COLOURS * 4)
    series = tuple(
        Series(s, SOURCE_COLOURS.get(s) or next(extra, GREY)) for s in sources
    )
    table: dict[str, dict[str, int]] = {}
    for purpose, source, n in rows:
        table.setdefault(purpose, {})[source] = n
    return Chart(
        chart_id="memories",
        title="Memories by purpose and source",
        series=series,
        rows=tuple(
            (purpose, tuple(by_source.get(s, 0) for s in sources))
            for purpose, by_source in table.items()
        ),
        category_label="purpose",
        value_label="memories stored",
        empty_message="No memories stored by this run.",
        note="Rejected candidates (no consent, no retention rule...) are in "
        "memory_rejections, not here."
        if rows
        else "",
    )


def ledger_chart(reader: _Reader, run_id: str) -> Chart:
    rows = reader.rows(
        "compression_ledger",
        "SELECT scope, count(*) FILTER (WHERE verified), "
        "count(*) FILTER (WHERE NOT verified), "
        "count(*) FILTER (WHERE rebuild_required) "
        "FROM compression_ledger WHERE run_id = ? GROUP BY ALL ORDER BY 1",
        [run_id],
    )
    return Chart(
        chart_id="ledger",
        title="Compression ledger: verified vs drifted",
        series=(
            Series("verified", GREEN),
            Series("drifted", RED),
            Series("rebuild required", ORANGE),
        ),
        rows=tuple(
            (f"{scope} summaries", (ok, drifted, rebuild))
            for scope, ok, drifted, rebuild in rows
        ),
        category_label="ledger scope",
        value_label="ledger entries",
        empty_message="No ledger entries in this run.",
        note="Drifted: a protected field is missing or altered in the summary. "
        "Rebuild required counts entries of either kind."
        if rows
        else "",
    )


def chunks_chart(reader: _Reader, run_id: str) -> Chart:
    rows = reader.rows(
        "evidence_chunks",
        "SELECT kind, count(*) FILTER (WHERE NOT embedding_reused), "
        "count(*) FILTER (WHERE embedding_reused), "
        "count(DISTINCT (tenant_id, content_hash)) FILTER (WHERE NOT embedding_reused) "
        "FROM evidence_chunks WHERE run_id = ? GROUP BY ALL ORDER BY 1",
        [run_id],
    )
    texts = sum(r[3] for r in rows)
    return Chart(
        chart_id="chunks",
        title="Evidence chunks: embedded vs reused",
        series=(Series("newly embedded", BLUE), Series("vector reused", TEAL)),
        rows=tuple((kind, (new, reused)) for kind, new, reused, _ in rows),
        category_label="chunk kind",
        value_label="chunks",
        empty_message="No evidence chunks in this run.",
        note=f"{texts:,} distinct text(s) went through the embedding model; a "
        "chunk whose text was already embedded reuses the stored vector."
        if rows
        else "",
    )


def timings_chart(run: dict[str, Any]) -> Chart:
    timings = run.get("stage_timings") or []
    return Chart(
        chart_id="timings",
        title="Time per stage",
        series=(Series("seconds", PURPLE),),
        rows=tuple((t["stage"], (float(t["seconds"]),)) for t in timings),
        category_label="stage",
        value_label="seconds of work (summed over workers)",
        empty_message="Time per stage not recorded for this run.",
        decimals=2,
        unit="s",
        note="Wall time inside each stage's steps, summed over workers and "
        "bundles (parallel workers can add up to more than the run's wall time); "
        "reading, shuffling and writing Parquet between steps are not attributed. "
        "commit: registering the staged shards as one snapshot."
        if timings
        else "",
    )


def _table_rows(run: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    try:
        inserted = json.loads(run.get("table_rows") or "{}")
    except ValueError:
        return ()
    return tuple(
        sorted(
            ((str(k), int(v)) for k, v in inserted.items() if v),
            key=lambda i: (-i[1], i[0]),
        )
    )


def gather(
    warehouse: str | Path,
    run: str,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
) -> ReportPage:
    """The report page's model for ``run`` (an id or ``latest``)."""
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        run_id = resolve_run(wh, run)
        snapshot = wh.snapshot_for_run(run_id)
    pinned = snapshot is not None
    try:
        wh = Warehouse.open(
            warehouse, catalog=catalog, data_path=data_path, snapshot=snapshot
        )
    except (duckdb.Error, WarehouseError):
        pinned = False
        wh = Warehouse.open(warehouse, catalog=catalog, data_path=data_path)
    with wh:
        reader = _Reader(wh)
        row = reader.run_row(run_id)
        if row is None:  # the run's own snapshot always holds its row
            raise ValueError(f"run {run_id!r} is not in snapshot {snapshot}")
        charts = (
            stages_chart(row),
            dead_letters_chart(reader, run_id),
            pii_chart(reader, run_id),
            memories_chart(reader, run_id),
            ledger_chart(reader, run_id),
            chunks_chart(reader, run_id),
            timings_chart(row),
        )
    header = RunHeader(
        run_id=run_id,
        job=row.get("job") or "",
        status=row.get("status") or "",
        policy_version=row.get("policy_version") or "",
        code_version=row.get("code_version") or "",
        snapshot_id=snapshot,
        started_at=row.get("started_at"),
        finished_at=row.get("finished_at"),
        runner=row.get("runner") or "",
        files_seen=row.get("files_seen") or 0,
        files_new=row.get("files_new") or 0,
        files_skipped=row.get("files_skipped") or 0,
        error=row.get("error"),
    )
    if pinned:
        note = f"Data as of snapshot {snapshot}, the one this run committed."
    else:
        note = (
            "The run's snapshot no longer exists (expired by retention or erasure): "
            "data shown as it is now, without rows erased or purged since."
        )
    return ReportPage(
        header=header,
        charts=charts,
        generated_at=datetime.now(UTC),
        data_note=note,
        table_rows=_table_rows(row),
    )


def write_report(
    warehouse: str | Path,
    run: str,
    html_path: str | Path,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
) -> RunReport:
    """Gather ``run`` and write its self-contained HTML page to ``html_path``."""
    page = gather(warehouse, run, catalog=catalog, data_path=data_path)
    path = Path(html_path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(render_page(page), encoding="utf-8")
    partial.replace(path)
    return RunReport(page=page, path=path)
