"""``eval.ledger_probes``: the labels' shape and the probe scoring rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eval.ledger_probes import LABELS, PROBES, hits, score_session

CORPORA = Path(__file__).resolve().parents[4] / "shared" / "corpora"


def test_labels_cover_ten_sessions_split_dev_and_measure():
    data = yaml.safe_load(LABELS.read_text())
    assert "by hand" in data["labelled_by"]
    sessions = data["sessions"]
    assert len(sessions) >= 10
    splits = {s["split"] for s in sessions}
    assert splits == {"dev", "measure"}
    assert len({s["id"] for s in sessions}) == len(sessions)
    for label in sessions:
        assert set(label["probes"]) == set(PROBES), label["id"]
        assert all(
            isinstance(p, str) and p for v in label["probes"].values() for p in v
        )


def test_a_probe_hits_only_when_every_phrase_occurs():
    text = "Fixed `src/marshmallow/fields.py`:\n  output **345**"
    assert hits(["src/marshmallow/fields.py", "OUTPUT 345"], text)
    assert not hits(["fields.py", "344"], text)


@pytest.mark.skipif(not CORPORA.is_dir(), reason="shared corpora absent")
def test_a_dev_session_is_scored_for_ledger_and_window():
    label = next(
        s
        for s in yaml.safe_load(LABELS.read_text())["sessions"]
        if s["id"] == "swe-pydicom-demo"
    )
    scored = score_session(label, CORPORA)
    assert scored.ledger["pending_approval"] is None  # no label: not applicable
    assert scored.ledger["goal"] is True  # the issue title, not the demonstration
    assert scored.ledger_tokens < 0.25 * scored.session_tokens
