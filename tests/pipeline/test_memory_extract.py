"""TestPipeline test of ``ExtractMemories``: main outputs (memories, rejections,
consent, extraction counts, input files) and the dead-letter output."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.grouped import group_records
from ctxledger.pipelines.memory.inputs import discover_inputs
from ctxledger.pipelines.memory.transforms import ExtractMemories
from ctxledger.schemas import Message, Session
from ctxledger.schemas.memory import ConsentRecord
from ctxledger.schemas.policy import load_policy

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"
KEY = bytes.fromhex("00112233445566778899aabbccddeeff")
NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _records():
    lines = [json.loads(x) for x in PLANTED.read_text().splitlines() if x.strip()]
    session = Session(
        session_id="ses_p",
        tenant_id="acme",
        source_format="canonical",
        source_file="tenant=acme/subject=priya/forty_turns.jsonl",
        source_hash="h1",
    )
    stranger = Session(
        session_id="ses_s",
        tenant_id="acme",
        source_format="canonical",
        source_file="tenant=acme/subject=nobody/chat.jsonl",
        source_hash="h2",
    )

    def message(session_id, turn, role, content, created):
        return Message(
            message_id=f"msg_{session_id}_{turn}",
            session_id=session_id,
            tenant_id="acme",
            turn=turn,
            role=role,
            content=content,
            content_hash="h",
            created_at=datetime.fromisoformat(created),
            token_count=1,
            policy_version="p",
            source_ref=f"f#line:{turn + 1}",
        )

    messages = [
        message("ses_p", x["turn"], x["role"], x["content"], x["created_at"])
        for x in lines
        if x["role"] != "tool"
    ]
    messages.append(
        message("ses_s", 0, "user", "I prefer short answers.", "2026-03-14T10:00:00Z")
    )
    orphan = message("ses_gone", 0, "user", "I prefer tea.", "2026-03-14T10:00:00Z")
    return [session, stranger], messages + [orphan]


def test_extract_memories_outputs_and_dead_letters(tmp_path):
    policy = load_policy(None)
    consent_dir = tmp_path / "consent"
    consent_dir.mkdir()
    (consent_dir / "events.jsonl").write_text(
        json.dumps(
            {"event": "grant", "tenant_id": "acme", "subject_id": "u-1",
             "purpose": "support", "basis": "consent", "at": "2026-01-01T00:00:00Z"}
        ) + "\n"
        + json.dumps(
            {"event": "grant", "tenant_id": "acme", "subject_id": "u-1",
             "purpose": "marketing", "basis": "consent", "at": "2026-01-01T00:00:00Z"}
        ) + "\n"
    )  # fmt: skip
    system = tmp_path / "system.jsonl"
    system.write_text(
        json.dumps(
            {"subject_id": "u-1", "purpose": "support", "key": "api_key_created",
             "text": "Key created 3 days ago", "observed_at": "2026-11-27T09:00:00Z"}
        ) + "\n{broken\n"
    )  # fmt: skip
    inputs = discover_inputs(consent_dir, "consent", "acme") + discover_inputs(
        system, "system_records", "acme"
    )
    stored = ConsentRecord(
        consent_id="cns_stored",
        tenant_id="acme",
        subject_id="priya",
        purpose="support",
        basis="contract",
        event="grant",
        effective_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    config = JobConfig(
        job="test",
        run_id="run_mem",
        landing=str(tmp_path / "landing"),
        warehouse=str(tmp_path / "wh"),
        policy_version=policy.policy_version,
        code_version="test",
    )
    sessions, messages = _records()
    with TestPipeline() as p:
        out = (
            p
            | "Sessions" >> beam.Create(group_records(sessions, messages))
            | ExtractMemories(
                config, policy, consent=[stored], inputs=inputs, now=NOW, key=KEY
            )
        )
        assert_that(
            out["memories"]
            | "Mem"
            >> beam.Map(
                lambda m: (
                    m.subject_id,
                    m.provenance.turn,
                    m.slot,
                    m.source,
                    m.superseded_by is not None,
                )
            )
            | "Pick" >> beam.Filter(lambda r: r[2] is not None),
            equal_to(
                [
                    ("priya", 2, "employee_number", "user_stated", True),
                    ("priya", 19, "affected_shard", "user_stated", False),
                    ("priya", 30, "employee_number", "user_stated", False),
                    ("priya", 1, "name", "user_stated", False),
                    ("priya", 32, "deploy", "user_stated", False),
                    ("u-1", None, "api_key_created", "system_record", False),
                ]
            ),
            label="CheckMemories",
        )
        # every stored memory carries its vector, computed once here with the
        # model queries use (``pack`` never embeds it per request)
        assert_that(
            out["memories"]
            | "Vectors" >> beam.Map(lambda m: (m.embed_model, len(m.embedding or [])))
            | "DistinctVectors" >> beam.Distinct(),
            equal_to([(policy.evidence.embedding.model, 384)]),
            label="CheckVectors",
        )
        assert_that(
            out["memory_rejections"] | beam.Map(lambda r: (r.subject_id, r.reason)),
            equal_to([("nobody", "no_basis")]),
            label="CheckRejections",
        )
        assert_that(
            out["consent"] | beam.Map(lambda c: (c.subject_id, c.purpose, c.event)),
            equal_to([("u-1", "support", "grant")]),
            label="CheckConsent",
        )
        assert_that(
            out["memory_extractions"]
            | beam.Map(lambda e: (e.subject_id, e.messages_in, e.messages_scanned)),
            equal_to([("priya", 37, 37), ("nobody", 1, 1)]),
            label="CheckExtractions",
        )
        assert_that(
            out["memory_inputs"]
            | beam.Map(lambda f: (f.kind, f.records_in, f.records_out, f.dead)),
            equal_to([("consent", 2, 1, 1), ("system_records", 2, 1, 1)]),
            label="CheckInputFiles",
        )
        assert_that(
            out["dead_letter"] | beam.Map(lambda d: (d.stage, d.reason_code)),
            equal_to(
                [
                    ("memory_extract", "orphan_message"),
                    ("memory_inputs", "unknown_purpose"),
                    ("memory_inputs", "malformed_json"),
                ]
            ),
            label="CheckDeadLetters",
        )
