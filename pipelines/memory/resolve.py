"""Bi-temporal supersession and conflicts between memories on the same slot.

Memories of one tenant and subject that share a ``slot`` (``employee_number``)
are resolved together, whatever their purpose:

* within one source, a newer memory supersedes the older one: the older gets
  ``valid_to`` (when it stopped holding: the newer one's ``valid_from``),
  ``superseded_at`` (when we learned that: the newer one's ``recorded_at``) and
  ``superseded_by``; it stays stored, for audit, until its retention ends.
  "Newer" is decided by time across sessions (``valid_from``) and by turn order
  inside a session when the times are equal or missing (a message without a
  time takes its session's start or the run's time, so every statement of an
  untimed session has the same ``valid_from``);
* where neither time nor turn decides (the same time in different sessions, or
  one message), an explicit correction ("..., not 4417", "instead of",
  "actually", "from now on": ``patterns.correction``) supersedes the value it
  names, or, naming none, the other values;
* a user statement or a system record outranks a model inference, whatever their
  order: the inference is superseded by the current fact;
* whatever the slots, a correction that names the value it replaces ("use
  eu-central-1 from now on, not us-east-2": ``patterns.replaced_values``)
  supersedes the subject's earlier memories of its source stating that value
  (``_named_replacements``), so free-text corrections need no shared slot;
* the same value stated twice at once: the later (by order) stands;
* what rules cannot decide is flagged, not guessed: different values at the same
  time and turn with no correction between them, or a current user statement
  and a current system record that disagree (a user's correction does not
  overrule an account's record), get ``conflict_with`` (each other) and are
  served as conflicts, not facts.

``resolve`` recomputes these columns from scratch for the memories it is given,
so it is idempotent and order-independent; memories without a slot keep their
stated validity and are never superseded.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from ctxledger.pipelines.memory import patterns
from ctxledger.schemas.memory import MemoryRecord

_FACT_SOURCES = ("user_stated", "system_record")


def _value_of(memory: MemoryRecord) -> str:
    value = memory.value if memory.value is not None else memory.text
    return " ".join(value.casefold().split())


def _place(memory: MemoryRecord) -> tuple[str, int, int]:
    """Session, turn and char offset of a memory's source (missing: first)."""
    prov = memory.provenance
    if prov is None:
        return ("", -1, -1)
    return (
        prov.session_id or "",
        -1 if prov.turn is None else prov.turn,
        -1 if prov.char_start is None else prov.char_start,
    )


def _order(memory: MemoryRecord) -> tuple:
    return (memory.valid_from, *_place(memory), memory.memory_id)


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


def _runs(items: list[MemoryRecord], key) -> list[list[MemoryRecord]]:
    """``items`` (sorted by ``_order``) cut into runs of equal ``key``."""
    runs: list[list[MemoryRecord]] = []
    for memory in items:
        if runs and key(runs[-1][0]) == key(memory):
            runs[-1].append(memory)
        else:
            runs.append([memory])
    return runs


def _succeed(runs: list[list[MemoryRecord]], settle, state) -> list[MemoryRecord]:
    """Settle each run, let each run's survivors be superseded by the next
    run's; return the last run's survivors."""
    heads: list[MemoryRecord] = []
    for run in runs:
        survivors = settle(run)
        for memory in heads:
            state[memory.memory_id].supersede(memory, survivors[0])
        heads = survivors
    return heads


def _beaten_by(
    memory: MemoryRecord, items: list[MemoryRecord], fixes: dict
) -> MemoryRecord | None:
    """The last memory of ``items`` that explicitly corrects ``memory``: it
    names ``memory``'s value, or it names none and ``memory`` corrects
    nothing itself."""
    value = _value_of(memory)
    beater = None
    for other in items:
        fix = fixes[other.memory_id]
        if other is memory or fix is None or _value_of(other) == value:
            continue
        if fix.names_value(value) or (
            not fix.names and fixes[memory.memory_id] is None
        ):
            beater = other
    return beater


def _tie(items: list[MemoryRecord], state: dict[str, _State]) -> list:
    """Memories order cannot separate: corrections, else one value, else a
    conflict. Returns the survivors (``items`` sorted by ``_order``)."""
    if len({_value_of(m) for m in items}) > 1:
        fixes = {m.memory_id: patterns.correction(m.text) for m in items}
        beaten = {m.memory_id: _beaten_by(m, items, fixes) for m in items}
        survivors = [m for m in items if beaten[m.memory_id] is None]
        if survivors:  # corrections that all name each other decide nothing
            for memory in items:
                newer = beaten[memory.memory_id]
                if newer is not None:
                    state[memory.memory_id].supersede(memory, newer)
            items = survivors
    if len({_value_of(m) for m in items}) > 1:
        for memory in items:
            other = next(m for m in items if _value_of(m) != _value_of(memory))
            state[memory.memory_id].conflict_with = other.memory_id
        return items
    # The same value stated twice at once: the last one stands for both.
    for memory, newer in zip(items, items[1:], strict=False):
        state[memory.memory_id].supersede(memory, newer)
    return items[-1:]


def _chain(memories: list[MemoryRecord], state: dict[str, _State]) -> list:
    """Supersede along one source's memories; return the current head group.

    By time first; at one time, by turn inside each session (a session
    without provenance is its own), then the sessions' heads tie.
    """

    def at_one_time(group: list[MemoryRecord]) -> list[MemoryRecord]:
        heads = []
        for session in _runs(group, lambda m: _place(m)[0] or m.memory_id):
            turns = _runs(session, lambda m: _place(m)[1])
            heads.extend(_succeed(turns, lambda run: _tie(run, state), state))
        return _tie(sorted(heads, key=_order), state)

    ordered = sorted(memories, key=_order)
    return _succeed(_runs(ordered, lambda m: m.valid_from), at_one_time, state)


def _states(value: str, memory: MemoryRecord) -> bool:
    """Does ``memory`` state ``value`` (as whole words of its value or text)?"""
    pattern = rf"(?<![\w-]){re.escape(value)}(?![\w-])"
    return any(
        re.search(pattern, " ".join(t.casefold().split()))
        for t in (memory.value or "", memory.text)
    )


def _named_replacements(memories: Sequence[MemoryRecord], state: dict) -> None:
    """A correction naming the value it replaces ("..., not us-east-2",
    "OAK instead of SFO") supersedes the subject's earlier memories of the
    same source that state that value, in any slot or none: a free-text
    correction needs no id-like value and no shared slot. Earlier: by time,
    then turn order (``_order``); a memory already superseded stays as is."""
    groups: dict[tuple, list[MemoryRecord]] = defaultdict(list)
    for memory in memories:
        if memory.source in _FACT_SOURCES:
            groups[(memory.tenant_id, memory.subject_id, memory.source)].append(memory)
    for group in groups.values():
        ordered = sorted(group, key=_order)
        for index, newer in enumerate(ordered):
            names = patterns.replaced_values(newer.text)
            if not names or state[newer.memory_id].superseded_by:
                continue
            for older in ordered[:index]:
                if (
                    state[older.memory_id].superseded_by is None
                    and _value_of(older) != _value_of(newer)
                    and _place(older)[:2] != _place(newer)[:2]
                    and any(_states(name, older) for name in names)
                ):
                    state[older.memory_id].supersede(older, newer)


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
    _named_replacements(memories, state)
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
