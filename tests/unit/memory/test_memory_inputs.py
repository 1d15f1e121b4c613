"""Consent and system-record input files: discovery, parsing, rejections."""

from __future__ import annotations

import json
from datetime import timedelta

from ctxledger.pipelines.ingest.landing import KnownFiles
from ctxledger.pipelines.memory.consent import had_grant, live_grants
from ctxledger.pipelines.memory.inputs import (
    discover_inputs,
    new_inputs,
    parse_consent_file,
    parse_system_records_file,
)
from ctxledger.schemas.memory import ConsentRecord
from ctxledger.schemas.policy import load_policy

SETTINGS = load_policy(None).memory


def _write(path, *lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_discovery_tenant_folders_and_known_hashes(tmp_path):
    grant = {"event": "grant", "subject_id": "u", "purpose": "support",
             "basis": "consent", "at": "2026-01-01T00:00:00Z"}  # fmt: skip
    _write(tmp_path / "c" / "tenant=acme" / "a.jsonl", grant)
    _write(tmp_path / "c" / "b.jsonl", grant)
    (tmp_path / "c" / "notes.txt").write_text("not an input")
    items = discover_inputs(tmp_path / "c", "consent", "dflt")
    assert [(i.rel_path, i.tenant_id) for i in items] == [
        ("consent/b.jsonl", "dflt"),
        ("consent/tenant=acme/a.jsonl", "acme"),
    ]
    assert items[0].file_hash == items[1].file_hash  # same bytes
    # ... under two tenants: two files (landing identity includes the tenant).
    assert len(new_inputs(tmp_path / "c", None, "dflt", KnownFiles())) == 2
    stored = [(i.file_hash, i.tenant_id, i.rel_path, i.kind) for i in items[:1]]
    left = new_inputs(tmp_path / "c", None, "dflt", KnownFiles.from_rows(stored))
    assert [i.rel_path for i in left] == ["consent/tenant=acme/a.jsonl"]
    single = discover_inputs(tmp_path / "c" / "b.jsonl", "consent", "dflt")
    assert [i.rel_path for i in single] == ["consent/b.jsonl"]


def test_consent_lines_are_validated_against_the_policy(tmp_path):
    path = _write(
        tmp_path / "consent.jsonl",
        {"event": "grant", "subject_id": "u", "purpose": "support",
         "basis": "contract", "at": "2026-01-01T00:00:00"},
        {"event": "withdraw", "subject_id": "u", "purpose": "*",
         "at": "2026-02-01T00:00:00Z"},
        {"event": "grant", "subject_id": "u", "purpose": "support",
         "at": "2026-01-01T00:00:00Z"},
        {"event": "grant", "subject_id": "u", "purpose": "support",
         "basis": "whim", "at": "2026-01-01T00:00:00Z"},
        {"event": "grant", "subject_id": "u", "purpose": "*", "basis": "consent",
         "at": "2026-01-01T00:00:00Z"},
        {"event": "grant", "subject_id": "u", "purpose": "spying",
         "basis": "consent", "at": "2026-01-01T00:00:00Z"},
        {"event": "revoke", "subject_id": "u", "purpose": "support",
         "at": "2026-01-01T00:00:00Z"},
    )  # fmt: skip
    (item,) = discover_inputs(path, "consent", "acme")
    parsed = parse_consent_file(item, SETTINGS, "run")
    assert [(c.event, c.purpose, c.tenant_id) for c in parsed.consent] == [
        ("grant", "support", "acme"),
        ("withdraw", "*", "acme"),
    ]
    assert parsed.consent[0].effective_at.tzinfo is not None  # naive = UTC
    assert [r.reason_code for r in parsed.rejected] == [
        "missing_field",
        "unknown_basis",
        "invalid_record",
        "unknown_purpose",
        "invalid_record",
    ]
    assert parsed.records_in == 7 == parsed.records_out + len(parsed.rejected)
    again = parse_consent_file(item, SETTINGS, "run")
    assert [c.consent_id for c in again.consent] == [
        c.consent_id for c in parsed.consent
    ]


def test_system_records_are_redacted_and_keep_their_line(tmp_path):
    _write(
        tmp_path / "tenant=acme" / "sys.jsonl",
        {"subject_id": "u", "purpose": "billing", "key": "Plan",
         "text": "Plan: Pro for jane@example.org",
         "observed_at": "2026-11-01T00:00:00Z"},
        {"subject_id": "u", "purpose": "billing", "text": "no key",
         "observed_at": "2026-11-01T00:00:00Z"},
    )  # fmt: skip
    (item,) = discover_inputs(tmp_path, "system_records", "dflt")
    seen = []

    def redact(text, tenant):
        seen.append(tenant)
        return text.replace("jane@example.org", "<EMAIL_ADDRESS:0a1b2c3d>")

    parsed = parse_system_records_file(item, SETTINGS, redact)
    (candidate,) = parsed.candidates
    assert candidate.text == "Plan: Pro for <EMAIL_ADDRESS:0a1b2c3d>"
    assert seen == ["acme"] and candidate.tenant_id == "acme"
    assert candidate.source == "system_record" and candidate.slot == "plan"
    assert candidate.provenance.input_ref.startswith("system_records/tenant=acme/")
    assert [r.reason_code for r in parsed.rejected] == ["missing_field"]
    assert all("jane" not in r.detail for r in parsed.rejected)


def test_a_file_that_changes_after_discovery_is_rejected_whole(tmp_path):
    path = _write(
        tmp_path / "c.jsonl",
        {"event": "grant", "subject_id": "u", "purpose": "support",
         "basis": "consent", "at": "2026-01-01T00:00:00Z"},
    )  # fmt: skip
    (item,) = discover_inputs(path, "consent", "acme")
    path.write_text(path.read_text() + "\n")
    parsed = parse_consent_file(item, SETTINGS, "run")
    assert parsed.status == "changed" and parsed.consent == []
    assert [r.reason_code for r in parsed.rejected] == ["file_changed_during_run"]


def test_a_stated_source_is_kept_an_unrecognised_one_stored_as_unknown(tmp_path):
    line = {"subject_id": "u", "purpose": "billing", "key": "plan",
            "text": "Plan: Pro", "observed_at": "2026-11-01T00:00:00Z"}  # fmt: skip
    stated = [None, "user_stated", "model_inferred", "unknown", "sytem_record", 7]
    _write(
        tmp_path / "sys.jsonl",
        *({**line, "source": s} if s is not None else line for s in stated),
    )
    (item,) = discover_inputs(tmp_path, "system_records", "dflt")
    parsed = parse_system_records_file(item, SETTINGS, lambda text, _: text)
    assert parsed.rejected == []  # never dead-lettered for its source
    assert [c.source for c in parsed.candidates] == [
        "system_record", "user_stated", "model_inferred",
        "unknown", "unknown", "unknown",
    ]  # fmt: skip
    # the stated value itself is not kept (it may be any text)
    assert "sytem" not in "".join(c.model_dump_json() for c in parsed.candidates)


def test_a_consent_event_of_unknown_source_is_stored_but_grants_nothing(tmp_path):
    event = {"event": "grant", "subject_id": "u", "purpose": "support",
             "basis": "contract", "at": "2026-01-01T00:00:00Z"}  # fmt: skip
    path = _write(
        tmp_path / "consent.jsonl",
        event,
        {**event, "source": "user_stated"},
        {**event, "source": "crm-export"},
    )
    (item,) = discover_inputs(path, "consent", "acme")
    parsed = parse_consent_file(item, SETTINGS, "run")
    assert parsed.rejected == []
    plain, stated, unknown = parsed.consent
    assert [c.source for c in parsed.consent] == [None, "user_stated", "unknown"]
    assert len({c.consent_id for c in parsed.consent}) == 3
    # an unstated source keeps the id older runs gave the same event
    assert plain.consent_id == ConsentRecord.id_for(
        "acme", "u", "support", "contract", "grant", plain.effective_at, None
    )
    later = plain.effective_at + timedelta(days=1)
    assert live_grants([unknown], "acme", "u", "support", later) == []
    assert live_grants([stated], "acme", "u", "support", later) == [stated]
    assert not had_grant([unknown], "acme", "u", "support", later)
