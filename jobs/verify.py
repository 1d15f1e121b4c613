"""The ``verify`` job: audit summaries against their sources in the warehouse.

Two modes:

* ``verify_outside``: summaries written by any LLM or tool (``--summaries FILE``,
  JSONL, see ``pipelines.ledger.verify.OutsideSummary``). Each text is first run
  through the redactor with the session tenant's pseudonym key (so a name the
  sources hold as ``<PERSON:...>`` matches, and no raw value is echoed), then
  checked for missing or altered protected fields and unmentioned changed
  artifacts.
* ``verify_stored``: the ledger entries in ``compression_ledger`` (the latest per
  session, scope and window), re-verified against the current source messages.

Either returns a ``VerifyReport``; ``failed`` is true when anything is missing,
altered or unreadable (the CLI then exits non-zero).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ctxledger.pipelines.ledger.build import SessionSources
from ctxledger.pipelines.ledger.store import find_sessions, load_entries, load_sources
from ctxledger.pipelines.ledger.verify import (
    audit_outside,
    display_value,
    parse_summaries,
    reverify_entry,
)
from ctxledger.pipelines.redact.registry import load_checked_policy
from ctxledger.schemas.policy import Policy
from ctxledger.schemas.transcript import Session
from ctxledger.warehouse.catalog import Warehouse


@dataclass
class VerifyRow:
    """One audited summary."""

    label: str
    session: str
    window: str
    generator: str
    present: int = 0
    total: int = 0
    missing: list[str] = field(default_factory=list)
    altered: list[str] = field(default_factory=list)
    missing_artifacts: list[str] = field(default_factory=list)
    artifacts: int = 0
    note: str = ""
    rebuild_required: bool = False

    @property
    def passed(self) -> bool:
        return (
            not self.missing
            and not self.altered
            and not self.missing_artifacts
            and not self.note.startswith("error")
        )


@dataclass
class VerifyReport:
    """All rows of one verify run."""

    rows: list[VerifyRow] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(not row.passed for row in self.rows)


def _redactor(policy: Policy, key_file: str | Path | None):
    from ctxledger.pipelines.redact.engine import Redactor
    from ctxledger.pipelines.redact.keys import load_key

    redactor = Redactor(policy, load_key(Path(key_file) if key_file else None))
    redactor.setup()
    return redactor


def verify_outside(
    warehouse: str | Path,
    summaries: str | Path,
    *,
    policy_file: str | Path | None = None,
    tenant: str | None = None,
    redact: bool = True,
    key_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> VerifyReport:
    """Audit outside summaries (``--summaries FILE``) against the warehouse."""
    policy = load_checked_policy(policy_file)
    settings = policy.ledger
    good, bad = parse_summaries(Path(summaries).read_text(encoding="utf-8"))
    report = VerifyReport()
    for line in bad:
        report.rows.append(
            VerifyRow(f"line {line.line}", "-", "-", "-", note=f"error: {line.reason}")
        )
    redactor = _redactor(policy, key_file) if redact and good else None
    cache: dict[str, tuple[Session, SessionSources] | None] = {}
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        for number, summary in good:
            ref = summary.session_id
            wanted = summary.tenant_id or tenant
            slot = f"{wanted}/{ref}"
            if slot not in cache:
                progress(f"loading session {ref}")
                found = find_sessions(wh, ref, wanted)
                cache[slot] = (
                    (found[0], load_sources(wh, found[0])) if len(found) == 1 else None
                )
            row = VerifyRow(
                f"line {number}", ref, summary.window_label, summary.generator
            )
            report.rows.append(row)
            loaded = cache[slot]
            if loaded is None:
                row.note = "error: unknown or ambiguous session"
                continue
            session, sources = loaded
            row.session = session.external_id or session.session_id
            text = summary.text
            if redactor is not None:
                text = redactor.redact_text(text, session.tenant_id).text
            first, last = summary.turn_range(
                len(sources.messages), settings.window_turns
            )
            audit = audit_outside(text, sources, settings, first, last)
            row.present, row.total = audit.present, len(audit.checks)
            row.missing = audit.missing
            row.altered = [
                f"{c.field.canonical} -> {display_value(c.found)}"
                for c in audit.altered
            ]
            row.missing_artifacts = audit.missing_artifacts
            row.artifacts = audit.changed_artifacts
    report.rows.sort(key=lambda r: int(r.label.split()[1]))
    return report


def verify_stored(
    warehouse: str | Path,
    *,
    session: str | None = None,
    tenant: str | None = None,
    policy_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> VerifyReport:
    """Re-verify the stored ledger entries against the current sources."""
    settings = load_checked_policy(policy_file).ledger
    report = VerifyReport()
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        if session is not None:
            sessions = find_sessions(wh, session, tenant)
            if not sessions:
                report.rows.append(
                    VerifyRow(session, session, "-", "-", note="error: unknown session")
                )
                return report
            entries = [e for s in sessions for e in load_entries(wh, s.session_id)]
        else:
            entries = load_entries(wh)
        by_session: dict[str, SessionSources] = {}
        for entry in entries:
            if entry.session_id not in by_session:
                progress(f"loading session {entry.session_id}")
                found = find_sessions(wh, entry.session_id)
                if not found:
                    report.rows.append(
                        VerifyRow(
                            entry.summary_id,
                            entry.session_id,
                            "-",
                            entry.generator,
                            note="error: session missing",
                        )
                    )
                    continue
                by_session[entry.session_id] = load_sources(wh, found[0])
            sources = by_session[entry.session_id]
            checked = reverify_entry(entry, sources, settings)
            window = (
                "session"
                if entry.scope == "session"
                else f"{entry.window_index} (t{entry.covered_from_turn}-"
                f"{entry.covered_to_turn})"
            )
            notes = []
            if checked.sources_changed:
                notes.append("sources changed")
            if checked.checksum_changed:
                notes.append("checksum changed")
            if checked.settings_changed:
                notes.append("settings changed")
            report.rows.append(
                VerifyRow(
                    entry.summary_id,
                    sources.session.external_id or entry.session_id,
                    window,
                    f"{entry.generator} {entry.generator_version}",
                    present=checked.audit.present,
                    total=len(checked.audit.checks),
                    missing=checked.entry.missing_fields,
                    altered=checked.entry.altered_fields,
                    missing_artifacts=checked.audit.missing_artifacts,
                    artifacts=checked.audit.changed_artifacts,
                    note=", ".join(notes),
                    rebuild_required=checked.entry.rebuild_required,
                )
            )
    return report


def print_report(report: VerifyReport, console, output: str = "table") -> None:
    """Print a report as a rich table (``table``), one JSON array (``json``) or
    one JSON object per row and line (``jsonl``)."""
    import json

    from rich.table import Table
    from rich.text import Text

    if output in {"json", "jsonl"}:  # one array / one object per line
        from ctxledger.jobs.cli_support import write_records

        rows = ({**row.__dict__, "passed": row.passed} for row in report.rows)
        write_records((json.loads(json.dumps(r, sort_keys=True)) for r in rows), output)
        return
    table = Table(title="ledger audit (protected fields and artifact trail)")
    for column in (
        "summary",
        "session",
        "window",
        "generator",
        "fields",
        "missing",
        "altered",
        "artifacts",
        "verdict",
    ):
        table.add_column(column)
    for row in report.rows:
        artifacts = f"{row.artifacts - len(row.missing_artifacts)}/{row.artifacts}" + (
            "".join(f"\nmissing {a}" for a in row.missing_artifacts)
        )
        verdict = Text.assemble(
            ("ok", "green") if row.passed else ("FAIL", "red"),
            " rebuild" if row.rebuild_required else "",
            f" ({row.note})" if row.note else "",
        )
        table.add_row(
            Text(row.label),
            Text(row.session),
            Text(row.window),
            Text(row.generator),
            f"{row.present}/{row.total}",
            Text("\n".join(row.missing) or "-"),
            Text("\n".join(row.altered) or "-"),
            Text(artifacts),
            verdict,
        )
    console.print(table)
    failed = sum(1 for row in report.rows if not row.passed)
    console.print(
        f"{len(report.rows)} summaries checked, {failed} failed"
        if failed
        else f"{len(report.rows)} summaries checked, all carry their protected fields"
    )
