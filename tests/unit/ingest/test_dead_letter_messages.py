"""Dead-letter messages name the field and the problem, never the value (issue 12).

Every field value (and many keys) below is a planted marker string; whatever the
readers, the memory input parsers or the document builder make of it, no
``Rejected.detail``/``DeadLetter.message`` (nor offset) may contain the marker.
Records start from a valid line of each input and get a random subset of their
fields replaced, so validation fails deep inside, not only at the first check.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.evidence.documents import RunInfo, build_document
from ctxledger.pipelines.evidence.landing import discover_documents
from ctxledger.pipelines.ingest.drafts import Rejected, SourceFile
from ctxledger.pipelines.ingest.readers import FORMATS, read_source
from ctxledger.pipelines.memory.inputs import (
    discover_inputs,
    parse_consent_file,
    parse_system_records_file,
)
from ctxledger.schemas.policy import Policy, load_policy

MARKER = "PLANTED7731"
SETTINGS = load_policy(None).memory
SLOW = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Marker strings shaped like the values that leaked before: a date, an e-mail,
# part of an AWS key, a password, a role or format word.
MARKED = st.sampled_from(
    [
        MARKER,
        f"2026-01-{MARKER}",
        f"{MARKER}@example.com",
        f"AKIA{MARKER}",
        f"hunter2-{MARKER}",
        f"user{MARKER}",
        f"{MARKER}" * 8,
    ]
)
FIELD_NAMES = [
    "session_id",
    "role",
    "content",
    "turn",
    "created_at",
    "metadata",
    "tool_calls",
    "tool_call_id",
    "status",
    "name",
    "type",
    "sessionId",
    "uuid",
    "message",
    "messages",
    "history",
    "traj",
    "task_id",
    "request",
    "response",
    "choices",
    "action",
    "observation",
    "args",
    "api_name",
    "param_dict",
    "result",
    "text",
    "answer_generation",
    "train_messages",
    "loglines",
    "trajectory",
    "info",
]
KEYS = st.sampled_from(FIELD_NAMES) | MARKED
VALUES = st.recursive(
    MARKED,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5)
    ),
    max_leaves=25,
)


def _overridden(base: dict) -> st.SearchStrategy[dict]:
    """``base`` with some fields set to marked values, plus marked extra keys."""
    return st.tuples(
        st.sets(st.sampled_from(sorted(base))),
        st.dictionaries(st.sampled_from(sorted(base)) | MARKED, VALUES, max_size=3),
    ).map(
        lambda pair: {
            **{k: v for k, v in base.items() if k not in pair[0]},
            **{k: MARKER for k in pair[0]},
            **pair[1],
        }
    )


CANONICAL = {"session_id": "s1", "role": "user", "content": "hi", "turn": 0}
CLAUDE = {
    "type": "user",
    "uuid": "u1",
    "sessionId": "s",
    "timestamp": "2026-01-01T00:00:00Z",
    "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
}
CHAT = {"messages": [{"role": "user", "content": "hi"}]}
RECORDS = (
    _overridden(CANONICAL)
    | _overridden(CLAUDE)
    | _overridden(CHAT)
    | st.dictionaries(KEYS, VALUES, min_size=1, max_size=6)
)


def _assert_clean(rejected: list[Rejected]) -> None:
    for item in rejected:
        assert MARKER not in item.detail, item
        assert MARKER not in item.source_offset, item


@SLOW
@given(st.lists(RECORDS, min_size=1, max_size=4), st.booleans())
def test_reader_rejections_never_quote_a_value(records, as_document):
    if as_document:
        data = json.dumps(records[0], indent=1).encode()
    else:
        data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    source = SourceFile("landing/x.jsonl", data)
    for fmt in (None, *FORMATS):
        _assert_clean([i for i in read_source(source, fmt) if isinstance(i, Rejected)])


GRANT = {
    "event": "grant",
    "tenant_id": "acme",
    "subject_id": "u-1",
    "purpose": "support",
    "basis": "consent",
    "at": "2026-01-01T00:00:00Z",
    "expires_at": "2027-01-01T00:00:00Z",
}
SYSTEM_RECORD = {
    "subject_id": "u-1",
    "purpose": "support",
    "key": "plan",
    "text": "Plan is Pro",
    "kind": "account_state",
    "observed_at": "2026-01-01T00:00:00Z",
    "valid_from": "2026-01-01T00:00:00Z",
    "valid_to": "2027-01-01T00:00:00Z",
}


@SLOW
@given(st.lists(_overridden(GRANT), min_size=1, max_size=3))
def test_consent_rejections_never_quote_a_value(lines):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "consent.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        (item,) = discover_inputs(path, "consent", "acme")
        parsed = parse_consent_file(item, SETTINGS, "run_t")
    _assert_clean(parsed.rejected)


@SLOW
@given(st.lists(_overridden(SYSTEM_RECORD), min_size=1, max_size=3))
def test_system_record_rejections_never_quote_a_value(lines):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        (item,) = discover_inputs(path, "system_records", "acme")
        parsed = parse_system_records_file(item, SETTINGS, lambda text, _t: text)
    _assert_clean(parsed.rejected)


SIDECAR = {
    "doc_id": "runbook",
    "version": "v1",
    "effective_date": "2026-01-01",
    "acl": ["support"],
    "trust": "trusted",
    "title": "Runbook",
    "authority": 0.5,
}


@dataclass
class _Unchanged:
    text: str
    findings: list = field(default_factory=list)


def _no_redaction(items):
    return [_Unchanged(text) for _, text in items]


@SLOW
@given(_overridden(SIDECAR), st.sampled_from(["", "---\ntitle: x\n---\n"]))
def test_document_dead_letters_never_quote_a_value(sidecar, front):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "doc.md").write_text(front + "Some body text.\n")
        (root / "doc.md.meta.json").write_text(json.dumps(sidecar))
        (item,) = discover_documents(root, "acme").items
        built = build_document(item, Policy(), _no_redaction, RunInfo("r", "p", "t"))
    for letter in built.dead_letters:
        assert MARKER not in letter.message, letter
        assert MARKER not in letter.source_offset, letter


def test_an_unparsable_effective_date_is_named_not_quoted():
    """The leak that was seen: up to 40 characters of a bad ``effective_date``."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "doc.md").write_text("body\n")
        bad = {**SIDECAR, "effective_date": f"{MARKER}@example.com"}
        (root / "doc.md.meta.json").write_text(json.dumps(bad))
        (item,) = discover_documents(root, "acme").items
        built = build_document(item, Policy(), _no_redaction, RunInfo("r", "p", "t"))
    (letter,) = built.dead_letters
    assert letter.reason_code == "bad_metadata"
    assert "effective_date" in letter.message and MARKER not in letter.message


def test_a_lone_surrogate_in_document_metadata_is_one_dead_letter():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "doc.md").write_text("body\n")
        (root / "doc.md.meta.json").write_text('{"title": "bad \\udc80 title"}')
        (item,) = discover_documents(root, "acme").items
        built = build_document(item, Policy(), _no_redaction, RunInfo("r", "p", "t"))
    assert built.version is None
    (letter,) = built.dead_letters
    assert letter.reason_code == "invalid_text"


def test_unknown_input_keys_are_not_echoed():
    """An unknown key is the data's own text (pydantic puts it in the location)."""
    line = {**GRANT, f"{MARKER}@example.com": 1}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "consent.jsonl"
        path.write_text(json.dumps(line) + "\n")
        (item,) = discover_inputs(path, "consent", "acme")
        parsed = parse_consent_file(item, SETTINGS, "run_t")
    (rejected,) = parsed.rejected
    assert rejected.detail == "extra_forbidden at *"
