"""``BuildLedger`` in a TestPipeline: ledger entries, the trail and dead letters,
over the redact stage's per-session bundles grouped by ``GroupSessions``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.drafts import DraftSession, SourceFile
from ctxledger.pipelines.ingest.grouped import SessionRecords
from ctxledger.pipelines.ingest.normalize import SourceInfo, normalize_session
from ctxledger.pipelines.ingest.readers import read_source
from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.pipelines.ledger.transforms import BuildLedger
from ctxledger.pipelines.redact.transforms import GroupSessions
from ctxledger.schemas.policy import load_policy

PLANTED = (
    Path(__file__).resolve().parents[1] / "fixtures" / "planted" / "forty_turns.jsonl"
)
CREATED = datetime(2026, 3, 15, tzinfo=UTC)

pytestmark = pytest.mark.slow


@dataclass
class _Same:
    text: str
    findings: tuple = ()


def _planted():
    (draft,) = [
        d
        for d in read_source(SourceFile(path=str(PLANTED), data=PLANTED.read_bytes()))
        if isinstance(d, DraftSession)
    ]
    info = SourceInfo("acme", "forty_turns.jsonl", "h", "run_t", "test+0", "test")
    return normalize_session(draft, info, lambda fields: [_Same(t) for _, t in fields])


def test_build_ledger_emits_entries_trail_and_dead_letters(tmp_path):
    built = _planted()
    # one redacted message still holds a secret: its line is dropped, and the
    # drop is a text-free dead letter (stage ledger_lines)
    leaked = [
        m.model_copy(
            update={"content": m.content + " Always use password: hunter2xyz."}
        )
        if m.turn == 2
        else m
        for m in built.messages
    ]
    built = replace(built, messages=leaked)
    settings = load_policy(None).ledger
    config = JobConfig(
        job="test",
        run_id="run_test",
        landing=str(tmp_path),
        warehouse=str(tmp_path / "wh"),
        policy_version="test+0",
        code_version="test",
    )
    expected = build_session_ledger(
        SessionSources(
            built.session,
            built.messages,
            built.observations,
            {a.artifact_id: a.content for a in built.artifacts},
        ),
        settings,
        created_at=CREATED,
        run_id="run_test",
        policy_version="test+0",
    )
    orphan = built.messages[1].model_copy(
        update={"session_id": "ses_orphan", "message_id": "msg_orphan"}
    )
    bundle = SessionRecords.of(
        built.session, built.messages, built.observations, built.artifacts
    )
    # messages whose session row is missing: a bundle without a session
    stray = SessionRecords(None, (orphan,))
    with TestPipeline() as p:
        out = (
            p
            | beam.Create([(r.session_id, r) for r in (bundle, stray)])
            | GroupSessions()
            | BuildLedger(config, settings, CREATED)
        )
        assert_that(
            out.compression_ledger
            | beam.Map(lambda e: (e.summary_id, e.protected_checksum, e.verified)),
            equal_to(
                [(e.summary_id, e.protected_checksum, True) for e in expected.entries]
            ),
            label="CheckLedger",
        )
        assert_that(
            out.artifact_trail | beam.Map(lambda t: (t.trail_id, t.outcome)),
            equal_to([(t.trail_id, t.outcome) for t in expected.trail]),
            label="CheckTrail",
        )
        assert_that(
            out.dead_letter
            | beam.Map(
                lambda d: (d.stage, d.reason_code, d.tenant_id, d.source_offset)
            ),
            equal_to(
                [("ledger", "ledger_no_session", "acme", "session:ses_orphan")]
                + [
                    ("ledger_lines", "secret_in_text", "acme",
                     f"session:{built.session.session_id}/turn:{line.turn}"
                     + (f"/message:{line.source_message_id}"
                        if line.source_message_id else ""))
                    for line, _ in expected.dropped
                ]
            ),
            label="CheckDeadLetters",
        )  # fmt: skip
        assert_that(
            out.dead_letter | beam.Map(lambda d: "hunter2" in d.model_dump_json()),
            equal_to([False] * (1 + len(expected.dropped))),
            label="CheckTextFree",
        )
    assert expected.dropped
