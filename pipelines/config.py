"""Domain settings of one job run (Beam's PipelineOptions hold runner settings only).

A frozen model saved with every run in ``runs.config``, so a run can be explained
and repeated later.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_serializer

from ctxledger.warehouse.catalog_url import mask_password

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ctxledger.warehouse.catalog import Warehouse


class JobConfig(BaseModel):
    """What a run processes and where it writes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job: str
    run_id: str
    landing: str
    warehouse: str
    catalog: str | None = None
    data_path: str | None = None
    default_tenant: str = "default"
    source_format: str | None = None
    policy_file: str | None = None
    policy_version: str
    code_version: str
    max_record_bytes: int = 8 * 1024 * 1024
    #: Documents landing folder of the evidence stage (None: no documents).
    docs: str | None = None
    #: Pseudonym key file later stages load the key from (None: env or default).
    key_file: str | None = None
    #: Memory stage: consent events and system records (JSONL file or folder).
    consent_input: str | None = None
    system_records_input: str | None = None
    #: Memory stage: optional OpenAI-compatible chat-completions extractor.
    llm_endpoint: str | None = None
    llm_model: str | None = None
    #: This attempt of the run (``warehouse.concurrency.new_attempt``): names its
    #: staging folder, so two overlapping attempts of one run id never share one.
    attempt: str = ""
    #: The run's logical time: when the warehouse received the run's input (a
    #: nightly's start; a backfill's: when the newest of its files was first
    #: received, ``jobs.backfill``). Rows of undated input take it (a tool
    #: output's ``effective_from``, a memory's ``valid_from``, a ledger's
    #: ``created_at``), never the wall clock: an identical rerun derives
    #: identical rows. None: callers that build a config by hand.
    received_at: datetime | None = None
    #: Evidence vectors of tool outputs computed by a helper process while the
    #: run redacts (``pipelines.evidence.ahead``): set by the graph when every
    #: stage runs in the job's own process and the policy embeds inline.
    embed_ahead: bool = False

    @field_serializer("catalog")
    def _catalog_without_password(self, catalog: str | None) -> str | None:
        """``runs.config`` keeps the catalog but never its password (libpq reads
        one from PGPASSWORD or ~/.pgpass on every worker instead)."""
        return mask_password(catalog)

    @property
    def staging_dir(self) -> str:
        suffix = f"-{self.attempt}" if self.attempt else ""
        return f"{self.warehouse}/staging/{self.run_id}{suffix}"

    def open_warehouse(self) -> Warehouse:
        """The run's warehouse (created if missing), on its catalog and data path."""
        from ctxledger.warehouse.catalog import Warehouse

        return Warehouse.open(
            self.warehouse, create=True, catalog=self.catalog, data_path=self.data_path
        )

    @contextmanager
    def reading(self, lake: Warehouse | None = None) -> Iterator[Warehouse]:
        """The warehouse to read from while the graph is built: ``lake`` when
        the job already holds it open (the nightly's launcher reads every
        stage's inputs on the one connection it opened first; each open
        attaches the catalog again), else one opened for the block."""
        with nullcontext(lake) if lake is not None else self.open_warehouse() as wh:
            yield wh
