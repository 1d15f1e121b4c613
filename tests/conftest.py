"""Shared test setup: offline model settings and a fixed pseudonym key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests never touch the user's real key file.
os.environ.setdefault("CTXLEDGER_PSEUDONYM_KEY", "00112233445566778899aabbccddeeff")
# That fixed key is 16 bytes, under the 32 a real key needs (docs/security.md).
os.environ.setdefault("CTXLEDGER_ALLOW_WEAK_KEY", "1")


@pytest.fixture(scope="session")
def job_server():
    """Jobs forked from one pre-imported process (``tests/forked_cli.py``),
    started on first use, one per test worker."""
    from forked_cli import JobServer

    root = Path(__file__).resolve().parents[1]
    server = JobServer(root, {**os.environ, "COLUMNS": "200", "PYTHONHASHSEED": "0"})
    yield server
    server.close()


#: The longest test modules, longest first (seconds on one process, measured with
#: ``--durations``: kill -9 90, nightly 47, backfill 35, ...). ``make test`` hands
#: modules to its workers in collection order (``--no-loadscope-reorder``), so
#: these start first and the workers finish together.
LONGEST_FIRST = (
    "tests/e2e/test_distributed_runners.py",  # ~200 s: dask cluster, worker pool
    "tests/e2e/test_kill9.py",
    "tests/e2e/test_forget_crash.py",
    "tests/e2e/test_nightly.py",
    "tests/e2e/test_labelled_leaks.py",
    "tests/e2e/test_backfill.py",
    "tests/e2e/test_postgres_catalog.py",
    "tests/e2e/test_stream.py",
    "tests/e2e/test_evidence_nightly.py",
    "tests/e2e/test_memory_serving.py",
    "tests/e2e/test_memory_planted.py",
    "tests/e2e/test_hostile_landing.py",
    "tests/e2e/test_serve.py",
    "tests/e2e/test_consent_readmission.py",
    "tests/e2e/test_concurrent_nightly.py",
    "tests/e2e/test_eval_cases.py",
    "tests/e2e/test_forget_bytes.py",
    "tests/e2e/test_private_leaks.py",
    "tests/e2e/test_deferred_embed.py",
    "tests/e2e/test_forget_shared_artifact.py",
    "tests/e2e/test_mcp.py",
    "tests/e2e/test_report_browser.py",
)


def pytest_collection_modifyitems(items):
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
