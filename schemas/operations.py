"""Operational records: dead letters, processed landing files and run manifests."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.base import Record

RunStatus = Literal["committed", "failed", "empty"]


class DeadLetter(Record):
    """A record a stage could not process. Never carries the raw payload.

    ``message`` is written by our code from the error's *kind* and location only;
    the raw bytes, when kept, sit in an owner-only quarantine file named by
    ``quarantine_ref``.
    """

    table: ClassVar[str | None] = "dead_letters"
    key: ClassVar[tuple[str, ...]] = ("dead_letter_id",)

    dead_letter_id: str
    run_id: str = ""
    stage: str
    tenant_id: str
    source_file: str
    source_offset: str
    reason_code: str
    message: str
    quarantine_ref: str | None = None
    job_version: str


class LandingFile(Record):
    """A landing file a run read, tracked by content hash.

    ``status`` is ``processed`` when its records (good and bad) were all accounted
    for; ``changed`` or ``unreadable`` files are recorded for audit but are read
    again by the next run. The ingest stage's counts live here (unit: source
    records); ``messages_parsed`` is what the file handed on to the redact stage.
    """

    table: ClassVar[str | None] = "landing_files"
    key: ClassVar[tuple[str, ...]] = ("file_hash", "path", "run_id")

    file_hash: str
    path: str
    tenant_id: str
    size_bytes: int
    source_format: str | None = None
    status: Literal["processed", "changed", "unreadable"] = "processed"
    records_in: int = 0
    records_out: int = 0
    dead: int = 0
    messages_parsed: int = 0
    run_id: str = ""


class StageCount(BaseModel):
    """Conservation counts of one stage: records_in == records_out + dead."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    records_in: int = 0
    records_out: int = 0
    dead: int = 0

    @property
    def balanced(self) -> bool:
        return self.records_in == self.records_out + self.dead


class StageTiming(BaseModel):
    """Wall seconds one stage's steps spent on their own work in a run.

    Summed over workers and bundles (parallel workers can add up to more than
    the run's wall time); ``calls`` is how many elements or batches that was.
    Measured by ``pipelines.timing`` and committed with the run's manifest.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    seconds: float = 0.0
    calls: int = 0


class RunManifest(Record):
    """One job run: what it read, what each stage kept or dropped, what it committed."""

    table: ClassVar[str | None] = "runs"
    key: ClassVar[tuple[str, ...]] = ("run_id",)

    run_id: str
    job: str
    status: RunStatus
    started_at: datetime
    finished_at: datetime
    policy_version: str
    code_version: str
    runner: str
    files_seen: int = 0
    files_new: int = 0
    stage_counts: list[StageCount] = Field(default_factory=list)
    table_rows: str = "{}"
    files_skipped: int = 0
    config: str = "{}"
    snapshot_id: int | None = None
    error: str | None = None
    #: Empty for runs that predate stage timings (their column reads NULL).
    stage_timings: list[StageTiming] = Field(default_factory=list)
    #: What the run's retention step did, as JSON counts (``warehouse.retention``
    #: ``RetentionCounts``: memories expired / withdrawn / re-resolved, artifacts
    #: and evidence rows past retention, snapshots expired, files deleted).
    retention: str = "{}"

    @field_validator("stage_timings", mode="before")
    @classmethod
    def _no_timings(cls, value: object) -> object:
        return [] if value is None else value

    @field_validator("retention", mode="before")
    @classmethod
    def _no_retention(cls, value: object) -> object:
        return "{}" if value is None else value
