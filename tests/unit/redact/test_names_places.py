"""Table tests for the PERSON and LOCATION cue rules (names.py, places.py) and
their wiring in the engine. All names and places are made up or generic."""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.names import find_names
from ctxledger.pipelines.redact.places import find_places, org_place, recipient_name
from ctxledger.pipelines.redact.spans import Detection


def _values(text: str, dets: list[Detection]) -> list[tuple[str, str]]:
    return [(d.entity_type, text[d.start : d.end]) for d in dets]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I'd like to join accounts with ms. wijtze", "wijtze"),
        ("please ask dr. okonkwo-baptiste about it", "okonkwo-baptiste"),
        ("my name is tracy sukhorukova and I live here", "tracy sukhorukova"),
        ("her maiden name is kowalczyk", "kowalczyk"),
        ("call me katy but u can call later", "katy"),
        ("john had given the keys to the agent", "john"),
        ("It was a done thing between him and Zumaya's kid.", "Zumaya"),
        ("Ask Oyelaran's wife", "Oyelaran"),
        # a former member or holder of a role, named right after it
        ("The song by ex-Marine Okonkwo is great", "Okonkwo"),
        # the recipient of a verb of giving or telling, before his/her
        ("john had given tomasz his address", "tomasz"),
        ("I told Zuleika her flight moved", "Zuleika"),
        # an artist's period, a person who died
        ("Nothing beats early Kasparian.", "Kasparian"),
        ("a tribute to the late Abernathy.", "Abernathy"),
        # given names written in lower case
        ("ping layla when the deploy is done", "layla"),
    ],
)
def test_person_cues(text: str, value: str) -> None:
    found = _values(text, find_names(text))
    assert ("PERSON", value) in found, found


@pytest.mark.parametrize(
    "text",
    [
        "call me back when the build passes",
        "my name is not important here",
        "The file name is readme.md",
        "Please ask ms. office to help.",
        "Apple's family of products",
        "ssh alice@host.example.com",
        "cd /home/john/projects",
        "see john.doe@example.com",
        "julia and ada are languages; hugo builds sites",
        "THE USER JOHN IS SHOUTING",
        "dolores eos qui ratione voluptatem",
    ],
)
def test_person_cue_negatives(text: str) -> None:
    new_rules = [
        text[d.start : d.end]
        for d in find_names(text)
        if d.recognizer in ("names:given_lower", "names:kin")
        or text[d.start : d.end].islower()
    ]
    assert new_rules == []


@pytest.mark.parametrize(
    "text",
    [
        "I gave him his keys and told them their seats.",
        "Please send the user his receipt.",
        "We sent mom her card; the bot gave customer her refund.",
        "Told everyone his plan.",
        "The fix landed in early March.",
        "It was fixed in early React.",
        "early Windows builds crashed",
        "Since late Friday, nothing.",
        "an ex-Google engineer joined",
    ],
)
def test_role_cue_negatives(text: str) -> None:
    cues = ("names:ex", "names:given_to", "names:period")
    found = [text[d.start : d.end] for d in find_names(text) if d.recognizer in cues]
    assert found == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Dr. Vesely grew up in Ústí nad Labem 2.", "Ústí nad Labem 2"),
        ("She was born in Zafferana Etnea in 1950.", "Zafferana Etnea"),
        ("I live in Porto Alegre now", "Porto Alegre"),
        ("Ana lives in Kouklia.", "Kouklia"),
        ("We are flying to Reykjavik on Monday", "Reykjavik"),
        ("When: 1998-06-28\nWhere: Kouklia Country Club.", "Kouklia Country Club"),
        ("studying at the University of Zafferana Etnea.", "Zafferana Etnea"),
        ("his hometown is Villa de Leyva", "Villa de Leyva"),
        ("On Monday the sudanese government said no.", "sudanese"),
        ("The Peruvian embassy opened late.", "Peruvian"),
    ],
)
def test_place_cues(text: str, value: str) -> None:
    found = _values(text, find_places(text))
    assert ("LOCATION", value) in found, found


@pytest.mark.parametrize(
    "text",
    [
        "The function lives in Utils and is called from main.",
        "I moved to Postgres last week.",
        "We are based in React land here.",
        "Where: src/app/main.py line 10",
        "Location: us-east-1",
        "City: None",
        "the helper lives in Settings.py",
        "we travel to GetUserToken next",
        "the federal government and the new administration",
        "the Python government-data package",
    ],
)
def test_place_cue_negatives(text: str) -> None:
    assert find_places(text) == []


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (
            "billing address: tracy sukhorukova\n    23 8 wressle road",
            "tracy sukhorukova",
        ),
        ("Ship to: Ana María Díaz\n975 Sunset Drive", "Ana María Díaz"),
        ("Olumide Bakare\n12 Harbour Road", "Olumide Bakare"),
        ("Acme Software\n12 Harbour Road", None),
        ("Order 42 shipped\n12 Harbour Road", None),
        ("Notes: see attached\n12 Harbour Road", None),
    ],
)
def test_recipient_name(text: str, name: str | None) -> None:
    start = text.index("\n") + 1
    while text[start] == " ":
        start += 1
    det = recipient_name(text, start)
    if name is None:
        assert det is None
    else:
        assert det is not None and text[det.start : det.end] == name


def test_engine_redacts_recipient_and_place(redactor) -> None:
    text = (
        "billing address: tracy sukhorukova\n    23 8 wressle road suite 771\n"
        "She grew up in Ústí nad Labem 2."
    )
    out = redactor.redact_text(text, "t").text
    for raw in ("tracy", "sukhorukova", "wressle", "Ústí"):
        assert raw not in out, out


def test_engine_redacts_repeated_password(redactor) -> None:
    pw = "Prl" + "23Db#@"
    text = f"Password:{pw}\n비번 {pw}\nroot/{pw}"
    out = redactor.redact_text(text, "t", "tool_output")
    assert pw not in out.text
    placeholders = {out.text[f.start : f.end] for f in out.findings}
    assert len(placeholders) == 1  # one value, one pseudonym


@pytest.mark.parametrize(
    ("text", "org", "place"),
    [
        ("a year at Halvorsen in WOLLONGBAR, which", "WOLLONGBAR", True),
        ("she worked for Brightwell Foods in Tarragundi.", "Tarragundi", True),
        ("a year at Halvorsen in Brightwell Ltd, which", "Brightwell Ltd", False),
        ("the fix landed in Brightwell yesterday", "Brightwell", False),
        ("a year at Halvorsen near Tarragundi", "Tarragundi", False),
    ],
)
def test_org_after_at_employer_in_is_a_place(text: str, org: str, place: bool) -> None:
    start = text.index(org)
    det = Detection(start, start + len(org), "ORGANIZATION", 0.85, "ner:ORG")
    relabelled = org_place(text, det)
    if place:
        assert relabelled is not None
        assert relabelled.entity_type == "LOCATION"
        assert (relabelled.start, relabelled.end) == (det.start, det.end)
    else:
        assert relabelled is None
