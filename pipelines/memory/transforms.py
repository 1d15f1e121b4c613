"""Beam wrapper of the memory stage: ``ExtractMemories``.

Graph (all logic lives in the pure modules of ``pipelines.memory``)::

    SessionGroup s (GroupSessions) --BatchElements-->
        ExtractSessionMemoriesFn ---------> candidates | memory_extractions | dead
    consent files --ReadConsentFn---------> consent (new events) | memory_inputs | dead
    system-record files --ReadSystemRecordsFn --> candidates | memory_inputs | dead
    candidates + (stored + new) consent --CoGroupByKey(tenant, subject)-->
        GateSubjectMemoriesFn ------------> memories | memory_rejections | dead

Dead letters are tagged per stage: ``memory_extract`` (a message an extractor
could not read), ``memory_inputs`` (a bad input line), ``memory_gate``.
``memory_branch`` plugs the composite into the nightly graph (``BRANCHES``).
Stored memories are then embedded in batches (``EmbedMemoriesFn``, unless
``evidence.embedding.mode`` is ``deferred``), so readers never embed them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from ctxledger.pipelines.batching import CALL_TEXTS
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.grouped import SessionGroup
from ctxledger.pipelines.ingest.landing import write_quarantine
from ctxledger.pipelines.ingest.normalize import SourceInfo, dead_letter
from ctxledger.pipelines.memory.inputs import (
    CONSENT,
    SYSTEM_RECORDS,
    MemoryInputItem,
    ParsedInput,
    new_inputs,
    parse_consent_file,
    parse_system_records_file,
)
from ctxledger.pipelines.timing import timed
from ctxledger.schemas import content_hash
from ctxledger.schemas.memory import MemoryExtraction, MemoryInputFile

DEAD_LETTER = "dead_letter"
EXTRACTION = "memory_extractions"
INPUT_FILE = "memory_inputs"
CONSENT_OUT = "consent"
REJECTION = "memory_rejections"

log = logging.getLogger(__name__)


def _info(tenant: str, source_file: str, source_hash: str, config: JobConfig):
    return SourceInfo(
        tenant_id=tenant,
        source_file=source_file,
        source_hash=source_hash,
        run_id=config.run_id,
        policy_version=config.policy_version,
        job_version=config.code_version,
    )


#: Sessions per ``ExtractSessionMemoriesFn`` call: their classifier sentences
#: go through MiniLM together (``MiniLMEncoder.collect``), sorted into passes
#: of one length class, so the more a call holds the less its passes pad. On
#: corpora section A (317 sessions, 588 sentences) calls of 64 sessions made
#: 14 model calls, 2.7 s on one thread; calls of 512 make 2, 1.6 s (same
#: labels; confidences moved in the 4th decimal on 4 of 700 memories).
SESSION_BATCH = 512


@timed("memory_extract")
class ExtractSessionMemoriesFn(beam.DoFn):
    """Memory candidates of a batch of sessions (rules + MiniLM classifier [+
    LLM]), each session on its own; the batch only shares the model's passes
    (``_warm``)."""

    def __init__(self, config: JobConfig, policy, encoder=None):
        self.config = config
        self.policy = policy
        self.encoder = encoder
        self.extractors = None
        self.purposes = None
        self.candidates = Metrics.counter("memory", "candidates")
        self.dead = Metrics.counter("memory", "extract_dead_letters")
        # the stage's model cost: texts handed to MiniLM (before its cache)
        self.classified = Metrics.counter("memory", "classified_sentences")
        self.purpose_texts = Metrics.counter("memory", "purpose_texts")

    def setup(self):
        from ctxledger.pipelines.memory.classify import MiniLMEncoder, PurposeClassifier
        from ctxledger.pipelines.memory.extract import RuleExtractor

        settings = self.policy.memory
        # The model loads on the first sentence that needs it (MiniLMEncoder
        # loads itself when called): a run with nothing to classify skips it.
        encoder = self.encoder
        if encoder is None:  # the policy's embedding backend (torch | onnx-int8)
            backend = self.policy.evidence.embedding.backend
            encoder = MiniLMEncoder(backend=backend)
        extractors = [RuleExtractor(settings, encoder)]
        if self.config.llm_endpoint:
            from ctxledger.pipelines.memory.llm import DEFAULT_MODEL, LlmExtractor

            extractors.append(
                LlmExtractor(
                    self.config.llm_endpoint, self.config.llm_model or DEFAULT_MODEL
                )
            )
        self.extractors = extractors
        self.purposes = PurposeClassifier(settings, encoder)
        self._encoder = encoder

    def process(self, batch):
        batch = list(batch)
        self._warm(batch)
        for element in batch:
            yield from self._session(element)

    def _warm(self, batch) -> None:
        """Embed what the batch's sessions will classify, in batched passes.

        A dry run of the rule extractor inside ``MiniLMEncoder.collect()``
        records the texts; ``warm`` embeds them by word-piece budget; the real
        run per session then reads every vector from the encoder's cache.
        Two dry steps, because purposes are asked for the messages that gave
        drafts, which depends on the kind labels: first the kind sentences
        (``prepare``) and the prototypes, then a whole extraction with real
        kinds records the purpose texts. Nothing here decides an output: a
        text the dry run missed is embedded by the real run itself.
        """
        from ctxledger.pipelines.memory.extract import RuleExtractor, extract_session

        encoder = self._encoder
        rules = [e for e in self.extractors if isinstance(e, RuleExtractor)]
        if not rules or not hasattr(encoder, "collect") or len(batch) < 2:
            return
        contexts = [c for c in map(self._context, batch) if c is not None]
        with encoder.collect() as wanted:
            for ctx in contexts:
                rules[0].prepare(ctx)
            if wanted:  # prototypes too, with the batch's first pass
                _ = rules[0].kinds.matrix if rules[0].kinds is not None else None
                if self.purposes.model is not None:
                    _ = self.purposes.model.matrix
        encoder.warm(list(wanted))
        with encoder.collect() as wanted:
            for ctx in contexts:
                try:
                    extract_session(ctx, rules, self.purposes)
                except Exception:  # noqa: BLE001, S112 - the real run reports it
                    continue
        encoder.warm(list(wanted))

    def _context(self, group: SessionGroup):
        """The ``SessionContext`` of a group; None for orphan messages."""
        from ctxledger.pipelines.memory.extract import SessionContext

        if group.session is None:
            return None
        return SessionContext.build(
            group.session,
            group.messages,
            group.observations,
            self.policy.memory.subject_metadata_key,
        )

    def _session(self, group: SessionGroup):
        from ctxledger.pipelines.memory.extract import SessionContext, extract_session

        session = group.session
        messages = group.messages
        if session is None:
            for message in messages:
                self.dead.inc()
                yield pvalue.TaggedOutput(
                    DEAD_LETTER,
                    dead_letter(
                        _info(message.tenant_id, message.source_ref, "", self.config),
                        "memory_extract",
                        message.source_ref.rsplit("#", 1)[-1],
                        "orphan_message",
                        "message without its session",
                    ),
                )
            return
        ctx = SessionContext.build(
            session,
            messages,
            group.observations,
            self.policy.memory.subject_metadata_key,
        )
        result = extract_session(ctx, self.extractors, self.purposes)
        info = _info(
            session.tenant_id, session.source_file, session.source_hash, self.config
        )
        for message, code, detail in result.failed:
            self.dead.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER,
                dead_letter(
                    info,
                    "memory_extract",
                    message.source_ref.rsplit("#", 1)[-1],
                    code,
                    detail,
                ),
            )
        self.candidates.inc(len(result.candidates))
        self.classified.inc(result.classified)
        self.purpose_texts.inc(result.purpose_texts)
        yield from result.candidates
        yield pvalue.TaggedOutput(
            EXTRACTION,
            MemoryExtraction(
                extraction_id=content_hash(
                    self.config.run_id, session.session_id, prefix="mex_"
                ),
                run_id=self.config.run_id,
                tenant_id=session.tenant_id,
                session_id=session.session_id,
                subject_id=ctx.subject_id,
                messages_in=len(messages),
                messages_scanned=result.scanned,
                candidates=len(result.candidates),
                extractor_version=",".join(e.version for e in self.extractors),
            ),
        )


def _emit_input(parsed: ParsedInput, config: JobConfig):
    """Dead letters and the ``memory_inputs`` row of one parsed input file."""
    item = parsed.item
    info = _info(item.tenant_id, item.rel_path, item.file_hash, config)
    for rejected in parsed.rejected:
        ref = (
            write_quarantine(config.warehouse, config.run_id, rejected.raw)
            if rejected.raw
            else None
        )
        yield pvalue.TaggedOutput(
            DEAD_LETTER,
            dead_letter(
                info,
                "memory_inputs",
                rejected.source_offset,
                rejected.reason_code,
                rejected.detail,
                ref,
            ),
        )
    yield pvalue.TaggedOutput(
        INPUT_FILE,
        MemoryInputFile(
            file_hash=item.file_hash,
            path=item.rel_path,
            kind=item.kind,
            tenant_id=item.tenant_id,
            size_bytes=item.size_bytes,
            status=parsed.status,
            records_in=parsed.records_in,
            records_out=parsed.records_out,
            dead=sum(r.records for r in parsed.rejected),
            run_id=config.run_id,
        ),
    )


@timed("memory_extract")
class ReadConsentFn(beam.DoFn):
    """Consent events of one input file (main output: ``ConsentRecord``)."""

    def __init__(self, config: JobConfig, policy):
        self.config = config
        self.policy = policy

    def process(self, item: MemoryInputItem):
        parsed = parse_consent_file(
            item, self.policy.memory, self.config.run_id, self.config.max_record_bytes
        )
        yield from parsed.consent
        yield from _emit_input(parsed, self.config)


@timed("memory_extract")
class ReadSystemRecordsFn(beam.DoFn):
    """System-record candidates of one input file, their text redacted."""

    def __init__(self, config: JobConfig, policy, key: bytes | None = None):
        self.config = config
        self.policy = policy
        self.key = key
        self.redactor = None

    def setup(self):
        from pathlib import Path

        from ctxledger.pipelines.redact.engine import Redactor
        from ctxledger.pipelines.redact.keys import load_key

        key = self.key or load_key(
            Path(self.config.key_file) if self.config.key_file else None
        )
        self.redactor = Redactor(self.policy, key)
        self.redactor.setup()

    def _redact(self, text: str, tenant: str) -> str:
        return self.redactor.redact_batch([("content", text)], tenant)[0].text

    def process(self, item: MemoryInputItem):
        parsed = parse_system_records_file(
            item, self.policy.memory, self._redact, self.config.max_record_bytes
        )
        yield from parsed.candidates
        yield from _emit_input(parsed, self.config)


@timed("memory_gate")
class GateSubjectMemoriesFn(beam.DoFn):
    """Gate one subject's candidates against its consent; resolve supersession."""

    def __init__(self, config: JobConfig, policy, now: datetime):
        self.config = config
        self.policy = policy
        self.now = now
        self.stored = Metrics.counter("memory", "stored")
        self.rejected = Metrics.counter("memory", "rejected")

    def process(self, element):
        from ctxledger.pipelines.memory.gate import gate_candidates
        from ctxledger.pipelines.memory.resolve import resolve

        _, grouped = element
        consent = list(grouped.get("consent", ()))  # none when the run has none
        memories = []
        for candidate in grouped["candidates"]:
            try:
                result = gate_candidates(
                    [candidate],
                    consent,
                    self.policy.memory,
                    now=self.now,
                    policy_version=self.config.policy_version,
                    run_id=self.config.run_id,
                    received_at=self.config.received_at,
                )
            except Exception as exc:  # noqa: BLE001 - terminal for this candidate
                yield pvalue.TaggedOutput(
                    DEAD_LETTER,
                    dead_letter(
                        _info(
                            candidate.tenant_id,
                            candidate.source_file,
                            candidate.memory_id,
                            self.config,
                        ),
                        "memory_gate",
                        candidate.source_offset,
                        "memory_gate_failed",
                        f"gate raised {type(exc).__name__}",
                    ),
                )
                continue
            memories.extend(result.memories)
            for rejection in result.rejections:
                self.rejected.inc()
                yield pvalue.TaggedOutput(REJECTION, rejection)
        self.stored.inc(len(memories))
        registry = self.policy.sources  # the registered source (docs/sources.md)
        memories = [
            m.model_copy(
                update={
                    "source_id": registry.resolve(
                        "memory", m.source, f"{m.source}:{m.kind}"
                    )
                }
            )
            for m in memories
        ]
        yield from resolve(memories)


@timed("memory_embed")
class EmbedMemoriesFn(beam.DoFn):
    """Batches of stored memories -> the same memories with their vectors.

    The ``Embedder`` of ``policy.evidence.embedding`` (the model queries use)
    is made in ``setup()`` and loads MiniLM, shared per process, on its first
    batch. A batch the model cannot embed is stored without vectors (readers
    embed such rows themselves): a memory is never lost for its vector, and
    the gate's conservation count (stored + rejected) stays exact.
    """

    def __init__(self, settings, embedder=None):
        self.settings = settings
        self.embedder = embedder
        self.embedded = Metrics.counter("memory", "embedded")
        self.failed = Metrics.counter("memory", "embed_failed")

    def setup(self):
        if self.embedder is None:
            from ctxledger.pipelines.evidence.embed import Embedder

            self.embedder = Embedder(self.settings)

    def process(self, batch):
        from ctxledger.pipelines.memory.embed import embed_memories

        try:
            done = embed_memories(batch, self.embedder)
        except Exception as exc:  # noqa: BLE001 - stored without vectors instead
            log.warning(
                "memory embedding failed for a batch of %d (%s): stored without "
                "vectors",
                len(batch),
                type(exc).__name__,
            )
            self.failed.inc(len(batch))
            yield from batch
            return
        self.embedded.inc(len(done))
        yield from done


def _by_subject(record):
    return (record.tenant_id, record.subject_id), record


class ExtractMemories(beam.PTransform):
    """Redacted records (+ memory inputs) -> memories and their bookkeeping.

    Input: the run's ``SessionGroup`` s (``GroupSessions``). Output:
    a dict with ``memories``, ``memory_rejections``, ``consent`` (events read by
    this run), ``memory_extractions``, ``memory_inputs`` and ``dead_letter``;
    ``consent`` and ``memory_inputs`` only when the run has input files.
    ``consent`` (constructor) is the consent already stored; ``inputs`` the new
    input files; ``encoder`` overrides the MiniLM encoder and ``embedder``
    the one that computes the stored memory vectors (tests).
    """

    def __init__(
        self,
        config: JobConfig,
        policy,
        *,
        consent=(),
        inputs: list[MemoryInputItem] | tuple = (),
        now: datetime | None = None,
        encoder=None,
        key: bytes | None = None,
        embedder=None,
    ):
        super().__init__()
        self.config = config
        self.policy = policy
        self.consent = list(consent)
        self.inputs = list(inputs)
        self.now = now or datetime.now(UTC)
        self.encoder = encoder
        self.key = key
        self.embedder = embedder

    def expand(self, groups):
        pipeline = groups.pipeline
        extracted = (
            groups
            | "BatchSessions"
            >> beam.BatchElements(
                min_batch_size=SESSION_BATCH, max_batch_size=SESSION_BATCH
            )
            | "ExtractSessionMemories"
            >> beam.ParDo(
                ExtractSessionMemoriesFn(self.config, self.policy, self.encoder)
            ).with_outputs(DEAD_LETTER, EXTRACTION, main="candidates")
        )

        # A source with nothing to read adds no steps (each would be a stage
        # of its own, a round trip to every worker in multi-process mode), and
        # its tables are left out of the outputs.
        consent_items = [i for i in self.inputs if i.kind == CONSENT]
        system_items = [i for i in self.inputs if i.kind == SYSTEM_RECORDS]
        candidates = [extracted.candidates]
        dead = [extracted[DEAD_LETTER]]
        input_files = []
        consent = []
        tables = {}
        if consent_items:
            consent_read = (
                pipeline
                | "ListConsentFiles" >> beam.Create(consent_items, reshuffle=False)
                | "ReadConsent"
                >> beam.ParDo(ReadConsentFn(self.config, self.policy)).with_outputs(
                    DEAD_LETTER, INPUT_FILE, main="consent"
                )
            )
            consent.append(consent_read.consent)
            dead.append(consent_read[DEAD_LETTER])
            input_files.append(consent_read[INPUT_FILE])
            tables["consent"] = consent_read.consent
        if system_items:
            system_read = (
                pipeline
                | "ListSystemRecordFiles" >> beam.Create(system_items, reshuffle=False)
                | "ReadSystemRecords"
                >> beam.ParDo(
                    ReadSystemRecordsFn(self.config, self.policy, self.key)
                ).with_outputs(DEAD_LETTER, INPUT_FILE, main="candidates")
            )
            candidates.append(system_read.candidates)
            dead.append(system_read[DEAD_LETTER])
            input_files.append(system_read[INPUT_FILE])
        if self.consent:
            consent.append(
                pipeline | "StoredConsent" >> beam.Create(self.consent, reshuffle=False)
            )
        to_gate = {
            "candidates": candidates
            | "FlattenCandidates" >> beam.Flatten()
            | "KeyCandidates" >> beam.Map(_by_subject)
        }
        if consent:
            to_gate["consent"] = (
                consent
                | "AllConsent" >> beam.Flatten()
                | "KeyConsent" >> beam.Map(_by_subject)
            )
        gated = (
            to_gate
            | "GroupBySubject" >> beam.CoGroupByKey()
            | "GateMemories"
            >> beam.ParDo(
                GateSubjectMemoriesFn(self.config, self.policy, self.now)
            ).with_outputs(REJECTION, DEAD_LETTER, main="memories")
        )
        dead.append(gated[DEAD_LETTER])
        memories = gated.memories
        embedding = self.policy.evidence.embedding
        if embedding.mode == "inline":
            # deferred: no model in this run; readers embed rows without vectors
            memories = (
                memories
                | "BatchMemories"
                >> beam.BatchElements(
                    min_batch_size=CALL_TEXTS, max_batch_size=CALL_TEXTS
                )
                | "EmbedMemories"
                >> beam.ParDo(EmbedMemoriesFn(embedding, self.embedder))
            )
        if input_files:
            tables["memory_inputs"] = input_files | "FlattenInputFiles" >> (
                beam.Flatten()
            )
        return {
            "memories": memories,
            "memory_rejections": gated[REJECTION],
            **tables,
            "memory_extractions": extracted[EXTRACTION],
            "dead_letter": dead | "FlattenMemoryDeadLetters" >> beam.Flatten(),
        }


def memory_branch(redacted, config: JobConfig, policy, pipeline, lake=None) -> dict:
    """The nightly graph's memory branch (``pipelines.graph.BRANCHES``).

    Reads, at graph construction, the consent already stored and which input
    files were already read; adds ``ExtractMemories`` over the redacted records.
    """
    from ctxledger.pipelines.ingest.landing import KnownFiles
    from ctxledger.warehouse.memory_api import known_input_files, load_consent

    with config.reading(lake) as wh:
        consent = load_consent(wh)
        known = KnownFiles.from_rows(known_input_files(wh))
    inputs = new_inputs(
        config.consent_input,
        config.system_records_input,
        config.default_tenant,
        known,
    )
    out = redacted.grouped | "ExtractMemories" >> ExtractMemories(
        config, policy, consent=consent, inputs=inputs
    )
    tables = {name: pcoll for name, pcoll in out.items() if name != "dead_letter"}
    tables["dead_letters"] = out["dead_letter"]
    return tables
