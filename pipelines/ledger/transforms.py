"""Beam wrapper of the ledger stage: redacted records in, ledgers and trail out.

``BuildLedger`` groups a run's redacted ``sessions``, ``messages``,
``tool_observations`` and (through the observations) ``artifacts`` by session and
runs ``pipelines.ledger.build.build_session_ledger`` once per session. Outputs:
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


def _artifacts_by_session(element):
    """``(artifact_id, {refs: [session ids], artifacts: [Artifact]})`` ->
    ``(session_id, (artifact_id, content))`` once per referencing session."""
    artifact_id, grouped = element
    artifacts = list(grouped["artifacts"])
    if not artifacts:
        return
    content = artifacts[0].content
    for session_id in sorted(set(grouped["refs"])):
        yield session_id, (artifact_id, content)


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

    def process(self, element):
        session_id, grouped = element
        sessions = sorted(grouped["session"], key=lambda s: s.source_hash)
        messages = list(grouped["messages"])
        if not sessions:
            tenant = messages[0].tenant_id if messages else "unknown"
            yield self._dead(
                session_id, tenant, "", NO_SESSION, "messages without a session record"
            )
            return
        session = sessions[0]
        try:
            built = build_session_ledger(
                SessionSources(
                    session=session,
                    messages=messages,
                    observations=list(grouped["observations"]),
                    outputs=dict(grouped["outputs"]),
                ),
                self.settings,
                created_at=self.created_at,
                run_id=self.config.run_id,
                policy_version=self.config.policy_version,
            )
        except Exception as exc:  # noqa: BLE001 - terminal for this session
            yield self._dead(
                session_id,
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
    """``{sessions, messages, tool_observations, artifacts}`` -> ledger outputs."""

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

    def expand(self, records):
        observations = records["tool_observations"]
        outputs = (
            {
                "refs": observations
                | "KeyRefsByArtifact"
                >> beam.Map(lambda o: (o.artifact_ref, o.session_id)),
                "artifacts": records["artifacts"]
                | "KeyArtifacts" >> beam.Map(lambda a: (a.artifact_id, a)),
            }
            | "JoinArtifactRefs" >> beam.CoGroupByKey()
            | "OutputsBySession" >> beam.FlatMap(_artifacts_by_session)
        )
        grouped = {
            "session": records["sessions"]
            | "KeySessions" >> beam.Map(lambda s: (s.session_id, s)),
            "messages": records["messages"]
            | "KeyMessages" >> beam.Map(lambda m: (m.session_id, m)),
            "observations": observations
            | "KeyObservations" >> beam.Map(lambda o: (o.session_id, o)),
            "outputs": outputs,
        } | "GroupBySession" >> beam.CoGroupByKey()
        return grouped | "BuildSessionLedgers" >> beam.ParDo(
            BuildSessionLedgerFn(self.config, self.settings, self.created_at)
        ).with_outputs(TRAIL, DEAD_LETTER, main=LEDGER)


def ledger_branch(redacted, config: JobConfig, policy, pipeline) -> dict:
    """The nightly graph's ledger branch (see ``pipelines.graph.BRANCHES``)."""
    out = {
        "sessions": redacted.sessions,
        "messages": redacted.messages,
        "tool_observations": redacted.tool_observations,
        "artifacts": redacted.artifacts,
    } | "BuildLedger" >> BuildLedger(config, policy.ledger)
    return {
        LEDGER: out[LEDGER],
        TRAIL: out[TRAIL],
        "dead_letters": out[DEAD_LETTER],
    }
