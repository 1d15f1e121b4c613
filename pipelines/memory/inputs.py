"""Memory input files: consent events and system records (JSONL).

``--consent FILE_OR_DIR`` and ``--system-records FILE_OR_DIR`` name them; every
``*.jsonl``/``*.ndjson``/``*.json`` file under a folder is read. Like landing files
they are identified by their landing identity (``tenant=``/``subject=`` folders
and the sha256 of their bytes, per kind; table ``memory_inputs``), so a nightly
run reads each version of a file once; a ``tenant=<id>/`` folder on the path
gives the tenant of lines that name none. Only regular files inside the folder
are read (docs/landing.md).

A system-record line (docs/memory.md)::

    {"subject_id": "u-1", "purpose": "support", "key": "api_key_created",
     "text": "Key created 3 days ago", "observed_at": "2026-11-27T09:00:00Z"}

Optional: ``tenant_id``, ``kind`` (default ``account_state``), ``valid_from``
(default ``observed_at``), ``valid_to``, ``source`` (default ``system_record``;
one of ``user_stated | system_record | model_inferred``, any other value is
stored as ``unknown``: kept and counted, never served, not a dead letter).
The text is redacted like any message before it becomes a candidate (the caller
passes the redactor).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Rejected, SourceFile
from ctxledger.pipelines.ingest.landing import (
    KnownFiles,
    NotRegularFileError,
    Refusal,
    hash_entry,
    landing_identity,
    new_items,
    read_regular,
    refused_hash,
    tenant_for,
    walk_landing,
)
from ctxledger.pipelines.ingest.sources import JsonRecord, iter_jsonl
from ctxledger.pipelines.memory.consent import ConsentError, ConsentLine, consent_record
from ctxledger.pipelines.memory.extract import (
    EXTRACTOR_VERSION,
    MemoryCandidate,
    memory_id_for,
)
from ctxledger.schemas.memory import (
    ConsentRecord,
    MemoryKind,
    MemorySettings,
    Provenance,
    source_kind,
)

INPUT_SUFFIXES = (".jsonl", ".ndjson", ".json")
CONSENT = "consent"
SYSTEM_RECORDS = "system_records"
SYSTEM_EXTRACTOR = "system_input"


@dataclass(frozen=True)
class MemoryInputItem:
    """One consent or system-record file to read.

    ``refusal`` (a reason code) marks an entry that is never read: a FIFO, a
    broken symlink, a symlink out of the input folder (``check_entry``); its
    ``file_hash`` then stands for the entry, and it becomes one dead letter.
    """

    path: str
    rel_path: str
    kind: str
    file_hash: str
    size_bytes: int
    tenant_id: str
    refusal: str | None = None
    refusal_detail: str = ""

    @property
    def landing_id(self) -> str:
        """Tenant folder + subject folder + bytes, per kind (``landing_identity``)."""
        return landing_identity(self.rel_path, self.file_hash, self.kind)


def discover_inputs(
    location: str | Path | None, kind: str, default_tenant: str
) -> list[MemoryInputItem]:
    """Input files at ``location`` (one file, or every input file under a folder).

    Under a folder, only regular files inside it are read (``check_entry``);
    other entries with an input suffix become refused items (dead letters).
    """
    if location is None:
        return []
    root = Path(location)
    if not root.exists():
        raise FileNotFoundError(f"{kind} input not found: {root}")
    if not root.is_dir():
        # One named file: the operator chose it, symlink or not (still never
        # opened unless it is a regular file).
        resolved = root.resolve()
        return [_item(resolved, root.name, kind, default_tenant, resolved.parent)]
    top = root.resolve()
    return [
        _item(path, rel, kind, default_tenant, top)
        for path, rel, wanted in walk_landing(top, INPUT_SUFFIXES)
        if wanted
    ]


def _item(
    path: Path, rel: str, kind: str, default_tenant: str, root: Path
) -> MemoryInputItem:
    tenant = tenant_for(rel, default_tenant)
    entry = hash_entry(path, root)
    if not isinstance(entry, Refusal):
        target, digest, size = entry
        return MemoryInputItem(target, f"{kind}/{rel}", kind, digest, size, tenant)
    refusal = entry
    return MemoryInputItem(
        path=str(path),
        rel_path=f"{kind}/{rel}",
        kind=kind,
        file_hash=refused_hash(f"{kind}/{rel}", refusal),
        size_bytes=0,
        tenant_id=tenant,
        refusal=refusal.reason,
        refusal_detail=refusal.detail,
    )


def new_inputs(
    consent: str | Path | None,
    system_records: str | Path | None,
    default_tenant: str,
    known: KnownFiles,
) -> list[MemoryInputItem]:
    """Input files whose landing identity no committed run has read yet (the
    same bytes under two ``tenant=`` folders are two files)."""
    items = discover_inputs(consent, CONSENT, default_tenant) + discover_inputs(
        system_records, SYSTEM_RECORDS, default_tenant
    )
    return new_items(items, known)


@dataclass
class ParsedInput:
    """What one input file gave: records, rejected lines, and its line count."""

    item: MemoryInputItem
    consent: list[ConsentRecord] = field(default_factory=list)
    candidates: list[MemoryCandidate] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    records_in: int = 0
    status: str = "processed"

    @property
    def records_out(self) -> int:
        return len(self.consent) + len(self.candidates)


def _read(item: MemoryInputItem, max_record_bytes: int) -> tuple[ParsedInput, list]:
    parsed = ParsedInput(item)
    refusal = (item.refusal, item.refusal_detail) if item.refusal else None
    if refusal is None:
        try:
            data = read_regular(item.path)
        except NotRegularFileError as exc:
            refusal = (reasons.NOT_REGULAR_FILE, str(exc))
        except OSError as exc:
            refusal = (reasons.FILE_UNREADABLE, type(exc).__name__)
    if refusal is not None:
        # Unreadable: read again next run; refused entries stay refused.
        if refusal[0] == reasons.FILE_UNREADABLE:
            parsed.status = "unreadable"
        parsed.records_in = 1
        parsed.rejected.append(Rejected(refusal[0], "file", refusal[1]))
        return parsed, []
    if hashlib.sha256(data).hexdigest() != item.file_hash:
        parsed.status = "changed"
        parsed.records_in = 1
        parsed.rejected.append(
            Rejected(
                reasons.FILE_CHANGED,
                "file",
                "file content changed between discovery and read; "
                "it will be read by the next run",
            )
        )
        return parsed, []
    source = SourceFile(
        path=item.rel_path,
        data=data,
        tenant_id=item.tenant_id,
        max_record_bytes=max_record_bytes,
    )
    records = list(iter_jsonl(source))
    parsed.records_in = len(records)
    return parsed, records


def _rejected_from(
    exc: ValidationError, offset: str, raw: bytes | None, model: type[BaseModel]
) -> Rejected:
    """A payload-free rejection: location parts other than ``model``'s field names
    (an unknown key is the data's own text) are written as ``*``."""
    code, detail = reasons.from_validation_error(exc, model.model_fields)
    return Rejected(code, offset, detail, raw)


def parse_consent_file(
    item: MemoryInputItem,
    settings: MemorySettings,
    run_id: str,
    max_record_bytes: int = 8 * 1024 * 1024,
) -> ParsedInput:
    """Consent events of one file; each bad line is rejected on its own."""
    parsed, records = _read(item, max_record_bytes)
    for record in records:
        if isinstance(record, Rejected):
            parsed.rejected.append(record)
            continue
        try:
            line = ConsentLine.model_validate(record.value)
            parsed.consent.append(
                consent_record(
                    line,
                    settings,
                    item.tenant_id,
                    f"{item.rel_path}#{record.offset}",
                    run_id,
                )
            )
        except ValidationError as exc:
            parsed.rejected.append(
                _rejected_from(exc, record.offset, record.raw, ConsentLine)
            )
        except ConsentError as exc:
            parsed.rejected.append(
                Rejected(exc.reason, record.offset, str(exc), record.raw)
            )
    return parsed


class SystemRecordLine(BaseModel):
    """One line of a system-record input file."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str | None = Field(default=None, min_length=1)
    subject_id: str = Field(min_length=1)
    purpose: str = Field(min_length=1)
    key: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=2000)
    kind: MemoryKind = "account_state"
    observed_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    #: Any JSON value: an unrecognised one is stored as ``unknown``.
    source: Any = None

    @field_validator("observed_at", "valid_from", "valid_to")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


#: ``redact(text, tenant_id) -> redacted text``.
RedactText = Callable[[str, str], str]


def parse_system_records_file(
    item: MemoryInputItem,
    settings: MemorySettings,
    redact: RedactText,
    max_record_bytes: int = 8 * 1024 * 1024,
) -> ParsedInput:
    """System-record candidates of one file, their text redacted."""
    parsed, records = _read(item, max_record_bytes)
    valid: list[tuple[JsonRecord, SystemRecordLine]] = []
    for record in records:
        if isinstance(record, Rejected):
            parsed.rejected.append(record)
            continue
        try:
            line = SystemRecordLine.model_validate(record.value)
        except ValidationError as exc:
            parsed.rejected.append(
                _rejected_from(exc, record.offset, record.raw, SystemRecordLine)
            )
            continue
        if line.purpose not in settings.purpose_names:
            parsed.rejected.append(
                Rejected(
                    "unknown_purpose",
                    record.offset,
                    "purpose is not listed in the policy",
                    record.raw,
                )
            )
            continue
        valid.append((record, line))
    for record, line in valid:
        tenant = line.tenant_id or item.tenant_id
        text = redact(line.text, tenant)
        provenance = Provenance(
            field="system_records",
            json_key=line.key,
            input_ref=f"{item.rel_path}#{record.offset}",
        )
        valid_from = line.valid_from or line.observed_at
        source = source_kind(line.source, "system_record")
        parsed.candidates.append(
            MemoryCandidate(
                memory_id=memory_id_for(
                    tenant,
                    line.subject_id,
                    line.purpose,
                    line.kind,
                    source,
                    text,
                    provenance,
                ),
                tenant_id=tenant,
                subject_id=line.subject_id,
                purpose=line.purpose,
                kind=line.kind,
                source=source,
                text=text,
                slot=line.key.strip().lower(),
                value=None,
                confidence=1.0,
                extractor=SYSTEM_EXTRACTOR,
                extractor_version=f"{SYSTEM_EXTRACTOR}-{EXTRACTOR_VERSION}",
                provenance=provenance,
                created_at=line.observed_at,
                valid_from=valid_from,
                valid_to=line.valid_to,
                source_file=item.rel_path,
                source_offset=record.offset,
            )
        )
    return parsed
