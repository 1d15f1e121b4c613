"""The memory-quality scorer (``eval.memory_quality``) and its labels."""

from __future__ import annotations

from eval.memory_quality import (
    Label,
    Predicted,
    load_labels,
    score,
    slot_matches,
    value_matches,
)
from eval.split import part_of

KINDS = {"rule", "preference", "identity", "fact", "account_state"}


def test_labels_cover_40_dialogues_of_both_corpora_in_both_parts():
    labels = load_labels()
    assert len(labels) >= 40
    corpora = {d.split("/", 1)[0] for d in labels}
    assert corpora == {"tau-bench-airline-gpt4o", "api-bank-dialogues"}
    assert {part_of(d) for d in labels} == {"dev", "measure"}
    for items in labels.values():
        for label in items:
            assert label.kind in KINDS
            assert label.source in ("user_stated", "system_record")
            assert label.slot and label.value and label.turn >= 0


def test_loose_value_and_slot_match():
    assert value_matches("direct flights", "direct flights")
    assert value_matches("silver", "a silver member")
    assert value_matches("Princeton", "princeton")
    assert not value_matches("mia_li_3668", "mia_li_3669")
    assert slot_matches("preference:flights", "preference:direct_flights")
    assert slot_matches("user_id", None)
    assert not slot_matches("membership", "role")
    assert not slot_matches("preference:flights", "preference:seats")


def test_score_counts_duplicates_once_and_splits_by_source_and_kind():
    d = "tau-bench-airline-gpt4o/task:0/trial:0"
    labels = {
        d: [
            Label(d, "identity", "user_stated", "user_id", "mia_li_3668", 3),
            Label(d, "account_state", "system_record", "membership", "gold", 7),
        ]
    }
    said = Predicted(d, "identity", "user_stated", "user_id", "mia_li_3668", "x", 3)
    memories = [
        said,
        said,  # stated twice: one memory
        Predicted(d, "rule", "user_stated", None, None, "I'm unhappy.", 5),
        Predicted(d, "fact", "model_inferred", None, None, "seems x", 6),
    ]
    result = score(labels, memories)
    table = result["scores"]
    assert table["all"]["precision"] == 0.5 and table["all"]["predicted"] == 2
    assert table["all"]["recall"] == 0.5
    assert table["source:system_record"]["recall"] == 0.0
    assert table["kind:rule"]["precision"] == 0.0
    assert result["model_inferred_stored"] == 1
    assert len(result["false_positives"]) == 1
    assert len(result["false_negatives"]) == 1
