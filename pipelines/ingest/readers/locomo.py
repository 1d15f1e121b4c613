"""LoCoMo long conversations (``locomo``).

The public LoCoMo format (snap-research/LoCoMo, ``data/locomo10.json``): a JSON
list of samples ``{sample_id, conversation{speaker_a, speaker_b, session_N:
[{speaker, dia_id, text, img_url?, blip_caption?}], session_N_date_time}, qa,
observation, session_summary, event_summary}``. A single sample object (not in a
list) is read the same way.

Each sample is one session *and* one source record (as ``tau_bench`` entries
are; ``expected_records`` agrees): the conversation's dated sessions are one
history between two people, and a question about it may need turns of several.
Every turn becomes a message:

* ``role``: ``user`` for ``speaker_a``'s turns, ``assistant`` for
  ``speaker_b``'s (two people talk; the roles only keep them apart);
* ``name``: the speaker (redacted with the session, like any person's name);
* ``content``: the text, plus ``[image: caption]`` when the speaker shared a
  photo (LoCoMo's BLIP caption; the image URL is left out);
* ``created_at``: the session's date (``1:56 pm on 8 May, 2023``, taken as
  UTC); a turn has no time of its own;
* ``source_id``: the ``dia_id`` (``D1:3``), so a hit traces back to its turn.

``external_id`` is the ``sample_id``. The ``qa``, ``observation`` and summary
fields are labels and derived text, not conversation: they are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import Parsed, SourceFile
from ctxledger.pipelines.ingest.readers._common import (
    SessionBuilder,
    check,
    meta,
    need,
    per_entry,
    per_record,
)
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "locomo"
NAME_HINTS = ("locomo",)

_SESSION_KEY = re.compile(r"^session_(\d{1,4})$")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE,
)
_MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}


def _is_sample(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    conversation = value.get("conversation")
    return isinstance(conversation, dict) and "speaker_a" in conversation


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, list) and value and _is_sample(value[0]):
        return 3
    return 3 if _is_sample(value) else 0


def parse_session_date(value: Any) -> datetime | None:
    """``1:56 pm on 8 May, 2023`` as an aware UTC datetime; None if not that form."""
    if not isinstance(value, str):
        return None
    match = _DATE.match(value)
    if not match:
        return None
    hour, minute, half, day, month, year = match.groups()
    number = _MONTHS.get(month.lower()) or next(
        (
            n
            for name, n in _MONTHS.items()
            if len(month) >= 3 and name.startswith(month.lower())
        ),
        None,
    )
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    if number is None:
        return None
    try:
        return datetime(int(year), number, int(day), hour_24, int(minute), tzinfo=UTC)
    except ValueError:
        return None


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    numbers = []
    for key in conversation:
        match = _SESSION_KEY.match(key)
        if match:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def convert_sample(sample: Any, offset: str) -> list[Parsed]:
    sample = check(sample, dict, "sample")
    conversation = need(sample, "conversation", dict, "")
    speaker_a = need(conversation, "speaker_a", str, "conversation.")
    builder = SessionBuilder(FORMAT)
    numbers = _session_numbers(conversation)
    for number in numbers:
        turns = check(conversation[f"session_{number}"], list, f"session_{number}")
        when = parse_session_date(conversation.get(f"session_{number}_date_time"))
        for i, turn in enumerate(turns):
            where = f"{offset}/session:{number}/turn:{i}"
            if not isinstance(turn, dict):
                builder.reject(reasons.WRONG_TYPE, where, "turn: expected object")
                continue
            speaker = turn.get("speaker")
            text = turn.get("text")
            caption = turn.get("blip_caption")
            if isinstance(text, str) and isinstance(caption, str) and caption:
                text = f"{text} [image: {caption}]"
            dia_id = turn.get("dia_id")
            builder.add(
                {
                    "role": "user" if speaker == speaker_a else "assistant",
                    "name": speaker if isinstance(speaker, str) and speaker else None,
                    "content": text,
                    "created_at": when,
                    "source_id": dia_id.strip()
                    if isinstance(dia_id, str) and dia_id.strip()
                    else None,
                    "source_offset": where,
                }
            )
    sample_id = sample.get("sample_id")
    return builder.finish(
        offset=offset,
        external_id=sample_id if isinstance(sample_id, str) and sample_id else None,
        metadata=meta(locomo_sessions=len(numbers)),
    )


def convert_record(record: JsonRecord) -> list[Parsed]:
    return per_entry(record, convert_sample, "sample", "samples")


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
