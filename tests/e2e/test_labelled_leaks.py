"""Acceptance: labelled PII and secret values never reach the warehouse or logs.

The nightly CLI (a job forked from the tests' job server, ``tests/forked_cli.py``)
ingests the labelled fixture (see tests/fixtures/labelled/README.md),
then every string of every table and every Parquet file, plus the CLI's output, is
scanned for the planted values. No planted value of any family may survive (a
substring scan: a value inside a longer unredacted token counts as leaked too).
``python -m eval.leaks_direct --show`` lists survivors without a pipeline run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.leaks import find_leaks, warehouse_strings

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "labelled"

#: Every family the fixture plants; none of them may leak.
FAMILIES = {
    "PERSON",
    "LOCATION",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "US_SSN",
    "IP_ADDRESS",
    "AWS_ACCESS_KEY",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "SLACK_TOKEN",
    "STRIPE_KEY",
    "OPENAI_API_KEY",
    "JWT",
    "PRIVATE_KEY",
    "PASSWORD",
    "SECRET",
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scanned(tmp_path_factory, job_server):
    warehouse = tmp_path_factory.mktemp("labelled-wh")
    job = job_server.start(
        [
            "nightly",
            "--landing",
            str(FIXTURE / "landing"),
            "--warehouse",
            str(warehouse),
        ],
        warehouse.parent / "labelled-nightly.log",
    )
    assert job.wait(timeout=1800) == 0, job.output()[-2000:]
    gold = json.loads((FIXTURE / "gold.json").read_text())
    strings = list(warehouse_strings(warehouse))
    stored = find_leaks(strings, gold)
    logged = find_leaks([job.output()], gold)
    return gold, strings, stored, logged


def test_the_scan_saw_redacted_rows_of_every_family(scanned):
    gold, strings, _, _ = scanned
    assert {g["family"] for g in gold} == FAMILIES
    blob = "\n".join(strings)
    for family in ("PERSON", "LOCATION", "SECRET", "PASSWORD", "PRIVATE_KEY"):
        assert f"<{family}:" in blob, family


def test_no_planted_value_reaches_a_table_or_file(scanned):
    _, _, stored, _ = scanned
    leaked = sorted({(g["family"], g["source"]) for g in stored})
    assert leaked == [], f"{len(stored)} planted values leaked: {leaked}"


def test_no_planted_value_reaches_the_log(scanned):
    _, _, _, logged = scanned
    assert [(g["family"], g["source"]) for g in logged] == []
