"""Operational records: dead letters, processed landing files and run manifests."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxledger.schemas.base import Record

RunStatus = Literal["committed", "failed", "empty"]


class DeadLetter(Record):
    """A record a stage could not process. Never carries the raw payload.

    ``message`` is written by our code from the error's *kind* and location only;
    the raw bytes, when kept, sit in an owner-only quarantine file named by
    ``quarantine_ref``.
    """

    table: ClassVar[str | None] = "dead_letters"
    key: ClassVar[tuple[str, ...]] = ("dead_letter_id",)

    dead_letter_id: str = Field(description="Content-hash id of the dead letter.")
    run_id: str = Field(default="", description="Run that produced it (see runs).")
    stage: str = Field(
        description="Stage that could not process the record (ingest, redact, ...)."
    )
    tenant_id: str = Field(description="Tenant the row belongs to.")
    source_file: str = Field(
        description="Landing file (or input) the record came from."
    )
    source_offset: str = Field(
        description="Where in that file: line, record index or key."
    )
    reason_code: str = Field(description="Machine-readable reason, e.g. invalid_json.")
    message: str = Field(
        description="Explanation written by our code; never the raw payload."
    )
    quarantine_ref: str | None = Field(
        default=None,
        description="Owner-only quarantine file with the raw bytes, if kept.",
    )
    job_version: str = Field(description="Code version of the job.")


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

    run_id: str = Field(
        description="Deterministic id of the run (job, policy, inputs)."
    )
    job: str = Field(description="nightly, backfill, stream, forget, ...")
    status: RunStatus = Field(description="committed or failed.")
    started_at: datetime = Field(description="Start time (UTC).")
    finished_at: datetime = Field(description="End time (UTC).")
    policy_version: str = Field(description="Policy version the run applied.")
    code_version: str = Field(description="ctxledger version that ran.")
    runner: str = Field(description="Beam runner (DirectRunner, FlinkRunner, ...).")
    files_seen: int = Field(default=0, description="Landing files found.")
    files_new: int = Field(default=0, description="Landing files not processed before.")
    stage_counts: list[StageCount] = Field(
        default_factory=list, description="Records in, out and dead-lettered per stage."
    )
    table_rows: str = Field(
        default="{}", description="Rows written per table, as JSON."
    )
    files_skipped: int = Field(
        default=0, description="Files skipped (not a transcript extension)."
    )
    config: str = Field(default="{}", description="The run's JobConfig as JSON.")
    snapshot_id: int | None = Field(
        default=None, description="DuckLake snapshot the run committed."
    )
    error: str | None = Field(
        default=None, description="First line of the error of a failed run."
    )
    #: Empty for runs that predate stage timings (their column reads NULL).
    stage_timings: list[StageTiming] = Field(
        default_factory=list, description="Seconds spent per stage."
    )
    #: What the run's retention step did, as JSON counts (``warehouse.retention``
    #: ``RetentionCounts``: memories expired / withdrawn / re-resolved, artifacts
    #: and evidence rows past retention, snapshots expired, files deleted).
    retention: str = Field(
        default="{}", description="What the retention step purged, as JSON counts."
    )

    @field_validator("stage_timings", mode="before")
    @classmethod
    def _no_timings(cls, value: object) -> object:
        return [] if value is None else value

    @field_validator("retention", mode="before")
    @classmethod
    def _no_retention(cls, value: object) -> object:
        return "{}" if value is None else value
