"""One value, one placeholder across a session (issue 29 item 6).

Detectors judge each text alone: a name NER finds in a sentence is missed as a
bare speaker prefix ("Nate: ok, deploying") in another turn, which then keeps
the raw name next to its own placeholder. The redact stage hands a session's
fields to ``Redactor.redact_batch`` in one call; ``session_repeats`` takes every
value detected in any of them (and each capitalised word of a multi-word
name, as ``spans.repeated_values`` does within one text) and adds a detection
wherever it occurs verbatim, as a whole word, in the other texts. One compiled
alternation per session: a scan per text, only when something was found.
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
MAX_VALUES = 256
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


def session_repeats(
    texts: Sequence[str], detections: Sequence[tuple[Detection, ...]]
) -> list[tuple[Detection, ...]]:
    """``detections`` plus every verbatim whole-word occurrence, in any text
    of the batch, of a value detected in any of them."""
    values = session_values(texts, detections)
    if not values:
        return list(detections)
    chosen = sorted(values, key=len, reverse=True)[:MAX_VALUES]
    finder = re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(v) for v in chosen) + r")(?!\w)"
    )
    out = []
    for text, dets in zip(texts, detections, strict=True):
        extra = []
        for m in finder.finditer(text):
            start, end = m.span()
            if any(d.start <= start and end <= d.end for d in dets):
                continue
            det = values[m.group()]
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
