"""Round 5 (issue 11): recall gaps the precision rules opened.

* Regions GeoNames lacks (``Scotland``, ``Bavaria``, ``Yorkshire``) come from
  ISO 3166-2 (``pycountry``), without its descriptors ("Central", "Centre",
  "North", "Capital"), which must not become places in technical text.
* "J.R. Smith": initials and a capitalised word are a name's shape.
* "Dana Whitfield ... Dana": one person, one pseudonym within a text.

Every example here was written for this file (none is copied from a corpus).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.redact.gazetteer import is_region, load_regions, region_names
from ctxledger.pipelines.redact.pseudonym import normalize_value, person_aliases
from ctxledger.pipelines.redact.technical import (
    _initials_name,
    is_technical,
)
from tests.unit.redact.test_technical_places import _det, _kept

needs_regions = pytest.mark.skipif(
    not load_regions(), reason="pycountry (ISO 3166-2) is not installed"
)


# --------------------------------------------------------------- regions


def test_region_names_drop_descriptors_that_many_countries_use():
    pairs = [
        ("GB", "Scotland"),
        ("GB", "Wales [Cymru GB-CYM]"),
        ("GB", "North Yorkshire"),
        ("GB", "East Riding of Yorkshire"),
        ("SD", "North Darfur"),
        ("SD", "South Darfur"),
        ("BW", "Central"),
        ("GH", "Central"),
        ("ZM", "Central"),
        ("CM", "North"),
        ("GH", "North East"),
        ("BW", "North West"),
        ("SD", "Northern"),
        ("GH", "Northern"),
        ("ZM", "Northern"),
        ("ZA", "Eastern Cape"),
        ("PH", "Central Luzon (Region III)"),
        ("BE", "Bruxelles-Capitale, Région de"),
        ("CH", "Fribourg / Freiburg"),
    ]
    names = region_names(pairs)
    for name in ("scotland", "wales", "cymru", "yorkshire", "darfur"):
        assert name in names, name
    # descriptors (3+ countries), a remainder of one name only, a note
    for name in ("central", "north", "northern", "cape", "luzon", "region iii"):
        assert name not in names, name
    assert "bruxelles-capitale" in names
    assert "fribourg" in names and "freiburg" in names
    assert "gb-cym" not in names


@needs_regions
@pytest.mark.parametrize(
    "name", ["Scotland", "Wales", "England", "Bavaria", "Yorkshire", "Ontario"]
)
def test_iso_regions_are_known(name):
    assert is_region(name)


@needs_regions
@pytest.mark.parametrize(
    "word", ["Centre", "Central", "North", "Northern", "Capital", "Western", "Coast"]
)
def test_descriptor_words_are_no_regions(word):
    assert not is_region(word)


@needs_regions
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I grew up in Scotland and moved south.", "Scotland"),
        ("We spent the summer hiking in Yorkshire.", "Yorkshire"),
        ("My parents retired to Bavaria last spring.", "Bavaria"),
        ("Wales is lovely in May.", "Wales"),
        ("The ferry to Wales's coast was late.", "Wales's"),
    ],
)
def test_regions_are_no_ordinary_words(text, value):
    assert _kept(text, value)
    assert is_technical(text, _det(text, value)) is None


@needs_regions
def test_regions_stay_places_in_technical_text():
    text = "Run `make backup` nightly; the replica lives in Scotland."
    assert _kept(text, "Scotland")


@needs_regions
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("## Central\nDeploy with `make deploy`.", "Central"),
        ("Run `make deploy`, then the Centre rollout starts.", "Centre"),
        ("Run `kubectl apply`; Capital is the default tier.", "Capital"),
        ("Set `region: west`, then Western follows.", "Western"),
    ],
)
def test_descriptor_words_are_dropped_in_technical_text(text, value):
    assert not _kept(text, value)


# -------------------------------------------------------------- initials


@pytest.mark.parametrize(
    "value", ["J.R. Smith", "J. R. R. Tolkien", "T.S. Eliot", "A. Okafor"]
)
def test_initials_and_a_word_are_a_name_shape(value):
    assert _initials_name(value)


@pytest.mark.parametrize(
    "value", ["Smith", "J.R.", "JR Smith", "e.g. Foo", "J.R. SMITH", "Customer Liaison"]
)
def test_other_shapes_are_not_initials_names(value):
    assert not _initials_name(value)


@pytest.mark.parametrize(
    "text",
    [
        "The report was written by J.R. Smith and reviewed last week.",
        "J.R. Smith called twice.",
        "Patch by J.R. Smith, see `git log` for the rest.",  # technical text
    ],
)
def test_initials_names_are_kept(text):
    assert _kept(text, "J.R. Smith", rec="ner:PERSON", etype="PERSON")


def test_ordinary_phrases_still_go():
    text = "Steps for Customer Liaison"
    assert not _kept(text, "Customer Liaison", rec="ner:PERSON", etype="PERSON")


# -------------------------------------------------------------- aliases


def test_first_and_last_words_alias_the_full_name():
    aliases = person_aliases(["Dana Whitfield", "Dana", "Whitfield", "Bob"])
    assert aliases == {"dana": "dana whitfield", "whitfield": "dana whitfield"}


def test_ambiguous_or_middle_words_keep_their_own_pseudonym():
    aliases = person_aliases(["Dana Whitfield", "Dana Scully", "Dana", "Scully"])
    assert aliases == {"scully": "dana scully"}
    assert person_aliases(["Anna Maria Lopez", "Maria"]) == {}
    assert person_aliases(["DANA  WHITFIELD", "dana"]) == {"dana": "dana whitfield"}


_WORD = st.text(alphabet="abcdeDANW", min_size=1, max_size=4)


@given(st.lists(st.lists(_WORD, min_size=1, max_size=3).map(" ".join), max_size=8))
def test_aliases_point_to_one_longer_name_of_the_same_text(values):
    aliases = person_aliases(values)
    normalized = {normalize_value("PERSON", v) for v in values}
    assert aliases == person_aliases(list(reversed(values)))  # order-free
    for short, full in aliases.items():
        assert short in normalized and full in normalized
        words = full.split(" ")
        assert len(words) > 1 and short in (words[0], words[-1])


def _placeholders(text: str) -> list[str]:
    return re.findall(r"<PERSON:[0-9a-f]+>", text)


def test_a_short_mention_gets_the_full_names_pseudonym(redactor):
    text = (
        "Dana Whitfield called about the refund. Later Dana asked again, "
        "and Whitfield agreed to wait."
    )
    out = redactor.redact_text(text, "acme").text
    found = _placeholders(out)
    assert len(found) == 3 and len(set(found)) == 1, out
    for raw in ("Dana", "Whitfield"):
        assert raw not in out
    assert redactor.redact_text(text, "acme").text == out  # deterministic
    alone = redactor.redact_text("Later Dana asked again.", "acme").text
    assert _placeholders(alone) and _placeholders(alone)[0] != found[0]
