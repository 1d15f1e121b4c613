"""Beam wrapper of the evidence stage: ``ChunkEvidence``.

Inputs: document landing items (``DocItem``), the run's redacted ``artifacts`` and
``messages``. Steps:

1. ``ParseDocuments``: read, redact (``Redactor`` loads in ``setup()``) and chunk
   each document file; a tombstone becomes a deleted version with no chunks.
2. ``ChunkArtifacts``: each distinct tool output, with the time and tool name of
   the first message that carried it, chunked as kind ``tool_artifact``.
3. ``EmbedChunks``: chunks are grouped by ``(tenant, content hash)``; a group
   whose vector the warehouse already holds reuses it (``LookupEmbeddingsFn``,
   batched reads), the rest go through ``RunInference`` with
   ``SentenceTransformerHandler`` (model loaded once per worker, batched), so
   every distinct text is embedded at most once, ever.

Outputs (``dict``): ``document_files``, ``documents``, ``evidence_chunks`` and
``dead_letter``. ``evidence_branch`` plugs the stage into the nightly graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import (
    KeyedModelHandler,
    ModelHandler,
    PredictionResult,
    RunInference,
)

from pipelines.config import JobConfig
from pipelines.evidence.documents import (
    STAGE_ARTIFACTS,
    STAGE_EMBED,
    RunInfo,
    as_utc,
    build_artifact,
    build_document,
    evidence_dead_letter,
)
from pipelines.evidence.embed import Embedder
from pipelines.timing import clock_of, timed
from schemas.evidence import EmbeddingSettings

DEAD_LETTER = "dead_letter"
OUTPUTS = ("document_files", "documents", "evidence_chunks")


def _run_info(config: JobConfig) -> RunInfo:
    return RunInfo(config.run_id, config.policy_version, config.code_version)


class SentenceTransformerHandler(ModelHandler[str, np.ndarray, Any]):
    """``RunInference`` handler for sentence-transformers (CPU, offline model).

    ``load_model`` runs once per worker (Beam shares the model between the
    threads of a process) and hands over an ``Embedder`` whose weights load on
    its first batch, so a run without new texts never pays for the model;
    batches are sized by the policy. With ``staging_dir`` each batch's time
    counts towards the run's ``evidence_embed`` timing (``pipelines.timing``).
    """

    def __init__(self, settings: EmbeddingSettings, staging_dir: str | None = None):
        super().__init__()
        self.settings = settings
        self.staging_dir = staging_dir

    def load_model(self) -> Any:
        return Embedder(self.settings)

    def run_inference(
        self,
        batch: Sequence[str],
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[PredictionResult]:
        clock = clock_of(self, STAGE_EMBED, self.staging_dir)
        vectors = clock.measure(lambda: model.encode(list(batch)))
        clock.flush()  # no end-of-bundle hook here; batches are big enough
        return [
            PredictionResult(example, vector)
            for example, vector in zip(batch, vectors, strict=True)
        ]

    def batch_elements_kwargs(self) -> dict[str, int]:
        return {
            "min_batch_size": self.settings.min_batch_size,
            "max_batch_size": self.settings.max_batch_size,
        }

    def get_num_bytes(self, batch: Sequence[str]) -> int:
        return sum(len(text.encode("utf-8")) for text in batch)

    def get_metrics_namespace(self) -> str:
        return "evidence_embed"


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
        from pipelines.redact.engine import Redactor

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
    """Chunk one distinct tool output; a failure is a dead letter."""

    def __init__(self, config: JobConfig, policy):
        self.config = config
        self.policy = policy

    def process(self, element):
        (tenant_id, artifact_id), grouped = element
        artifacts = list(grouped["artifacts"])
        # no artifact: a message pointing at an artifact of an earlier run
        for artifact in artifacts[:1]:
            yield from self._chunk(tenant_id, artifact_id, artifact, grouped["seen"])

    def _chunk(self, tenant_id, artifact_id, artifact, seen):
        seen = [s for s in seen if s is not None]
        observed = min((as_utc(t) for t, _ in seen if t is not None), default=None)
        names = sorted({n for _, n in seen if n})
        run = _run_info(self.config)
        try:
            built = build_artifact(
                artifact, self.policy, run, observed, names[0] if names else None
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
        else:
            yield pvalue.TaggedOutput("documents", built.version)
            yield from built.chunks


@timed("evidence_embed")
class LookupEmbeddingsFn(beam.DoFn):
    """Batches of ``(key, drafts)``: complete the drafts whose text the warehouse
    already embedded (same tenant, hash and model); pass the rest on."""

    def __init__(self, config: JobConfig, model: str):
        self.config = config
        self.model = model
        self.reused = Metrics.counter("evidence", "embeddings_reused")

    def process(self, batch):
        from warehouse.evidence_api import lookup_embeddings

        known = lookup_embeddings(
            self.config.warehouse,
            [key for key, _ in batch],
            self.model,
            catalog=self.config.catalog,
            data_path=self.config.data_path,
        )
        for key, drafts in batch:
            vector = known.get(key)
            if vector is None:
                yield pvalue.TaggedOutput("to_embed", (tuple(drafts), drafts[0].text))
                continue
            self.reused.inc(len(drafts))
            for draft in drafts:
                yield draft.complete(vector, self.model, reused=True)


class CompleteEmbeddedFn(beam.DoFn):
    """``(drafts, PredictionResult)`` -> the drafts' ``EvidenceChunk`` s."""

    def __init__(self, model: str):
        self.model = model
        self.embedded = Metrics.counter("evidence", "texts_embedded")

    def process(self, element):
        drafts, result = element
        self.embedded.inc()
        vector = result.inference
        for draft in drafts:
            yield draft.complete(vector, self.model, reused=False)


class FailedEmbeddingFn(beam.DoFn):
    """A batch RunInference could not embed -> one dead letter per chunk."""

    def __init__(self, config: JobConfig):
        self.config = config

    def process(self, element):
        batch, exc = element
        run = _run_info(self.config)
        for drafts, _text in batch:
            for draft in drafts:
                fields = draft.fields
                yield evidence_dead_letter(
                    STAGE_EMBED,
                    fields["tenant_id"],
                    fields["doc_id"],
                    fields["chunk_id"],
                    f"chunk:{fields['ordinal']}",
                    "embedding_failed",
                    f"embedding raised {type(exc).__name__}",
                    run,
                )


class EmbedChunks(beam.PTransform):
    """``ChunkDraft`` s -> ``EvidenceChunk`` s (reused or newly embedded) + dead
    letters; each distinct ``(tenant, text)`` is embedded at most once."""

    def __init__(self, config: JobConfig, policy):
        super().__init__()
        self.config = config
        self.settings = policy.evidence.embedding

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
        looked_up = (
            grouped
            | "BatchLookups" >> beam.BatchElements(min_batch_size=1, max_batch_size=512)
            | "LookupEmbeddings"
            >> beam.ParDo(LookupEmbeddingsFn(self.config, model)).with_outputs(
                "to_embed", main="reused"
            )
        )
        handler = KeyedModelHandler(
            SentenceTransformerHandler(self.settings, self.config.staging_dir)
        )
        embedded, failed = (
            looked_up.to_embed
            | "RunInference" >> RunInference(handler).with_exception_handling()
        )
        fresh = embedded | "CompleteEmbedded" >> beam.ParDo(CompleteEmbeddedFn(model))
        dead = failed.failed_inferences | "FailedEmbeddings" >> beam.ParDo(
            FailedEmbeddingFn(self.config)
        )
        chunks = (looked_up.reused, fresh) | "FlattenChunks" >> beam.Flatten()
        return {"evidence_chunks": chunks, DEAD_LETTER: dead}


class ChunkEvidence(beam.PTransform):
    """``{"documents": DocItem s, "artifacts": Artifact s, "messages": Message s}``
    -> ``{"document_files", "documents", "evidence_chunks", "dead_letter"}``."""

    def __init__(self, config: JobConfig, policy, key: bytes):
        super().__init__()
        self.config = config
        self.policy = policy
        self.key = key

    def expand(self, inputs):
        parsed = inputs["documents"] | "ParseDocuments" >> beam.ParDo(
            ParseDocumentFn(self.config, self.policy, self.key)
        ).with_outputs(DEAD_LETTER, "document_files", "documents", main="chunks")
        artifacts = inputs["artifacts"] | "KeyArtifacts" >> beam.Map(
            lambda a: ((a.tenant_id, a.artifact_id), a)
        )
        seen = inputs["messages"] | "ArtifactSightings" >> beam.FlatMap(
            lambda m: (
                [((m.tenant_id, m.artifact_ref), (m.created_at, m.name))]
                if m.artifact_ref
                else []
            )
        )
        chunked = (
            {"artifacts": artifacts, "seen": seen}
            | "JoinArtifactSightings" >> beam.CoGroupByKey()
            | "ChunkArtifacts"
            >> beam.ParDo(ChunkArtifactFn(self.config, self.policy)).with_outputs(
                DEAD_LETTER, "documents", main="chunks"
            )
        )
        drafts = (parsed.chunks, chunked.chunks) | "FlattenDrafts" >> beam.Flatten()
        embedded = drafts | "EmbedChunks" >> EmbedChunks(self.config, self.policy)
        return {
            "document_files": parsed.document_files,
            "documents": (parsed.documents, chunked.documents)
            | "FlattenDocuments" >> beam.Flatten(),
            "evidence_chunks": embedded["evidence_chunks"],
            DEAD_LETTER: (
                parsed[DEAD_LETTER],
                chunked[DEAD_LETTER],
                embedded[DEAD_LETTER],
            )
            | "FlattenEvidenceDeadLetters" >> beam.Flatten(),
        }


def evidence_branch(redacted, config: JobConfig, policy, pipeline) -> dict[str, Any]:
    """The nightly graph's evidence branch (registered in ``pipelines.graph``).

    Documents come from ``config.docs`` (files the warehouse has not processed);
    tool artifacts are this run's ``artifacts``.
    """
    from pipelines.evidence.landing import discover_documents
    from pipelines.redact.keys import load_key
    from warehouse.evidence_api import processed_document_hashes

    items = []
    if config.docs:
        found = discover_documents(
            config.docs, config.default_tenant, policy.evidence.documents.suffixes
        )
        known = processed_document_hashes(
            config.warehouse, catalog=config.catalog, data_path=config.data_path
        )
        unique: dict[str, Any] = {}
        for item in found.items:
            if item.file_hash not in known:
                unique.setdefault(item.file_hash, item)
        items = list(unique.values())
    key = load_key(Path(config.key_file) if config.key_file else None)
    docs = pipeline | "ListDocumentFiles" >> beam.Create(items, reshuffle=False)
    out = {
        "documents": docs,
        "artifacts": redacted.artifacts,
        "messages": redacted.messages,
    } | "ChunkEvidence" >> ChunkEvidence(config, policy, key)
    return {
        "document_files": out["document_files"],
        "documents": out["documents"],
        "evidence_chunks": out["evidence_chunks"],
        "dead_letters": out[DEAD_LETTER],
    }
