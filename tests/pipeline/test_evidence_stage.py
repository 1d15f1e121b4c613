"""TestPipeline tests of ``ChunkEvidence``: main outputs and dead letters (tool
outputs scoped to the subject of their session, residual secrets refused),
embedding reuse against a real DuckLake warehouse, embedding failures as dead
letters."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.evidence.documents import RunInfo, build_document, text_hash
from ctxledger.pipelines.evidence.embed import Embedder
from ctxledger.pipelines.evidence.landing import discover_documents
from ctxledger.pipelines.evidence.transforms import ChunkEvidence
from ctxledger.pipelines.ingest.grouped import group_records
from ctxledger.schemas import Artifact, Message, Session
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.evidence import EvidenceChunk
from ctxledger.schemas.policy import load_policy
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

KEY = bytes.fromhex("00112233445566778899aabbccddeeff")
POLICY = load_policy(None)
RUNBOOK = """# Disk full

## Meaning

The volume of the database is almost full.

## Mitigation

Grow the volume, then page the owner at dba@example.org.
"""


def _config(tmp_path) -> JobConfig:
    return JobConfig(
        job="test",
        run_id="run_ev",
        landing=str(tmp_path / "landing"),
        warehouse=str(tmp_path / "wh"),
        policy_version="test+0",
        code_version="test",
        docs=str(tmp_path / "docs"),
    )


def _docs(tmp_path, extra: dict[str, bytes] | None = None):
    docs = tmp_path / "docs" / "tenant=acme"
    docs.mkdir(parents=True)
    (docs / "disk.md").write_text(RUNBOOK)
    (docs / "disk.md.meta.json").write_text(
        json.dumps({"doc_id": "disk-full", "acl": ["sre"], "version": "v1",
                    "effective_date": "2024-01-01"})
    )  # fmt: skip
    for name, data in (extra or {}).items():
        (docs / name).write_bytes(data)
    return discover_documents(tmp_path / "docs", "default").items


def _artifact_inputs():
    artifact = Artifact(
        artifact_id="art_1",
        tenant_id="acme",
        size_bytes=40,
        content="kubectl get pods\nweb-1 Running\nweb-2 Pending",
        policy_version="p",
    )
    # "redacted" already, yet a secret rule still matches: never stored
    leaky = Artifact(
        artifact_id="art_secret",
        tenant_id="acme",
        size_bytes=40,
        content="db login ok\npassword: hunter2xyz",
        policy_version="p",
    )

    def message(message_id, session_id, artifact_ref):
        return Message(
            message_id=message_id,
            session_id=session_id,
            tenant_id="acme",
            turn=2,
            role="tool",
            name="kubectl",
            content="[tool_result]",
            content_hash="h",
            token_count=3,
            artifact_ref=artifact_ref,
            policy_version="p",
            source_ref="f#1",
            created_at=datetime(2025, 3, 1, 9, 0, tzinfo=UTC),
        )

    sessions = [
        Session(session_id="s1", tenant_id="acme", source_format="canonical",
                source_file="tenant=acme/a.jsonl", source_hash="x",
                metadata='{"subject_id": "cust-1"}'),
        Session(session_id="s2", tenant_id="acme", source_format="canonical",
                source_file="tenant=acme/subject=cust-2/b.jsonl", source_hash="y"),
    ]  # fmt: skip
    messages = [
        message("m1", "s1", "art_1"),
        message("m2", "s2", "art_1"),  # the same output in another subject's session
        message("m3", "s1", "art_secret"),
    ]
    # the same artifact seen twice
    return [artifact, artifact, leaky], messages, sessions


def test_chunk_evidence_outputs_and_dead_letters(tmp_path):
    items = _docs(
        tmp_path,
        {
            "binary.md": b"\xff\xfe\x00 not text",
            "bad.md": b"---\nacl: [sre\n---\nbody",
        },
    )
    artifacts, messages, sessions = _artifact_inputs()
    config = _config(tmp_path)
    with TestPipeline() as p:
        out = {
            "documents": p | "Docs" >> beam.Create(items),
            "artifacts": p | "Artifacts" >> beam.Create(artifacts),
            "sessions": p
            | "Sessions" >> beam.Create(group_records(sessions, messages)),
        } | ChunkEvidence(config, POLICY, KEY)
        assert_that(
            out["documents"]
            | beam.Map(
                lambda v: (v.doc_id, v.kind, v.chunk_count, v.acl, v.subject_id)
            ),
            equal_to(
                [
                    ("disk-full", "document", 2, ["sre"], None),
                    # one version per subject whose session carried the output
                    ("art_1", "tool_artifact", 1, ["operators"], "cust-1"),
                    ("art_1", "tool_artifact", 1, ["operators"], "cust-2"),
                    ("art_secret", "tool_artifact", 1, ["operators"], "cust-1"),
                ]
            ),
            label="CheckDocuments",
        )
        assert_that(
            out["evidence_chunks"]
            | beam.Map(
                lambda c: (
                    c.doc_id,
                    c.subject_id,
                    tuple(c.section_path),
                    len(c.embedding),
                    "example.org" in c.text,
                )
            ),
            equal_to(
                [
                    ("disk-full", None, ("Disk full", "Meaning"), 384, False),
                    ("disk-full", None, ("Disk full", "Mitigation"), 384, False),
                    ("art_1", "cust-1", ("kubectl",), 384, False),
                    ("art_1", "cust-2", ("kubectl",), 384, False),
                ]
            ),
            label="CheckChunks",
        )
        assert_that(
            out["dead_letter"]
            | beam.Map(lambda d: (d.stage, d.reason_code, "hunter2" in d.message)),
            equal_to(
                [
                    ("evidence_docs", "not_utf8", False),
                    ("evidence_docs", "bad_metadata", False),
                    ("evidence_embed", "secret_in_text", False),
                ]
            ),
            label="CheckDeadLetters",
        )
        assert_that(
            out["document_files"] | beam.Map(lambda f: (f.versions_out, f.dead)),
            equal_to([(1, 0), (0, 1), (0, 1)]),
            label="CheckFiles",
        )


def test_known_texts_reuse_the_stored_vector(tmp_path):
    items = _docs(tmp_path)
    config = _config(tmp_path)
    policy = POLICY
    # what the pipeline will build, to plant the first chunk's text as known
    built = build_document(
        items[0],
        policy,
        lambda fields: [type("R", (), {"text": t, "findings": []}) for _, t in fields],
        RunInfo("run_old", "p", "t"),
    )
    meaning = next(d for d in built.chunks if "Meaning" in d.fields["section_path"])
    marker = [0.0] * 383 + [1.0]
    old = meaning.complete(marker, policy.evidence.embedding.model, reused=False)
    old = old.model_copy(update={"chunk_id": "chk_old", "doc_version_id": "dv_old"})
    with Warehouse.open(config.warehouse, create=True) as wh:
        wh.commit_staged(
            "seed",
            {},
            {"evidence_chunks": to_table(EvidenceChunk, [old.row()])},
            {"seed": True},
        )
    with TestPipeline() as p:
        out = {
            "documents": p | "Docs" >> beam.Create(items),
            "artifacts": p | "Artifacts" >> beam.Create([]),
            "sessions": p | "Sessions" >> beam.Create([]),
        } | ChunkEvidence(config, policy, KEY)
        assert_that(
            out["evidence_chunks"]
            | beam.Map(
                lambda c: (c.section_path[-1], c.embedding_reused, c.embedding[-1])
            ),
            _reuse_matcher(),
            label="CheckReuse",
        )
    assert old.content_hash == text_hash(meaning.text)


def _reuse_matcher():
    def check(actual):
        by_section = {a[0]: a for a in actual}
        assert by_section["Meaning"][1:] == (True, 1.0)
        assert by_section["Mitigation"][1] is False
        assert by_section["Mitigation"][2] != 1.0
        assert len(actual) == 2

    return check


def test_embedding_failures_become_dead_letters(tmp_path, monkeypatch):
    original = Embedder.encode

    def poisoned(self, texts, model=None):
        if any("POISON" in t for t in texts):
            raise RuntimeError("model exploded")
        return original(self, texts, model)

    monkeypatch.setattr(Embedder, "encode", poisoned)
    items = _docs(tmp_path, {"poison.md": b"# P\n\nPOISON text"})
    config = _config(tmp_path)
    with TestPipeline() as p:
        out = {
            "documents": p | "Docs" >> beam.Create(items),
            "artifacts": p | "Artifacts" >> beam.Create([]),
            "sessions": p | "Sessions" >> beam.Create([]),
        } | ChunkEvidence(config, POLICY, KEY)
        # one batch holds every text: all three chunks fail together, none is lost
        assert_that(
            out["dead_letter"] | beam.Map(lambda d: (d.stage, d.reason_code)),
            equal_to([("evidence_embed", "embedding_failed")] * 3),
            label="CheckDead",
        )
        assert_that(out["evidence_chunks"], equal_to([]), label="CheckNoChunks")


def test_a_failed_call_is_retried_in_parts_and_only_the_bad_part_is_lost(
    tmp_path, monkeypatch
):
    """Texts are embedded in large calls (``CALL_TEXTS``); when a call fails,
    its texts are embedded again in parts of ``max_batch_size``, so one text
    the model cannot embed costs only its own part."""
    original = Embedder.encode
    calls: list[int] = []

    def poisoned(self, texts, model=None):
        calls.append(len(texts))
        if any("POISON" in t for t in texts):
            raise RuntimeError("model exploded")
        return original(self, texts, model)

    monkeypatch.setattr(Embedder, "encode", poisoned)
    policy = POLICY.model_copy(
        update={
            "evidence": POLICY.evidence.model_copy(
                update={
                    "embedding": POLICY.evidence.embedding.model_copy(
                        update={"max_batch_size": 1}
                    )
                }
            )
        }
    )
    items = _docs(tmp_path, {"poison.md": b"# P\n\nPOISON text"})
    with TestPipeline() as p:
        out = {
            "documents": p | "Docs" >> beam.Create(items),
            "artifacts": p | "Artifacts" >> beam.Create([]),
            "sessions": p | "Sessions" >> beam.Create([]),
        } | ChunkEvidence(_config(tmp_path), policy, KEY)
        assert_that(
            out["dead_letter"] | beam.Map(lambda d: (d.stage, d.reason_code)),
            equal_to([("evidence_embed", "embedding_failed")]),
            label="CheckDead",
        )
        assert_that(
            out["evidence_chunks"] | beam.Map(lambda c: c.section_path[-1]),
            equal_to(["Meaning", "Mitigation"]),
            label="CheckEmbedded",
        )
    assert calls[0] == 3  # one call for the run's three texts, then one each
    assert sorted(calls[1:]) == [1, 1, 1]


def test_deferred_mode_commits_pending_chunks_without_a_model(tmp_path, monkeypatch):
    """``evidence.embedding.mode: deferred``: a text the warehouse already
    embedded still reuses its vector; the others come out with ``embedding``
    None (for ``ctxledger embed``), and the model is never called."""

    def no_model(self, texts, model=None):
        raise AssertionError("deferred mode must not embed")

    monkeypatch.setattr(Embedder, "encode", no_model)
    items = _docs(tmp_path)
    config = _config(tmp_path)
    data = POLICY.model_dump()
    data["evidence"]["embedding"]["mode"] = "deferred"
    policy = type(POLICY).model_validate(data)
    built = build_document(
        items[0],
        policy,
        lambda fields: [type("R", (), {"text": t, "findings": []}) for _, t in fields],
        RunInfo("run_old", "p", "t"),
    )
    meaning = next(d for d in built.chunks if "Meaning" in d.fields["section_path"])
    old = meaning.complete([0.0] * 383 + [1.0], policy.evidence.embedding.model, False)
    old = old.model_copy(update={"chunk_id": "chk_old", "doc_version_id": "dv_old"})
    with Warehouse.open(config.warehouse, create=True) as wh:
        wh.commit_staged(
            "seed",
            {},
            {"evidence_chunks": to_table(EvidenceChunk, [old.row()])},
            {"seed": True},
        )
    with TestPipeline() as p:
        out = {
            "documents": p | "Docs" >> beam.Create(items),
            "artifacts": p | "Artifacts" >> beam.Create([]),
            "sessions": p | "Sessions" >> beam.Create([]),
        } | ChunkEvidence(config, policy, KEY)
        assert_that(
            out["evidence_chunks"]
            | beam.Map(
                lambda c: (
                    c.section_path[-1],
                    c.embedding_reused,
                    None if c.embedding is None else c.embedding[-1],
                    c.embed_model,
                )
            ),
            equal_to(
                [
                    ("Meaning", True, 1.0, policy.evidence.embedding.model),
                    ("Mitigation", False, None, policy.evidence.embedding.model),
                ]
            ),
            label="CheckDeferred",
        )
        assert_that(out["dead_letter"], equal_to([]), label="CheckNoDead")


#: Chunks a pipeline of this test process emitted (the in-process runner runs
#: ``_keep_chunk`` here, on an unpickled copy: a closure's list would stay empty).
_CHUNKS: list = []


def _keep_chunk(chunk):
    _CHUNKS.append((chunk.chunk_id, chunk.embedding_reused, tuple(chunk.embedding)))


def test_no_stored_vector_of_the_model_skips_the_lookups(tmp_path, monkeypatch):
    """``has_stored_vectors`` is False on a fresh warehouse and for another
    model's vectors; ``reuse=False`` then embeds what the lookups would have
    found nothing for: the same chunks, and the lookup step never runs."""
    from ctxledger.pipelines.evidence.transforms import LookupEmbeddingsFn
    from ctxledger.warehouse.evidence_api import has_stored_vectors

    items = _docs(tmp_path)
    config = _config(tmp_path)
    model = POLICY.evidence.embedding.model
    with Warehouse.open(config.warehouse, create=True) as wh:
        assert has_stored_vectors(wh, model) is False
    built = build_document(
        items[0],
        POLICY,
        lambda fields: [type("R", (), {"text": t, "findings": []}) for _, t in fields],
        RunInfo("run_old", "p", "t"),
    )
    other = built.chunks[0].complete([0.5] * 384, "another-model", reused=False)
    with Warehouse.open(config.warehouse) as wh:
        wh.commit_staged(
            "seed",
            {},
            {"evidence_chunks": to_table(EvidenceChunk, [other.row()])},
            {"seed": True},
        )
        assert has_stored_vectors(wh, "another-model") is True
        assert has_stored_vectors(wh, model) is False

    def rows(reuse):
        _CHUNKS.clear()
        with TestPipeline() as p:
            out = {
                "documents": p | "Docs" >> beam.Create(items),
                "artifacts": p | "Artifacts" >> beam.Create([]),
                "sessions": p | "Sessions" >> beam.Create([]),
            } | ChunkEvidence(config, POLICY, KEY, reuse=reuse)
            _ = out["evidence_chunks"] | beam.Map(_keep_chunk)
        return sorted(_CHUNKS)

    looked_up = rows(True)

    def no_lookup(self, batch):
        raise AssertionError("reuse=False must not look vectors up")

    monkeypatch.setattr(LookupEmbeddingsFn, "process", no_lookup)
    assert rows(False) == looked_up
    assert len(looked_up) == 2 and not any(r[1] for r in looked_up)
