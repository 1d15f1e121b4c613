"""Redactor end to end: spans, fields, operators, overlaps, JSON, size, pickling."""

from __future__ import annotations

import json
import pickle
import re

import pytest

from ctxledger.pipelines.redact.engine import Redaction, Redactor
from ctxledger.schemas.policy import Policy, load_policy
from ctxledger.schemas.transcript import PiiFinding

GH = "ghp_" + "aB3d" * 9
TEST_KEY = b"unit-test-key-0123456789abcdef!!"
PLACEHOLDER = re.compile(r"<[A-Z_]+(?::[0-9a-f]+)?>")


def _check_spans(result: Redaction) -> None:
    for f in result.findings:
        assert isinstance(f, PiiFinding)
        assert PLACEHOLDER.fullmatch(result.text[f.start : f.end]) or f.entity_type
    starts = [f.start for f in result.findings]
    assert starts == sorted(starts)


def test_basic_redaction_and_spans(redactor) -> None:
    text = (
        "Hi, I'm John Smith from Seattle. Mail john.smith@example.com or call "
        f"(206) 555-0147. Token {GH}."
    )
    result = redactor.redact_text(text, "acme", field="content")
    for raw in ("John Smith", "john.smith@example.com", "555-0147", GH):
        assert raw not in result.text
    types = {f.entity_type for f in result.findings}
    assert {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "GITHUB_TOKEN"} <= types
    for f in result.findings:
        placeholder = result.text[f.start : f.end]
        assert placeholder.startswith(f"<{f.entity_type}:")
        assert re.fullmatch(r"<[A-Z_]+:[0-9a-f]{8}>", placeholder)
        assert f.field == "content" and f.recognizer and 0 < f.score <= 1


def test_batch_fields_and_determinism(redactor) -> None:
    items = [
        ("content", "Please email mia@example.com"),
        ("tool_arguments", '{"email": "mia@example.com"}'),
        ("tool_output", "sent to MIA@EXAMPLE.COM"),
        ("thinking", ""),
    ]
    out = redactor.redact_batch(items, "acme")
    assert len(out) == 4 and out[3] == Redaction("", [])
    placeholders = {r.text[f.start : f.end] for r in out[:3] for f in r.findings}
    assert len(placeholders) == 1  # same value (case-folded) -> same pseudonym
    assert [f.field for r in out for f in r.findings] == [
        "content",
        "tool_arguments",
        "tool_output",
    ]
    other = redactor.redact_batch(items, "globex")
    assert other[0].text != out[0].text  # tenants do not share pseudonyms


def test_idempotent_on_own_output(redactor) -> None:
    text = f"Olivia Brown <olivia@example.org> password=Tr0ub4dor&3x {GH}"
    once = redactor.redact_text(text, "t")
    twice = redactor.redact_text(once.text, "t")
    assert twice.text == once.text and twice.findings == []


def test_json_tool_output(redactor) -> None:
    payload = {
        "name": {"first_name": "Mia", "last_name": "Li"},
        "address": {"address1": "975 Sunset Drive", "city": "Austin", "zip": "78750"},
        "email": "mia.li3818@example.com",
        "note": "Customer Mia Li called from Denver about her card 4539 5787 6362 1486",
        "flight": "HAT069",
        "count": 3,
    }
    text = json.dumps(payload)
    result = redactor.redact_text(text, "t", field="tool_output")
    for raw in ("Mia", '"Li"', "975 Sunset", "Austin", "mia.li3818", "4539 5787"):
        assert raw not in result.text, raw
    assert "HAT069" in result.text
    # the output is still valid JSON with the same keys
    assert set(json.loads(result.text)) == set(payload)


def test_large_input_offsets(redactor) -> None:
    filler = "The build of module number seven completed without errors. " * 3000
    text = filler + "Contact Jennifer Whitaker at jen@example.org." + filler
    assert len(text) > 300_000
    result = redactor.redact_text(text, "t", field="tool_output")
    assert "jen@example.org" not in result.text
    assert "Jennifer Whitaker" not in result.text
    for f in result.findings:
        assert result.text[f.start : f.end].startswith(f"<{f.entity_type}")
    assert result.text.startswith(filler[:1000])
    assert result.text.endswith(filler[-1000:])


def test_overlaps_prefer_secrets(redactor) -> None:
    # an e-mail-looking userinfo inside a URL credential: password must win
    text = "postgres://mia:Sup3rS3cret@db.example.com:5432/app"
    result = redactor.redact_text(text, "t")
    assert "Sup3rS3cret" not in result.text
    assert any(f.entity_type == "PASSWORD" for f in result.findings)


def test_operators(policy) -> None:
    data = policy.model_dump(mode="json")
    for rule in data["pii"]["entities"]:
        if rule["type"] == "EMAIL_ADDRESS":
            rule["operator"] = "redact"
        if rule["type"] == "CREDIT_CARD":
            rule.update(operator="mask", keep_last=4, mask_char="#")
        if rule["type"] == "IP_ADDRESS":
            rule["operator"] = "keep"
    custom = Policy.model_validate(data)
    r = Redactor(custom, TEST_KEY)
    text = "mail a@example.com card 4539 5787 6362 1486 from 58.74.121.78"
    result = r.redact_text(text, "t")
    assert "<EMAIL_ADDRESS>" in result.text
    assert "###############1486" in result.text
    assert "58.74.121.78" in result.text
    by_type = {f.entity_type: result.text[f.start : f.end] for f in result.findings}
    assert by_type["IP_ADDRESS"] == "58.74.121.78"
    assert by_type["CREDIT_CARD"] == "###############1486"


def test_policy_restricts_entities() -> None:
    only_email = Policy.model_validate(
        {"pii": {"entities": [{"type": "EMAIL_ADDRESS"}]}}
    )
    r = Redactor(only_email, TEST_KEY)
    result = r.redact_text(f"John Smith a@example.com {GH}", "t")
    assert [f.entity_type for f in result.findings] == ["EMAIL_ADDRESS"]
    assert "John Smith" in result.text and GH in result.text
    assert r._loaded.ner is None  # no NER types: spaCy is never loaded


def test_presidio_fallback_for_other_types() -> None:
    p = Policy.model_validate({"pii": {"entities": [{"type": "MAC_ADDRESS"}]}})
    r = Redactor(p, TEST_KEY)
    result = r.redact_text("nic 00:1A:2B:3C:4D:5E up", "t")
    assert "00:1A:2B:3C:4D:5E" not in result.text
    assert result.findings[0].recognizer.startswith("presidio:")


def test_pickles_before_and_after_setup(policy) -> None:
    r = Redactor(policy, TEST_KEY)
    blob = pickle.dumps(r)
    assert len(blob) < 200_000
    clone = pickle.loads(blob)
    assert not clone.is_setup
    clone.setup()
    clone.setup()  # idempotent
    after = pickle.loads(pickle.dumps(clone))
    assert not after.is_setup  # engines never travel
    text = "mail mia@example.com"
    assert after.redact_text(text, "t").text == clone.redact_text(text, "t").text


def test_cache_does_not_change_results(policy) -> None:
    r = Redactor(policy, TEST_KEY, cache_size=8)
    text = "Olivia Brown wrote from olivia@example.org"
    first = r.redact_text(text, "t")
    second = r.redact_text(text, "t")
    assert first == second and r.stats["cache_hits"] == 1
    uncached = Redactor(policy, TEST_KEY, cache_size=0).redact_text(text, "t")
    assert uncached == first


@pytest.mark.parametrize("text", ["", "   ", "no pii here at all", "12345"])
def test_nothing_to_redact(redactor, text: str) -> None:
    assert redactor.redact_text(text, "t") == Redaction(text, [])


def test_redactor_loaded_once(redactor) -> None:
    loaded = redactor._loaded
    redactor.setup()
    assert redactor._loaded is loaded
    assert redactor.policy_version == load_policy(None).policy_version


def test_unknown_secret_switch_is_rejected() -> None:
    p = Policy.model_validate({"pii": {"secrets": {"recognizers": {"githab": False}}}})
    with pytest.raises(ValueError, match="githab"):
        Redactor(p, TEST_KEY)


def test_presidio_analyzer_with_our_recognizers(policy) -> None:
    from ctxledger.pipelines.redact.recognizers import build_analyzer

    analyzer = build_analyzer(policy)
    results = analyzer.analyze(
        f"Olivia Brown pushed with {GH} and password=Tr0ub4dor&3x",
        language="en",
        entities=["GITHUB_TOKEN", "PASSWORD", "PERSON"],
    )
    assert {r.entity_type for r in results} >= {"GITHUB_TOKEN", "PASSWORD", "PERSON"}


def test_prefetch_fills_the_cache_and_changes_no_result() -> None:
    policy = load_policy(None)
    texts = [
        "Hi, I'm John Smith from Seattle, mail john.smith@example.com",
        f"token {GH} in the build log",
        "Call Maria Garcia in Lisbon tomorrow.",
        "",
    ]
    plain = Redactor(policy, TEST_KEY)
    want = plain.redact_batch([("content", t) for t in texts], "acme")
    warm = Redactor(policy, TEST_KEY)
    assert warm.prefetch(texts + texts) == 3  # distinct, non-empty
    hits = warm.stats["cache_hits"]
    got = warm.redact_batch([("content", t) for t in texts], "acme")
    assert warm.stats["cache_hits"] == hits + 3  # every text from the cache
    assert [(r.text, r.findings) for r in got] == [(r.text, r.findings) for r in want]
    assert warm.prefetch(texts) == 0  # already cached


def test_prefetch_detects_only_what_the_cache_keeps() -> None:
    policy = load_policy(None)
    small = Redactor(policy, TEST_KEY, cache_size=2, cache_max_chars=40)
    texts = ["short one, Anna", "x" * 41, "short two, Bob", "short three, Eve"]
    assert small.prefetch(texts) == 2  # the long text is skipped, then the cap
    assert Redactor(policy, TEST_KEY, cache_size=0).prefetch(texts) == 0
