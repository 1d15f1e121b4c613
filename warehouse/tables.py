"""The warehouse's tables: which record model each holds, derived from ``schemas``."""

from __future__ import annotations

from ctxledger.schemas import (
    Artifact,
    DeadLetter,
    LandingFile,
    Message,
    Record,
    RunManifest,
    Session,
    ToolObservation,
)
from ctxledger.schemas.backfill import BackfillChange
from ctxledger.schemas.evidence import DocumentFile, DocumentVersion, EvidenceChunk
from ctxledger.schemas.ledger import ArtifactTrailEntry, LedgerEntry
from ctxledger.schemas.memory import (
    ConsentRecord,
    ErasureReceipt,
    MemoryExtraction,
    MemoryInputFile,
    MemoryRecord,
    MemoryRejection,
)
from ctxledger.schemas.sources import SourceRow

#: Every table, in commit order, mapped to its record model. A new record family
#: adds its models here; ``Warehouse.ensure_tables`` creates them on next open.
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
        LedgerEntry,
        ArtifactTrailEntry,
        MemoryRecord,
        MemoryRejection,
        ConsentRecord,
        MemoryExtraction,
        MemoryInputFile,
        ErasureReceipt,
        DocumentFile,
        DocumentVersion,
        EvidenceChunk,
        BackfillChange,
        SourceRow,
    )
}
