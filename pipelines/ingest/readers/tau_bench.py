"""tau-bench historical trajectories (``tau_bench``).

A JSON list of ``{task_id, reward, info, traj, trial}``; ``traj`` is an OpenAI chat
conversation. Each entry is one session *and* one source record, so a document of
50 entries counts 50 records (``expected_records`` agrees). A JSONL file with one
entry per line is read the same way.

``external_id`` is ``task:<task_id>/trial:<trial>`` (tasks repeat across trials);
metadata holds ``task_id``, ``trial``, ``reward`` and ``user_cost`` only: the
``info`` object carries the simulated user's instruction and profile, which is
conversation text, so it is left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ctxledger.pipelines.ingest.drafts import Parsed, SourceFile
from ctxledger.pipelines.ingest.readers._common import (
    SessionBuilder,
    check,
    meta,
    need,
    per_entry,
    per_record,
)
from ctxledger.pipelines.ingest.readers.openai_chat import ChatState
from ctxledger.pipelines.ingest.sources import JsonRecord

FORMAT = "tau_bench"
NAME_HINTS = ("tau",)


def _is_entry(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "traj" in value
        and ("task_id" in value or "reward" in value)
    )


def sniff(value: Any, kind: str) -> int:
    if isinstance(value, list) and value and _is_entry(value[0]):
        return 3
    if _is_entry(value):
        return 3
    return 0


def _scalar_id(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return str(value)


def convert_entry(entry: Any, offset: str) -> list[Parsed]:
    entry = check(entry, dict, "entry")
    traj = need(entry, "traj", list, "")
    builder = SessionBuilder(FORMAT)
    state = ChatState(builder)
    for i, message in enumerate(traj):
        state.add(message, f"{offset}/traj:{i}")
    task_id, trial = _scalar_id(entry.get("task_id")), _scalar_id(entry.get("trial"))
    external_id = None
    if task_id is not None:
        external_id = f"task:{task_id}" + (f"/trial:{trial}" if trial else "")
    info = entry.get("info") if isinstance(entry.get("info"), dict) else {}
    return builder.finish(
        offset=offset,
        external_id=external_id,
        metadata=meta(
            task_id=entry.get("task_id")
            if isinstance(entry.get("task_id"), int | str)
            else None,
            trial=entry.get("trial") if isinstance(entry.get("trial"), int) else None,
            reward=entry.get("reward")
            if isinstance(entry.get("reward"), int | float)
            else None,
            user_cost=info.get("user_cost")
            if isinstance(info.get("user_cost"), int | float)
            else None,
        ),
    )


def convert_record(record: JsonRecord) -> list[Parsed]:
    return per_entry(record, convert_entry, "entry", "entries")


def read(source: SourceFile) -> Iterator[Parsed]:
    yield from per_record(source, convert_record)
