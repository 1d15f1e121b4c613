"""Landing discovery, tenants, quarantine permissions."""

from __future__ import annotations

import hashlib
import stat

import pytest

from pipelines.ingest.landing import (
    discover,
    parse_landing_file,
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
