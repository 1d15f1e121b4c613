"""The split-by-source evaluation: variants keep gold spans on the same words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eval.families import Labelled, apply_variant, pooled, variant
from eval.metrics import Span


def test_unpunct_drops_sentence_punctuation_but_keeps_token_dots() -> None:
    text, _ = variant('He said: "call Ana, at 535.104.05 (ok)."', "unpunct")
    assert text == "He said call Ana at 535.104.05 ok"


def test_spans_follow_the_words_through_each_variant() -> None:
    record = Labelled("Met (Sung-min Cho), in Seoul.", (Span(5, 17, "PERSON"),))
    for kind, value in (
        ("original", "Sung-min Cho"),
        ("lower", "sung-min cho"),
        ("unpunct", "Sung-min Cho"),
    ):
        moved = apply_variant(record, kind)
        (gold,) = moved.gold
        assert moved.text[gold.start : gold.end] == value


@given(st.text(alphabet=st.sampled_from(list("ab .,()'\n:-")), max_size=40))
def test_every_kept_character_maps_to_itself(text: str) -> None:
    out, index = variant(text, "unpunct")
    assert len(index) == len(text) + 1
    for i, j in enumerate(index[:-1]):
        if j >= 0:
            assert out[j] == text[i]
    assert index[-1] == len(out)


def test_pooled_reports_each_family_separately() -> None:
    def row(family: str, tp: int, fp: int, n: int) -> dict:
        return {
            "family": family,
            "variant": "original",
            "ours": {"tp": tp, "fp": fp, "n": n},
        }

    rows = [row("develop", 9, 1, 10), row("measure", 1, 1, 4)]
    assert pooled(rows, "measure")["original"] == {
        "n": 4,
        "recall": 0.25,
        "precision": 0.5,
    }
    assert pooled(rows, "develop")["original"]["recall"] == 0.9
