"""Issue 29 items 1 and 6 through the real engine: escaped values, secret-bearing
keys (JSON stays valid JSON) and one placeholder per value across a session.

Values are invented for this test."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.redact.fieldkeys import SecretKeys, key_words
from ctxledger.pipelines.redact.spans import PLACEHOLDER_RE


@pytest.mark.parametrize(
    ("key", "etype"),
    [
        ("pin", "SECRET"),
        ("account_pin", "SECRET"),
        ("apiKey", "SECRET"),
        ("api-key", "SECRET"),
        ("API_KEY", "SECRET"),
        ("apikey", "SECRET"),
        ("X-Api-Key", "SECRET"),
        ("clientSecret", "SECRET"),
        ("otp", "SECRET"),
        ("CVV", "SECRET"),
        ("userPassword", "PASSWORD"),
        ("passcode", "PASSWORD"),
        ("private_key", "SECRET"),
        ("mfa_code", "SECRET"),  # the default policy's own addition
    ],
)
def test_secret_keys_match_by_words(key, etype):
    keys = SecretKeys(("mfa code",))
    assert keys.entity_for(key) == etype


@pytest.mark.parametrize(
    "key", ["shipping", "spinner", "token_count", "password_policy", "max_tokens",
            "pin_length", "opinion", "topic"]
)  # fmt: skip
def test_keys_that_only_look_like_secrets(key):
    assert SecretKeys().entity_for(key) is None


def test_key_words():
    assert key_words("apiKey") == key_words("API_KEY") == ("api", "key")


def test_values_under_secret_keys_are_redacted_and_json_stays_valid(redactor):
    raw = json.dumps(
        {
            "pin": "482913",
            "apiKey": "abc",
            "user": {"cvv": 123, "otp": "551234", "shipping": "express"},
            "items": [{"Security-Code": "77"}],
            "ok": True,
        }
    )
    out = redactor.redact_text(raw, "t", "tool_output")
    doc = json.loads(out.text)
    for value in ("482913", "abc", "123", "551234", '"77"'):
        assert value not in out.text
    assert doc["user"]["shipping"] == "express" and doc["ok"] is True
    assert PLACEHOLDER_RE.fullmatch(doc["user"]["cvv"])  # the number is quoted
    for f in out.findings:
        assert PLACEHOLDER_RE.fullmatch(out.text[f.start : f.end])


def test_secret_key_lines_and_prose_codes(redactor):
    text = "db:\n  pin: 4829\n  host: db1\nAlso, always use my account pin 7342."
    out = redactor.redact_text(text, "t").text
    assert "4829" not in out and "7342" not in out and "db1" in out


def test_escaped_name_is_redacted_like_the_literal_one(redactor):
    escaped = json.dumps({"full_name": "Magdalena Szymańska"})
    literal = json.dumps({"full_name": "Magdalena Szymańska"}, ensure_ascii=False)
    a = redactor.redact_text(escaped, "t", "tool_output").text
    b = redactor.redact_text(literal, "t", "tool_output").text
    assert "Szyma" not in a and a == b
    assert json.loads(a)["full_name"].startswith("<PERSON:")


def test_html_and_percent_encoded_values(redactor):
    out = redactor.redact_text(
        "Contact: mailto:jane.doe%40example.com or Magdalena Szyma&#324;ska", "t"
    ).text
    assert "jane.doe" not in out and "Szyma" not in out


def test_speaker_prefix_gets_the_names_placeholder(redactor):
    items = [
        ("content", "I spoke with Nate Holloway about the rollout."),
        ("content", "Nate: ok, deploying now"),
    ]
    first, second = redactor.redact_batch(items, "t")
    assert "Nate" not in first.text and "Nate" not in second.text
    token = second.text.split(":", 1)[0] + ":" + second.text.split(":")[1]
    assert token.startswith("<PERSON:")
    # "Nate" alone takes "Nate Holloway"'s pseudonym: one person, one placeholder
    assert (
        PLACEHOLDER_RE.search(first.text).group()
        == PLACEHOLDER_RE.search(second.text).group()
    )


def test_a_secret_found_once_is_replaced_in_every_field(redactor):
    items = [
        ("content", "my password is Kestrel-5150q"),
        ("tool_arguments", '{"user": "ops", "note": "Kestrel-5150q"}'),
    ]
    out = redactor.redact_batch(items, "t")
    assert all("Kestrel-5150q" not in r.text for r in out)
    assert json.loads(out[1].text)["user"] == "ops"


def test_new_types_in_messages(redactor):
    text = (
        "My passport number is K4821937, my PESEL is 44051401359 and I was "
        "born on 14 March 1987."
    )
    out = redactor.redact_text(text, "t").text
    for value in ("K4821937", "44051401359", "14 March 1987"):
        assert value not in out
    assert "<PASSPORT:" in out and "<NATIONAL_ID:" in out and "<DATE_OF_BIRTH:" in out


def test_secret_keys_inside_json_held_in_a_json_string(redactor):
    raw = json.dumps({"body": json.dumps({"pin": "482913", "note": "ok"})})
    out = redactor.redact_text(raw, "t", "tool_output").text
    inner = json.loads(json.loads(out)["body"])
    assert "482913" not in out and inner["note"] == "ok"
    assert inner["pin"].startswith("<SECRET:")


_VALUE = st.from_regex(r"[A-Za-z0-9]{4,12}", fullmatch=True).filter(
    lambda v: v.lower() not in ("null", "none", "true", "false")
)
_SECRET_KEY = st.sampled_from(["pin", "apiKey", "API_KEY", "otp", "cvv", "password"])


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        _SECRET_KEY, st.one_of(_VALUE, st.integers(1000, 10**9)), min_size=1
    ),
    st.booleans(),
)
def test_any_document_keeps_its_shape_and_loses_its_secrets(redactor, doc, nest):
    document = {"outer": doc, "status": "ok"} if nest else doc
    raw = json.dumps(document)
    out = json.loads(redactor.redact_text(raw, "t", "tool_output").text)
    got = out["outer"] if nest else out
    assert set(got) == set(doc)
    for key in doc:
        assert isinstance(got[key], str) and PLACEHOLDER_RE.fullmatch(got[key]), key
