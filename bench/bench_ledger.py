"""Ledger build throughput: sessions/s and messages/s, as ratios against baselines.

Data: every transcript set of ../shared/corpora section A when present (the
``CORPORA`` env var overrides) plus the 40-turn planted-fact transcript, else the
bundled sample landing plus the planted transcript. Sessions are read and
normalised once with an identity redactor (the ledger stage reads redacted
records; redaction has its own bench), then:

* ``build_session_ledger`` over every session (window entries, session entry,
  artifact trail, protected fields, verification): sessions/s and messages/s,
  median of ``--repeat`` runs;
* baseline ``normalize``: building the message records themselves
  (``normalize_session`` with the identity redactor) on the same sessions;
* baseline ``count_tokens``: one tiktoken count per message (the cheapest thing
  every stage does per message);
* parts: the artifact trail alone and protected-field extraction alone;
* ``BuildLedger`` on the Beam DirectRunner over the same records (grouping and
  per-element overhead included);
* ``replay`` of the five default policies per session;
* summary size: summary tokens / source tokens of the session entries, and the
  share of entries that verified.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRANSCRIPT_SETS = (
    "tau-bench-airline-gpt4o",
    "swe-agent-trajectories",
    "mini-swe-agent-trajectories",
    "openhands-trajectories",
    "toolbench-dfsdt-answers",
    "api-bank-dialogues",
    "pydantic-ai-recorded-tool-conversations",
    "claude-code-session-fixtures",
)
SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")


@dataclass
class _Same:
    text: str
    findings: tuple = ()


def _identity(fields):
    return [_Same(text) for _, text in fields]


def transcript_files() -> tuple[list[Path], str]:
    corpora = Path(os.environ.get("CORPORA", ROOT.parent / "shared" / "corpora"))
    planted = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"
    if corpora.is_dir():
        files = [
            p
            for name in TRANSCRIPT_SETS
            if (corpora / name).is_dir()
            for p in sorted((corpora / name).rglob("*"))
            if p.suffix in SUFFIXES
        ]
        return [*files, planted], f"{corpora} section A + planted transcript"
    sample = sorted(
        p for p in (ROOT / "sample" / "landing").rglob("*") if p.suffix in SUFFIXES
    )
    return [*sample, planted], "bundled sample landing + planted transcript"


def drafts(files: list[Path]):
    from ctxledger.pipelines.ingest.drafts import DraftSession, SourceFile
    from ctxledger.pipelines.ingest.readers import read_source

    out = []
    for path in files:
        for item in read_source(SourceFile(path=str(path), data=path.read_bytes())):
            if isinstance(item, DraftSession):
                out.append((path, item))
    return out


def normalize_one(path: Path, draft):
    import hashlib

    from ctxledger.pipelines.ingest.normalize import SourceInfo, normalize_session

    digest = hashlib.sha256(str(path).encode()).hexdigest()
    info = SourceInfo("bench", path.name, digest, "run_bench", "bench+0", "bench")
    return normalize_session(draft, info, _identity)


def normalize_all(items):
    return [normalize_one(path, draft) for path, draft in items]


def timed(fn, repeat: int) -> tuple[float, object]:
    from ctxledger.pipelines.ledger.build import clear_caches

    times, result = [], None
    for _ in range(repeat):
        clear_caches()  # every run starts cold, as a new batch of sessions would
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "inf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-beam", action="store_true", help="skip the Beam run")
    args = parser.parse_args()

    from ctxledger.pipelines.ingest.tokens import count_tokens
    from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
    from ctxledger.pipelines.ledger.protected import extract_fields
    from ctxledger.pipelines.ledger.replay import (
        DEFAULT_POLICIES,
        SessionView,
        parse_policy,
    )
    from ctxledger.pipelines.ledger.replay import replay as run_replay
    from ctxledger.pipelines.ledger.trail import TrailInput, derive_trail
    from ctxledger.schemas.policy import load_policy

    settings = load_policy(None).ledger
    files, source = transcript_files()
    items = drafts(files)
    count_tokens("warm up the encoding")
    normalize_time, built = timed(lambda: normalize_all(items), args.repeat)
    sources = [
        SessionSources(
            b.session,
            b.messages,
            b.observations,
            {a.artifact_id: a.content for a in b.artifacts},
        )
        for b in built
    ]
    sessions = len(sources)
    messages = sum(len(s.messages) for s in sources)
    print(f"data: {source}: {sessions} sessions, {messages} messages")

    build_time, ledgers = timed(
        lambda: [build_session_ledger(s, settings) for s in sources], args.repeat
    )
    tokens_time, _ = timed(
        lambda: [count_tokens(m.content) for s in sources for m in s.messages],
        args.repeat,
    )
    trail_time, _ = timed(
        lambda: [
            derive_trail(
                TrailInput(
                    s.session.session_id,
                    s.session.tenant_id,
                    s.session.source_format,
                    s.messages,
                    {o.message_id: o for o in s.observations},
                    s.outputs,
                )
            )
            for s in sources
        ],
        args.repeat,
    )
    fields_time, _ = timed(
        lambda: [extract_fields(s.messages) for s in sources], args.repeat
    )
    policies = [parse_policy(p) for p in DEFAULT_POLICIES]
    replay_time, _ = timed(
        lambda: [run_replay(SessionView(s, settings), policies) for s in sources], 1
    )

    entries = [e for ledger in ledgers for e in ledger.entries]
    session_entries = [ledger.session_entry for ledger in ledgers]
    verified = sum(e.verified for e in entries) / len(entries)
    source_tokens = sum(e.source_tokens for e in session_entries)
    summary_tokens = sum(e.summary_tokens for e in session_entries)
    long = [e for e in session_entries if e.source_tokens >= 5_000]
    long_ratio = (
        sum(e.summary_tokens for e in long) / sum(e.source_tokens for e in long)
        if long
        else float("nan")
    )

    print(
        f"ledger build (pure): {rate(sessions, build_time)} sessions, "
        f"{rate(messages, build_time)} messages "
        f"({build_time:.2f}s, median of {args.repeat}; "
        f"{len(entries)} entries, {sum(len(x.trail) for x in ledgers)} trail rows)"
    )
    print(
        f"  baseline normalize (identity redactor): {rate(messages, normalize_time)} "
        f"messages -> ledger/normalize = {normalize_time / build_time:.2f}x"
    )
    print(
        f"  baseline count_tokens: {rate(messages, tokens_time)} messages "
        f"-> ledger/count_tokens = {tokens_time / build_time:.2f}x"
    )
    print(
        f"  parts: artifact trail {rate(messages, trail_time)} messages "
        f"({trail_time / build_time:.0%} of the build), protected fields "
        f"{rate(messages, fields_time)} messages ({fields_time / build_time:.0%})"
    )
    print(
        f"  replay of {len(policies)} policies: {rate(sessions, replay_time)} "
        f"sessions, {rate(messages, replay_time)} messages"
    )
    print(
        f"  summaries: {summary_tokens / source_tokens:.2f} of source tokens overall, "
        f"{long_ratio:.2f} on the {len(long)} sessions of >= 5k tokens; "
        f"{verified:.1%} of entries verified"
    )
    if not args.no_beam:
        beam_time = beam_run(files, settings)
        pure = normalize_time + build_time
        print(
            f"  Beam DirectRunner, parse + normalize + BuildLedger: "
            f"{rate(sessions, beam_time)} sessions, {rate(messages, beam_time)} "
            f"messages -> Beam/pure (same steps) = {pure / beam_time:.2f}x "
            "(pipeline start included)"
        )


def beam_run(files: list[Path], settings) -> float:
    """The same sessions through Beam: files are parsed and normalised on the
    workers (as in the nightly graph), bundled per session, grouped by
    ``GroupSessions`` and built by ``BuildLedger``."""
    import tempfile

    import apache_beam as beam

    from ctxledger.jobs.runner import beam_pipeline
    from ctxledger.pipelines.config import JobConfig
    from ctxledger.pipelines.ingest.grouped import SessionRecords
    from ctxledger.pipelines.ledger.transforms import BuildLedger
    from ctxledger.pipelines.redact.transforms import GroupSessions

    config = JobConfig(
        job="bench",
        run_id="run_bench",
        landing=".",
        warehouse=tempfile.gettempdir(),
        policy_version="bench+0",
        code_version="bench",
    )

    def bundles(path: str):
        for item_path, draft in drafts([Path(path)]):
            built = normalize_one(item_path, draft)
            records = SessionRecords.of(
                built.session, built.messages, built.observations, built.artifacts
            )
            yield records.session_id, records

    started = time.perf_counter()
    with beam_pipeline([]) as pipeline:  # the jobs' runner (jobs.runner)
        out = (
            pipeline
            | beam.Create([str(f) for f in files])
            | beam.Reshuffle()
            | beam.FlatMap(bundles)
            | GroupSessions()
            | BuildLedger(config, settings)
        )
        _ = out.compression_ledger | beam.combiners.Count.Globally()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
