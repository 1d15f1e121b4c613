"""The detection record shared by every detector, and overlap resolution.

A ``Detection`` is a candidate entity in the *original* text (``start``/``end``
offsets, half open). Detectors produce many, possibly overlapping; the engine keeps
a non-overlapping subset with ``resolve_overlaps`` before anything is replaced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: Entity types produced by the secret detectors. Overlaps prefer these.
SECRET_TYPES = frozenset(
    {
        "AWS_ACCESS_KEY",
        "AWS_SECRET_KEY",
        "GITHUB_TOKEN",
        "GITLAB_TOKEN",
        "SLACK_TOKEN",
        "STRIPE_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "API_KEY",
        "JWT",
        "PRIVATE_KEY",
        "SECRET",
        "PASSWORD",
    }
)

#: What our own output looks like: ``<TYPE>`` or ``<TYPE:hex>``. Detections that
#: overlap one are dropped, so redacting redacted text changes nothing.
PLACEHOLDER_RE = re.compile(r"<[A-Z][A-Z0-9_]*(?::[0-9a-f]{4,64})?>")


@dataclass(frozen=True, slots=True)
class Detection:
    """One candidate entity: half-open span of the original text."""

    start: int
    end: int
    entity_type: str
    score: float
    recognizer: str

    @property
    def length(self) -> int:
        """Number of characters covered."""
        return self.end - self.start

    def shifted(self, offset: int) -> Detection:
        """The same detection with both offsets moved by ``offset``."""
        return Detection(
            self.start + offset,
            self.end + offset,
            self.entity_type,
            self.score,
            self.recognizer,
        )


def _priority(det: Detection) -> tuple[int, float, int, int]:
    return (det.entity_type in SECRET_TYPES, det.score, det.length, -det.start)


def merge_same_type(detections: Iterable[Detection]) -> list[Detection]:
    """Union overlapping detections of the same entity type (max score wins).

    Two NER chunks, or NER and a pattern, often find pieces of one address or one
    name; one placeholder for the union is what a reader expects.
    """
    by_type: dict[str, list[Detection]] = {}
    for det in detections:
        by_type.setdefault(det.entity_type, []).append(det)
    merged: list[Detection] = []
    for dets in by_type.values():
        dets.sort(key=lambda d: (d.start, -d.end))
        current = dets[0]
        for det in dets[1:]:
            if det.start < current.end:
                if det.end > current.end or det.score > current.score:
                    best = det if det.score > current.score else current
                    current = Detection(
                        current.start,
                        max(current.end, det.end),
                        current.entity_type,
                        max(current.score, det.score),
                        best.recognizer,
                    )
            else:
                merged.append(current)
                current = det
        merged.append(current)
    return merged


def resolve_overlaps(detections: Iterable[Detection]) -> list[Detection]:
    """A non-overlapping subset, sorted by start.

    Same-type overlaps are unioned first; across types the winner is chosen by:
    secrets first, then the higher score, then the longer span, then the earlier.
    """
    candidates = merge_same_type(d for d in detections if d.end > d.start)
    candidates.sort(key=_priority, reverse=True)
    kept: list[Detection] = []
    for det in candidates:
        if all(det.end <= k.start or det.start >= k.end for k in kept):
            kept.append(det)
    kept.sort(key=lambda d: d.start)
    return kept


def placeholder_spans(text: str) -> list[tuple[int, int]]:
    """Spans of our own placeholders already present in ``text``."""
    if "<" not in text:
        return []
    return [m.span() for m in PLACEHOLDER_RE.finditer(text)]


def drop_overlapping(
    detections: list[Detection], spans: list[tuple[int, int]]
) -> list[Detection]:
    """Detections that overlap none of ``spans``."""
    if not spans:
        return detections
    return [d for d in detections if all(d.end <= s or d.start >= e for s, e in spans)]


#: Types whose values are not repeated by ``repeated_values``: secrets have their
#: own (``secrets._repeats``), and these are too generic to search for again.
_NO_REPEAT = frozenset({"DATE_TIME", "NRP", "URL"})
_MAX_REPEAT_VALUES = 64
_NAME_PART = re.compile(r"[^\W\d_][^\W\d_'’\-]{2,}")
#: Words of a name that are never searched again on their own: function words
#: a loose multi-word match can hold ("Hourglass With Flowing Sand", "Trigram
#: For Heaven"), whose every occurrence would otherwise become a placeholder.
_NO_REPEAT_PARTS = frozenset(
    "the and for with from into onto over under of off out via per not but nor "
    "yet all any each every this that these those its our your their his her "
    "new old see use get set add run".split()
)


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def repeated_values(text: str, kept: list[Detection]) -> list[Detection]:
    """Other occurrences of each detected value in ``text`` (whole words only).

    A detector (or NER) often finds a value once and misses it the second time
    ("I met Ana Ruiz; Ana Ruiz said..."), which leaves it next to its own
    placeholder. Each detected value is searched again; for a multi-word PERSON
    each capitalised word of 3+ letters too ("Ana Ruiz ... Ruiz said"), since a
    later mention usually drops the first or last name. Same type and score as
    the original; ``resolve_overlaps`` settles clashes with other detections.
    """
    values: dict[str, Detection] = {}
    for det in kept:
        if det.entity_type in SECRET_TYPES or det.entity_type in _NO_REPEAT:
            continue
        value = text[det.start : det.end]
        if len(value.strip()) < 3:
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
        if len(values) >= _MAX_REPEAT_VALUES:
            break
    if not values:
        return []
    taken = {(d.start, d.end) for d in kept}
    out: list[Detection] = []
    for value, det in values.items():
        pos = text.find(value)
        while pos >= 0:
            end = pos + len(value)
            if (
                (pos, end) not in taken
                and not (pos > 0 and _word_char(text[pos - 1]))
                and not (end < len(text) and _word_char(text[end]))
            ):
                out.append(
                    Detection(
                        pos, end, det.entity_type, det.score, f"repeat:{det.recognizer}"
                    )
                )
            pos = text.find(value, end)
    return out
