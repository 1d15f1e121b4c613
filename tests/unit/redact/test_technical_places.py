"""Precision on technical text, round 4 (issue 11, point 4): places without capitals.

Every example here was written for this file (none is copied from a corpus).
A ``drop`` case is an NER LOCATION guess on a lower-case English word of the
kind old or literary prose is full of (a book grepped in a tool output, a
lower-case tweet); a ``keep`` case is a real place, or a guess the rule must
not judge (capitalised, a cue rule's, a token no dictionary knows).
"""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.spans import Detection
from ctxledger.pipelines.redact.technical import drop_technical, is_technical


def _det(text: str, value: str, rec: str = "ner:GPE", etype: str = "LOCATION"):
    start = text.index(value)
    return Detection(start, start + len(value), etype, 0.85, rec)


def _kept(text: str, value: str, rec: str = "ner:GPE", etype: str = "LOCATION"):
    det = _det(text, value, rec, etype)
    return det in drop_technical(text, [det])


@pytest.mark.parametrize(
    ("text", "value", "rec"),
    [
        # bank given names, rare words, phrases: the frequent-word rule kept them
        ("the wind howled across the heath that night", "heath", "ner:GPE"),
        ("and yonder lay the dark water", "yonder", "ner:GPE"),
        ("she walked on past the barton to the dairy", "barton", "ner:LOC"),
        ("they camped by the mere below the fell", "mere", "ner:LOC"),
        ("we rode over the moor and fen till dawn", "moor and fen", "ner:LOC"),
        ("he came down from the glen", "glen", "ner:GPE"),
        ("the flock grazed on the wold", "wold", "repeat:ner:GPE"),
    ],
)
def test_lower_case_english_words_that_no_gazetteer_knows_are_no_places(
    text, value, rec
):
    assert not _kept(text, value, rec)
    assert is_technical(text, _det(text, value, rec)) == "ordinary"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("i moved to london last year", "london"),
        ("flying to new york tomorrow", "new york"),
        ("paris in the spring is lovely", "paris"),
        ("london's parks are green", "london's"),
        ("back in abq new mexico now", "abq new mexico"),  # a place inside
        ("we drove to milton keyons", "milton keyons"),  # a place and a typo
        ("visiting kzarnia soon", "kzarnia"),  # no English word: no evidence
    ],
)
def test_lower_case_places_stay_redacted(text, value):
    assert _kept(text, value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("They walked across Hampstead Heath.", "Hampstead Heath"),
        ("She moved to Paris last year.", "Paris"),
        ("She loved London's parks.", "London's"),
        ("The mail came from Amherst.", "Amherst"),
    ],
)
def test_capitalised_places_are_untouched(text, value):
    assert _kept(text, value)


def test_only_ner_guesses_are_judged_as_no_place_words():
    text = "we moved to heath"
    assert _kept(text, "heath", rec="places:move")
    # a lower-case PERSON is judged by the name bank, not by the gazetteer
    assert _kept("then okafor said so", "okafor", rec="ner:PERSON", etype="PERSON")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Install Node.js first, then run the build.", "Node.js"),
        ("The server uses Socket.io for events.", "Socket.io"),
    ],
)
def test_a_dotted_identifier_is_code(text, value):
    assert not _kept(text, value)
    assert is_technical(text, _det(text, value)) == "code"


def test_a_dotted_name_without_a_lower_case_part_is_no_code():
    text = "We met in St.Louis last year."
    assert is_technical(text, _det(text, "St.Louis")) != "code"
    assert _kept(text, "St.Louis")


# ------------------------------------ one-word places in technical text need GeoNames

_TECH = "Run `make docs` first.\n"


@pytest.mark.parametrize("value", ["Lua", "Node", "Duplex"])
def test_a_bank_given_name_is_no_place_in_technical_text(value):
    text = f"{_TECH}The plugin was ported to {value} last year."
    assert not _kept(text, value)
    assert is_technical(text, _det(text, value)) == "techtext"


@pytest.mark.parametrize(
    ("text", "value", "etype", "rec"),
    [
        (f"{_TECH}The team moved to Tokyo last year.", "Tokyo", "LOCATION", "ner:GPE"),
        (f"{_TECH}Ask Anne about the plugin.", "Anne", "LOCATION", "ner:GPE"),
        (f"{_TECH}Ask Zahra about the plugin.", "Zahra", "PERSON", "ner:PERSON"),
        # outside technical text a bank given name read as a place stays
        ("We ported it to Lua last year, said Tom.", "Lua", "LOCATION", "ner:GPE"),
    ],
)
def test_places_lexicon_names_and_prose_stay(text, value, etype, rec):
    assert _kept(text, value, rec, etype)
