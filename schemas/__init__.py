"""The data contract: frozen pydantic records, with Arrow schemas derived from them.

Every table the warehouse holds has exactly one model here. `schemas.arrow` derives the
Arrow (and so Parquet and DuckDB) schema from the model, and a parity test keeps both
in step, so the contract lives in one place.
"""

from ctxledger.schemas.base import SCHEMA_VERSION, Record, canonical_json, content_hash
from ctxledger.schemas.operations import (
    DeadLetter,
    LandingFile,
    RunManifest,
    StageCount,
)
from ctxledger.schemas.transcript import (
    Artifact,
    Message,
    PiiFinding,
    Session,
    ToolCall,
    ToolObservation,
)

__all__ = [
    "SCHEMA_VERSION",
    "Artifact",
    "DeadLetter",
    "LandingFile",
    "Message",
    "PiiFinding",
    "Record",
    "RunManifest",
    "Session",
    "StageCount",
    "ToolCall",
    "ToolObservation",
    "canonical_json",
    "content_hash",
]
