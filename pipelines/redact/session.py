"""One value, one placeholder across a session (issue 29 item 6).

Detectors judge each text alone: a name NER finds in a sentence is missed as a
bare speaker prefix ("Nate: ok, deploying") in another turn, which then keeps
the raw name next to its own placeholder. The redact stage hands a session's
fields to ``Redactor.redact_batch`` in one call; ``session_repeats`` takes every
value detected in any of them (and each capitalised word of a multi-word
name, as ``spans.repeated_values`` does within one text) and adds a detection
wherever it occurs verbatim, as a whole word, in the other texts. One compiled
``findall`` of the words of each text against the values' first words, only
when something was found. Within one
long text this also reaches values past ``spans.repeated_values``' cap of 64
(a long chat pasted as one message: "Nate: ..." prefixes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxledger.pipelines.redact.spans import (
    _NAME_PART,
    _NO_REPEAT,
    _NO_REPEAT_PARTS,
    Detection,
    drop_overlapping,
    placeholder_spans,
    resolve_overlaps,
)

#: Values searched per session at most (the longest first).
MAX_VALUES = 4096
_WORD = re.compile(r"\w+")
#: Shortest value searched (shorter ones are too likely to be something else).
MIN_CHARS = 3


def session_values(
    texts: Sequence[str], detections: Sequence[Sequence[Detection]]
) -> dict[str, Detection]:
    """Each detected value of the session -> the detection it came from."""
    values: dict[str, Detection] = {}
    for text, dets in zip(texts, detections, strict=True):
        for det in dets:
            if det.entity_type in _NO_REPEAT:
                continue
            value = text[det.start : det.end]
            if len(value.strip()) < MIN_CHARS or "\n" in value:
                continue
            values.setdefault(value, det)
            if det.entity_type == "PERSON" and " " in value:
                for part in _NAME_PART.findall(value):
                    if (
                        part[0].isupper()
                        and not part.isupper()
                        and part.lower() not in _NO_REPEAT_PARTS
                    ):
                        values.setdefault(part, det)
    return values


def _index(values: dict[str, Detection]) -> tuple[dict[str, list[str]], list[str]]:
    """Values by their first word (longest first), and those that start with
    no word character."""
    by_word: dict[str, list[str]] = {}
    odd: list[str] = []
    for value in values:
        m = _WORD.match(value)
        if m is None:
            odd.append(value)
        else:
            by_word.setdefault(m.group(), []).append(value)
    for group in by_word.values():
        group.sort(key=len, reverse=True)
    return by_word, odd


def _occurrences(
    text: str, by_word: dict[str, list[str]], odd: list[str]
) -> list[tuple[int, int]]:
    """Whole-word spans of the indexed values in ``text``: the text's words
    (one C-level ``findall``) meet the index, and only the values whose first
    word is there are searched (``str.find``); overlaps are settled later by
    ``resolve_overlaps``."""
    words = set(_WORD.findall(text))
    candidates = [v for w in words.intersection(by_word) for v in by_word[w]]
    spans = []
    for value in [*candidates, *odd]:
        pos = text.find(value)
        while pos >= 0:
            end = pos + len(value)
            if not (pos > 0 and _word_char(text[pos - 1])) and not (
                end < len(text) and _word_char(text[end])
            ):
                spans.append((pos, end))
            pos = text.find(value, end)
    return spans


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def session_repeats(
    texts: Sequence[str], detections: Sequence[tuple[Detection, ...]]
) -> list[tuple[Detection, ...]]:
    """``detections`` plus every verbatim whole-word occurrence, in any text
    of the batch, of a value detected in any of them."""
    values = session_values(texts, detections)
    if not values:
        return list(detections)
    if len(values) > MAX_VALUES:
        values = dict(sorted(values.items(), key=lambda kv: -len(kv[0]))[:MAX_VALUES])
    by_word, odd = _index(values)
    out = []
    for text, dets in zip(texts, detections, strict=True):
        extra = []
        for start, end in _occurrences(text, by_word, odd):
            if any(d.start <= start and end <= d.end for d in dets):
                continue
            det = values[text[start:end]]
            extra.append(
                Detection(
                    start, end, det.entity_type, det.score, f"session:{det.recognizer}"
                )
            )
        if extra:
            extra = drop_overlapping(extra, placeholder_spans(text))
            out.append(tuple(resolve_overlaps([*dets, *extra])))
        else:
            out.append(dets)
    return out
