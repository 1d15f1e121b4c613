"""The redact stage's speed-ups change no output (issue 11: >= 1,000 msg/s).

Each fast path is checked against the slow form it replaces, on inputs built to
hit its edge cases; ``bench/bench_redact.py`` measures the speed itself.
"""

from __future__ import annotations

import random
import re
import time
from types import SimpleNamespace

from ctxledger.pipelines.redact import names, technical
from ctxledger.pipelines.redact.ner import NerRunner
from ctxledger.pipelines.redact.patterns import (
    _PHONE_CAND_RE,
    PhoneFinder,
    _mask_dead_digits,
)
from ctxledger.pipelines.redact.textkind import has_digit

# ------------------------------------------------------------------ phones


def _spans(regex: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in regex.finditer(text)]


def test_masking_dead_digit_runs_keeps_every_phone_candidate():
    rng = random.Random(3)
    pieces = [*"0123456789" * 2, *" .-/()+x:@_aeXE\n", "ext", " x ", "00", "+1 "]
    checked = masked = 0
    for _ in range(400):
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.3:  # runs around the 16-digit threshold
                size = rng.choice([14, 15, 16, 17])
                parts.append("".join(rng.choice("0123456789") for _ in range(size)))
            else:
                parts.append("".join(rng.choice(pieces) for _ in range(4)))
        text = "".join(parts)
        fast = _mask_dead_digits(text)
        assert len(fast) == len(text)
        masked += fast != text
        assert _spans(_PHONE_CAND_RE, fast) == _spans(_PHONE_CAND_RE, text), text
        checked += 1
    assert masked > 20  # the masked branch was exercised


def test_masking_edges():
    # a decimal point before a masked run still reads as one: no new match
    for text in (
        "call 555 1234.1234567890123456a",
        "tel 555-1234 1234567890123456:",
        "x " + "1" * 70 + " then 555-123-4567",
        "+49 30 1234 5678 and " + "9" * 80,
    ):
        assert _spans(_PHONE_CAND_RE, _mask_dead_digits(text)) == _spans(
            _PHONE_CAND_RE, text
        ), text
    assert _mask_dead_digits("id 1234567890123456a") == "id 1aaaaaaaaaaaaaaaa"
    assert _mask_dead_digits("tel 1234567890123456 x") == "tel 1234567890123456 x"


def test_long_digit_runs_do_not_backtrack():
    # CTF tool outputs: each of these took ~0.5 s in the candidate regex alone
    text = "\n".join(
        f"value {i}: " + "01" * 45 + "\nbig int : " + "7" * 80 + "L" for i in range(8)
    )
    finder = PhoneFinder()
    started = time.perf_counter()
    assert finder.find(text) == []
    assert time.perf_counter() - started < 2.0


# --------------------------------------------------------------- technical


def test_tech_head_search_without_per_word_regex():
    texts = [
        "Open the Grafana dashboard and the grafana  Logs",
        "GrafanaGrafana dashboard",  # overlapping occurrences
        "aaaa aaaa's api, aaaaa tools",
        "Loki's query\tand Loki\nquery",
        "Sentry",
    ]
    for text in texts:
        for word in ("Grafana", "grafana", "aaaa", "aa", "Loki", "Sentry", "Gra"):
            slow = re.search(re.escape(word) + technical._TECH_HEAD, text) is not None
            assert technical._followed_by_tech_head(text, word) is slow, (text, word)
            assert list(technical._occurrences(text, word.lower())) == [
                m.span() for m in re.finditer(re.escape(word.lower()), text)
            ]


# ------------------------------------------------------------------- names


def test_phrase_prefilter_never_hides_a_match():
    cues = [
        "my name is",
        "Name is",
        "CALL ME",
        "calls me",
        "maiden name is",
        "last name:",
        "first name?",
        "surname is",
        "full name:",
        "Regards,",
        "sincerely,",
        "cheers,",
        "Thanks,",
        "directed by",
        "written by",
        "starring",
        "said",
        "Says",
        "fan of",
        "my wife",
        "My boss's name is",
        "my friend,",
    ]
    for cue in cues:
        text = f"x\n{cue} Maria Lopez"
        assert names._PHRASE_RE.search(text), cue
        assert names._may_hold_phrase(text), cue
    assert not names._may_hold_phrase("The build failed at step 3 of 4.")
    assert names._may_hold_phrase("Kelvin \u212a")  # non-ASCII: never judged


# --------------------------------------------------------------------- NER


class _FakeNlp:
    """Records what reaches ``pipe``; every text gets one PERSON entity."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def pipe(self, texts, batch_size=256):  # noqa: ANN001, ANN201
        for text in texts:
            self.seen.append(text)
            ent = SimpleNamespace(label_="PERSON", start_char=0, end_char=len(text))
            yield SimpleNamespace(ents=[ent])


def test_ner_runs_each_distinct_window_once():
    runner = NerRunner("fake", {"PERSON"}, cache_size=2)
    runner.nlp = _FakeNlp()
    first = runner.detect(["Ana Silva", "Bo Chen", "Ana Silva"])
    assert runner.nlp.seen == ["Ana Silva", "Bo Chen"]  # longest first, once each
    assert [[(d.start, d.end) for d in found] for found in first] == [
        [(0, 9)],
        [(0, 7)],
        [(0, 9)],
    ]
    again = runner.detect(["Bo Chen", "Ana Silva"])
    assert runner.nlp.seen == ["Ana Silva", "Bo Chen"]  # both remembered
    assert again == [first[1], first[0]]
    runner.detect(["Cy Dee"])  # evicts the oldest ("Ana Silva")
    runner.detect(["Ana Silva"])
    assert runner.nlp.seen[-1] == "Ana Silva"


# ------------------------------------------------------------------ digits


def test_has_digit_is_isdigit():
    samples = [
        "",
        "no digits here",
        "room 12",
        "x²",  # superscript: isdigit, not \d
        "step ①",
        "٣ Arabic-Indic",  # \d (Nd)
        "café ☕ only",
        "\u0966",  # Devanagari zero
    ]
    for text in samples:
        assert has_digit(text) is any(ch.isdigit() for ch in text), text
