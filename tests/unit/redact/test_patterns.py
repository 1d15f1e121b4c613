"""Pattern PII detectors, the prose classifier and the offline e-mail check."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ctxledger.pipelines.redact import textkind
from ctxledger.pipelines.redact.names import find_names
from ctxledger.pipelines.redact.ner import candidate_windows, chunk_span
from ctxledger.pipelines.redact.patterns import (
    PhoneFinder,
    find_addresses,
    find_cards,
    find_emails,
    find_ibans,
    find_ips,
    find_ssns,
    iban_ok,
    luhn_ok,
)
from ctxledger.pipelines.redact.spans import Detection, resolve_overlaps


def _values(text: str, dets: list[Detection]) -> list[str]:
    return [text[d.start : d.end] for d in dets]


@pytest.mark.parametrize(
    ("finder", "text", "expected"),
    [
        (find_emails, "write to Mia.Li@example.co.uk today", ["Mia.Li@example.co.uk"]),
        (find_emails, "git@github.com:org/repo.git", []),
        (find_emails, "pkg@1.2.3 and user@localhost", []),
        (find_cards, "card 4539 5787 6362 1486 ok", ["4539 5787 6362 1486"]),
        (find_cards, "id 4539578763621487", []),  # Luhn fails
        (find_cards, "ts 1700000000000000", []),
        (
            find_ibans,
            "IBAN DE89 3704 0044 0532 0130 00.",
            ["DE89 3704 0044 0532 0130 00"],
        ),
        (find_ibans, "IBAN DE89 3704 0044 0532 0130 01", []),
        (find_ssns, "SSN 536-22-1234", ["536-22-1234"]),
        (find_ssns, "id 000-12-3456 and 666-12-3456", []),
        (find_ssns, "number 536221234", []),  # undelimited needs context
        (find_ssns, "my ssn is 536221234", ["536221234"]),
        (find_ips, "from 58.74.121.78 and 127.0.0.1", ["58.74.121.78"]),
        (find_ips, "version 1.2.3.4 and v2.0.0.1", []),
        (
            find_ips,
            "addr 2001:db8::8a2e:370:7334 at 12:30:45",
            ["2001:db8::8a2e:370:7334"],
        ),
    ],
)
def test_pattern_tables(finder, text: str, expected: list[str]) -> None:
    assert _values(text, finder(text)) == expected


def test_checksums() -> None:
    assert luhn_ok("4539578763621486") and not luhn_ok("4539578763621487")
    assert iban_ok("GB82 WEST 1234 5698 7654 32")
    assert not iban_ok("GB00WEST12345698765432")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call me at (415) 555-0147 please", ["(415) 555-0147"]),
        ("Mobile: +1-944-435-4352x04732", ["+1-944-435-4352x04732"]),
        ("phone 027 896 92 86", ["027 896 92 86"]),
        ("released 2024-05-15 15:00:00", []),
        ("build 1234567890 finished", []),
        ("took 12.345678 seconds", []),
    ],
)
def test_phone(text: str, expected: list[str]) -> None:
    assert _values(text, PhoneFinder().find(text)) == expected


def test_addresses() -> None:
    text = "Ship to 975 Sunset Drive, Suite 217\nAustin, TX 78750\nThanks!"
    found = _values(text, find_addresses(text))
    assert "975 Sunset Drive, Suite 217\nAustin, TX 78750" in found
    assert find_addresses("Ran 10 tests in 3.2s\n1 of 3 passed") == []
    block = "Michael Urner\n\n11 Školní 939\n Apt. 827\n Kaplice 1\n\n Iceland 80392"
    assert any("Iceland 80392" in v for v in _values(block, find_addresses(block)))


def test_names() -> None:
    text = "Please ask Mrs. Amy Kupcová, or call me Roland. Thanks, Sarah Connor"
    found = _values(text, find_names(text))
    assert "Amy Kupcová" in found and "Roland" in found and "Sarah Connor" in found
    assert find_names("Please Note The Following Steps") == []


def test_prose_classifier() -> None:
    assert textkind.is_prose_line("Thanks, I will book the flight for Mia tomorrow.")
    for line in (
        "    return self._cache[key]",
        "2024-05-15 15:00:01 INFO worker started pid=1234",
        'File "/usr/lib/python3.11/json/decoder.py", line 337, in decode',
        "diff --git a/x.py b/x.py",
        "/usr/local/lib/python3.11/site-packages/foo/bar_baz.py",
        "$ pip install -r requirements.txt",
    ):
        assert not textkind.is_prose_line(line), line
    text = "Hello Mia.\n```\nx = call(y)\n```\nSee you in Paris."
    spans = textkind.nl_spans(text)
    assert [text[a:b] for a, b in spans] == ["Hello Mia.", "See you in Paris."]


def test_json_literals_keep_offsets() -> None:
    text = '{"name": {"first_name": "Mia"}, "note": "Met Mia Li\\nin Paris", "n": 3}'
    pairs = [(k, text[a:b]) for k, a, b in textkind.json_literals(text)]
    assert ("first_name", "Mia") in pairs
    assert ("note", "Met Mia Li\\nin Paris") in pairs
    spans = [text[a:b] for a, b in textkind.nl_spans(text)]
    assert spans == ["Met Mia Li", "in Paris"]


def test_candidate_windows_and_chunks() -> None:
    text = "the build of GetUserToken failed; JSON was fine but Olivia Brown said no."
    windows = candidate_windows(text, 0, len(text))
    assert len(windows) == 1 and "Olivia Brown" in text[windows[0][0] : windows[0][1]]
    assert candidate_windows("the API returned JSON for ValueError", 0, 36) == []
    big = ("word " * 5000).strip()
    pieces = chunk_span(big, 0, len(big), 1000)
    assert pieces[0][0] == 0 and pieces[-1][1] == len(big)
    assert all(b - a <= 1000 for a, b in pieces)
    assert all(pieces[i][1] == pieces[i + 1][0] for i in range(len(pieces) - 1))


def test_resolve_overlaps() -> None:
    dets = [
        Detection(0, 10, "PERSON", 0.85, "ner"),
        Detection(5, 30, "GITHUB_TOKEN", 0.5, "secret"),  # secrets win
        Detection(40, 50, "PERSON", 0.6, "a"),
        Detection(45, 60, "PERSON", 0.9, "b"),  # same type: union
        Detection(70, 80, "LOCATION", 0.6, "x"),
        Detection(72, 76, "PERSON", 0.9, "y"),  # higher score wins
        Detection(90, 95, "US_SSN", 0.5, "x"),
        Detection(90, 99, "PHONE_NUMBER", 0.5, "y"),  # equal score: longer wins
    ]
    kept = [(d.start, d.end, d.entity_type) for d in resolve_overlaps(dets)]
    assert kept == [
        (5, 30, "GITHUB_TOKEN"),
        (40, 60, "PERSON"),
        (72, 76, "PERSON"),
        (90, 99, "PHONE_NUMBER"),
    ]


def test_tldextract_never_touches_the_network() -> None:
    code = (
        "import time;t=time.time();"
        "from ctxledger.pipelines.redact.patterns import find_emails;"
        "assert find_emails('a@example.com');print(time.time()-t)"
    )
    started = time.time()
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": "",
            "PYTHONPATH": ".",
            "HOME": "/nonexistent",
            "https_proxy": "http://127.0.0.1:9",
            "http_proxy": "http://127.0.0.1:9",
        },
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip()) < 5 and time.time() - started < 30
