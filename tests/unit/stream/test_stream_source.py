"""The folder watcher hands over a file only once it stopped changing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxledger.pipelines.ingest.landing import sha256_file
from ctxledger.pipelines.stream.source import FolderWatcher, LandingSource, scan


def write(path: Path, text: str, mtime_ns: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


def test_it_is_a_landing_source(tmp_path):
    assert isinstance(FolderWatcher(tmp_path), LandingSource)


def test_a_file_is_handed_over_on_the_poll_after_it_settled(tmp_path):
    watcher = FolderWatcher(tmp_path, "acme")
    write(tmp_path / "tenant=t1" / "a.jsonl", "{}\n")
    assert watcher.poll() == []  # first sight: maybe still being written
    assert watcher.unsettled() == 1
    (item,) = watcher.poll()
    assert item.rel_path == "tenant=t1/a.jsonl"
    assert item.tenant_id == "t1"
    assert item.file_hash == sha256_file(tmp_path / "tenant=t1" / "a.jsonl")
    assert item.size_bytes == 3
    assert watcher.unsettled() == 0
    assert watcher.poll() == []  # handed over once


def test_a_file_still_growing_is_not_read_half_way(tmp_path):
    watcher = FolderWatcher(tmp_path)
    path = tmp_path / "a.jsonl"
    write(path, "line 1\n", mtime_ns=1_000)
    watcher.poll()
    write(path, "line 1\nline 2\n", mtime_ns=2_000)  # the writer appended
    assert watcher.poll() == []
    assert watcher.unsettled() == 1
    (item,) = watcher.poll()
    assert item.size_bytes == len("line 1\nline 2\n")


def test_same_size_rewrite_is_seen_by_its_mtime(tmp_path):
    watcher = FolderWatcher(tmp_path)
    path = tmp_path / "a.jsonl"
    write(path, "aaaa\n", mtime_ns=1_000)
    watcher.poll()
    write(path, "bbbb\n", mtime_ns=2_000)
    assert watcher.poll() == []


def test_a_file_changed_after_hand_over_is_handed_over_again(tmp_path):
    watcher = FolderWatcher(tmp_path)
    path = tmp_path / "a.jsonl"
    write(path, "v1\n", mtime_ns=1_000)
    watcher.poll()
    (first,) = watcher.poll()
    write(path, "v1\nv2\n", mtime_ns=2_000)
    assert watcher.poll() == []
    (second,) = watcher.poll()
    assert second.file_hash != first.file_hash


def test_hidden_temporary_files_are_ignored_until_renamed_into_place(tmp_path):
    watcher = FolderWatcher(tmp_path)
    write(tmp_path / ".a.jsonl.tmp", "{}\n")
    write(tmp_path / ".hidden" / "b.jsonl", "{}\n")
    watcher.poll()
    assert watcher.poll() == []
    assert watcher.unsettled() == 0
    os.rename(tmp_path / ".a.jsonl.tmp", tmp_path / "a.jsonl")
    watcher.poll()
    assert [i.rel_path for i in watcher.poll()] == ["a.jsonl"]


def test_other_extensions_are_listed_as_skipped(tmp_path):
    write(tmp_path / "notes.txt", "x")
    write(tmp_path / "a.ndjson", "{}\n")
    found, skipped = scan(tmp_path)
    assert list(found) == ["a.ndjson"]
    assert skipped == ["notes.txt"]
    watcher = FolderWatcher(tmp_path)
    watcher.poll()
    assert watcher.skipped == {"notes.txt"}


def test_a_file_removed_and_put_back_is_seen_again(tmp_path):
    watcher = FolderWatcher(tmp_path)
    path = tmp_path / "a.jsonl"
    write(path, "{}\n", mtime_ns=1_000)
    watcher.poll()
    assert len(watcher.poll()) == 1
    path.unlink()
    watcher.poll()
    write(path, "{}\n", mtime_ns=1_000)
    watcher.poll()
    assert len(watcher.poll()) == 1


def test_missing_landing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="landing folder not found"):
        FolderWatcher(tmp_path / "nope").poll()
