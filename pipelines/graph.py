"""Compose the stages into the batch graph the jobs run.

Landing items -> IngestTranscripts -> RedactPII -> GroupSessions -> [branches]
-> WriteTables -> ReportShards; then, after the runner is done, the job runs
the returned ``PendingCommit`` on the launcher (one commit, whatever the
runner: ``pipelines.sink.pending``). Dead letters of every stage are flattened into
one ``dead_letters`` table.

A *branch* is a later stage that reads the redacted records (memories, ledgers,
evidence). It is a callable ``branch(redacted, config, policy, pipeline,
lake=None)`` that returns ``{table_name: PCollection[Record]}``; a
``"dead_letters"`` entry is merged into the run's dead letters. ``redacted`` is
a ``Redacted``: the redact stage's record outputs and ``grouped``, the run's
``SessionGroup`` s, grouped by session id once for all branches (the ledger,
memory and evidence stages each used to group the same records themselves).
Branches are listed in ``BRANCHES`` in stage order; each also registers its
conservation counter in ``pipelines.sink.counts``.
``lake``: an open ``Warehouse`` a branch reads what it needs at graph-build
time from (stored consent, known input files, whether any vectors are stored),
or None to open one itself (``JobConfig.reading``); it must not stay open while
the pipeline runs (a held attach of a local catalog blocks the commit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import apache_beam as beam

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.evidence import ahead
from ctxledger.pipelines.evidence.transforms import evidence_branch
from ctxledger.pipelines.ingest.landing import LandingItem
from ctxledger.pipelines.ingest.spread import spread_files
from ctxledger.pipelines.ingest.transforms import IngestTranscripts
from ctxledger.pipelines.ledger.transforms import ledger_branch
from ctxledger.pipelines.memory.transforms import memory_branch
from ctxledger.pipelines.redact.transforms import GroupSessions, RedactPII
from ctxledger.pipelines.sink.pending import PendingCommit
from ctxledger.pipelines.sink.transforms import ReportShards, WriteTables

Branch = Callable[..., dict[str, Any]]

#: Stages after redaction, in order (see module docstring).
BRANCHES: list[Branch] = []
BRANCHES.append(ledger_branch)
BRANCHES.append(memory_branch)
BRANCHES.append(evidence_branch)


@dataclass(frozen=True)
class Redacted:
    """What the branches read: the redact stage's records by table, and the
    run's ``SessionGroup`` s (one per session id)."""

    sessions: Any
    messages: Any
    artifacts: Any
    tool_observations: Any
    grouped: Any


def build_batch_graph(
    pipeline: beam.Pipeline,
    items: list[LandingItem],
    config: JobConfig,
    policy,
    key: bytes,
    *,
    started_at: datetime,
    files_seen: int,
    files_skipped: int,
    runner: str,
    commit=None,
    workers: int = 1,
    lake=None,
    shares_process: bool = False,
):
    """Add the ingest -> redact -> branches -> staged shards graph to
    ``pipeline``; return the ``PendingCommit`` the job runs once the pipeline
    has finished.

    ``commit`` replaces the appending commit step (``commit_run``), e.g. with the
    backfill's replacing one. ``workers``: local Beam worker processes
    (``pipelines.models.local_workers``); the landing files are split between
    them by bytes (``pipelines.ingest.spread``). ``lake``: the open warehouse
    the branches read from while the graph is built (module docstring).
    ``shares_process``: every stage runs in this process
    (``pipelines.models.shares_process``), so tool outputs can be embedded
    ahead by a helper process (``JobConfig.embed_ahead``) where the policy
    embeds inline; for a landing of ``ahead.START_BYTES`` or more it starts
    now, loading MiniLM while the run starts.
    """
    embedding = policy.evidence.embedding
    if (
        shares_process
        and embedding.mode == "inline"
        and embedding.ahead
        and embedding.backend == "torch"
    ):
        config = config.model_copy(update={"embed_ahead": True})
        if sum(item.size_bytes for item in items) >= ahead.START_BYTES:
            ahead.run_helper(config, policy).launch()  # MiniLM loads meanwhile
    ingested = (
        pipeline
        | "ListLandingFiles"
        >> beam.Create(spread_files(items, workers), reshuffle=False)
        | "IngestTranscripts"
        >> IngestTranscripts(config, policy.memory.subject_metadata_key, spread=True)
    )
    out = ingested.sessions | "RedactPII" >> RedactPII(config, policy, key)
    redacted = Redacted(
        out.sessions,
        out.messages,
        out.artifacts,
        out.tool_observations,
        out.session_records | "GroupSessions" >> GroupSessions(),
    )
    dead_letters = [ingested.dead_letter, out.dead_letter]
    tables: dict[str, Any] = {
        "sessions": redacted.sessions,
        "messages": redacted.messages,
        "artifacts": redacted.artifacts,
        "tool_observations": redacted.tool_observations,
        "landing_files": ingested.landing_file,
    }
    for branch in BRANCHES:
        extra = dict(branch(redacted, config, policy, pipeline, lake=lake))
        if "dead_letters" in extra:
            dead_letters.append(extra.pop("dead_letters"))
        clash = set(extra) & set(tables)
        if clash:
            raise ValueError(f"branch {branch!r} rewrites tables {clash}")
        tables.update(extra)
    tables["dead_letters"] = dead_letters | "FlattenDeadLetters" >> beam.Flatten()
    _ = (
        tables
        | "WriteTables" >> WriteTables(config)
        | "ReportShards" >> ReportShards(config)
    )
    return PendingCommit(
        config,
        started_at,
        files_seen,
        files_skipped,
        runner,
        commit,
        expected_files=len(items),
    )
