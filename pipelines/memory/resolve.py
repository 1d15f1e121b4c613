"""Bi-temporal supersession and conflicts between memories on the same slot.

Memories of one tenant and subject that share a ``slot`` (``employee_number``)
are resolved together, whatever their purpose:

* within one source, a newer memory (later ``valid_from``) supersedes the older
  one: the older gets ``valid_to`` (when it stopped holding: the newer one's
  ``valid_from``), ``superseded_at`` (when we learned that: the newer one's
  ``recorded_at``) and ``superseded_by``; it stays stored, for audit, until its
  retention ends;
* a user statement or a system record outranks a model inference, whatever their
  order: the inference is superseded by the current fact;
* the same value stated twice at the same time: the later (by turn) stands;
* what rules cannot decide is flagged, not guessed: two memories of one source
  with the same ``valid_from`` and different values, or a current user statement
  and a current system record that disagree, get ``conflict_with`` (each other)
  and are served as conflicts, not facts.

``resolve`` recomputes these columns from scratch for the memories it is given,
so it is idempotent and order-independent; memories without a slot keep their
stated validity and are never superseded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from schemas.memory import MemoryRecord

_FACT_SOURCES = ("user_stated", "system_record")


def _value_of(memory: MemoryRecord) -> str:
    value = memory.value if memory.value is not None else memory.text
    return " ".join(value.casefold().split())


def _order(memory: MemoryRecord) -> tuple:
    turn = memory.provenance.turn if memory.provenance else None
    return (memory.valid_from, -1 if turn is None else turn, memory.memory_id)


def _min(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class _State:
    def __init__(self, memory: MemoryRecord):
        self.valid_to = memory.stated_valid_to
        self.superseded_at: datetime | None = None
        self.superseded_by: str | None = None
        self.conflict_with: str | None = None

    def supersede(self, memory: MemoryRecord, newer: MemoryRecord) -> None:
        self.superseded_by = newer.memory_id
        self.superseded_at = max(newer.recorded_at, memory.recorded_at)
        self.valid_to = _min(
            memory.stated_valid_to, max(newer.valid_from, memory.valid_from)
        )


def _chain(memories: list[MemoryRecord], state: dict[str, _State]) -> list:
    """Supersede along one source's memories; return the current head group."""
    groups: list[list[MemoryRecord]] = []
    for memory in sorted(memories, key=_order):
        if groups and groups[-1][0].valid_from == memory.valid_from:
            groups[-1].append(memory)
        else:
            groups.append([memory])
    for older, newer in zip(groups, groups[1:], strict=False):
        for memory in older:
            state[memory.memory_id].supersede(memory, newer[0])
    for index, group in enumerate(groups):
        values = {_value_of(m) for m in group}
        if len(values) > 1:
            for memory in group:
                other = next(m for m in group if _value_of(m) != _value_of(memory))
                state[memory.memory_id].conflict_with = other.memory_id
        else:
            # The same value stated twice at once: the last one stands for both.
            for memory, newer in zip(group, group[1:], strict=False):
                state[memory.memory_id].supersede(memory, newer)
            groups[index] = group[-1:]
    return groups[-1] if groups else []


def resolve(memories: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Every memory with ``valid_to``, ``superseded_*`` and ``conflict_with``
    recomputed (same order as given)."""
    state = {m.memory_id: _State(m) for m in memories}
    slots: dict[tuple[str, str, str], list[MemoryRecord]] = defaultdict(list)
    for memory in memories:
        if memory.slot:
            slots[(memory.tenant_id, memory.subject_id, memory.slot)].append(memory)
    for group in slots.values():
        by_source: dict[str, list[MemoryRecord]] = defaultdict(list)
        for memory in group:
            by_source[memory.source].append(memory)
        heads = {source: _chain(items, state) for source, items in by_source.items()}
        user, system = heads.get("user_stated", []), heads.get("system_record", [])
        if len(user) == 1 and len(system) == 1:
            a, b = user[0], system[0]
            if _value_of(a) != _value_of(b) and not (
                state[a.memory_id].conflict_with or state[b.memory_id].conflict_with
            ):
                state[a.memory_id].conflict_with = b.memory_id
                state[b.memory_id].conflict_with = a.memory_id
        facts = [m for s in _FACT_SOURCES for m in heads.get(s, [])]
        if facts:
            winner = max(facts, key=_order)
            for inference in heads.get("model_inferred", []):
                state[inference.memory_id].supersede(inference, winner)
    out = []
    for memory in memories:
        s = state[memory.memory_id]
        out.append(
            memory.model_copy(
                update={
                    "valid_to": s.valid_to,
                    "superseded_at": s.superseded_at,
                    "superseded_by": s.superseded_by,
                    "conflict_with": s.conflict_with,
                }
            )
        )
    return out


def changed(before: Sequence[MemoryRecord], after: Sequence[MemoryRecord]) -> list:
    """The memories of ``after`` whose lifecycle columns differ from ``before``."""
    columns = ("valid_to", "superseded_at", "superseded_by", "conflict_with")
    old = {m.memory_id: m for m in before}
    return [
        m
        for m in after
        if any(getattr(m, c) != getattr(old[m.memory_id], c) for c in columns)
    ]
