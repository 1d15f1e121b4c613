"""Convention 1 of DESIGN.md: the domain core never imports Apache Beam."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ALLOWED = re.compile(r"(^|/)(transforms\.py|graph\.py)$|^jobs/")
IMPORT = re.compile(r"^\s*(import apache_beam|from apache_beam)", re.MULTILINE)


def test_beam_is_imported_only_by_transforms_graph_and_jobs():
    offenders = []
    for folder in ("schemas", "pipelines", "warehouse", "jobs"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if IMPORT.search(path.read_text()) and not ALLOWED.search(rel):
                offenders.append(rel)
    assert offenders == []


def test_the_check_itself_would_catch_an_offender():
    assert IMPORT.search("x = 1\nimport apache_beam as beam\n")
    assert not ALLOWED.search("pipelines/ingest/landing.py")
    assert ALLOWED.search("pipelines/redact/transforms.py")
