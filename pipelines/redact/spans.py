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
