"""The warehouse's tables: which record model each holds, derived from ``schemas``."""

from __future__ import annotations

from schemas import (
    Artifact,
    DeadLetter,
    LandingFile,
    Message,
    Record,
    RunManifest,
    Session,
    ToolObservation,
)

#: Every table, in commit order, mapped to its record model.
TABLES: dict[str, type[Record]] = {
    model.table: model  # type: ignore[misc]
    for model in (
        Session,
        Message,
        Artifact,
        ToolObservation,
        DeadLetter,
        LandingFile,
        RunManifest,
    )
}

#: Tables a run stages as Parquet shards before the commit step registers them.
STAGED_TABLES = (
    "sessions",
    "messages",
    "artifacts",
    "tool_observations",
    "dead_letters",
)
