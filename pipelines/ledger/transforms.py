"""Beam wrapper of the ledger stage: redacted records in, ledgers and trail out.

``BuildLedger`` runs ``pipelines.ledger.build.build_session_ledger`` once per
``SessionGroup`` (a session's redacted records and the tool outputs its
observations point at, grouped once for every stage by ``GroupSessions``,
``pipelines.ingest.grouped``). Outputs:
``compression_ledger`` (main: ``LedgerEntry``), ``artifact_trail``
(``ArtifactTrailEntry``) and ``dead_letter`` (``DeadLetter``, stage ``ledger``:
one per session whose ledger could not be built; stage ``ledger_lines``, reason
``secret_in_text``: one per section and message whose lines were left out of
the summaries because they still held a secret, with the count, never the text).

``ledger_branch`` plugs the stage into the nightly graph (``pipelines.graph``).
"""

from __future__ import annotations

from datetime import UTC, datetime

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.grouped import SessionGroup
from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.pipelines.timing import timed
from ctxledger.schemas import DeadLetter, content_hash
from ctxledger.schemas.policy import LedgerSettings

STAGE = "ledger"
DEAD_LETTER = "dead_letter"
TRAIL = "artifact_trail"
LEDGER = "compression_ledger"
BUILD_FAILED = "ledger_build_failed"
NO_SESSION = "ledger_no_session"
#: Stage of dropped-line dead letters (not sessions: the ``ledger`` count's
#: unit is the session, and a session with dropped lines still has its ledger).
LINES_STAGE = "ledger_lines"
SECRET_IN_TEXT = "secret_in_text"


@timed("ledger")
class BuildSessionLedgerFn(beam.DoFn):
    """Build one session's ledger entries and artifact trail."""

    def __init__(
        self, config: JobConfig, settings: LedgerSettings, created_at: datetime
    ):
        self.config = config
        self.settings = settings
        self.created_at = created_at
        self.entries = Metrics.counter(STAGE, "entries")
        self.dead = Metrics.counter(STAGE, "dead_letters")

    def _dead(self, session_id: str, tenant: str, source: str, code: str, detail: str):
        self.dead.inc()
        return pvalue.TaggedOutput(
            DEAD_LETTER,
            DeadLetter(
                dead_letter_id=content_hash(
                    tenant, session_id, STAGE, code, self.config.run_id, prefix="dl_"
                ),
                run_id=self.config.run_id,
                stage=STAGE,
                tenant_id=tenant,
                source_file=source,
                source_offset=f"session:{session_id}",
                reason_code=code,
                message=detail,
                job_version=self.config.code_version,
            ),
        )

    def _dropped_line(self, session, line, count: int):
        """The text-free dead letter of lines dropped for holding a secret."""
        self.dead.inc()
        return pvalue.TaggedOutput(
            DEAD_LETTER,
            DeadLetter(
                dead_letter_id=content_hash(
                    session.tenant_id,
                    session.session_id,
                    LINES_STAGE,
                    line.section,
                    line.source_message_id,
                    line.turn,
                    self.config.run_id,
                    prefix="dl_",
                ),
                run_id=self.config.run_id,
                stage=LINES_STAGE,
                tenant_id=session.tenant_id,
                source_file=session.source_file,
                source_offset=f"session:{session.session_id}/turn:{line.turn}"
                + (
                    f"/message:{line.source_message_id}"
                    if line.source_message_id
                    else ""
                ),
                reason_code=SECRET_IN_TEXT,
                message=(
                    f"{count} {line.section} line(s) matched a secret rule after "
                    "redaction; left out of the ledger"
                ),
                job_version=self.config.code_version,
            ),
        )

    def process(self, group: SessionGroup):
        session = group.session  # first by source hash
        messages = list(group.messages)
        if session is None:
            tenant = messages[0].tenant_id if messages else "unknown"
            yield self._dead(
                group.session_id,
                tenant,
                "",
                NO_SESSION,
                "messages without a session record",
            )
            return
        try:
            built = build_session_ledger(
                SessionSources(
                    session=session,
                    messages=messages,
                    observations=list(group.observations),
                    outputs=dict(group.outputs),
                ),
                self.settings,
                created_at=self.created_at,
                run_id=self.config.run_id,
                policy_version=self.config.policy_version,
            )
        except Exception as exc:  # noqa: BLE001 - terminal for this session
            yield self._dead(
                group.session_id,
                session.tenant_id,
                session.source_file,
                BUILD_FAILED,
                f"ledger builder raised {type(exc).__name__}",
            )
            return
        self.entries.inc(len(built.entries))
        yield from built.entries
        for line, count in built.dropped:
            yield self._dropped_line(session, line, count)
        for trail in built.trail:
            yield pvalue.TaggedOutput(TRAIL, trail)


class BuildLedger(beam.PTransform):
    """``SessionGroup`` s -> ledger outputs."""

    def __init__(
        self,
        config: JobConfig,
        settings: LedgerSettings,
        created_at: datetime | None = None,
    ):
        super().__init__()
        self.config = config
        self.settings = settings
        self.created_at = created_at or datetime.now(UTC)

    def expand(self, groups):
        return groups | "BuildSessionLedgers" >> beam.ParDo(
            BuildSessionLedgerFn(self.config, self.settings, self.created_at)
        ).with_outputs(TRAIL, DEAD_LETTER, main=LEDGER)


def ledger_branch(redacted, config: JobConfig, policy, pipeline, lake=None) -> dict:
    """The nightly graph's ledger branch (see ``pipelines.graph.BRANCHES``)."""
    out = redacted.grouped | "BuildLedger" >> BuildLedger(
        config, policy.ledger, created_at=config.received_at
    )
    return {
        LEDGER: out[LEDGER],
        TRAIL: out[TRAIL],
        "dead_letters": out[DEAD_LETTER],
    }
