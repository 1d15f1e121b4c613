"""Landing folders: discover files, hash them, find their tenant, parse one file.

A landing file is identified by its *landing identity* (``landing_identity``):
a hash of its ``tenant=<id>`` folder, its ``subject=<id>`` folder and the sha256
of its bytes. The same bytes under two tenants (or two subjects) are two files,
both ingested; the same bytes under two names of one tenant and subject are one
file. The nightly job skips identities the warehouse already holds, so re-running
over the same landing folder is a no-op, and a file that grew since the last run
is processed again (its unchanged records de-duplicate on their content-hash ids).
The identity is computed from the stored ``path`` and ``file_hash`` columns, so a
warehouse written before identities existed is recognised as it is.

Landing folders are not trusted: only regular files inside the landing root are
ever opened (``check_entry``). FIFOs, sockets, devices, folders behind symlinks,
dangling or looping symlinks and symlinks that resolve outside the root are never
read (not even hashed); each becomes a *refused* ``LandingItem`` whose reason
(``outside_landing``, ``not_regular_file``, ``broken_symlink``,
``cross_scope_link``, ``file_unreadable``) ends as a dead letter, so the run goes
on and commits the good files. A symlink may point at another file of its own
``tenant=``/``subject=`` folders (then it is the same file: one identity); one
whose target lies under another tenant or subject folder is refused
(``cross_scope_link``), so a link can never carry one tenant's bytes into
another's scope. See docs/landing.md.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from ctxledger.pipelines.atomic import sha256_of, write_atomic
from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import DraftSession, Rejected, SourceFile
from ctxledger.pipelines.ingest.subjects import subject_from_path
from ctxledger.schemas.base import content_hash

#: Extensions the nightly job treats as transcripts; other files are listed as
#: skipped in the run output (never silently).
TRANSCRIPT_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
TENANT_SEGMENT = "tenant="
#: ``landing_files.path`` of a file whose subject was erased (``warehouse.memory_api``).
ERASED_PREFIX = "erased:"
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class LandingItem:
    """One file found in a landing folder.

    ``refusal`` is set (a reason code) for an entry that must not be read: its
    ``file_hash`` is then a hash of the entry's path and reason (no bytes were
    read), and the ingest stage turns it into one dead letter.
    """

    path: str
    rel_path: str
    file_hash: str
    size_bytes: int
    tenant_id: str
    refusal: str | None = None
    refusal_detail: str = ""

    @property
    def landing_id(self) -> str:
        return landing_identity(self.rel_path, self.file_hash)


@dataclass
class Discovery:
    """What a scan of a landing folder found."""

    items: list[LandingItem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def refused(self) -> list[LandingItem]:
        """Entries that are not read (dead letters with a reason)."""
        return [i for i in self.items if i.refusal]


@dataclass(frozen=True)
class Refusal:
    """Why a landing entry is not read: a reason code and a payload-free detail."""

    reason: str
    detail: str


class NotRegularFileError(OSError):
    """A path that is not a regular file where one was about to be opened."""


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


# ------------------------------------------------------------------ safe reads
def file_kind(mode: int) -> str:
    """A human name of a file type (for dead-letter details)."""
    for test, name in (
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symlink"),
    ):
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


def open_regular(path: str | Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file.

    Checked with ``stat`` before opening (a FIFO would block ``open``, a device
    may act on it), opened with ``O_NONBLOCK`` in case it was swapped for one in
    between, and checked again with ``fstat`` on what was actually opened.
    Raises ``NotRegularFileError`` (an ``OSError``) or the ``OSError`` of the call.
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(f"a {file_kind(mode)}, not a regular file")
    fd = os.open(path, _READ_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(f"a {file_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | Path) -> bytes:
    """All bytes of a regular file (see ``open_regular``)."""
    with os.fdopen(open_regular(path), "rb") as handle:
        return handle.read()


def hash_regular(path: str | Path, chunk: int = 1 << 20) -> tuple[str, int]:
    """``(sha256, size)`` of a regular file, from one open descriptor."""
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(open_regular(path), "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """The sha256 of a regular file's bytes (never opens a FIFO or device)."""
    return hash_regular(path, chunk)[0]


def check_entry(path: str | Path, root: str | Path) -> Refusal | None:
    """Why the entry ``path`` under the resolved landing ``root`` must not be
    read, or None when it is a regular file inside the root.

    Only metadata is looked at (``lstat``/``realpath``/``stat``): the bytes of a
    file outside the root are never read, not even to hash them.
    """
    if not utf8_name(str(path)):
        return Refusal(reasons.INVALID_TEXT, "file name is not valid UTF-8")
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
        target = os.path.realpath(path, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Refusal(reasons.BROKEN_SYMLINK, "symlink loop")
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return Refusal(reasons.BROKEN_SYMLINK, "dangling symlink")
        return Refusal(reasons.FILE_UNREADABLE, f"{type(exc).__name__} on stat")
    if not Path(target).is_relative_to(root):
        what = "symlink" if link else "path"
        return Refusal(
            reasons.OUTSIDE_LANDING, f"{what} resolves outside the landing folder"
        )
    if _scope(_entry_rel(path, root)) != _scope(Path(target).relative_to(root)):
        return Refusal(
            reasons.CROSS_SCOPE_LINK,
            "symlink target lies under another tenant=/subject= folder",
        )
    try:
        mode = os.stat(target).st_mode
    except OSError as exc:
        return Refusal(reasons.FILE_UNREADABLE, f"{type(exc).__name__} on stat")
    if not stat.S_ISREG(mode):
        via = "symlink to a " if link else ""
        return Refusal(
            reasons.NOT_REGULAR_FILE, f"{via}{file_kind(mode)}, not a regular file"
        )
    return None


def _entry_rel(path: str | Path, root: str | Path) -> str:
    """Where the entry ``path`` itself sits under ``root``: its folders resolved,
    its last component not (a symlink is judged by the folder it was put in)."""
    absolute = os.path.abspath(path)
    folder = os.path.realpath(os.path.dirname(absolute))
    return os.path.relpath(os.path.join(folder, os.path.basename(absolute)), root)


def _scope(rel_path: str | Path) -> tuple[str, str]:
    """The ``tenant=`` and ``subject=`` folders of a landing path (the parts of
    ``landing_identity`` that come from the path)."""
    rel = Path(rel_path).as_posix()
    return tenant_for(rel, ""), subject_from_path(rel) or ""


def utf8_name(name: str) -> bool:
    """Whether a path name from the file system is valid UTF-8 text. Python
    decodes other bytes to lone surrogates, which no Parquet or DuckDB column
    can hold: such a file is refused (``invalid_text``), never read."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def safe_rel(rel: str) -> str:
    """``rel`` as storable text: bytes that are not UTF-8 shown as ``\\xNN``."""
    if utf8_name(rel):
        return rel
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


# -------------------------------------------------------------------- identity
def tenant_for(rel_path: str, default: str) -> str:
    """The tenant a file belongs to: a ``tenant=<id>`` folder on its path wins."""
    for part in Path(rel_path).parts[:-1]:
        if part.startswith(TENANT_SEGMENT) and len(part) > len(TENANT_SEGMENT):
            return part[len(TENANT_SEGMENT) :]
    return default


def landing_identity(rel_path: str, file_hash: str, namespace: str = "") -> str:
    """What makes a landing file "the same file": its ``tenant=`` folder, its
    ``subject=`` folder and its bytes (``file_hash``), within ``namespace``
    (e.g. consent vs system records).

    Only path folders count, not the job's default tenant nor metadata inside
    the file, so the identity of a stored row is computed from its ``path`` and
    ``file_hash`` columns alone (rows written before identities existed too).
    """
    tenant = tenant_for(rel_path, "")
    return content_hash(
        namespace, tenant, subject_from_path(rel_path) or "", file_hash, prefix="lid_"
    )


class _Identified(Protocol):
    @property
    def landing_id(self) -> str: ...

    @property
    def tenant_id(self) -> str: ...

    @property
    def file_hash(self) -> str: ...


Item = TypeVar("Item", bound=_Identified)


@dataclass
class KnownFiles:
    """Landing identities a committed run already processed.

    Built from stored ``(file_hash, tenant_id, path[, namespace])`` rows. A row
    whose path was erased (``erased:<sha256>``, a subject's erasure) lost its
    folders: it matches any file of its tenant with the same bytes, so an
    erased file is never ingested again.
    """

    ids: set[str] = field(default_factory=set)
    erased: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[str]]) -> KnownFiles:
        known = cls()
        for row in rows:
            file_hash, tenant_id, path = row[0], row[1], row[2]
            namespace = row[3] if len(row) > 3 else ""
            if str(path).startswith(ERASED_PREFIX):
                known.erased.add((tenant_id, file_hash))
            else:
                known.ids.add(landing_identity(path, file_hash, namespace))
        return known

    def __contains__(self, item: _Identified) -> bool:
        return (
            item.landing_id in self.ids
            or (item.tenant_id, item.file_hash) in self.erased
        )

    def add(self, items: Iterable[_Identified]) -> None:
        self.ids.update(i.landing_id for i in items)

    def __len__(self) -> int:
        return len(self.ids) + len(self.erased)


def new_items(items: Iterable[Item], known: KnownFiles) -> list[Item]:
    """Items whose identity is not ``known``; the same identity under two names
    (same tenant and subject folder, same bytes) is one file: the first wins."""
    unique: dict[str, Item] = {}
    for item in items:
        if item not in known:
            unique.setdefault(item.landing_id, item)
    return list(unique.values())


def refused_hash(rel_path: str, refusal: Refusal) -> str:
    """A stand-in ``file_hash`` for an entry that is not read: stable while the
    entry stays as it is, different once it is replaced by a readable file."""
    return hashlib.sha256(
        "\x00".join(("refused", rel_path, refusal.reason, refusal.detail)).encode(
            "utf-8", "surrogateescape"
        )
    ).hexdigest()


# ------------------------------------------------------------------- discovery
def discover(
    landing: str | Path,
    default_tenant: str,
    suffixes: Iterable[str] = TRANSCRIPT_SUFFIXES,
) -> Discovery:
    """Every transcript file under ``landing`` (sorted, hidden entries skipped);
    entries that must not be read are refused items (see ``check_entry``)."""
    found = Discovery()
    root = Path(landing).resolve()
    for path, rel, wanted in walk_landing(root, tuple(suffixes)):
        if not wanted:
            found.skipped.append(rel)
            continue
        tenant = tenant_for(rel, default_tenant)
        entry = hash_entry(path, root)
        if isinstance(entry, Refusal):
            found.items.append(refused_item(path, rel, tenant, entry))
        else:
            target, digest, size = entry
            found.items.append(LandingItem(target, rel, digest, size, tenant))
    return found


def hash_entry(path: str | Path, root: str | Path) -> tuple[str, str, int] | Refusal:
    """``(resolved path, sha256, size)`` of the regular file ``path`` inside the
    resolved ``root``, or why it is not read (``check_entry``, then the open)."""
    refusal = check_entry(path, root)
    if refusal is not None:
        return refusal
    target = os.path.realpath(path)
    try:
        digest, size = hash_regular(target)
    except NotRegularFileError as exc:
        return Refusal(reasons.NOT_REGULAR_FILE, str(exc))
    except OSError as exc:
        return Refusal(reasons.FILE_UNREADABLE, type(exc).__name__)
    return target, digest, size


def refused_item(path: Path, rel: str, tenant: str, refusal: Refusal) -> LandingItem:
    """The ``LandingItem`` of an entry that is not read (one dead letter)."""
    return LandingItem(
        path=str(path),
        rel_path=rel,
        file_hash=refused_hash(rel, refusal),
        size_bytes=0,
        tenant_id=tenant,
        refusal=refusal.reason,
        refusal_detail=refusal.detail,
    )


def walk_landing(
    landing: str | Path, suffixes: tuple[str, ...]
) -> Iterator[tuple[Path, str, bool]]:
    """``(path, rel_path, wanted)`` of every entry under ``landing``, sorted, with
    hidden files and folders left out (writers use them as temporary names);
    ``wanted``: the lower-cased name ends with one of ``suffixes``.

    Symlinks are never followed into folders (no loops, no escapes): a symlink
    to a folder is an entry like a file (``check_entry`` refuses it), and so are
    FIFOs, sockets and dangling links. Only ``lstat``-level metadata is read.
    """
    root = Path(landing)
    if not root.is_dir():
        raise FileNotFoundError(f"landing folder not found: {root}")
    for dirpath, dirnames, filenames in os.walk(root):
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and d not in linked
        )
        for name in sorted(filenames + linked):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            rel = safe_rel(path.relative_to(root).as_posix())
            yield path, rel, name.lower().endswith(suffixes)


def parse_landing_file(
    item: LandingItem,
    source_format: str | None,
    max_record_bytes: int,
    subject_key: str = "subject_id",
) -> ParsedFile:
    """Read one landing file through its reader, checking it did not change.

    The bytes are hashed again after reading: a file modified since discovery is
    rejected as a whole (``file_changed_during_run``) and stays unprocessed, so the
    next run picks up its final content.
    """
    from ctxledger.pipelines.ingest.readers import (
        detect_format,
        expected_records,
        read_source,
    )

    if item.refusal:
        return _whole_file_rejected(item, item.refusal, item.refusal_detail)
    try:
        data = read_regular(item.path)
    except NotRegularFileError as exc:
        return _whole_file_rejected(item, reasons.NOT_REGULAR_FILE, str(exc))
    except OSError as exc:
        return _whole_file_rejected(item, reasons.FILE_UNREADABLE, type(exc).__name__)
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
        subject_key=subject_key,
    )
    fmt = source_format or detect_format(source)
    parsed = ParsedFile(item, fmt, records_in=expected_records(source, fmt))
    for result in read_source(source, fmt):
        if isinstance(result, Rejected):
            parsed.rejected.append(result)
        else:
            parsed.sessions.append(result)
    return parsed


def _whole_file_rejected(item: LandingItem, reason: str, detail: str) -> ParsedFile:
    """A file none of whose bytes are read: one dead letter at offset ``file``."""
    return ParsedFile(
        item, None, rejected=[Rejected(reason, "file", detail)], records_in=1
    )


def write_quarantine(root: str | Path, run_id: str, raw: bytes) -> str:
    """Keep rejected raw bytes in an owner-only file; return its path under root.

    The folder is 0700 and the file 0600: raw payloads may hold PII, so they stay
    out of the warehouse tables and out of dead-letter messages. The file is
    named by the sha256 of its bytes and written atomically
    (``pipelines.atomic.write_atomic``: a full disk leaves no truncated copy and
    no debris); an existing file whose bytes do not match its name (a copy cut
    short by an older version) is rewritten, never trusted because it exists.
    """
    digest = hashlib.sha256(raw).hexdigest()
    folder = Path(root) / "quarantine" / run_id
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    os.chmod(folder.parent, 0o700)
    target = folder / f"{digest}.bin"
    if sha256_of(target) != digest:
        write_atomic(target, raw, 0o600)
    return target.relative_to(Path(root)).as_posix()
