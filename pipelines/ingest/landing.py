"""Landing folders: discover files, hash them, find their tenant, parse one file.

A landing file is identified by the sha256 of its bytes. The nightly job skips
hashes the warehouse already holds, so re-running over the same landing folder is a
no-op, and a file that grew since the last run is processed again (its unchanged
records de-duplicate on their content-hash ids).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.ingest import reasons
from pipelines.ingest.drafts import DraftSession, Rejected, SourceFile

#: Extensions the nightly job treats as transcripts; other files are listed as
#: skipped in the run output (never silently).
TRANSCRIPT_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
TENANT_SEGMENT = "tenant="


@dataclass(frozen=True)
class LandingItem:
    """One file found in a landing folder."""

    path: str
    rel_path: str
    file_hash: str
    size_bytes: int
    tenant_id: str


@dataclass
class Discovery:
    """What a scan of a landing folder found."""

    items: list[LandingItem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass
class ParsedFile:
    """A landing file after its reader ran: sessions, rejections and counts."""

    item: LandingItem
    source_format: str | None
    sessions: list[DraftSession] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    records_in: int = 0

    @property
    def records_out(self) -> int:
        return sum(s.records for s in self.sessions)

    @property
    def records_dead(self) -> int:
        return sum(r.records for r in self.rejected)

    @property
    def messages_parsed(self) -> int:
        return sum(len(s.messages) for s in self.sessions)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def tenant_for(rel_path: str, default: str) -> str:
    """The tenant a file belongs to: a ``tenant=<id>`` folder on its path wins."""
    for part in Path(rel_path).parts[:-1]:
        if part.startswith(TENANT_SEGMENT) and len(part) > len(TENANT_SEGMENT):
            return part[len(TENANT_SEGMENT) :]
    return default


def discover(
    landing: str | Path,
    default_tenant: str,
    suffixes: Iterable[str] = TRANSCRIPT_SUFFIXES,
) -> Discovery:
    """Every transcript file under ``landing`` (sorted, hidden entries skipped)."""
    found = Discovery()
    for path, rel, wanted in walk_landing(landing, tuple(suffixes)):
        if not wanted:
            found.skipped.append(rel)
            continue
        found.items.append(
            LandingItem(
                path=str(path.resolve()),
                rel_path=rel,
                file_hash=sha256_file(path),
                size_bytes=path.stat().st_size,
                tenant_id=tenant_for(rel, default_tenant),
            )
        )
    return found


def walk_landing(
    landing: str | Path, suffixes: tuple[str, ...]
) -> Iterator[tuple[Path, str, bool]]:
    """``(path, rel_path, wanted)`` of every file under ``landing``, sorted, with
    hidden files and folders left out (writers use them as temporary names);
    ``wanted``: the lower-cased name ends with one of ``suffixes``."""
    root = Path(landing)
    if not root.is_dir():
        raise FileNotFoundError(f"landing folder not found: {root}")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            yield path, rel, name.lower().endswith(suffixes)


def parse_landing_file(
    item: LandingItem, source_format: str | None, max_record_bytes: int
) -> ParsedFile:
    """Read one landing file through its reader, checking it did not change.

    The bytes are hashed again after reading: a file modified since discovery is
    rejected as a whole (``file_changed_during_run``) and stays unprocessed, so the
    next run picks up its final content.
    """
    from pipelines.ingest.readers import detect_format, expected_records, read_source

    try:
        data = Path(item.path).read_bytes()
    except OSError as exc:
        return ParsedFile(
            item,
            source_format,
            rejected=[
                Rejected(reasons.FILE_UNREADABLE, "file", f"{type(exc).__name__}")
            ],
            records_in=1,
        )
    if hashlib.sha256(data).hexdigest() != item.file_hash:
        return ParsedFile(
            item,
            source_format,
            rejected=[
                Rejected(
                    reasons.FILE_CHANGED,
                    "file",
                    "file content changed between discovery and read; "
                    "it will be processed by the next run",
                )
            ],
            records_in=1,
        )
    source = SourceFile(
        path=item.rel_path,
        data=data,
        tenant_id=item.tenant_id,
        max_record_bytes=max_record_bytes,
    )
    fmt = source_format or detect_format(source)
    parsed = ParsedFile(item, fmt, records_in=expected_records(source, fmt))
    for result in read_source(source, fmt):
        if isinstance(result, Rejected):
            parsed.rejected.append(result)
        else:
            parsed.sessions.append(result)
    return parsed


def write_quarantine(root: str | Path, run_id: str, raw: bytes) -> str:
    """Keep rejected raw bytes in an owner-only file; return its path under root.

    The folder is 0700 and the file 0600: raw payloads may hold PII, so they stay
    out of the warehouse tables and out of dead-letter messages.
    """
    digest = hashlib.sha256(raw).hexdigest()
    folder = Path(root) / "quarantine" / run_id
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    os.chmod(folder.parent, 0o700)
    target = folder / f"{digest}.bin"
    if not target.exists():
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
    return target.relative_to(Path(root)).as_posix()
