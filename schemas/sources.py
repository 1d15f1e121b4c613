"""The source registry: where every piece of context comes from, and what it is worth.

A context architect registers each *source* before any template: its owner,
scope, authority, freshness (half-life and TTL), sensitivity, estimated cost,
injection risk and invalidation policy. Rows are assigned to a source by kind
and pattern (documents by doc id or folder, tool artifacts by tool name,
memories by source kind, consent and system records); a row that matches none
gets the registry's ``default_source``, so every row resolves.

The registry is a versioned YAML file (``load_registry``), identified like the
policy: ``registry_version = "{version}+{sha256(canonical json)[:8]}"``. Its
sources are stored in the ``sources`` table (one row per source per registry
version, ``ctxledger sources --sync``), and ``pack`` reads the newest version
at query time: changing a source's authority rewrites no evidence row, it
changes ranking on the next call. Which source a row belongs to is a pure
function of the row's kind and key (``resolve_source``), stamped as
``source_id`` when the row is written and re-derived at query time from the
active registry (so a new registry needs no rewrite either).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from fnmatch import fnmatchcase
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ctxledger.schemas.base import Record, canonical_json

SourceKind = Literal["document", "tool_artifact", "memory", "consent", "system_record"]
Sensitivity = Literal["public", "internal", "confidential", "restricted"]
#: Sensitivity levels, least to most sensitive.
SENSITIVITY_ORDER: tuple[str, ...] = (
    "public",
    "internal",
    "confidential",
    "restricted",
)
InjectionRisk = Literal["low", "medium", "high"]
Invalidation = Literal["none", "on_new_version", "manual"]

#: The id of the built-in catch-all source (a registry may name another).
DEFAULT_SOURCE_ID = "unregistered"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceSpec(_Strict):
    """One registered source, as written in the registry file.

    ``match``: fnmatch patterns over the row's key for its ``kind``: a
    document's ``doc_id`` (``runbook/*``), a tool artifact's tool name
    (``check_*``), a memory's source kind (``user_stated``). ``authority``
    and ``freshness_half_life_days`` override the policy's pack defaults for
    the source's items (a document's own ``authority`` still wins);
    ``ttl_days``: items older than this are dropped ``source_expired``;
    ``invalidated``: every item is dropped ``source_invalidated``.
    """

    source_id: str = Field(min_length=1)
    kind: SourceKind | None = None
    match: tuple[str, ...] = ()
    owner: str = "unknown"
    scope: str = "tenant"
    description: str = ""
    authority: float | None = Field(default=None, ge=0.0, le=1.0)
    freshness_half_life_days: float | None = Field(default=None, gt=0.0)
    ttl_days: float | None = Field(default=None, gt=0.0)
    sensitivity: Sensitivity = "internal"
    estimated_cost_tokens: int | None = Field(default=None, ge=0)
    injection_risk: InjectionRisk = "low"
    invalidation: Invalidation = "on_new_version"
    invalidated: bool = False
    invalidated_reason: str | None = None


class SourceRegistry(_Strict):
    """A named, versioned list of sources (see the module docstring).

    ``clearance`` maps principal groups to the most sensitive level they may
    see; a principal gets the highest of its groups, else ``default_clearance``.
    """

    name: str = "default"
    version: str = "1"
    default_source: str = DEFAULT_SOURCE_ID
    default_clearance: Sensitivity = "internal"
    clearance: dict[str, Sensitivity] = Field(default_factory=dict)
    sources: tuple[SourceSpec, ...] = ()

    @model_validator(mode="after")
    def _unique_ids(self) -> SourceRegistry:
        ids = [s.source_id for s in self.sources]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate source ids: {', '.join(dupes)}")
        return self

    @cached_property
    def registry_version(self) -> str:
        """``"{version}+{sha256(canonical registry json)[:8]}"``."""
        digest = hashlib.sha256(
            canonical_json(self.model_dump(mode="json")).encode("utf-8")
        ).hexdigest()
        return f"{self.version}+{digest[:8]}"

    @cached_property
    def by_id(self) -> dict[str, SourceSpec]:
        """Every source by id, the default one included (built-in when unlisted)."""
        out = {s.source_id: s for s in self.sources}
        out.setdefault(
            self.default_source,
            SourceSpec(
                source_id=self.default_source,
                owner="unassigned",
                description="rows that match no registered source",
            ),
        )
        return out

    def resolve(self, kind: str, *keys: str | None) -> str:
        """The id of the first source of ``kind`` with a pattern matching any
        of ``keys`` (registry order), else the default source."""
        for spec in self.sources:
            if spec.kind is not None and spec.kind != kind:
                continue
            for key in keys:
                if key is None:
                    continue
                if any(fnmatchcase(key, pattern) for pattern in spec.match):
                    return spec.source_id
        return self.default_source

    def spec(self, source_id: str | None) -> SourceSpec:
        """The source ``source_id`` names (the default for unknown or None)."""
        return self.by_id.get(source_id or "", self.by_id[self.default_source])

    def clearance_of(self, groups: list[str] | tuple[str, ...]) -> str:
        """The most sensitive level any of ``groups`` may see."""
        levels = [self.clearance[g] for g in groups if g in self.clearance]
        levels.append(self.default_clearance)
        return max(levels, key=SENSITIVITY_ORDER.index)


def resolve_source(registry: SourceRegistry, kind: str, *keys: str | None) -> str:
    """Module-level alias of ``SourceRegistry.resolve`` (pure; used by stages)."""
    return registry.resolve(kind, *keys)


def above_clearance(sensitivity: str, clearance: str) -> bool:
    """Whether ``sensitivity`` is more sensitive than ``clearance`` allows."""
    return SENSITIVITY_ORDER.index(sensitivity) > SENSITIVITY_ORDER.index(clearance)


def load_registry(path: str | Path) -> SourceRegistry:
    """Parse a registry YAML file (``docs/sources.md``)."""
    with Path(path).open("r", encoding="utf-8") as handle:
        data: Any = yaml.safe_load(handle) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a source registry is a mapping")
    return SourceRegistry.model_validate(data)


class SourceRow(Record):
    """One source of one registry version, as stored in the ``sources`` table.

    Rows are append-only: a new registry version adds its rows, and readers
    take the newest ``registry_version`` (by ``loaded_at``).
    """

    table: ClassVar[str | None] = "sources"
    key: ClassVar[tuple[str, ...]] = ("registry_version", "source_id")

    registry_version: str
    registry_name: str
    source_id: str
    is_default: bool = False
    kind: str | None = None
    match: list[str] = Field(default_factory=list)
    owner: str
    scope: str
    description: str = ""
    authority: float | None = None
    freshness_half_life_days: float | None = None
    ttl_days: float | None = None
    sensitivity: str
    estimated_cost_tokens: int | None = None
    injection_risk: str
    invalidation: str
    invalidated: bool = False
    invalidated_reason: str | None = None
    #: The whole registry (canonical JSON), so readers rebuild it exactly.
    registry_json: str = "{}"
    loaded_at: datetime
    run_id: str = ""


def registry_rows(
    registry: SourceRegistry, loaded_at: datetime, run_id: str = ""
) -> list[SourceRow]:
    """The ``sources`` rows of ``registry`` (the default source included)."""
    whole = canonical_json(registry.model_dump(mode="json"))
    out = []
    for spec in registry.by_id.values():
        data = spec.model_dump()
        data["match"] = list(data["match"])
        out.append(
            SourceRow(
                registry_version=registry.registry_version,
                registry_name=registry.name,
                is_default=spec.source_id == registry.default_source,
                registry_json=whole,
                loaded_at=loaded_at,
                run_id=run_id,
                **data,
            )
        )
    return out


def registry_from_rows(rows: list[dict[str, Any]]) -> SourceRegistry:
    """Rebuild the registry of one version from its ``sources`` rows (each
    row carries the whole registry's canonical JSON, so the version is exact)."""
    if not rows:
        return SourceRegistry()
    return SourceRegistry.model_validate_json(rows[0]["registry_json"])


__all__ = [
    "DEFAULT_SOURCE_ID",
    "SENSITIVITY_ORDER",
    "SourceRegistry",
    "SourceRow",
    "SourceSpec",
    "above_clearance",
    "load_registry",
    "registry_from_rows",
    "registry_rows",
    "resolve_source",
]
