"""End to end: one nightly over a generated, hostile landing folder.

Issues 11 and 12. A seeded generator writes >= 1,000 bad records of many kinds
(malformed JSON, wrong types, missing fields, unknown roles, oversize lines,
invalid UTF-8, lone surrogate escapes, duplicate keys, unknown fields, non-object
lines), mixed into JSONL files between good canonical lines (some files start
with bad lines, so format detection must look past them), plus entries that must
never be read: a FIFO, a dangling symlink, a symlink loop, symlinks out of the
landing folder (to a file and to a FIFO), a symlink to an outside folder, and an
"unreadable" entry. Tests run as root, for whom ``chmod 000`` stops nothing, so
unreadable is simulated by an entry whose open fails for root too: a symlink to
a folder (``open`` gives ``EISDIR``; discovery refuses it as ``not_regular_file``
without opening it). The same bytes also sit under two tenants.

One nightly runs in-process. It must exit normally, land every good record (for
each tenant), turn every bad record into a dead letter with reason, location and
an owner-only quarantine copy of its bytes, turn every refused entry into a
dead letter (no quarantine: its bytes may not be read), read nothing outside
the landing root, balance every stage, and a second run must add nothing.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections import Counter
from pathlib import Path

import pytest
import yaml

from ctxledger.jobs.nightly import run_nightly
from ctxledger.schemas.policy import DEFAULT_POLICY_PATH
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

SEED = 20261201
MAX_RECORD_BYTES = 2048
OUTSIDE_MARKER = "OUTSIDE-LANDING-MARKER-7f3c"


def _line(**fields) -> bytes:
    return json.dumps(fields).encode("utf-8")


def _bad(kind: str, rng: random.Random, sid: str) -> bytes:
    """One bad canonical line of ``kind`` (see ``BAD_KINDS``)."""
    word = rng.choice(["alpha", "beta", "gamma", "delta"])
    if kind == "malformed_json":
        cut = _line(session_id=sid, role="user", content=word)
        return cut[: rng.randrange(1, len(cut) - 1)]
    if kind == "wrong_type":
        return _line(session_id=sid, role="user", content=rng.choice([5, [1], {}]))
    if kind == "not_an_object":
        return rng.choice([b"[1, 2]", b"42", b'"text"', b"null", b"true"])
    if kind == "missing_field":
        fields = {"session_id": sid, "role": "user", "content": word}
        del fields[rng.choice(sorted(fields))]
        return _line(**fields)
    if kind == "unknown_role":
        return _line(session_id=sid, role=rng.choice(["narrator", "bot", ""]),
                     content=word)  # fmt: skip
    if kind == "unknown_field":
        return _line(session_id=sid, role="user", content=word, contnet=word)
    if kind == "oversize_record":
        return _line(session_id=sid, role="user", content=word * MAX_RECORD_BYTES)
    if kind == "invalid_utf8":
        return b'{"session_id": "%s", "role": "user", "content": "\xff\xfe%s"}' % (
            sid.encode(),
            word.encode(),
        )
    if kind == "lone_surrogate":
        return b'{"session_id": "%s", "role": "user", "content": "a\\udc80b"}' % (
            sid.encode()
        )
    if kind == "duplicate_key":
        return (
            b'{"session_id": "%s", "role": "user", "content": "a", "content": "b"}'
            % (sid.encode())
        )
    raise AssertionError(kind)


#: Kind of bad line -> the reason code its dead letter must carry.
BAD_KINDS = {
    "malformed_json": "malformed_json",
    "wrong_type": "wrong_type",
    "not_an_object": "wrong_type",
    "missing_field": "missing_field",
    "unknown_role": "unknown_role",
    "unknown_field": "invalid_record",
    "oversize_record": "oversize_record",
    "invalid_utf8": "invalid_utf8",
    "lone_surrogate": "invalid_text",  # H2's reader change
    "duplicate_key": "duplicate_key",  # H2's reader change
}


class Landing:
    """The generated folder and what the run must make of it."""

    def __init__(self, root: Path, outside: Path):
        self.root = root
        self.outside = outside
        #: (tenant, rel_path, "line:N" or "file", reason) of every dead letter.
        self.dead: Counter = Counter()
        #: rel_path -> {line number: raw bytes} of bad lines (quarantined).
        self.raw: dict[str, dict[int, bytes]] = {}
        #: (tenant, session external id) -> good messages.
        self.good: Counter = Counter()
        #: rel paths that must end as processed ``landing_files`` rows.
        self.processed: set[str] = set()

    def jsonl(self, tenant: str, rel: str, lines: list[tuple[str, bytes]]) -> bytes:
        data = b"".join(raw + b"\n" for _, raw in lines)
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.expect(tenant, rel, lines)
        return data

    def expect(self, tenant: str, rel: str, lines: list[tuple[str, bytes]]) -> None:
        self.processed.add(rel)
        for n, (kind, raw) in enumerate(lines, start=1):
            if kind in BAD_KINDS:
                self.dead[(tenant, rel, f"line:{n}", BAD_KINDS[kind])] += 1
                self.raw.setdefault(rel, {})[n] = raw
            else:
                self.good[(tenant, kind)] += 1

    def refused(self, tenant: str, rel: str, reason: str) -> None:
        self.processed.add(rel)
        self.dead[(tenant, rel, "file", reason)] += 1


def generate(base: Path, seed: int = SEED) -> Landing:
    rng = random.Random(seed)
    land = Landing(base / "landing", base / "outside")
    land.root.mkdir()
    land.outside.mkdir()
    kinds = sorted(BAD_KINDS)
    files: dict[str, list[tuple[str, bytes]]] = {}
    for f in range(24):
        tenant = "a" if f % 2 else "b"
        rel = f"tenant={tenant}/batch/f{f:02d}.jsonl"
        lines: list[tuple[str, bytes]] = []
        sid = f"f{f:02d}-s"
        if f % 3 == 0:  # bad lines first: detection must look past them
            lines += [(k, _bad(k, rng, sid)) for k in rng.sample(kinds, 4)]
        for n in range(44):
            if n % 15 == 0:  # a few good lines, in two sessions per file
                session = f"{sid}{n % 2}"
                text = f"note {n} for {session}"
                lines.append((session, _line(session_id=session, role="user",
                                             content=text)))  # fmt: skip
            kind = rng.choice(kinds)
            lines.append((kind, _bad(kind, rng, sid)))
        land.jsonl(tenant, rel, lines)
        files[rel] = lines
    # Issue 11: the same bytes under two tenants are two files, both ingested;
    # under two names of one tenant, one file.
    shared = [
        ("shared-1", _line(session_id="shared-1", role="user", content="hi")),
        ("wrong_type", _bad("wrong_type", rng, "shared-1")),
        ("shared-1", _line(session_id="shared-1", role="assistant", content="ok")),
    ]
    data = land.jsonl("a", "tenant=a/shared.jsonl", shared)
    land.jsonl("b", "tenant=b/shared.jsonl", shared)
    (land.root / "tenant=a" / "copy").mkdir()
    (land.root / "tenant=a" / "copy" / "shared.jsonl").write_bytes(data)
    # A folder named like a transcript is a folder: its files are read.
    inner = [("inner-1", _line(session_id="inner-1", role="user", content="in"))]
    land.jsonl("b", "tenant=b/folder.jsonl/inner.jsonl", inner)
    # A symlink inside its own tenant folder is its target (one file); one into
    # another tenant's folder would move that tenant's bytes into this one:
    # refused (issue 32), never read.
    (land.root / "tenant=a" / "zz").mkdir()  # walked after batch/: f01 comes first
    (land.root / "tenant=a" / "zz" / "alias.jsonl").symlink_to("../batch/f01.jsonl")
    (land.root / "tenant=b" / "stolen.jsonl").symlink_to("../tenant=a/batch/f01.jsonl")
    land.refused("b", "tenant=b/stolen.jsonl", "cross_scope_link")
    # Issue 12: entries that are never read.
    secret = land.outside / "secret.jsonl"
    secret.write_bytes(_line(session_id="x", role="user", content=OUTSIDE_MARKER))
    os.mkfifo(land.outside / "pipe.jsonl")
    os.mkfifo(land.root / "tenant=a" / "pipe.jsonl")
    land.refused("a", "tenant=a/pipe.jsonl", "not_regular_file")
    (land.root / "tenant=a" / "dangling.jsonl").symlink_to("missing.jsonl")
    land.refused("a", "tenant=a/dangling.jsonl", "broken_symlink")
    (land.root / "tenant=b" / "loop1.jsonl").symlink_to("loop2.jsonl")
    (land.root / "tenant=b" / "loop2.jsonl").symlink_to("loop1.jsonl")
    land.refused("b", "tenant=b/loop1.jsonl", "broken_symlink")
    land.refused("b", "tenant=b/loop2.jsonl", "broken_symlink")
    (land.root / "tenant=b" / "escape.jsonl").symlink_to(secret)
    land.refused("b", "tenant=b/escape.jsonl", "outside_landing")
    (land.root / "tenant=b" / "escape_pipe.jsonl").symlink_to(
        land.outside / "pipe.jsonl"
    )
    land.refused("b", "tenant=b/escape_pipe.jsonl", "outside_landing")
    (land.root / "tenant=a" / "unreadable.jsonl").symlink_to(
        "batch", target_is_directory=True
    )
    land.refused("a", "tenant=a/unreadable.jsonl", "not_regular_file")
    (land.root / "tenant=b" / "linked").symlink_to(
        land.outside, target_is_directory=True
    )
    _side_inputs(base, land.outside)
    return land


#: One consent grant, one system record and one document, each written with the
#: same bytes under ``tenant=a`` and ``tenant=b`` (plus a FIFO and an escaping
#: symlink in each folder): both tenants' copies must be read, the rest refused.
SIDE_INPUTS = {
    "consent": ("grants.jsonl", _line(event="grant", subject_id="u-1",
                purpose="support", basis="consent", at="2026-01-01T00:00:00Z")),
    "system": ("plan.jsonl", _line(subject_id="u-1", purpose="support", key="plan",
               text="Plan is Pro", observed_at="2026-11-27T09:00:00Z")),
    "docs": ("guide.md", b"# Guide\n\nRestart the worker, then check the queue.\n"),
}  # fmt: skip


def _side_inputs(base: Path, outside: Path) -> None:
    for folder, (name, data) in SIDE_INPUTS.items():
        for tenant in ("a", "b"):
            path = base / folder / f"tenant={tenant}" / name
            path.parent.mkdir(parents=True)
            path.write_bytes(data + (b"" if folder == "docs" else b"\n"))
        suffix = Path(name).suffix
        os.mkfifo(base / folder / f"pipe{suffix}")
        (base / folder / f"escape{suffix}").symlink_to(outside / "secret.jsonl")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    land = generate(base)
    policy = yaml.safe_load(Path(DEFAULT_POLICY_PATH).read_text())
    policy.setdefault("limits", {})["max_record_bytes"] = MAX_RECORD_BYTES
    policy_file = base / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(policy))
    warehouse = base / "wh"

    def _hung(*_):
        raise TimeoutError("the nightly blocked (a FIFO was opened?)")

    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(240)
    try:
        result = run_nightly(
            land.root,
            warehouse,
            policy_file=policy_file,
            consent=base / "consent",
            system_records=base / "system",
            docs=base / "docs",
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return land, warehouse, result, policy_file


def test_the_generator_is_big_and_varied_enough(hostile):
    land, *_ = hostile
    assert sum(land.dead.values()) >= 1000
    reasons = Counter(reason for (_, _, _, reason) in land.dead.elements())
    assert set(reasons) >= set(BAD_KINDS.values()) | {
        "not_regular_file",
        "broken_symlink",
        "outside_landing",
        "cross_scope_link",
    }
    assert sum(land.good.values()) >= 50


def test_run_commits_and_every_stage_balances(hostile):
    _, _, result, _ = hostile
    manifest = result.manifest
    assert manifest is not None and manifest.status == "committed"
    for count in manifest.stage_counts:
        assert count.records_in == count.records_out + count.dead, count
    assert result.discovery.skipped == ["tenant=b/linked"]


def test_every_good_record_lands_for_its_tenant(hostile):
    land, warehouse, _, _ = hostile
    with Warehouse.open(warehouse) as wh:
        rows = wh.query(
            "SELECT s.tenant_id, s.external_id, count(*) FROM messages m "
            "JOIN sessions s USING (session_id) GROUP BY ALL"
        ).fetchall()
    assert Counter({(t, e): n for t, e, n in rows}) == land.good
    assert {t for t, e, _ in rows if e == "shared-1"} == {"a", "b"}


def test_every_bad_record_and_refused_entry_is_a_dead_letter(hostile):
    land, warehouse, _, _ = hostile
    with Warehouse.open(warehouse) as wh:
        rows = wh.query(
            "SELECT tenant_id, source_file, source_offset, reason_code, message, "
            "quarantine_ref FROM dead_letters WHERE stage IN ('ingest', 'validate')"
        ).fetchall()
    got = Counter(
        (tenant, rel, ":".join(offset.split(":")[:2]), reason)
        for tenant, rel, offset, reason, _, _ in rows
    )
    missing, extra = land.dead - got, got - land.dead
    assert (dict(missing), dict(extra)) == ({}, {})
    for _tenant, rel, offset, _reason, message, ref in rows:
        assert message and OUTSIDE_MARKER not in message
        if offset == "file":  # refused: nothing read, nothing quarantined
            assert ref is None, rel
            continue
        copy = warehouse / ref
        assert oct(copy.stat().st_mode & 0o777) == "0o600"
        line = int(offset.split(":")[1])
        # The copy is the line's bytes (without its surrounding whitespace).
        assert copy.read_bytes().strip() == land.raw[rel][line].strip(), (rel, line)


def test_nothing_outside_the_landing_root_is_read(hostile):
    land, warehouse, result, _ = hostile
    import hashlib

    secret = hashlib.sha256((land.outside / "secret.jsonl").read_bytes()).hexdigest()
    assert secret not in {i.file_hash for i in result.discovery.items}
    leaks = [
        p for p in (warehouse / "quarantine").rglob("*.bin")
        if OUTSIDE_MARKER.encode() in p.read_bytes()
    ]  # fmt: skip
    with Warehouse.open(warehouse) as wh:
        for table in wh.row_counts():
            for row in wh.query(f"SELECT * FROM {table}").fetchall():
                leaks += [table] if OUTSIDE_MARKER in str(row) else []
    assert leaks == []


def test_two_tenants_files_are_two_rows_and_a_rerun_adds_nothing(hostile):
    land, warehouse, _, policy_file = hostile
    with Warehouse.open(warehouse) as wh:
        paths = {r[0] for r in wh.query("SELECT path FROM landing_files").fetchall()}
        before = wh.row_counts(), wh.snapshots()
    assert paths == land.processed  # tenant=a/copy/shared.jsonl is the same file
    base = land.root.parent
    again = run_nightly(
        land.root,
        warehouse,
        policy_file=policy_file,
        consent=base / "consent",
        system_records=base / "system",
        docs=base / "docs",
    )
    assert again.manifest is None and again.files_new == 0
    with Warehouse.open(warehouse) as wh:
        assert (wh.row_counts(), wh.snapshots()) == before


def test_consent_system_records_and_documents_per_tenant_and_refused(hostile):
    _, warehouse, _, _ = hostile
    with Warehouse.open(warehouse) as wh:

        def rows(sql):
            return sorted(wh.query(sql).fetchall())

        inputs = rows("SELECT path, tenant_id, status FROM memory_inputs")
        consent = rows("SELECT tenant_id, subject_id FROM consent")
        memories = rows(
            "SELECT tenant_id, subject_id FROM memories WHERE source = 'system_record'"
        )
        doc_files = rows("SELECT path, tenant_id, versions_out FROM document_files")
        documents = rows("SELECT tenant_id, doc_id FROM documents")
        refused = rows(
            "SELECT source_file, reason_code, quarantine_ref FROM dead_letters "
            "WHERE source_offset = 'file' AND stage NOT IN ('ingest', 'validate')"
        )
    assert inputs == [
        ("consent/escape.jsonl", "default", "processed"),
        ("consent/pipe.jsonl", "default", "processed"),
        ("consent/tenant=a/grants.jsonl", "a", "processed"),
        ("consent/tenant=b/grants.jsonl", "b", "processed"),
        ("system_records/escape.jsonl", "default", "processed"),
        ("system_records/pipe.jsonl", "default", "processed"),
        ("system_records/tenant=a/plan.jsonl", "a", "processed"),
        ("system_records/tenant=b/plan.jsonl", "b", "processed"),
    ]
    assert consent == [("a", "u-1"), ("b", "u-1")]
    assert memories == [("a", "u-1"), ("b", "u-1")]
    assert doc_files == [
        ("escape.md", "default", 0),
        ("pipe.md", "default", 0),
        ("tenant=a/guide.md", "a", 1),
        ("tenant=b/guide.md", "b", 1),
    ]
    assert documents == [("a", "guide"), ("b", "guide")]
    assert refused == [
        ("consent/escape.jsonl", "outside_landing", None),
        ("consent/pipe.jsonl", "not_regular_file", None),
        ("escape.md", "outside_landing", None),
        ("pipe.md", "not_regular_file", None),
        ("system_records/escape.jsonl", "outside_landing", None),
        ("system_records/pipe.jsonl", "not_regular_file", None),
    ]
