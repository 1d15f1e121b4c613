"""Landing discovery, tenants, quarantine permissions."""

from __future__ import annotations

import hashlib
import os
import signal
import stat

import pytest

from ctxledger.pipelines.ingest.landing import (
    KnownFiles,
    NotRegularFileError,
    discover,
    landing_identity,
    new_items,
    parse_landing_file,
    sha256_file,
    tenant_for,
    write_quarantine,
)


@pytest.mark.parametrize(
    ("rel", "tenant"),
    [
        ("a.jsonl", "dflt"),
        ("tenant=acme/a.jsonl", "acme"),
        ("x/tenant=globex/y/a.json", "globex"),
        ("tenant=/a.json", "dflt"),
        ("tenant=acme.jsonl", "dflt"),
    ],
)
def test_tenant_comes_from_a_tenant_folder(rel, tenant):
    assert tenant_for(rel, "dflt") == tenant


def test_discover_hashes_files_and_reports_skipped_ones(tmp_path):
    (tmp_path / "tenant=t1").mkdir()
    (tmp_path / "tenant=t1" / "a.jsonl").write_bytes(b'{"x": 1}\n')
    (tmp_path / "notes.md").write_text("not a transcript")
    (tmp_path / ".hidden.jsonl").write_text("{}")
    found = discover(tmp_path, "dflt")
    assert [i.rel_path for i in found.items] == ["tenant=t1/a.jsonl"]
    item = found.items[0]
    assert item.tenant_id == "t1"
    assert item.file_hash == hashlib.sha256(b'{"x": 1}\n').hexdigest()
    assert found.skipped == ["notes.md"]


def test_discover_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="landing folder not found"):
        discover(tmp_path / "nope", "t")


def test_file_changed_after_discovery_is_rejected_whole(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"session_id": "s", "role": "user", "content": "hi"}\n')
    (item,) = discover(tmp_path, "t").items
    path.write_text('{"session_id": "s", "role": "user", "content": "changed"}\n')
    parsed = parse_landing_file(item, None, 1 << 20)
    assert [r.reason_code for r in parsed.rejected] == ["file_changed_during_run"]
    assert parsed.sessions == []
    assert parsed.records_in == parsed.records_out + parsed.records_dead


def test_quarantine_is_owner_only(tmp_path):
    ref = write_quarantine(tmp_path, "run_x", b"secret raw bytes")
    target = tmp_path / ref
    assert target.read_bytes() == b"secret raw bytes"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert write_quarantine(tmp_path, "run_x", b"secret raw bytes") == ref


# ------------------------------------------------- tenant-aware landing identity
LINE = b'{"session_id": "s", "role": "user", "content": "hi"}\n'


def _put(root, rel, data=LINE):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_same_bytes_under_two_tenants_are_two_files(tmp_path):
    _put(tmp_path, "tenant=a/x.jsonl")
    _put(tmp_path, "tenant=b/x.jsonl")
    _put(tmp_path, "tenant=b/copy/x.jsonl")  # same tenant, same bytes: one file
    _put(tmp_path, "tenant=b/subject=u1/x.jsonl")  # another subject: its own file
    found = discover(tmp_path, "dflt")
    assert len({i.file_hash for i in found.items}) == 1
    fresh = new_items(found.items, KnownFiles())
    assert [(i.tenant_id, i.rel_path) for i in fresh] == [
        ("a", "tenant=a/x.jsonl"),
        ("b", "tenant=b/x.jsonl"),
        ("b", "tenant=b/subject=u1/x.jsonl"),
    ]
    assert len({i.landing_id for i in fresh}) == 3


def test_stored_rows_are_recognised_old_ones_and_erased_ones_too(tmp_path):
    _put(tmp_path, "tenant=a/x.jsonl")
    _put(tmp_path, "tenant=b/x.jsonl")
    _put(tmp_path, "tenant=c/subject=u/x.jsonl")
    found = discover(tmp_path, "dflt")
    digest = found.items[0].file_hash
    # ``landing_files`` rows as the old code wrote them: (file_hash, tenant, path).
    known = KnownFiles.from_rows(
        [(digest, "a", "tenant=a/x.jsonl"), (digest, "c", f"erased:{digest}")]
    )
    assert [i.rel_path for i in new_items(found.items, known)] == ["tenant=b/x.jsonl"]
    # The identity depends on folders, not on the job's default tenant.
    assert landing_identity("x.jsonl", digest) != landing_identity(
        "tenant=dflt/x.jsonl", digest
    )
    assert landing_identity("tenant=a/x.jsonl", digest) == landing_identity(
        "tenant=a/deeper/y.jsonl", digest
    )


# ------------------------------------------------------------ hostile entries
@pytest.fixture
def no_hang():
    """Fail (instead of hanging the suite) if something opens a FIFO."""

    def _raise(*_):
        raise TimeoutError("blocked: a FIFO was opened")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _reasons(found):
    return {i.rel_path: (i.refusal, i.refusal_detail) for i in found.items}


def test_special_entries_are_refused_without_being_opened(tmp_path, no_hang):
    root, outside = tmp_path / "landing", tmp_path / "outside"
    outside.mkdir()
    secret = _put(outside, "passwd.jsonl", b'{"root": "x"}\n')
    os.mkfifo(outside / "pipe.jsonl")
    _put(root, "good.jsonl")
    _put(root, "sub/real.jsonl")
    os.mkfifo(root / "fifo.jsonl")
    (root / "dangling.jsonl").symlink_to(root / "missing.jsonl")
    (root / "loop_a.jsonl").symlink_to(root / "loop_b.jsonl")
    (root / "loop_b.jsonl").symlink_to(root / "loop_a.jsonl")
    (root / "escape.jsonl").symlink_to(secret)
    (root / "escape_fifo.jsonl").symlink_to(outside / "pipe.jsonl")
    (root / "rel_escape.jsonl").symlink_to("../outside/passwd.jsonl")
    (root / "inside.jsonl").symlink_to("sub/real.jsonl")
    (root / "folder.jsonl").symlink_to(root / "sub", target_is_directory=True)
    (root / "linked_dir").symlink_to(outside, target_is_directory=True)
    found = discover(root, "dflt")
    got = _reasons(found)
    assert got["good.jsonl"] == (None, "")
    assert got["inside.jsonl"] == (None, "")  # a symlink inside the root is fine
    assert got["fifo.jsonl"] == ("not_regular_file", "FIFO, not a regular file")
    assert got["dangling.jsonl"] == ("broken_symlink", "dangling symlink")
    assert got["loop_a.jsonl"] == ("broken_symlink", "symlink loop")
    for rel in ("escape.jsonl", "escape_fifo.jsonl", "rel_escape.jsonl"):
        assert got[rel][0] == "outside_landing"
    assert got["folder.jsonl"][0] == "not_regular_file"
    assert found.skipped == ["linked_dir"]  # listed, never walked into
    assert not any(i.rel_path.startswith("linked_dir/") for i in found.items)
    outside_hash = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert outside_hash not in {i.file_hash for i in found.items}
    assert {i.rel_path for i in found.refused} == set(got) - {
        "good.jsonl",
        "inside.jsonl",
        "sub/real.jsonl",
    }
    for item in found.refused:
        parsed = parse_landing_file(item, None, 1 << 20)
        assert [(r.reason_code, r.source_offset, r.raw) for r in parsed.rejected] == [
            (item.refusal, "file", None)
        ]
        assert parsed.records_in == parsed.records_dead == 1
    # Re-running finds the same refused items (stable ids: nothing new twice).
    again = discover(root, "dflt")
    assert [i.landing_id for i in again.items] == [i.landing_id for i in found.items]


def test_unreadable_regular_file_is_a_dead_letter_not_a_crash(tmp_path, monkeypatch):
    _put(tmp_path, "ok.jsonl")
    locked = _put(tmp_path, "locked.jsonl")
    real_open = os.open

    def deny(path, *args, **kwargs):
        if str(path) == str(locked.resolve()):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    found = discover(tmp_path, "dflt")
    got = _reasons(found)
    assert got["locked.jsonl"] == ("file_unreadable", "PermissionError")
    assert got["ok.jsonl"] == (None, "")


def test_a_file_swapped_for_a_fifo_after_discovery_is_not_opened(tmp_path, no_hang):
    path = _put(tmp_path, "a.jsonl")
    (item,) = discover(tmp_path, "t").items
    path.unlink()
    os.mkfifo(path)
    parsed = parse_landing_file(item, None, 1 << 20)
    assert [r.reason_code for r in parsed.rejected] == ["not_regular_file"]
    with pytest.raises(NotRegularFileError):
        sha256_file(path)


def test_memory_inputs_get_the_same_identity_and_guards(tmp_path, no_hang):
    from ctxledger.pipelines.memory.inputs import discover_inputs, new_inputs

    outside = _put(tmp_path / "elsewhere", "c.jsonl", b"{}\n")
    _put(tmp_path, "c/tenant=a/x.jsonl", b"{}\n")
    _put(tmp_path, "c/tenant=b/x.jsonl", b"{}\n")
    os.mkfifo(tmp_path / "c" / "fifo.jsonl")
    (tmp_path / "c" / "out.jsonl").symlink_to(outside)
    items = discover_inputs(tmp_path / "c", "consent", "dflt")
    assert {i.rel_path: i.refusal for i in items} == {
        "consent/fifo.jsonl": "not_regular_file",
        "consent/out.jsonl": "outside_landing",
        "consent/tenant=a/x.jsonl": None,
        "consent/tenant=b/x.jsonl": None,
    }
    assert len(new_inputs(tmp_path / "c", None, "dflt", KnownFiles())) == 4


def test_stream_folder_watcher_hands_refused_entries_over_once(tmp_path, no_hang):
    from ctxledger.pipelines.stream.source import FolderWatcher

    _put(tmp_path, "tenant=a/x.jsonl")
    os.mkfifo(tmp_path / "tenant=a" / "pipe.jsonl")
    (tmp_path / "tenant=a" / "gone.jsonl").symlink_to("nowhere.jsonl")
    watcher = FolderWatcher(tmp_path, "dflt")
    assert watcher.poll() == []  # not settled yet
    ready = {i.rel_path: i.refusal for i in watcher.poll()}
    assert ready == {
        "tenant=a/x.jsonl": None,
        "tenant=a/pipe.jsonl": "not_regular_file",
        "tenant=a/gone.jsonl": "broken_symlink",
    }
    assert watcher.poll() == []


def test_a_file_name_that_is_not_utf8_is_refused_and_stored_escaped(tmp_path):
    """Python decodes such names to lone surrogates, which no Parquet column can
    hold: the entry is refused (never read) under a storable, escaped name."""
    _put(tmp_path, "tenant=a/ok.jsonl")
    bad = os.path.join(os.fsencode(tmp_path / "tenant=a"), b"caf\xe9.jsonl")
    with open(bad, "wb") as handle:
        handle.write(b'{"role": "user", "content": "hello"}\n')
    found = discover(tmp_path, "dflt")
    got = _reasons(found)
    assert got["tenant=a/ok.jsonl"] == (None, "")
    assert got["tenant=a/caf\\xe9.jsonl"] == (
        "invalid_text",
        "file name is not valid UTF-8",
    )
    for item in found.items:
        item.rel_path.encode("utf-8")  # storable
        assert item.tenant_id == "a"
