"""A session's redacted records, grouped once for every later stage.

The ledger, memory and evidence stages all read a session's records together
(the session row, its messages, its tool observations and the outputs they
point at). Each used to group the run's records by session id on its own:
three groupings of the same records, every message encoded and shuffled three
times. Now the redact stage emits one ``SessionRecords`` per draft session (a
bundle, not one element per record) and a single grouping by session id merges
the bundles of one id into a ``SessionGroup`` that the three stages share.

A session id can come from more than one landing file (a canonical or Claude
Code session continued in a later file), hence a merge, not a lookup.
``group_records`` builds the same groups from loose records, for callers that
hold records rather than bundles (tests, benchmarks). No Beam here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ctxledger.schemas import Artifact, Message, Session, ToolObservation


@dataclass(frozen=True, slots=True)
class SessionRecords:
    """The records one draft session was normalised into (the redact stage's
    per-session bundle): ``outputs`` maps artifact id -> redacted tool output
    for the outputs the session's own observations point at."""

    session: Session | None
    messages: tuple[Message, ...] = ()
    observations: tuple[ToolObservation, ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(
        cls,
        session: Session | None,
        messages: Iterable[Message],
        observations: Iterable[ToolObservation],
        artifacts: Iterable[Artifact],
    ) -> SessionRecords:
        """A bundle of one normalised session (``normalize_session``'s output:
        every observation points at an artifact of the same session)."""
        return cls(
            session,
            tuple(messages),
            tuple(observations),
            tuple((a.artifact_id, a.content) for a in artifacts),
        )

    @property
    def session_id(self) -> str:
        """The id the bundle is grouped by (its messages' id without a session)."""
        if self.session is not None:
            return self.session.session_id
        return self.messages[0].session_id if self.messages else ""


@dataclass(frozen=True)
class SessionGroup:
    """Every record of one session id in this run, as the later stages read it.

    ``sessions`` holds one row per landing file that carried the session,
    ordered by source hash (then file), so "the" session row is the same
    whatever order the files were read in; it is empty for messages whose
    session row is missing (a stage reports those as dead letters)."""

    session_id: str
    sessions: tuple[Session, ...] = ()
    messages: tuple[Message, ...] = ()
    observations: tuple[ToolObservation, ...] = ()
    outputs: Mapping[str, str] = field(default_factory=dict)

    @property
    def session(self) -> Session | None:
        """The session row the stages build from (first by source hash)."""
        return self.sessions[0] if self.sessions else None

    @classmethod
    def merge(cls, session_id: str, parts: Iterable[SessionRecords]) -> SessionGroup:
        """One group from the bundles of ``session_id``."""
        parts = list(parts)
        if len(parts) == 1:  # the common case: one file per session
            part = parts[0]
            return cls(
                session_id,
                (part.session,) if part.session is not None else (),
                part.messages,
                part.observations,
                dict(part.outputs),
            )
        sessions = sorted(
            (p.session for p in parts if p.session is not None),
            key=lambda s: (s.source_hash, s.source_file),
        )
        outputs: dict[str, str] = {}
        for part in parts:
            outputs.update(part.outputs)
        return cls(
            session_id,
            tuple(sessions),
            tuple(m for p in parts for m in p.messages),
            tuple(o for p in parts for o in p.observations),
            outputs,
        )


def group_records(
    sessions: Iterable[Session],
    messages: Iterable[Message] = (),
    observations: Iterable[ToolObservation] = (),
    artifacts: Iterable[Artifact] = (),
) -> list[SessionGroup]:
    """Loose records grouped by session id, as the redact stage's bundles group
    them: a session's outputs are the artifacts its observations point at;
    messages or observations of an id without a session row make a group
    without one. Groups in order of first appearance."""
    content = {a.artifact_id: a.content for a in artifacts}
    parts: dict[str, list] = {}

    def slot(session_id: str) -> list:
        return parts.setdefault(session_id, [[], [], [], {}])

    for session in sessions:
        slot(session.session_id)[0].append(session)
    for message in messages:
        slot(message.session_id)[1].append(message)
    for observation in observations:
        held = slot(observation.session_id)
        held[2].append(observation)
        if observation.artifact_ref in content:
            held[3][observation.artifact_ref] = content[observation.artifact_ref]
    return [
        SessionGroup(
            session_id,
            tuple(sorted(rows, key=lambda s: (s.source_hash, s.source_file))),
            tuple(found),
            tuple(seen),
            outputs,
        )
        for session_id, (rows, found, seen, outputs) in parts.items()
    ]
