"""Full-corpus acceptance: the PagerDuty and Prometheus runbook version histories
(../shared/corpora, Apache-2.0) ingest as versioned documents; re-ingesting the
unchanged history needs no new embedding; one new version needs only its changed
chunks embedded. Skipped when the corpora are absent.

The documents go through the same landing, metadata, redaction and chunking code
as the nightly job (pure functions, no Beam); the redactor runs with the pattern
and secret detectors only (no NER) to keep the suite fast. Which chunks would be
embedded is decided exactly as the embed step does: by (tenant, content hash)
against the hashes already stored. The pipeline path itself is covered by
``test_evidence_nightly.py``; ``make bench`` runs the full corpora through it.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

from ctxledger.pipelines.evidence.documents import RunInfo, build_document
from ctxledger.pipelines.evidence.landing import discover_documents
from ctxledger.pipelines.redact.engine import Redactor
from ctxledger.schemas.policy import load_policy

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CORPORA = Path(os.environ.get("CTXLEDGER_CORPORA", ROOT.parent / "shared" / "corpora"))
SETS = (
    "pagerduty-incident-response-docs-versions",
    "prometheus-operator-runbooks-versions",
)
KEY = bytes.fromhex("00112233445566778899aabbccddeeff")
NER_TYPES = {"PERSON", "LOCATION", "NRP", "ORGANIZATION", "DATE_TIME"}

if not all((CORPORA / s / "versions.json").exists() for s in SETS):
    pytest.skip("versioned-docs corpora not present", allow_module_level=True)


def _policy():
    policy = load_policy(None)
    entities = tuple(e for e in policy.pii.entities if e.type not in NER_TYPES)
    return policy.model_copy(
        update={"pii": policy.pii.model_copy(update={"entities": entities})}
    )


@pytest.fixture(scope="module")
def corpus():
    policy = _policy()
    redactor = Redactor(policy, KEY)
    redactor.setup()
    run = RunInfo("run_corpus", policy.policy_version, "test")
    built = {}
    for name in SETS:
        for item in discover_documents(CORPORA / name, "default").items:
            built[item.rel_path, name] = build_document(
                item,
                policy,
                lambda fields, t=item.tenant_id: redactor.redact_batch(fields, t),
                run,
            )
    return policy, redactor, run, built


def test_every_version_of_every_document_ingests(corpus):
    _, _, _, built = corpus
    assert all(not b.dead_letters for b in built.values())
    versions = [b.version for b in built.values()]
    for name in SETS:
        manifest = json.loads((CORPORA / name / "versions.json").read_text())
        for document in manifest:
            ours = sorted(
                (v for v in versions if v.doc_id == document["document"]),
                key=lambda v: (v.effective_from, v.version_sort),
            )
            expected = [
                (f"v{x['version']:02d}", datetime.fromisoformat(x["date"]))
                for x in document["versions"]
            ]
            # ordered by effective time, each with the manifest's exact time
            assert [(v.version, v.effective_from) for v in ours] == expected
    assert len(versions) == 105 + 32


def test_chunks_are_exact_cited_spans(corpus):
    policy, _, _, built = corpus
    limit = policy.evidence.chunking.max_tokens
    for b in built.values():
        text = b.version.text
        assert b.version.chunk_count == len(b.chunks)
        for draft in b.chunks:
            f = draft.fields
            assert text[f["char_start"] : f["char_end"]] == f["text"]
            assert 0 < f["token_count"] <= limit
    # no fragment stands alone: the old chunker left a bare trailing
    # "## Additional Reading" (3 tokens) as a chunk that pack then selected
    tiny = [
        d.fields["text"]
        for b in built.values()
        for d in b.chunks
        if d.fields["token_count"] < 8
    ]
    assert tiny == []


def test_reingesting_unchanged_history_embeds_nothing(corpus):
    policy, redactor, run, built = corpus
    known = {d.embed_key for b in built.values() for d in b.chunks}
    again = {}
    for name in SETS:
        for item in discover_documents(CORPORA / name, "default").items:
            again[item.rel_path, name] = build_document(
                item,
                policy,
                lambda fields, t=item.tenant_id: redactor.redact_batch(fields, t),
                run,
            )
    new = {d.embed_key for b in again.values() for d in b.chunks} - known
    assert new == set()
    assert [d.fields["chunk_id"] for b in again.values() for d in b.chunks] == [
        d.fields["chunk_id"] for b in built.values() for d in b.chunks
    ]


def test_one_new_version_embeds_only_its_changed_chunks(corpus, tmp_path):
    policy, redactor, run, built = corpus
    known = {d.embed_key for b in built.values() for d in b.chunks}
    by_doc = defaultdict(list)
    for b in built.values():
        by_doc[b.version.doc_id].append(b)
    latest = max(by_doc["incident_commander"], key=lambda b: b.version.effective_from)
    source = CORPORA / SETS[0] / latest.version.source_path
    text = source.read_text()
    marker = "## Prerequisites"
    assert marker in text
    edited = text.replace(
        marker, marker + "\n\nShadow two incidents before your first shift.", 1
    )
    folder = tmp_path / "incident_commander"
    folder.mkdir()
    (folder / "v22_2025-06-01_00000000.md").write_text(edited)
    (item,) = discover_documents(tmp_path, "default").items
    new_version = build_document(
        item, policy, lambda fields: redactor.redact_batch(fields, "default"), run
    )
    assert new_version.version.doc_id == "incident_commander"
    to_embed = {d.embed_key for d in new_version.chunks} - known
    assert len(to_embed) == 1  # only the edited section's chunk
    assert len(new_version.chunks) > 20
