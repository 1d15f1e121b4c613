"""Shared base record and the canonical hashing every id in the project is made from.

Ids are content hashes of canonical JSON (sorted keys, no whitespace, UTF-8), so a
re-run over the same input produces the same ids and the warehouse never holds
duplicates of the same fact.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"not canonicalisable: {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """Serialise ``value`` deterministically: sorted keys, compact, UTF-8 safe."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=_default,
    )


def content_hash(*parts: Any, prefix: str = "", length: int = 32) -> str:
    """Hex sha256 of the canonical JSON of ``parts``, truncated to ``length`` chars."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()
    return f"{prefix}{digest[:length]}"


class Record(BaseModel):
    """Base of every stored record: frozen, strict about unknown fields, versioned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Name of the warehouse table the record lands in (None: not stored as a table).
    table: ClassVar[str | None] = None
    #: Column(s) that identify a row; the commit step de-duplicates on them.
    key: ClassVar[tuple[str, ...]] = ()

    schema_version: int = Field(
        default=SCHEMA_VERSION,
        description="Version of the record schema the row was written with.",
    )

    def row(self) -> dict[str, Any]:
        """The record as a plain dict ready for Arrow (nested models become dicts)."""
        return self.model_dump(mode="python")
