"""Document landing shape: discovery, metadata layers, tombstones, identity."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxledger.pipelines.evidence.landing import (
    MetadataError,
    discover_documents,
    read_sidecar,
    resolve_metadata,
    split_front_matter,
    version_sort_key,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "evidence" / "runbooks"


def _meta(item, **kw):
    front, _ = split_front_matter(Path(item.path).read_text()) if item.path else ({}, 0)
    sidecar = read_sidecar(item.sidecar) if item.sidecar else {}
    return resolve_metadata(
        item, front, sidecar, ("*",), "untrusted", f"sha-{item.file_hash[:8]}", **kw
    )


def test_versioned_folder_with_manifest_gives_exact_times(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "tenant=acme")
    found = discover_documents(tmp_path, "default")
    assert len(found.items) == 11 and found.skipped == []
    metas = {(_meta(i).doc_id, _meta(i).version): _meta(i) for i in found.items}
    v2 = metas[("InfoInhibitor", "v02")]
    assert v2.tenant_id == "acme"
    assert v2.source == "manifest"
    # the manifest's commit time, not just the date in the file name
    assert v2.effective_from == datetime(2022, 2, 22, 13, 11, 51, tzinfo=UTC)
    assert v2.title == "Info Inhibitor"  # Hugo front matter
    assert v2.acl == ("*",) and v2.trust == "untrusted"


def test_file_name_pattern_without_manifest(tmp_path):
    folder = tmp_path / "KubeletTooManyPods"
    shutil.copytree(FIXTURES / "KubeletTooManyPods", folder)
    found = discover_documents(tmp_path, "t1")
    meta = _meta(next(i for i in found.items if "v03" in i.rel_path))
    assert (meta.doc_id, meta.version, meta.source) == (
        "KubeletTooManyPods",
        "v03",
        "file_name",
    )
    assert meta.effective_from == datetime(2022, 2, 2, tzinfo=UTC)
    assert meta.tenant_id == "t1"


def test_sidecar_beats_front_matter_and_fallback_uses_path_and_mtime(tmp_path):
    doc = tmp_path / "policies" / "refunds.md"
    doc.parent.mkdir()
    doc.write_text("---\ndoc_id: from-front\nversion: 2\nacl: [a]\n---\nBody\n")
    (tmp_path / "policies" / "refunds.md.meta.json").write_text(
        json.dumps({"doc_id": "refund-policy", "acl": ["billing", "support"],
                    "trust": "trusted", "authority": 0.9,
                    "effective_date": "2024-03-01"})
    )  # fmt: skip
    plain = tmp_path / "notes" / "howto.txt"
    plain.parent.mkdir()
    plain.write_text("plain text")
    os.utime(plain, (1_700_000_000, 1_700_000_000))
    items = {i.rel_path: i for i in discover_documents(tmp_path, "t").items}
    meta = _meta(items["policies/refunds.md"])
    assert meta.doc_id == "refund-policy" and meta.source == "sidecar"
    assert meta.version == "v02"  # from the front matter (an int)
    assert meta.acl == ("billing", "support")
    assert (meta.trust, meta.authority) == ("trusted", 0.9)
    fallback = _meta(items["notes/howto.txt"])
    assert fallback.doc_id == "notes/howto" and fallback.source == "fallback"
    assert fallback.version.startswith("sha-")
    assert fallback.effective_from == datetime.fromtimestamp(1_700_000_000, tz=UTC)


def test_sidecar_without_its_file_is_a_tombstone(tmp_path):
    (tmp_path / "gone.md.meta.yaml").write_text(
        "doc_id: refund-policy\ndeleted: true\neffective_date: 2025-01-01\n"
    )
    (item,) = discover_documents(tmp_path, "t").items
    assert item.tombstone and item.path is None
    meta = _meta(item)
    assert meta.deleted and meta.doc_id == "refund-policy"


def test_identity_covers_the_sidecar(tmp_path):
    (tmp_path / "a.md").write_text("same body")
    first = discover_documents(tmp_path, "t").items[0].file_hash
    (tmp_path / "a.md.meta.json").write_text('{"acl": ["x"]}')
    second = discover_documents(tmp_path, "t").items[0].file_hash
    assert first != second


@pytest.mark.parametrize(
    "front, sidecar, message",
    [
        ({"trust": "maybe"}, {}, "trust"),
        ({"authority": 3}, {}, "authority"),
        ({"acl": []}, {}, "acl"),
        ({"effective_date": "yesterday"}, {}, "ISO"),
        ({}, {"tenant": "globex"}, "tenant"),
    ],
)
def test_bad_metadata_raises(tmp_path, front, sidecar, message):
    folder = tmp_path / "tenant=acme"
    folder.mkdir()
    (folder / "a.md").write_text("x")
    (item,) = discover_documents(tmp_path, "t").items
    with pytest.raises(MetadataError, match=message):
        resolve_metadata(item, front, sidecar, ("*",), "untrusted", "sha-1")


def test_front_matter_split_and_natural_version_order():
    text = "---\ntitle: T\n---\n# Body\n"
    meta, start = split_front_matter(text)
    assert meta == {"title": "T"} and text[start:] == "# Body\n"
    assert split_front_matter("# no front matter") == ({}, 0)
    with pytest.raises(MetadataError):
        split_front_matter("---\nacl: [sre\n---\n")
    # broken front matter of another tool (a real runbook version) is skipped
    broken = "---\ntitle: Alertmanager Failed To Send Alerts weight: 20\n---\n# A\n"
    meta, start = split_front_matter(broken)
    assert meta == {} and broken[start:] == "# A\n"
    assert sorted(["v10", "v2", "v1"], key=version_sort_key) == ["v1", "v2", "v10"]


# ------------------------------------- tenant identity and hostile entries
def test_same_document_under_two_tenants_is_two_documents(tmp_path):
    from ctxledger.pipelines.ingest.landing import KnownFiles, new_items

    for tenant in ("a", "b"):
        (tmp_path / f"tenant={tenant}").mkdir()
        (tmp_path / f"tenant={tenant}" / "guide.md").write_text("# Guide\nSame.\n")
    found = discover_documents(tmp_path, "default")
    assert len({i.file_hash for i in found.items}) == 1
    fresh = new_items(found.items, KnownFiles())
    assert [i.tenant_id for i in fresh] == ["a", "b"]
    stored = [(fresh[0].file_hash, "a", fresh[0].rel_path)]
    left = new_items(found.items, KnownFiles.from_rows(stored))
    assert [i.rel_path for i in left] == ["tenant=b/guide.md"]


def test_hostile_document_entries_are_refused_unread(tmp_path):
    import signal

    from ctxledger.pipelines.evidence.documents import RunInfo, build_document
    from ctxledger.schemas.policy import Policy

    docs, outside = tmp_path / "docs", tmp_path / "outside"
    docs.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n")
    (outside / "acl.meta.json").write_text('{"acl": ["everyone"]}')
    (docs / "ok.md").write_text("# Ok\n")
    (docs / "escape.md").symlink_to(outside / "secret.md")
    os.mkfifo(docs / "pipe.md")
    (docs / "gone.md").symlink_to(docs / "nowhere.md")
    (docs / "sided.md").write_text("# Sided\n")
    (docs / "sided.md.meta.json").symlink_to(outside / "acl.meta.json")
    os.mkfifo(docs / "versions.json")  # a manifest that would block a reader

    def _raise(*_):
        raise TimeoutError("blocked: a FIFO was opened")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(10)
    try:
        found = discover_documents(docs, "default")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    got = {i.rel_path: (i.refusal, i.refusal_detail) for i in found.items}
    assert got == {
        "escape.md": ("outside_landing", "symlink resolves outside the landing folder"),
        "gone.md": ("broken_symlink", "dangling symlink"),
        "ok.md": (None, ""),
        "pipe.md": ("not_regular_file", "FIFO, not a regular file"),
        "sided.md": (
            "outside_landing",
            "sidecar: symlink resolves outside the landing folder",
        ),
    }
    assert found.skipped == ["versions.json"]
    run = RunInfo("run_x", "p1", "test")
    refused = next(i for i in found.items if i.rel_path == "pipe.md")
    built = build_document(refused, Policy(), lambda fields: [], run)
    assert built.version is None and built.file.dead == 1
    (letter,) = built.dead_letters
    assert (letter.reason_code, letter.source_file) == ("not_regular_file", "pipe.md")
