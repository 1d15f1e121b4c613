"""Beam wrapper of the redact stage: draft sessions in, redacted records out.

The presidio engine loads once per worker in ``setup()``; the DoFn only adapts
``pipelines.ingest.normalize.normalize_session`` to Beam's tagged outputs.
Outputs: one per table (``sessions``, ``messages``, ``artifacts``,
``tool_observations``), ``dead_letter``, and ``session_records``: the same
records once more as one ``(session id, SessionRecords)`` bundle per draft
session, which ``GroupSessions`` turns into the ``SessionGroup`` s the ledger,
memory and evidence stages share (``pipelines.ingest.grouped``).
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.grouped import SessionGroup, SessionRecords
from ctxledger.pipelines.ingest.normalize import normalize_session
from ctxledger.pipelines.ingest.transforms import source_info
from ctxledger.pipelines.timing import timed

DEAD_LETTER = "dead_letter"
RECORD_TAGS = ("messages", "artifacts", "tool_observations")
#: Per-session bundles (``SessionRecords``); not counted as stage outputs
#: (``pipelines.timing``): they repeat records the other tags already emit.
SESSION_RECORDS = "session_records"


#: Draft sessions per ``RedactSessionFn`` call: their texts are detected
#: together first (``Redactor.prefetch``), then each session is redacted alone.
SESSION_BATCH = 32


@timed("redact")
class RedactSessionFn(beam.DoFn):
    """Redact a batch of draft sessions, each on its own, and emit their
    records by table; the batch only shares the detection passes."""

    def __init__(self, config: JobConfig, policy, key: bytes):
        self.config = config
        self.policy = policy
        self.key = key
        self.redactor = None
        self.ahead = None
        self.messages = Metrics.counter("redact", "messages")
        self.dead = Metrics.counter("redact", "dead_letters")

    def setup(self):
        from ctxledger.pipelines.redact.engine import Redactor

        self.redactor = Redactor(self.policy, self.key)
        self.redactor.setup()

    def process(self, batch):
        from ctxledger.pipelines.ingest.normalize import redaction_texts

        batch = list(batch)
        if len(batch) > 1:
            texts = [text for _, draft in batch for text in redaction_texts(draft)]
            try:
                self.redactor.prefetch(texts)
            except Exception:  # noqa: BLE001, S110
                # nothing is lost: each session redacts its own texts again
                # below, where a failing text becomes that message's dead letter
                pass
        for element in batch:
            yield from self._session(element)

    def _session(self, element):
        item, draft = element
        info = source_info(item, self.config, self.policy.memory.subject_metadata_key)
        tenant = item.tenant_id

        def redact(fields):
            return self.redactor.redact_batch(fields, tenant)

        built = normalize_session(draft, info, redact, self.policy.sources)
        self.messages.inc(len(built.messages))
        yield built.session
        for message in built.messages:
            yield pvalue.TaggedOutput("messages", message)
        for artifact in built.artifacts:
            if self.config.embed_ahead:
                self._embed_ahead(artifact)
            yield pvalue.TaggedOutput("artifacts", artifact)
        for observation in built.observations:
            yield pvalue.TaggedOutput("tool_observations", observation)
        for letter in built.dead_letters:
            self.dead.inc()
            yield pvalue.TaggedOutput(DEAD_LETTER, letter)
        records = SessionRecords.of(
            built.session, built.messages, built.observations, built.artifacts
        )
        yield pvalue.TaggedOutput(SESSION_RECORDS, (records.session_id, records))

    def _embed_ahead(self, artifact) -> None:
        """Hand a redacted tool output to the run's embed-ahead helper
        (``pipelines.evidence.ahead``: it starts once the run has handed over
        enough of them, or already did when the graph was built)."""
        if self.ahead is None:
            from ctxledger.pipelines.evidence.ahead import run_helper

            self.ahead = run_helper(self.config, self.policy)
        self.ahead.submit(artifact.tenant_id, artifact.content)


class RedactPII(beam.PTransform):
    """``(LandingItem, DraftSession)`` -> redacted records by table + dead letters."""

    def __init__(self, config: JobConfig, policy, key: bytes):
        super().__init__()
        self.config = config
        self.policy = policy
        self.key = key

    def expand(self, sessions):
        return (
            sessions
            | "BatchSessions"
            >> beam.BatchElements(
                min_batch_size=SESSION_BATCH, max_batch_size=SESSION_BATCH
            )
            | "RedactSessions"
            >> beam.ParDo(
                RedactSessionFn(self.config, self.policy, self.key)
            ).with_outputs(DEAD_LETTER, SESSION_RECORDS, *RECORD_TAGS, main="sessions")
        )


class GroupSessions(beam.PTransform):
    """``(session id, SessionRecords)`` bundles -> one ``SessionGroup`` per
    session id: the single grouping the ledger, memory and evidence stages
    share (each used to group the run's records by session on its own)."""

    def expand(self, bundles):
        return (
            bundles
            | "GroupBySession" >> beam.GroupByKey()
            | "MergeSessionRecords" >> beam.MapTuple(SessionGroup.merge)
        )
