"""End to end: an inline nightly in one process embeds its tool outputs ahead
(``pipelines.evidence.ahead``) and commits the same evidence as without the
helper: the same rows, vectors within bf16 noise, no process left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from ctxledger.jobs.nightly import run_nightly
from ctxledger.pipelines.evidence import ahead
from ctxledger.schemas.policy import DEFAULT_POLICY_PATH
from ctxledger.warehouse import Warehouse

pytestmark = pytest.mark.slow

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
WITH_TOOL_OUTPUTS = (
    "mini_swe_agent_local.traj.json",
    "openhands_resolver_output.jsonl",
    "claude_code_sample_session.jsonl",
)


def _landing(tmp_path: Path) -> Path:
    landing = tmp_path / "landing" / "tenant=acme"
    landing.mkdir(parents=True)
    for name in WITH_TOOL_OUTPUTS:
        shutil.copy(TRANSCRIPTS / name, landing / name)
    return tmp_path / "landing"


def _chunks(warehouse: Path) -> dict[str, tuple]:
    with Warehouse.open(warehouse) as wh:
        rows = wh.query(
            "SELECT chunk_id, doc_version_id, tenant_id, subject_id, text, "
            "content_hash, embedding, embed_model, embedding_reused "
            "FROM evidence_chunks"
        ).fetchall()
    return {row[0]: row for row in rows}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The landing and the warehouse of the same nightly without the helper."""
    tmp_path = tmp_path_factory.mktemp("plain")
    landing = _landing(tmp_path)
    policy = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    policy["evidence"]["embedding"]["ahead"] = False
    without = tmp_path / "policy_without.yaml"
    without.write_text(yaml.safe_dump(policy))
    run_nightly(landing, tmp_path / "wh", policy_file=without)
    return landing, _chunks(tmp_path / "wh")


@pytest.mark.parametrize(
    ("start_after", "start_bytes"),
    [
        (0, 10**12),  # started by the first tool output handed over
        (10**9, 0),  # started when the graph is built (a large landing)
    ],
)
def test_the_helper_embeds_tool_outputs_with_the_same_evidence(
    plain, tmp_path, monkeypatch, start_after, start_bytes
):
    landing, without = plain
    helpers: list = []
    real_close = ahead.AheadProcess.close

    def close(self):
        real_close(self)
        helpers.append(self)

    # a fixture-sized run would otherwise embed its few texts itself
    monkeypatch.setattr(ahead, "START_AFTER", start_after)
    monkeypatch.setattr(ahead, "START_BYTES", start_bytes)
    monkeypatch.setattr(ahead.AheadProcess, "close", close)
    result = run_nightly(landing, tmp_path / "wh_with")

    assert len(helpers) == 1 and helpers[0].started
    # the stage took the helper's vectors (and embedded those it lent)
    assert helpers[0].received + helpers[0].lent > 5
    assert helpers[0]._proc.returncode == 0  # stopped by the run's commit
    assert ahead.current_ahead(result.run_id) is None
    with_helper = _chunks(tmp_path / "wh_with")
    assert len(without) > 5 and set(with_helper) == set(without)
    for chunk_id, row in with_helper.items():
        other = without[chunk_id]
        assert row[:6] == other[:6] and row[7:] == other[7:]
        a, b = np.asarray(row[6]), np.asarray(other[6])
        assert float(a @ b) > 0.9999
