"""The technical-text precision filter (issue 11): pure tables, plus one engine case.

Each ``DROPPED`` row is a false PERSON/LOCATION the issue or the technical corpora
showed (a heading, a role title, a type, a product); each ``KEPT`` row is a real
name in the same kind of text that the filter must leave alone.
"""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.spans import Detection
from ctxledger.pipelines.redact.technical import drop_technical, is_identifier


def _det(text: str, value: str, etype: str = "PERSON", rec: str = "ner:PERSON"):
    start = text.index(value)
    return Detection(start, start + len(value), etype, 0.85, rec)


def _kept(text: str, value: str, etype: str = "PERSON", rec: str = "ner:PERSON"):
    det = _det(text, value, etype, rec)
    return det in drop_technical(text, [det])


DROPPED = [
    ("## Rate limits\n\nEach key gets 100 requests.", "Rate", "PERSON"),
    ("Keys are revoked after 30 days.", "Keys", "PERSON"),
    ("## Steps for Customer Liaison\nBe on stand-by.", "Customer Liaison", "PERSON"),
    (
        "Decide, then instruct Customer Liaison accordingly.",
        "Customer Liaison",
        "PERSON",
    ),
    ("---\ntitle: Kube API Error Budget Burn\nweight: 20\n---", "Kube API", "PERSON"),
    ("| Owner | Status |\n|---|---|\n| a | b |", "Owner", "PERSON"),
    ("Check the `Bool` type first.", "Bool", "PERSON"),
    ("    54\t    envsmap: Map[String, String] box,", "String", "PERSON"),
    ("```\nlet x = Pony.create()\n```", "Pony", "PERSON"),
    ("call toggleDarkMode now", "toggleDarkMode", "PERSON"),
    ("The IC and Deputy are not all-knowing.", "IC", "PERSON"),
    ("License :: OSI Approved :: MIT License", "MIT License", "PERSON"),
    ("the strain on the Container Network Interface (CNI)", "Network", "PERSON"),
    (
        "Run it in Prometheus.\nSee kube-prometheus/issues/861.",
        "Prometheus",
        "LOCATION",
    ),
    ("The Grafana dashboard shows it. Open Grafana.", "Grafana", "PERSON"),
    ("IN NO EVENT SHALL THE AUTHORS BE LIABLE", "THE", "LOCATION"),
]

KEPT = [
    ("> IC: Bob, please investigate the high latency.", "Bob", "PERSON"),
    ("Hi, I'm Rich, and welcome to the training.", "Rich", "PERSON"),
    (
        "Here's a clip where Gene Kranz speaks: /watch/gene-kranz",
        "Gene Kranz",
        "PERSON",
    ),
    ('54:    author="Steven Loria",', "Steven Loria", "PERSON"),
    ("Bob is from the labyrinth review.", "Bob", "PERSON"),
    ("Thanks for the update Sherlock Holmes.", "Sherlock Holmes", "PERSON"),
    ("John Smith reported the outage.", "John Smith", "PERSON"),
    ("That old map does say New Orleans Square just above.", "New Orleans", "LOCATION"),
    ("She moved to Paris last year.", "Paris", "LOCATION"),
    ("Writer McWriterson took notes.", "McWriterson", "PERSON"),
]


@pytest.mark.parametrize(("text", "value", "etype"), DROPPED)
def test_not_names_in_technical_text_are_dropped(text, value, etype):
    rec = "ner:GPE" if etype == "LOCATION" else "ner:PERSON"
    assert not _kept(text, value, etype, rec)


@pytest.mark.parametrize(("text", "value", "etype"), KEPT)
def test_real_names_are_kept(text, value, etype):
    rec = "ner:GPE" if etype == "LOCATION" else "ner:PERSON"
    assert _kept(text, value, etype, rec)


def test_cue_detections_and_other_types_are_never_judged():
    text = "## Mr. Rate\nIP 10.0.0.1"
    cue = _det(text, "Rate", rec="names:title")
    ip = _det(text, "10.0.0.1", "IP_ADDRESS", "pattern:ip")
    assert drop_technical(text, [cue, ip]) == [cue, ip]


def test_a_name_with_its_own_evidence_keeps_its_other_mentions():
    """'Keys' is a surname here: "Dr. Keys" is a cue, so "Keys said" stays."""
    text = "Dr. Alicia Keys joined.\n\nKeys said the rollout is done."
    cue = _det(text, "Alicia Keys", rec="names:title")
    second = text.rindex("Keys")
    ner = Detection(second, second + 4, "PERSON", 0.85, "ner:PERSON")
    assert ner in drop_technical(text, [cue, ner])


def test_repeats_of_a_dropped_value_go_too():
    text = "## Etiquette\n\nEtiquette matters. We value etiquette and Etiquette."
    first = _det(text, "Etiquette")
    last = text.rindex("Etiquette")
    repeat = Detection(last, last + 9, "PERSON", 0.85, "repeat:ner:PERSON")
    assert drop_technical(text, [first, repeat]) == []


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("snake_case", True),
        ("camelCase", True),
        ("HttpClient", True),
        ("ex-ZombieKing", True),
        ("McDonald", False),
        ("O'Neil", False),
        ("DeShawn", False),
        ("Customer", False),
    ],
)
def test_identifier_shapes(word, expected):
    assert is_identifier(word) is expected


def test_engine_applies_the_filter(redactor):
    """End to end through the engine: the issue's heading keeps its words."""
    text = (
        "## Rate limits\n\nKeys are revoked after 30 days. Ask Maria Lopez.\n\n"
        "## Steps for Customer Liaison\nEtiquette dictates that people announce."
    )
    out = redactor.redact_text(text, "t1", "content").text
    assert out.startswith("## Rate limits\n\nKeys are revoked")
    assert "## Steps for Customer Liaison\nEtiquette dictates" in out
    assert "Maria Lopez" not in out
