"""Compose the stages into the batch graph the jobs run.

Landing items -> IngestTranscripts -> RedactPII -> WriteTables -> CommitSnapshot.
Dead letters of every stage are flattened into one ``dead_letters`` table.
"""

from __future__ import annotations

from datetime import datetime

import apache_beam as beam

from pipelines.config import JobConfig
from pipelines.ingest.landing import LandingItem
from pipelines.ingest.transforms import IngestTranscripts
from pipelines.redact.transforms import RedactPII
from pipelines.sink.transforms import CommitSnapshot, WriteTables


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
):
    """Add the ingest -> redact -> commit graph to ``pipeline``; return the manifest
    PCollection (one ``RunManifest``)."""
    ingested = (
        pipeline
        | "ListLandingFiles" >> beam.Create(items, reshuffle=False)
        | "IngestTranscripts" >> IngestTranscripts(config)
    )
    redacted = ingested.sessions | "RedactPII" >> RedactPII(config, policy, key)
    dead_letters = (
        ingested.dead_letter,
        redacted.dead_letter,
    ) | "FlattenDeadLetters" >> beam.Flatten()
    tables = {
        "sessions": redacted.sessions,
        "messages": redacted.messages,
        "artifacts": redacted.artifacts,
        "tool_observations": redacted.tool_observations,
        "dead_letters": dead_letters,
        "landing_files": ingested.landing_file,
    }
    return (
        tables
        | "WriteTables" >> WriteTables(config)
        | "CommitSnapshot"
        >> CommitSnapshot(config, started_at, files_seen, files_skipped, runner)
    )
