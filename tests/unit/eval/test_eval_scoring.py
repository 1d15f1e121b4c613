"""``make eval`` bookkeeping: the split, verbatim survival, technical-text rates.

Pure functions on tiny made-up inputs (no corpora, no models), so they run in
milliseconds and pin what the printed numbers mean.
"""

from __future__ import annotations

from collections import Counter

from ctxledger.pipelines.redact.spans import Detection
from eval.baselines import found
from eval.metrics import Span
from eval.redaction import _mask, score_parts
from eval.split import PARTS, part_of
from eval.technical import TechText, measure


def test_split_is_deterministic_and_roughly_even():
    keys = [f"sentence {i}" for i in range(400)]
    parts = [part_of(k) for k in keys]
    assert parts == [part_of(k) for k in keys]
    counts = Counter(parts)
    assert set(counts) == set(PARTS)
    assert 150 < counts["dev"] < 250


def test_mask_replaces_predicted_spans_only():
    text = "Call Ana Lima at 555-0100."
    masked = _mask(text, [Span(5, 13, "PERSON")])
    assert masked == "Call <PERSON> at 555-0100."


def test_survival_counts_whole_gold_values_left_in_the_output():
    """A wrong-type placeholder still removes the value; a partial one does not."""
    records = [
        (
            "Ana Lima lives in Porto.",
            [Span(0, 8, "PERSON"), Span(18, 23, "LOCATION")],
            [],
        )
    ]
    # PERSON found with the wrong type (still gone); LOCATION missed entirely
    predicted = [[Span(0, 8, "LOCATION")]]
    part = part_of(records[0][0])
    table = score_parts(records, predicted, None)[part]
    assert table["PERSON"]["recall"] == 0.0
    assert table["PERSON"]["survival"] == 0.0
    assert table["LOCATION"]["survival"] == 1.0
    assert table["ALL"]["survival"] == 0.5


def test_other_tools_found_values():
    assert found("AKIAABCDEFGHIJKLMNOP", ["key=AKIAABCDEFGHIJKLMNOP"])
    assert found("hunter2-long-password", ["hunter2-long"])
    assert not found("hunter2-long-password", ["hunt"])
    assert not found("value", [])


class _FakeRedactor:
    """Flags every capitalised word as PERSON (the failure the rate measures)."""

    def detect_batch(self, texts):
        out = []
        for text in texts:
            dets, pos = [], 0
            for word in text.split():
                start = text.index(word, pos)
                pos = start + len(word)
                if word[:1].isupper():
                    dets.append(Detection(start, pos, "PERSON", 0.85, "ner:PERSON"))
            out.append(tuple(dets))
        return out


def test_technical_rate_separates_true_names_from_false_ones():
    texts = [TechText("docs", "a", "Rate limits apply . Ask Anne today")]
    result = measure(_FakeRedactor(), texts, frozenset({"Anne"}))
    row = result["per_group"]["docs"][texts[0].part]
    assert row["tokens"] == 7
    assert row["placeholders"] == 3  # Rate, Ask, Anne
    assert row["false"] == 2  # Anne is on the true-name list
    assert row["false_per_10k"] == round(2 * 10_000 / 7, 2)
