"""Pluggable unbounded sources of landing items for the stream job.

A source is anything with ``poll()`` (the items that became ready since the last
call), ``ack(items)`` (called after the items' micro-batch committed) and
``close()``; see ``LandingSource``. The job never looks behind it, so a Pub/Sub
subscription or a Kafka topic of "file landed" notifications (GCS/S3 object
events) fits the same three methods: ``poll`` pulls messages and stages each
object as a local file, ``ack`` acknowledges (commits offsets) only after the
snapshot committed. Redelivery after a crash is harmless because committed file
hashes are skipped and record ids are content hashes.

``FolderWatcher`` is the source used today: it polls a landing folder. A file is
handed over only once it is *settled*: its size and modification time are the
same on two consecutive polls (and again right after hashing), so a file still
being written is never read half-way. Writers that rename a finished file into
place (``x.jsonl.tmp`` -> ``x.jsonl``; hidden ``.x`` names are ignored too) are
picked up on the poll after the rename. A file that changes after it was handed
over (an appended JSONL) is handed over again with its new hash, like ``nightly``
does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ctxledger.pipelines.ingest.landing import (
    TRANSCRIPT_SUFFIXES,
    LandingItem,
    NotRegularFileError,
    Refusal,
    check_entry,
    refused_item,
    sha256_file,
    tenant_for,
    walk_landing,
)


@runtime_checkable
class LandingSource(Protocol):
    """What the stream job needs from a source (see module docstring)."""

    def poll(self) -> list[LandingItem]:
        """Items that became ready since the last poll (may be empty)."""
        ...

    def unsettled(self) -> int:
        """How many inputs were seen but are not ready yet (still being written)."""
        ...

    def ack(self, items: Sequence[LandingItem]) -> None:
        """The items' micro-batch committed: the source may forget them."""
        ...

    def close(self) -> None:
        """Release connections (a no-op for a folder)."""
        ...


@dataclass(frozen=True)
class Stat:
    """What a poll sees of a file without reading it."""

    size: int
    mtime_ns: int


def scan(
    root: str | Path, suffixes: Iterable[str] = TRANSCRIPT_SUFFIXES
) -> tuple[dict[str, Stat], list[str]]:
    """``({rel_path: Stat}, skipped)`` of the transcript files under ``root``.

    Hidden files and folders are left out (writers use them as temporary names);
    other extensions are listed as skipped. A file removed between the listing and
    its ``stat`` is simply not seen this time.
    """
    found: dict[str, Stat] = {}
    skipped: list[str] = []
    for path, rel, wanted in walk_landing(root, tuple(s.lower() for s in suffixes)):
        if not wanted:
            skipped.append(rel)
            continue
        try:
            st = path.stat()
        except OSError:
            try:  # a dangling or looping symlink: refused once it is settled
                st = path.lstat()
            except OSError:
                continue
        found[rel] = Stat(st.st_size, st.st_mtime_ns)
    return found, skipped


class FolderWatcher:
    """A landing folder as an unbounded source of settled files."""

    def __init__(
        self,
        root: str | Path,
        default_tenant: str = "default",
        suffixes: Iterable[str] = TRANSCRIPT_SUFFIXES,
    ):
        self.root = Path(root).resolve()
        self.default_tenant = default_tenant
        self.suffixes = tuple(suffixes)
        #: The previous poll's listing: a file is settled when it did not change.
        self._last: dict[str, Stat] = {}
        #: The stat each path had when it was last handed over.
        self._emitted: dict[str, Stat] = {}
        #: Files seen on the last poll that are not handed over yet.
        self._unsettled = 0
        #: Files with other extensions (listed in the job's summary, never read).
        self.skipped: set[str] = set()

    def poll(self) -> list[LandingItem]:
        listing, skipped = scan(self.root, self.suffixes)
        self.skipped.update(skipped)
        ready: list[LandingItem] = []
        waiting = 0
        for rel, stat in listing.items():
            if self._emitted.get(rel) == stat:
                continue
            if self._last.get(rel) != stat:
                waiting += 1  # new or still changing: look again next poll
                continue
            item = self._settled_item(rel, stat)
            if item is None:
                waiting += 1
                continue
            self._emitted[rel] = stat
            ready.append(item)
        # Forget files that left the folder, so a file put back is seen again.
        self._emitted = {r: s for r, s in self._emitted.items() if r in listing}
        self._last = listing
        self._unsettled = waiting
        return ready

    def _settled_item(self, rel: str, stat: Stat) -> LandingItem | None:
        """Hash the file; None when it changed while being hashed. An entry
        that must not be read (FIFO, broken or escaping symlink: ``check_entry``)
        is handed over as a refused item, which becomes a dead letter."""
        path = self.root / rel
        tenant = tenant_for(rel, self.default_tenant)
        refusal = check_entry(path, self.root)
        if refusal is not None:
            return refused_item(path, rel, tenant, refusal)
        try:
            digest = sha256_file(path)
            after = path.stat()
        except NotRegularFileError as exc:
            return refused_item(
                path, rel, tenant, Refusal("not_regular_file", str(exc))
            )
        except OSError:
            return None
        if Stat(after.st_size, after.st_mtime_ns) != stat:
            return None
        return LandingItem(
            path=str(path),
            rel_path=rel,
            file_hash=digest,
            size_bytes=stat.size,
            tenant_id=tenant,
        )

    def unsettled(self) -> int:
        return self._unsettled

    def ack(self, items: Sequence[LandingItem]) -> None:
        """Nothing to acknowledge: committed hashes live in the warehouse."""

    def close(self) -> None:
        """Nothing to release."""
