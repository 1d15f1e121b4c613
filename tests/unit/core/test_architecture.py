"""Convention 1 of DESIGN.md: the domain core never imports Apache Beam."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ALLOWED = re.compile(r"(^|/)(transforms\.py|graph\.py)$|^jobs/")
IMPORT = re.compile(r"^\s*(import apache_beam|from apache_beam)", re.MULTILINE)


def test_beam_is_imported_only_by_transforms_graph_and_jobs():
    offenders = []
    for folder in ("schemas", "pipelines", "warehouse", "serving", "jobs"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if IMPORT.search(path.read_text()) and not ALLOWED.search(rel):
                offenders.append(rel)
    assert offenders == []


def test_the_check_itself_would_catch_an_offender():
    assert IMPORT.search("x = 1\nimport apache_beam as beam\n")
    assert not ALLOWED.search("pipelines/ingest/landing.py")
    assert ALLOWED.search("pipelines/redact/transforms.py")


#: Import direction (DESIGN.md section 2): schemas <- pipelines <- jobs and
#: warehouse <- serving <- jobs. A folder on the left never imports one listed
#: for it here: the lake never depends on its readers, and the read path never
#: pulls in the jobs (nor, through them, Beam and the pipeline's models).
FORBIDDEN = {
    "schemas": ("serving", "jobs"),
    "pipelines": ("serving", "jobs"),
    "warehouse": ("serving", "jobs"),
    "serving": ("jobs",),
}


def _imports(text: str, package: str) -> bool:
    pattern = rf"^\s*(import {package}(\.|\s|$)|from {package}(\.|\s))"
    return re.search(pattern, text, re.MULTILINE) is not None


def test_imports_run_one_way_warehouse_before_serving_before_jobs():
    offenders = []
    for folder, banned in FORBIDDEN.items():
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            offenders += [
                f"{path.relative_to(ROOT).as_posix()} imports {b}"
                for b in banned
                if _imports(text, b)
            ]
    assert offenders == []


def test_the_direction_check_would_catch_an_offender():
    assert _imports("x = 1\n    from serving.context import Context\n", "serving")
    assert _imports("import serving\n", "serving")
    assert not _imports("from servings import x\nimport serving_x\n", "serving")
