"""Issue 11, second round: phones, address clauses, other scripts, place cues,
and technical-text precision (products, code comments, titles). Pure functions;
the examples are written here, not taken from the evaluation sets."""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.names import find_names
from ctxledger.pipelines.redact.patterns import PhoneFinder, find_addresses
from ctxledger.pipelines.redact.places import find_places, person_over_ner_place
from ctxledger.pipelines.redact.scripts import foreign_script_names
from ctxledger.pipelines.redact.spans import Detection, repeated_values
from ctxledger.pipelines.redact.technical import drop_technical


def _values(text: str, dets: list[Detection]) -> list[str]:
    return [text[d.start : d.end] for d in dets]


# ------------------------------------------------------------------ phones


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        ("Greta called from +61-2-5550-1234 on Monday.", "+61-2-5550-1234"),
        ("She rang us from 06-1/234 5678 at noon.", "06-1/234 5678"),
        ("Smit called from +31(0)20-5551234 today.", "+31(0)20-5551234"),
        ("Contact: +49(0) 301234567", "+49(0) 301234567"),
        ("Ola called from 22334455 yesterday.", "22334455"),
        (
            "Write to jo@mail.example or to +55 11 5555-0199 instead.",
            "+55 11 5555-0199",
        ),
    ],
)
def test_phones_near_a_cue(text: str, phone: str) -> None:
    assert phone in _values(text, PhoneFinder().find(text))


@pytest.mark.parametrize(
    "text",
    [
        "released 2023-01-05, see 12/05/2023",
        "the build took 22334455 ms",
        "version 1.2.3 of 45 files",
    ],
)
def test_no_phones_without_a_cue(text: str) -> None:
    assert PhoneFinder().find(text) == []


# --------------------------------------------------------- address clauses


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("Please ship it to Kastanjelaan 12, Utrecht 3511 AB.", "Kastanjelaan 12"),
        ("Is Olga still living at Wiśniowa 8, Kraków?", "Wiśniowa 8, Kraków"),
        ("The parcel was delivered to 14 Orchard Rise, Ballymena.", "14 Orchard Rise"),
        ("Forward all mail to Số 12/34 Lê Lợi", "Số 12/34 Lê Lợi"),
    ],
)
def test_address_after_a_delivery_cue(text: str, address: str) -> None:
    found = _values(text, find_addresses(text))
    assert any(address in v for v in found), found


@pytest.mark.parametrize(
    "text",
    [
        "The fix was shipped to PR 1234.",
        "We shipped to Production 3 times today.",
        "The release is shipped to PyPI 2.1.",
        "The alerts are forwarded to Slack 2 hours later.",
    ],
)
def test_no_address_clause_in_technical_sentences(text: str) -> None:
    found = [d for d in find_addresses(text) if d.recognizer == "pattern:address"]
    assert found == []


# ------------------------------------------------------------ other scripts


def test_names_in_another_script_inside_english() -> None:
    text = "The meeting with सरल तिवारी in अहमदाबाद was moved."
    found = {(text[d.start : d.end], d.entity_type) for d in foreign_script_names(text)}
    assert found == {("सरल तिवारी", "PERSON"), ("अहमदाबाद", "LOCATION")}


def test_text_in_another_script_is_left_alone() -> None:
    assert foreign_script_names("मुझे Python सीखना है और मैं रोज़ अभ्यास करता हूँ") == []
    assert foreign_script_names("Привет, как дела? Я работаю в Москве.") == []


# ----------------------------------------------------------- place cues


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("Jan works remotely from Hlinsko.", "Hlinsko"),
        ("Eli visited Kvitsøy twice.", "Kvitsøy"),
        ("My family and I live in Dvůr-Králové.", "Dvůr-Králové"),
    ],
)
def test_places_after_movement_cues(text: str, place: str) -> None:
    assert place in _values(text, find_places(text))


def test_bank_person_beats_ner_place() -> None:
    text = "Hi Kjell, thanks for the update!"
    ner = Detection(3, 8, "LOCATION", 0.85, "ner:GPE")
    bank = Detection(3, 8, "PERSON", 0.6, "names:bank_addressed")
    assert person_over_ner_place(text, [ner, bank]) == [bank]
    text = "I moved to Kjell last year."  # a locative word keeps the place
    ner = Detection(11, 16, "LOCATION", 0.85, "ner:GPE")
    bank = Detection(11, 16, "PERSON", 0.6, "names:bank_single")
    assert ner in person_over_ner_place(text, [ner, bank])


# ------------------------------------------------- technical-text precision


def test_milliseconds_and_sentence_adverbs_are_no_names() -> None:
    text = "Table sorted 1.1 ms, index 3.6 ms. Sort memories by tenant."
    assert "Sort" not in _values(text, find_names(text))
    text = "Conversely, you can turn the value back."
    assert "Conversely" not in _values(text, find_names(text))
    text = "Dr. Sort signed it. Zahra, can you check?"
    assert {"Sort", "Zahra"} <= set(_values(text, find_names(text)))


def _kept(text: str, value: str, etype: str = "PERSON", rec: str = "ner:PERSON"):
    start = text.index(value)
    det = Detection(start, start + len(value), etype, 0.85, rec)
    return det in drop_technical(text, [det])


_README = "# fastlib\n\nInstall with `pip install fastlib`.\n\n"


@pytest.mark.parametrize(
    ("text", "value", "etype"),
    [
        (_README + "It writes Parquet files for you.", "Parquet", "PERSON"),
        (_README + "Runs on Dataflow or locally.", "Dataflow", "LOCATION"),
        (_README + "Tested by Travis CI nightly.", "Travis CI", "PERSON"),
        (_README + "    # Display found secrets\n    print(x)", "Display", "PERSON"),
        (_README + "Glyph: Hourglass With Flowing Sand", "Hourglass With Flowing Sand",
         "PERSON"),
        (_README + "1. Kangxi Radical table", "Kangxi Radical", "PERSON"),
        (_README + "On Windows, you might need admin rights.", "Windows", "LOCATION"),
        (_README + "Bindings exist for Java, Scala, Go and R.", "Scala", "PERSON"),
        ("src/app/io.py:12: handled by Kestrel later", "Kestrel", "PERSON"),
        (_README + ".. |travis| image:: badge.svg", "travis", "PERSON"),
    ],
)  # fmt: skip
def test_technical_text_products_and_terms_dropped(
    text: str, value: str, etype: str
) -> None:
    assert not _kept(text, value, etype)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (_README + "IC: Bob, please investigate the latency.", "Bob"),
        (_README + "Written by Anne in 2020.", "Anne"),
        (_README + "Thanks to Zahra for the patch.", "Zahra"),
        (_README + "Maintained by Gene Kranz since 1970.", "Gene Kranz"),
    ],
)
def test_technical_text_people_kept(text: str, value: str) -> None:
    assert _kept(text, value)


def test_prose_is_not_technical_text() -> None:
    # the same capitalised word in a chat line without code markers stays
    assert _kept("It writes Parquet every day lol", "Parquet")


def test_function_words_of_a_name_are_not_repeated() -> None:
    text = "Hourglass With Flowing Sand; with love, and With that"
    det = Detection(0, 27, "PERSON", 0.7, "names:bank")
    assert "With" not in _values(text, repeated_values(text, [det]))
