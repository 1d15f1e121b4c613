"""A symlink cannot move bytes across ``tenant=``/``subject=`` folders (issue 32,
item 1): identity comes from where the bytes really are. A link whose target
lies under another tenant or subject folder is refused (``cross_scope_link``)
for transcripts, documents and consent/system-record inputs alike; a link
inside its own folders is the same file as its target (one identity)."""

from __future__ import annotations

import os

from ctxledger.pipelines.evidence.landing import discover_documents
from ctxledger.pipelines.ingest.landing import KnownFiles, discover, new_items
from ctxledger.pipelines.memory.inputs import discover_inputs

LINE = b'{"session_id": "s", "role": "user", "content": "victim secret"}\n'


def _victim(root, name="a.jsonl", data=LINE):
    folder = root / "tenant=victim" / "subject=a"
    folder.mkdir(parents=True)
    (folder / name).write_bytes(data)
    return folder / name


def _link(root, rel, target):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def test_a_link_into_another_tenant_or_subject_is_refused(tmp_path):
    _victim(tmp_path)
    _link(tmp_path, "tenant=evil/subject=e/stolen.jsonl",
          "../../tenant=victim/subject=a/a.jsonl")  # fmt: skip
    _link(tmp_path, "tenant=victim/subject=b/b.jsonl", "../subject=a/a.jsonl")
    _link(tmp_path, "loose.jsonl", "tenant=victim/subject=a/a.jsonl")
    _link(tmp_path, "tenant=victim/subject=a/alias.jsonl", "a.jsonl")
    found = discover(tmp_path, "dflt")
    got = {i.rel_path: i.refusal for i in found.items}
    assert got == {
        "loose.jsonl": "cross_scope_link",
        "tenant=evil/subject=e/stolen.jsonl": "cross_scope_link",
        "tenant=victim/subject=a/a.jsonl": None,
        "tenant=victim/subject=a/alias.jsonl": None,
        "tenant=victim/subject=b/b.jsonl": "cross_scope_link",
    }
    refused = [i for i in found.items if i.refusal]
    assert all(i.size_bytes == 0 for i in refused)  # never read, not even hashed
    # The link inside its own folders is the target itself: one file.
    readable = [i for i in found.items if not i.refusal]
    assert len(new_items(readable, KnownFiles())) == 1


def test_documents_and_sidecars_cannot_link_across_tenants(tmp_path):
    victim = tmp_path / "tenant=victim"
    victim.mkdir()
    (victim / "plan.md").write_text("# Plan\n\nThe victim's plan.\n")
    (victim / "acl.meta.json").write_text('{"acl": ["everyone"]}')
    (tmp_path / "tenant=evil").mkdir()
    _link(tmp_path, "tenant=evil/plan.md", "../tenant=victim/plan.md")
    (tmp_path / "tenant=evil" / "own.md").write_text("# Own\n")
    _link(tmp_path, "tenant=evil/own.md.meta.json", "../tenant=victim/acl.meta.json")
    found = discover_documents(tmp_path, "dflt")
    got = {i.rel_path: i.refusal for i in found.items}
    assert got["tenant=evil/plan.md"] == "cross_scope_link"
    assert got["tenant=evil/own.md"] == "cross_scope_link"  # through its sidecar
    assert got["tenant=victim/plan.md"] is None


def test_consent_inputs_cannot_link_across_tenants(tmp_path):
    event = b'{"event": "grant", "subject_id": "a", "purpose": "support"}\n'
    (tmp_path / "tenant=victim").mkdir()
    (tmp_path / "tenant=victim" / "c.jsonl").write_bytes(event)
    _link(tmp_path, "tenant=evil/c.jsonl", "../tenant=victim/c.jsonl")
    items = discover_inputs(tmp_path, "consent", "dflt")
    got = {i.rel_path: i.refusal for i in items}
    assert got == {
        "consent/tenant=evil/c.jsonl": "cross_scope_link",
        "consent/tenant=victim/c.jsonl": None,
    }
