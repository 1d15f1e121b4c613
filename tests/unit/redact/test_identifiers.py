"""DATE_OF_BIRTH, PASSPORT and NATIONAL_ID recognizers (issue 29 item 2).

Ids are invented; each checksum-valid one was computed for this test."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.redact.identifiers import (
    IDENTIFIER_TYPES,
    NATIONAL_IDS,
    detect,
    kz_iin_valid,
)


def _found(text):
    return {
        (text[d.start : d.end], d.entity_type) for d in detect(text, IDENTIFIER_TYPES)
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("My PESEL is 44051401359.", "44051401359"),
        ("Aadhaar: 2341 2341 2346", "2341 2341 2346"),
        ("his IIN 870117300452 was rejected", "870117300452"),
        ("CPF 111.444.777-35 on file", "111.444.777-35"),
        ("codice fiscale RSSMRA85T10A562S", "RSSMRA85T10A562S"),
        ("national ID number: 880412-5531", "880412-5531"),
    ],
)
def test_national_ids(text, value):
    assert (value, "NATIONAL_ID") in _found(text)


def test_plain_digits_need_an_id_word():
    assert _found("order 44051401359 shipped") == set()


def test_checksum_decides_the_score():
    good = detect("My PESEL is 44051401359.", IDENTIFIER_TYPES)
    bad = detect("My PESEL is 44051401358.", IDENTIFIER_TYPES)
    assert [d.score for d in good] == [0.95]
    assert [(d.score, d.recognizer) for d in bad] == [(0.6, "id:context")]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("My passport number is K4821937.", "K4821937"),
        ("passport no. C01X00T47, expires 2030", "C01X00T47"),
        ("Passport: 912803456", "912803456"),
    ],
)
def test_passports(text, value):
    assert (value, "PASSPORT") in _found(text)


def test_passport_needs_digits():
    assert _found("passport control was slow") == set()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I was born on 14 March 1987.", "14 March 1987"),
        ("DOB: 1987-03-14", "1987-03-14"),
        ("date of birth 03/14/1987", "03/14/1987"),
        ("born in Krakow on March 14th, 1987", "March 14th, 1987"),
        ("she was born in 1987", "1987"),
    ],
)
def test_birth_dates(text, value):
    assert (value, "DATE_OF_BIRTH") in _found(text)


def test_dates_without_birth_context_are_not_birth_dates():
    assert _found("deployed on 2024-03-14 at 10:00") == set()


def test_kz_iin_checksum():
    assert kz_iin_valid("870117300452")
    assert not kz_iin_valid("870117300453")


def test_every_rule_names_an_importable_validator():
    from ctxledger.pipelines.redact.identifiers import _validator

    for rule in NATIONAL_IDS:
        assert callable(_validator(rule.validator)), rule.name


@given(st.text(max_size=200))
def test_detections_lie_inside_the_text(text):
    for det in detect(text, IDENTIFIER_TYPES):
        assert 0 <= det.start < det.end <= len(text)
