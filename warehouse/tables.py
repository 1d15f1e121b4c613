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
from schemas.backfill import BackfillChange
from schemas.evidence import DocumentFile, DocumentVersion, EvidenceChunk
from schemas.ledger import ArtifactTrailEntry, LedgerEntry
from schemas.memory import (
    ConsentRecord,
    ErasureReceipt,
    MemoryExtraction,
    MemoryInputFile,
    MemoryRecord,
    MemoryRejection,
)
from schemas.sources import SourceRow

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
