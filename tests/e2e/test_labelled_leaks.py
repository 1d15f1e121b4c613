"""Acceptance: labelled PII and secret values never reach the warehouse or logs.

The nightly CLI ingests the labelled fixture (see tests/fixtures/labelled/README.md),
then every string of every table and every Parquet file, plus the CLI's output, is
scanned for the planted values. Structured PII and token-shaped secrets must never
leak; for the NER- and keyword-dependent families the allowed leak rate is the
measured one (a regression bound; the note on the issue reports the numbers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from eval.leaks import find_leaks, warehouse_strings

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "labelled"

#: Families that must never leak at all.
ZERO_LEAK = {
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "US_SSN",
    "IP_ADDRESS",
    "IBAN_CODE",
    "AWS_ACCESS_KEY",
    "GITHUB_TOKEN",
    "SLACK_TOKEN",
    "OPENAI_API_KEY",
    "JWT",
    "PRIVATE_KEY",
    "PASSWORD",
    "GITLAB_TOKEN",
    "STRIPE_KEY",
}
#: Highest leak rate allowed per remaining family (measured; see module docstring).
MAX_LEAK_RATE = {
    "PERSON": 0.10,  # measured 4/54: lowercase or uncommon names without a cue
    "LOCATION": 0.05,  # measured 2/60
    "SECRET": 0.10,  # measured 3/41: keyword and value split by other words
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    warehouse = tmp_path_factory.mktemp("labelled-wh")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.cli",
            "nightly",
            "--landing",
            str(FIXTURE / "landing"),
            "--warehouse",
            str(warehouse),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    gold = json.loads((FIXTURE / "gold.json").read_text())
    stored = find_leaks(warehouse_strings(warehouse), gold)
    logged = find_leaks([done.stdout, done.stderr], gold)
    return gold, stored, logged


def test_every_family_of_the_fixture_is_covered_by_a_bound(scanned):
    gold, _, _ = scanned
    assert {g["family"] for g in gold} <= ZERO_LEAK | set(MAX_LEAK_RATE)


def test_structured_pii_and_token_secrets_never_leak(scanned):
    _, stored, logged = scanned
    leaked = [(g["family"], g["source"]) for g in stored if g["family"] in ZERO_LEAK]
    assert leaked == []
    assert logged == []


def test_other_families_stay_within_their_measured_leak_rate(scanned):
    gold, stored, _ = scanned
    total = Counter(g["family"] for g in gold)
    leaked = Counter(g["family"] for g in stored)
    rates = {f: leaked[f] / total[f] for f in MAX_LEAK_RATE if total[f]}
    over = {f: round(r, 3) for f, r in rates.items() if r > MAX_LEAK_RATE[f]}
    assert over == {}, rates
