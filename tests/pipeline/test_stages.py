"""One TestPipeline test per composite, asserting main and dead-letter outputs."""

from __future__ import annotations

import json

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.drafts import DraftMessage, DraftSession
from ctxledger.pipelines.ingest.landing import discover
from ctxledger.pipelines.ingest.transforms import IngestTranscripts
from ctxledger.pipelines.redact.transforms import RedactPII

pytestmark = pytest.mark.slow


def _config(tmp_path) -> JobConfig:
    return JobConfig(
        job="test",
        run_id="run_test",
        landing=str(tmp_path / "landing"),
        warehouse=str(tmp_path / "wh"),
        policy_version="test+0",
        code_version="test",
    )


def _line(**fields) -> str:
    return json.dumps(fields) + "\n"


def test_ingest_transcripts_splits_sessions_dead_letters_and_file_counts(tmp_path):
    landing = tmp_path / "landing" / "tenant=acme"
    landing.mkdir(parents=True)
    (landing / "chat.jsonl").write_text(
        _line(session_id="s1", role="user", content="hello")
        + _line(session_id="s1", role="assistant", content="hi")
        + _line(session_id="s1", role="narrator", content="who?")
        + '{"session_id": "s2", "role": \n'
    )
    (landing / "empty.jsonl").write_text("")
    items = discover(tmp_path / "landing", "default").items
    config = _config(tmp_path)
    with TestPipeline() as p:
        out = p | beam.Create(items) | IngestTranscripts(config)
        assert_that(
            out.sessions | beam.Map(lambda e: (e[1].external_id, len(e[1].messages))),
            equal_to([("s1", 2)]),
            label="CheckSessions",
        )
        assert_that(
            out.dead_letter | beam.Map(lambda d: (d.stage, d.reason_code, d.tenant_id)),
            equal_to(
                [
                    ("ingest", "unknown_role", "acme"),
                    ("ingest", "malformed_json", "acme"),
                    ("ingest", "empty_file", "acme"),
                ]
            ),
            label="CheckDeadLetters",
        )
        assert_that(
            out.landing_file
            | beam.Map(
                lambda f: (
                    f.path,
                    f.records_in,
                    f.records_out,
                    f.dead,
                    f.messages_parsed,
                )
            ),
            equal_to(
                [
                    ("tenant=acme/chat.jsonl", 4, 2, 2, 2),
                    ("tenant=acme/empty.jsonl", 1, 0, 1, 0),
                ]
            ),
            label="CheckLandingFiles",
        )


def _redact(pipeline, tmp_path, items):
    """``RedactPII`` under the default policy over ``items``."""
    from ctxledger.schemas.policy import load_policy

    policy = load_policy(None)
    config = _config(tmp_path).model_copy(
        update={"policy_version": policy.policy_version}
    )
    return pipeline | beam.Create(items) | RedactPII(config, policy, b"k" * 32)


def test_redact_pii_emits_redacted_records_by_table(tmp_path):
    items = []
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing" / "x.jsonl").write_text("{}\n")
    (item,) = discover(tmp_path / "landing", "acme").items
    draft = DraftSession(
        source_format="canonical",
        external_id="s1",
        source_offset="line:1",
        messages=[
            DraftMessage(
                role="user",
                content="Reach me at carol.danvers@example.com please",
                source_offset="line:1",
            ),
            DraftMessage(
                role="tool",
                tool_call_id="c1",
                tool_output='{"token": "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}',
                tool_status="ok",
                source_offset="line:2",
            ),
        ],
    )
    items.append((item, draft))
    with TestPipeline() as p:
        out = _redact(p, tmp_path, items)
        assert_that(
            out.messages
            | beam.Map(
                lambda m: (
                    m.turn,
                    "carol.danvers" in m.content,
                    sorted({f.entity_type for f in m.pii}),
                )
            ),
            equal_to([(0, False, ["EMAIL_ADDRESS"]), (1, False, ["GITHUB_TOKEN"])]),
            label="CheckMessages",
        )
        assert_that(
            out.artifacts | beam.Map(lambda a: "ghp_ABCDEF" in a.content),
            equal_to([False]),
            label="CheckArtifacts",
        )
        assert_that(
            out.tool_observations | beam.Map(lambda o: o.status),
            equal_to(["ok"]),
            label="CheckObservations",
        )
        assert_that(out.dead_letter, equal_to([]), label="CheckNoDeadLetters")
        assert_that(
            out.sessions | beam.Map(lambda s: s.message_count),
            equal_to([2]),
            label="CheckSessions",
        )
        # the same records once more, bundled per session for GroupSessions
        assert_that(
            out.session_records
            | beam.MapTuple(
                lambda sid, r: (
                    sid == r.session.session_id,
                    [m.turn for m in r.messages],
                    [o.status for o in r.observations],
                    [any("ghp_ABCDEF" in c for _, c in r.outputs), len(r.outputs)],
                )
            ),
            equal_to([(True, [0, 1], ["ok"], [False, 1])]),
            label="CheckSessionRecords",
        )


def test_files_spread_between_two_workers_parse_as_reshuffled_ones(tmp_path):
    """``spread=True`` (the nightly graph: files grouped by bytes per local
    worker, ``pipelines.ingest.spread``) yields every session and file count
    once, as the reshuffled path does, also on two worker threads."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from ctxledger.pipelines.ingest.spread import spread_files

    landing = tmp_path / "landing" / "tenant=acme"
    landing.mkdir(parents=True)
    for n in range(5):
        (landing / f"chat{n}.jsonl").write_text(
            "".join(
                _line(session_id=f"s{n}", role="user", content="hello " * (n + 1))
                for _ in range(n + 1)
            )
        )
    items = discover(tmp_path / "landing", "default").items
    config = _config(tmp_path)
    options = PipelineOptions(
        ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]
    )
    with TestPipeline(options=options) as p:
        out = (
            p
            | beam.Create(spread_files(items, 2), reshuffle=False)
            | IngestTranscripts(config, spread=True)
        )
        assert_that(
            out.sessions | beam.Map(lambda e: (e[1].external_id, len(e[1].messages))),
            equal_to([(f"s{n}", n + 1) for n in range(5)]),
            label="CheckSessions",
        )
        assert_that(
            out.landing_file | beam.Map(lambda f: (f.path, f.records_out)),
            equal_to([(f"tenant=acme/chat{n}.jsonl", n + 1) for n in range(5)]),
            label="CheckFiles",
        )


def _sessions(tmp_path, count: int) -> list:
    (tmp_path / "landing").mkdir(exist_ok=True)
    (tmp_path / "landing" / "x.jsonl").write_text("{}\n")
    (item,) = discover(tmp_path / "landing", "acme").items
    return [
        (
            item,
            DraftSession(
                source_format="canonical",
                external_id=f"s{n}",
                source_offset=f"line:{n}",
                messages=[
                    DraftMessage(
                        role="user",
                        content=f"I am Maria Garcia, ticket {n}: maria{n}@example.com",
                        source_offset=f"line:{n}",
                    )
                ],
            ),
        )
        for n in range(count)
    ]


@pytest.mark.parametrize("prefetch_fails", [False, True])
def test_redact_pii_batches_sessions_and_loses_none(
    tmp_path, monkeypatch, prefetch_fails
):
    """Sessions go through ``RedactSessionFn`` in batches whose texts are
    detected together first; a prefetch that fails loses nothing (each
    session redacts its own texts) and adds no dead letter."""
    from ctxledger.pipelines.redact.engine import Redactor

    if prefetch_fails:

        def broken(self, texts):
            raise RuntimeError("detector down")

        monkeypatch.setattr(Redactor, "prefetch", broken)
    items = _sessions(tmp_path, 40)  # more than one batch (SESSION_BATCH = 32)
    with TestPipeline() as p:
        out = _redact(p, tmp_path, items)
        assert_that(
            out.messages
            | beam.Map(
                lambda m: (
                    "maria" in m.content.lower(),
                    sorted({f.entity_type for f in m.pii}),
                )
            ),
            equal_to([(False, ["EMAIL_ADDRESS", "PERSON"])] * 40),
            label="CheckMessages",
        )
        assert_that(out.dead_letter, equal_to([]), label="CheckNoDeadLetters")
        assert_that(
            out.sessions | beam.combiners.Count.Globally(),
            equal_to([40]),
            label="CheckSessions",
        )
