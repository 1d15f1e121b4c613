"""Beam wrapper of the evidence stage: ``ChunkEvidence``.

Inputs: document landing items (``DocItem``), the run's redacted ``artifacts``
and its ``SessionGroup`` s (``GroupSessions``). Steps:

1. ``ParseDocuments``: read, redact (``Redactor`` loads in ``setup()``) and chunk
   each document file; a tombstone becomes a deleted version with no chunks.
2. ``ChunkArtifacts``: each distinct tool output, chunked as kind
   ``tool_artifact`` once per subject whose sessions carried it (the subject
   of a session is ``pipelines.memory.subjects.subject_for``), with the time
   and tool name of the first such message: a tool output is evidence for its
   own subject (and the policy's operator groups) only.

Chunks whose text still matches a secret rule after redaction are dead letters
(``secret_in_text``, stage ``evidence_embed``) and are never embedded or stored.
3. ``EmbedChunks``: chunks are grouped by ``(tenant, content hash)``; a group
   whose vector the warehouse already holds reuses it (``LookupEmbeddingsFn``,
   batched reads on one read-only warehouse connection per worker, opened on
   its first batch), the rest are embedded in batches by ``EmbedTextsFn``
   (MiniLM loaded once per process, on the first batch), so every distinct
   text is embedded at most once, ever. Not Beam's ``RunInference``: importing
   ``apache_beam.ml`` pulls in torch (1-2 s) before the graph is even built,
   also in runs that have nothing to embed. With ``evidence.embedding.mode:
   deferred`` the texts not reused are committed without a vector instead
   (``pending_chunks``) and no model is loaded; ``jobs.embed`` fills them.
   Where every stage runs in one process, the redact stage has handed the tool
   outputs to a helper process that embedded their chunk texts meanwhile
   (``pipelines.evidence.ahead``, ``JobConfig.embed_ahead``): ``EmbedTextsFn``
   takes those vectors and embeds only the rest.

Outputs (``dict``): ``document_files``, ``documents``, ``evidence_chunks`` and
``dead_letter``. ``evidence_branch`` plugs the stage into the nightly graph.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from ctxledger.pipelines.batching import CALL_TEXTS
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.evidence.documents import (
    STAGE_ARTIFACTS,
    STAGE_EMBED,
    RunInfo,
    as_utc,
    build_artifact,
    build_document,
    evidence_dead_letter,
    received_now,
)
from ctxledger.pipelines.evidence.embed import Embedder
from ctxledger.pipelines.ingest.grouped import SessionGroup
from ctxledger.pipelines.memory.subjects import subject_for
from ctxledger.pipelines.timing import timed
from ctxledger.schemas.evidence import EmbeddingSettings, EvidenceChunk

DEAD_LETTER = "dead_letter"
OUTPUTS = ("document_files", "documents", "evidence_chunks")


def _run_info(config: JobConfig) -> RunInfo:
    return RunInfo(config.run_id, config.policy_version, config.code_version)


@timed("evidence_embed")
class EmbedTextsFn(beam.DoFn):
    """Batches of ``(drafts, text)`` -> the drafts' ``EvidenceChunk`` s.

    The ``Embedder`` is made in ``setup()`` and loads MiniLM (shared per
    process: ``pipelines.models``) on its first batch, so a run with nothing
    new to embed never loads torch. Batches are large (``CALL_TEXTS``) so the
    model sorts many texts into passes of one length; when one fails, its
    texts are embedded again in parts of ``max_batch_size``, and a part the
    model cannot embed becomes one dead letter per chunk (terminal: retrying
    the same text fails the same way).
    """

    def __init__(self, config: JobConfig, settings: EmbeddingSettings):
        self.config = config
        self.settings = settings
        self.embedder: Embedder | None = None
        self.embedded = Metrics.counter("evidence", "texts_embedded")
        self.embedded_ahead = Metrics.counter("evidence", "texts_embedded_ahead")

    def setup(self):
        self.embedder = Embedder(self.settings)

    def process(self, batch):
        batch = list(batch)
        ahead = self._ahead_vectors(batch)
        if ahead:
            self.embedded_ahead.inc(len(ahead))
            yield from self._chunks([batch[i] for i in ahead], list(ahead.values()))
            batch = [element for i, element in enumerate(batch) if i not in ahead]
            if not batch:
                return
        try:
            yield from self._completed(batch)
            return
        except Exception:  # noqa: BLE001 - each part on its own below
            pass
        size = self.settings.max_batch_size
        for start in range(0, len(batch), size):
            part = batch[start : start + size]
            try:
                yield from self._completed(part)
            except Exception as exc:  # noqa: BLE001 - terminal for this part
                yield from _failed_embeddings(self.config, part, exc)

    def _completed(self, batch):
        """The batch's chunks with their vectors (a list: all or nothing)."""
        return self._chunks(batch, self.embedder.encode([t for _d, t in batch]))

    def _chunks(self, batch, vectors) -> list[EvidenceChunk]:
        """The drafts of each ``(drafts, text)`` completed with its vector."""
        model = self.settings.model
        out = []
        for (drafts, _text), vector in zip(batch, vectors, strict=True):
            self.embedded.inc()
            out.extend(draft.complete(vector, model, reused=False) for draft in drafts)
        return out

    def _ahead_vectors(self, batch) -> dict:
        """Vectors the embed-ahead helper computed for this batch's texts
        (``pipelines.evidence.ahead``), by position in the batch."""
        if not self.config.embed_ahead:
            return {}
        from ctxledger.pipelines.evidence.ahead import current_ahead

        helper = current_ahead(self.config.run_id)
        if helper is None:
            return {}
        # the run's own core embeds passes the helper lends it, when the
        # model is loaded here already (the memory stage's): no second load
        lend = (
            (lambda work: self.embedder.run_pass(work, threads=1))
            if self.embedder.at_hand()
            else None
        )
        out = {}
        for i, (drafts, _text) in enumerate(batch):
            vector = helper.take(drafts[0].embed_key, lend)
            if vector is not None:
                out[i] = vector
        return out


@timed("evidence_docs")
class ParseDocumentFn(beam.DoFn):
    """Read, redact and chunk one document file (see ``build_document``)."""

    def __init__(self, config: JobConfig, policy, key: bytes):
        self.config = config
        self.policy = policy
        self.key = key
        self.redactor = None
        self.documents = Metrics.counter("evidence", "documents")

    def setup(self):
        from ctxledger.pipelines.redact.engine import Redactor

        # presidio and spaCy load on the first document (``redact_batch``
        # sets up once), so runs without documents do not pay for them
        self.redactor = Redactor(self.policy, self.key)

    def process(self, item):
        tenant = item.tenant_id

        def redact(fields):
            return self.redactor.redact_batch(fields, tenant)

        built = build_document(item, self.policy, redact, _run_info(self.config))
        yield pvalue.TaggedOutput("document_files", built.file)
        if built.version is not None:
            self.documents.inc()
            yield pvalue.TaggedOutput("documents", built.version)
        yield from built.chunks
        for letter in built.dead_letters:
            yield pvalue.TaggedOutput(DEAD_LETTER, letter)


@timed("evidence_artifacts")
class ChunkArtifactFn(beam.DoFn):
    """Chunk one distinct tool output, one version per subject that saw it; a
    failure is one dead letter for the artifact (no version of it is kept)."""

    def __init__(self, config: JobConfig, policy):
        self.config = config
        self.policy = policy
        self.received_at = None

    def setup(self):
        # undated messages: their outputs take the time the run received them,
        # the run's logical time (the same on every worker and every rerun)
        self.received_at = self.config.received_at or received_now()

    def process(self, element):
        (tenant_id, artifact_id), grouped = element
        artifacts = list(grouped["artifacts"])
        # no artifact: a message pointing at an artifact of an earlier run
        for artifact in artifacts[:1]:
            yield from self._chunk(tenant_id, artifact_id, artifact, grouped["seen"])

    def _chunk(self, tenant_id, artifact_id, artifact, seen):
        by_subject: dict[str | None, list] = {}
        for sighting in seen:
            if sighting is not None:
                when, name, subject = sighting
                by_subject.setdefault(subject, []).append((when, name))
        if not by_subject:
            by_subject[None] = []  # no sighting: operators only
        run = replace(_run_info(self.config), received_at=self.received_at)
        try:
            built = []
            for subject in sorted(by_subject, key=lambda s: (s is not None, s)):
                sightings = by_subject[subject]
                observed = min(
                    (as_utc(t) for t, _ in sightings if t is not None), default=None
                )
                names = sorted({n for _, n in sightings if n})
                built.append(
                    build_artifact(
                        artifact,
                        self.policy,
                        run,
                        observed,
                        names[0] if names else None,
                        subject_id=subject,
                    )
                )
        except Exception as exc:  # noqa: BLE001 - terminal for this artifact
            built = None
            letter = evidence_dead_letter(
                STAGE_ARTIFACTS,
                tenant_id,
                f"artifacts/{artifact_id}",
                artifact_id,
                "artifact",
                "chunking_failed",
                f"chunker raised {type(exc).__name__}",
                run,
            )
        if built is None:
            yield pvalue.TaggedOutput(DEAD_LETTER, letter)
            return
        for one in built:
            yield pvalue.TaggedOutput("documents", one.version)
            yield from one.chunks
            for dead in one.dead_letters:
                yield pvalue.TaggedOutput(DEAD_LETTER, dead)


@timed("evidence_embed")
class LookupEmbeddingsFn(beam.DoFn):
    """Batches of ``(key, drafts)``: complete the drafts whose text the warehouse
    already embedded (same tenant, hash and model); pass the rest on."""

    def __init__(self, config: JobConfig, model: str, vectors: str | None = None):
        self.config = config
        self.model = model
        #: The launcher's export of the stored vectors (``pipelines.evidence.
        #: stored``): the job's path, no catalog attach in this DoFn. None: the
        #: warehouse itself (``StoredVectors``), for callers outside the jobs.
        self.vectors = vectors
        self.reused = Metrics.counter("evidence", "embeddings_reused")
        self._stored = None

    def setup(self):
        if self.vectors is not None:
            from ctxledger.pipelines.evidence.stored import VectorFile

            self._stored = VectorFile(self.vectors)
            return
        from ctxledger.warehouse.evidence_api import StoredVectors

        # One read-only connection for all of this instance's batches
        # (attaching the catalog costs ~0.1-0.3 s), opened on the first one.
        config = self.config
        self._stored = StoredVectors(
            config.warehouse, self.model, config.catalog, config.data_path
        )

    def finish_bundle(self):
        # Closed at the end of each bundle too, not only in ``teardown`` (which
        # Beam may call late or never): a held read-only attach of a DuckDB
        # catalog file would block the run's own commit.
        self._stored.close()

    def teardown(self):
        if self._stored is not None:
            self._stored.close()

    def process(self, batch):
        known = self._stored([key for key, _ in batch])
        for key, drafts in batch:
            vector = known.get(key)
            if vector is None:
                yield pvalue.TaggedOutput("to_embed", (tuple(drafts), drafts[0].text))
                continue
            self.reused.inc(len(drafts))
            for draft in drafts:
                yield draft.complete(vector, self.model, reused=True)


def _failed_embeddings(config: JobConfig, batch, exc: Exception):
    """One text-free dead letter per chunk of a batch that could not be embedded."""
    run = _run_info(config)
    for drafts, _text in batch:
        for draft in drafts:
            fields = draft.fields
            yield pvalue.TaggedOutput(
                DEAD_LETTER,
                evidence_dead_letter(
                    STAGE_EMBED,
                    fields["tenant_id"],
                    fields["doc_id"],
                    fields["chunk_id"],
                    f"chunk:{fields['ordinal']}",
                    "embedding_failed",
                    f"embedding raised {type(exc).__name__}",
                    run,
                ),
            )


def pending_chunks(element, model: str):
    """``(drafts, text)`` -> the drafts as ``EvidenceChunk`` s without a vector
    (deferred embedding; ``embed_model`` names the model that will fill it)."""
    drafts, _text = element
    for draft in drafts:
        yield EvidenceChunk(
            **draft.fields, embedding=None, embed_model=model, embedding_reused=False
        )


@timed("evidence_embed")
class DeferEmbeddingFn(beam.DoFn):
    """``pending_chunks`` as a timed step: in deferred mode it is the stage's
    only step when nothing can be reused (no lookups), and the run's
    ``stage_timings`` still list the stage."""

    def __init__(self, config: JobConfig, model: str):
        self.config = config
        self.model = model

    def process(self, element):
        yield from pending_chunks(element, self.model)


#: Keys per ``LookupEmbeddingsFn`` batch: one warehouse query per batch, so
#: a fixed large batch (adaptive batching started at 1 and doubled: eleven
#: queries per worker for section A's 1,769 chunks, two now).
LOOKUP_BATCH = 512


class EmbedChunks(beam.PTransform):
    """``ChunkDraft`` s -> ``EvidenceChunk`` s (reused or newly embedded) + dead
    letters (none in deferred mode, which embeds nothing); each distinct
    ``(tenant, text)`` is embedded at most once. ``reuse=False`` (the warehouse
    holds no vector of the model: ``has_stored_vectors``) skips the lookups."""

    def __init__(self, config: JobConfig, policy, reuse: bool | str = True):
        super().__init__()
        self.config = config
        self.settings = policy.evidence.embedding
        self.reuse = reuse  # a str: the exported vectors file to look up in

    def expand(self, drafts):
        model = self.settings.model
        grouped = (
            drafts
            | "KeyByText" >> beam.Map(lambda d: (d.embed_key, d))
            | "GroupByText" >> beam.GroupByKey()
            | "SortDrafts"
            >> beam.MapTuple(
                lambda key, ds: (key, sorted(ds, key=lambda d: d.fields["chunk_id"]))
            )
        )
        if self.reuse:
            looked_up = (
                grouped
                | "BatchLookups"
                >> beam.BatchElements(
                    min_batch_size=LOOKUP_BATCH, max_batch_size=LOOKUP_BATCH
                )
                | "LookupEmbeddings"
                >> beam.ParDo(
                    LookupEmbeddingsFn(
                        self.config,
                        model,
                        self.reuse if isinstance(self.reuse, str) else None,
                    )
                ).with_outputs("to_embed", main="reused")
            )
            reused, to_embed = [looked_up.reused], looked_up.to_embed
        else:
            reused = []
            to_embed = grouped | "NothingToReuse" >> beam.MapTuple(
                lambda _key, drafts: (tuple(drafts), drafts[0].text)
            )
        if self.settings.mode == "deferred":
            # No model in this run: the chunks are committed without a vector
            # (BM25 finds them at once); ``ctxledger embed`` fills them later.
            pending = to_embed | "DeferEmbedding" >> beam.ParDo(
                DeferEmbeddingFn(self.config, model)
            )
            chunks = [*reused, pending] | "FlattenChunks" >> beam.Flatten()
            return {"evidence_chunks": chunks}  # nothing embedded: no failures
        embedded = (
            to_embed
            | "BatchTexts"
            >> beam.BatchElements(min_batch_size=CALL_TEXTS, max_batch_size=CALL_TEXTS)
            | "EmbedTexts"
            >> beam.ParDo(EmbedTextsFn(self.config, self.settings)).with_outputs(
                DEAD_LETTER, main="chunks"
            )
        )
        chunks = [*reused, embedded.chunks] | "FlattenChunks" >> beam.Flatten()
        return {"evidence_chunks": chunks, DEAD_LETTER: embedded[DEAD_LETTER]}


def _sightings(group: SessionGroup, metadata_key: str):
    """``((tenant, artifact id), (time, tool name, subject))`` for each message
    of a session that carried a tool output. The subject is the session's
    (``subject_for``; the smallest when its rows disagree); a session whose
    row is missing gets its own id's subject, never a shared one."""
    subjects = sorted(
        subject_for(s.session_id, s.source_file, s.metadata, metadata_key)
        for s in group.sessions
    )
    subject = subjects[0] if subjects else subject_for(group.session_id, "", None)
    for message in group.messages:
        if message.artifact_ref:
            yield (
                (message.tenant_id, message.artifact_ref),
                (message.created_at, message.name, subject),
            )


class ChunkEvidence(beam.PTransform):
    """``{"documents": DocItem s, "artifacts": Artifact s, "sessions":
    SessionGroup s}`` -> ``{"document_files", "documents", "evidence_chunks",
    "dead_letter"}``. A tool output's sightings (time, tool, subject) come
    from the session groups' messages."""

    def __init__(self, config: JobConfig, policy, key: bytes, reuse: bool | str = True):
        super().__init__()
        self.config = config
        self.policy = policy
        self.key = key
        self.reuse = reuse

    def expand(self, inputs):
        # Without a "documents" input (a run with no new document files) the
        # parse step is left out, and so is its "document_files" output.
        parsed = None
        if inputs.get("documents") is not None:
            parsed = inputs["documents"] | "ParseDocuments" >> beam.ParDo(
                ParseDocumentFn(self.config, self.policy, self.key)
            ).with_outputs(DEAD_LETTER, "document_files", "documents", main="chunks")
        artifacts = inputs["artifacts"] | "KeyArtifacts" >> beam.Map(
            lambda a: ((a.tenant_id, a.artifact_id), a)
        )
        seen = inputs["sessions"] | "ArtifactSightings" >> beam.FlatMap(
            _sightings, self.policy.memory.subject_metadata_key
        )
        chunked = (
            {"artifacts": artifacts, "seen": seen}
            | "JoinArtifactSightings" >> beam.CoGroupByKey()
            | "ChunkArtifacts"
            >> beam.ParDo(ChunkArtifactFn(self.config, self.policy)).with_outputs(
                DEAD_LETTER, "documents", main="chunks"
            )
        )
        parts = [chunked] if parsed is None else [parsed, chunked]
        drafts = [p.chunks for p in parts] | "FlattenDrafts" >> beam.Flatten()
        embedded = drafts | "EmbedChunks" >> EmbedChunks(
            self.config, self.policy, self.reuse
        )
        dead = [p[DEAD_LETTER] for p in parts]
        if embedded.get(DEAD_LETTER) is not None:
            dead.append(embedded[DEAD_LETTER])
        out = {} if parsed is None else {"document_files": parsed.document_files}
        return {
            **out,
            "documents": [p.documents for p in parts]
            | "FlattenDocuments" >> beam.Flatten(),
            "evidence_chunks": embedded["evidence_chunks"],
            DEAD_LETTER: dead | "FlattenEvidenceDeadLetters" >> beam.Flatten(),
        }


def evidence_branch(
    redacted, config: JobConfig, policy, pipeline, lake=None
) -> dict[str, Any]:
    """The nightly graph's evidence branch (registered in ``pipelines.graph``).

    Documents come from ``config.docs`` (files the warehouse has not processed);
    tool artifacts are this run's ``artifacts``. Whether any vector of the
    model is stored (else no lookups) is read from ``lake`` (or a warehouse
    opened for it).
    """
    from ctxledger.pipelines.evidence.landing import discover_documents
    from ctxledger.pipelines.evidence.stored import vectors_path
    from ctxledger.pipelines.ingest.landing import KnownFiles, new_items
    from ctxledger.pipelines.redact.keys import load_key
    from ctxledger.warehouse.evidence_api import (
        export_stored_vectors,
        has_stored_vectors,
        processed_document_files,
    )

    items = []
    with config.reading(lake) as wh:
        if config.docs:
            found = discover_documents(
                config.docs, config.default_tenant, policy.evidence.documents.suffixes
            )
            known = KnownFiles.from_rows(
                processed_document_files(config.warehouse, wh=wh)
            )
            items = new_items(found.items, known)
        reuse: bool | str = has_stored_vectors(wh, policy.evidence.embedding.model)
        if reuse:
            # the lookups read an export made here, on the launcher, not the
            # catalog from inside a DoFn (pipelines.evidence.stored)
            reuse = vectors_path(config.staging_dir)
            export_stored_vectors(wh, policy.evidence.embedding.model, reuse)
    key = load_key(Path(config.key_file) if config.key_file else None)
    inputs = {"artifacts": redacted.artifacts, "sessions": redacted.grouped}
    if items:  # no document files: no parse step (``ChunkEvidence``)
        inputs["documents"] = pipeline | "ListDocumentFiles" >> beam.Create(
            items, reshuffle=False
        )
    out = inputs | "ChunkEvidence" >> ChunkEvidence(config, policy, key, reuse)
    return {
        **({"document_files": out["document_files"]} if items else {}),
        "documents": out["documents"],
        "evidence_chunks": out["evidence_chunks"],
        "dead_letters": out[DEAD_LETTER],
    }
