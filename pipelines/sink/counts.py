"""Conservation counts over a run's staged Parquet shards.

Each stage contributes one ``StageCount`` (its own unit: source records, messages,
documents...). The core stages are defined here; later stages register a counter
in ``STAGE_COUNTERS`` (a function of a ``StagedCounts`` to a ``StageCount``) so the
commit step checks every stage the same way: a stage whose
``records_in != records_out + dead`` lost a record, and the run is not committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxledger.schemas import StageCount
from ctxledger.warehouse.catalog import connect


class StagedCounts:
    """Aggregate queries over the staged shards of one run, table by table."""

    def __init__(self, staged: dict[str, list[str]]):
        self.staged = staged
        self._con = connect()

    def close(self) -> None:
        self._con.close()

    def value(self, table: str, expression: str, where: str = "") -> int:
        """One aggregate ``expression`` over the staged rows of ``table``."""
        files: Sequence[str] = self.staged.get(table, [])
        if not files:
            return 0
        listing = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
        clause = f" WHERE {where}" if where else ""
        row = self._con.execute(
            f"SELECT {expression} "
            f"FROM read_parquet({listing}, union_by_name=true){clause}"
        ).fetchone()
        return int(row[0] or 0)

    def rows(self, table: str, where: str = "") -> int:
        """Staged rows of ``table`` (before de-duplication)."""
        return self.value(table, "count(*)", where)

    def total(self, table: str, column: str, where: str = "") -> int:
        """Sum of ``column`` over the staged rows of ``table``."""
        return self.value(table, f"sum({column})", where)

    def dead(self, stage: str) -> int:
        """Dead letters staged by ``stage``."""
        return self.rows("dead_letters", f"stage = '{stage}'")


def ingest_count(c: StagedCounts) -> StageCount:
    """Unit: source record (JSONL line or JSON document), from ``landing_files``."""
    return StageCount(
        stage="ingest",
        records_in=c.total("landing_files", "records_in"),
        records_out=c.total("landing_files", "records_out"),
        dead=c.total("landing_files", "dead"),
    )


def validate_count(c: StagedCounts) -> StageCount:
    """Unit: message inside an accepted record; rejects are message-level letters."""
    parsed = c.total("landing_files", "messages_parsed")
    dead = c.dead("validate")
    return StageCount(
        stage="validate", records_in=parsed + dead, records_out=parsed, dead=dead
    )


def redact_count(c: StagedCounts) -> StageCount:
    """Unit: message; every parsed message is a staged row or a redact dead letter."""
    return StageCount(
        stage="redact",
        records_in=c.total("landing_files", "messages_parsed"),
        records_out=c.rows("messages"),
        dead=c.dead("redact"),
    )


#: Counters in stage order. Later stages append theirs (see module docstring).
STAGE_COUNTERS: list[Callable[[StagedCounts], StageCount]] = [
    ingest_count,
    validate_count,
    redact_count,
]


def ledger_count(c: StagedCounts) -> StageCount:
    """Unit: session; each gets one session-scope ledger entry or a dead letter."""
    distinct = "count(DISTINCT session_id)"
    return StageCount(
        stage="ledger",
        records_in=c.value("sessions", distinct),
        records_out=c.value("compression_ledger", distinct, "scope = 'session'"),
        dead=c.dead("ledger"),
    )


STAGE_COUNTERS.append(ledger_count)


def memory_extract_count(c: StagedCounts) -> StageCount:
    """Unit: memory source record, i.e. a redacted message or a line of a consent /
    system-record input file. Each message is scanned (``memory_extractions``)
    or is a ``memory_extract`` dead letter; each input line is a consent event,
    a system record or a ``memory_inputs`` dead letter."""
    lines_out = c.rows("consent") + c.total(
        "memory_inputs", "records_out", "kind = 'system_records'"
    )
    return StageCount(
        stage="memory_extract",
        records_in=c.rows("messages") + c.total("memory_inputs", "records_in"),
        records_out=c.total("memory_extractions", "messages_scanned") + lines_out,
        dead=c.dead("memory_extract") + c.dead("memory_inputs"),
    )


def memory_gate_count(c: StagedCounts) -> StageCount:
    """Unit: memory candidate; stored, or rejected with a reason (counted in
    ``dead`` with the gate's dead letters)."""
    return StageCount(
        stage="memory_gate",
        records_in=c.total("memory_extractions", "candidates")
        + c.total("memory_inputs", "records_out", "kind = 'system_records'"),
        records_out=c.rows("memories"),
        dead=c.rows("memory_rejections") + c.dead("memory_gate"),
    )


STAGE_COUNTERS.extend([memory_extract_count, memory_gate_count])


def evidence_docs_count(c: StagedCounts) -> StageCount:
    """Unit: document file; each becomes a ``documents`` version (or tombstone)
    or an ``evidence_docs`` dead letter."""
    return StageCount(
        stage="evidence_docs",
        records_in=c.rows("document_files"),
        records_out=c.rows("documents", "kind = 'document'"),
        dead=c.dead("evidence_docs"),
    )


def evidence_artifacts_count(c: StagedCounts) -> StageCount:
    """Unit: distinct tool artifact of the run; each becomes ``tool_artifact``
    versions (one per subject that saw it) or an ``evidence_artifacts`` dead
    letter."""
    return StageCount(
        stage="evidence_artifacts",
        records_in=c.value("artifacts", "count(DISTINCT artifact_id)"),
        records_out=c.value(
            "documents", "count(DISTINCT doc_id)", "kind = 'tool_artifact'"
        ),
        dead=c.dead("evidence_artifacts"),
    )


def evidence_embed_count(c: StagedCounts) -> StageCount:
    """Unit: chunk; every chunk a version announced is stored with its vector
    (reused or new) or is an ``evidence_embed`` dead letter."""
    return StageCount(
        stage="evidence_embed",
        records_in=c.total("documents", "chunk_count"),
        records_out=c.rows("evidence_chunks"),
        dead=c.dead("evidence_embed"),
    )


STAGE_COUNTERS.extend(
    [evidence_docs_count, evidence_artifacts_count, evidence_embed_count]
)
