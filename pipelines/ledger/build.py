"""Build a session's ledger: window summaries, merges, rebuild rules, the trail.

For each compaction window of ``window_turns`` messages the builder emits one
``LedgerEntry`` (scope ``window``) holding the cumulative summary up to the end of
that window, and one entry (scope ``session``) for the whole session:

* the first window, and any window after a rebuild rule fired, is built **from
  the raw messages** it covers (``rebuilt_from_raw``, ``roll_depth`` 0);
* otherwise the window's messages are **merged** into the previous summary's
  sections (``roll_depth`` + 1); the summary is never summarised again;
* a merged summary is checked for **drift** right away: its protected set must
  equal the one extracted from the raw messages it covers, and its text must
  carry every field; if not, it is rebuilt from raw (``rebuild_reason=drift``);
* ``rebuild_required`` says the *next* summary must be rebuilt from raw: after
  ``rebuild_after_merges`` merges, when the covered messages span more than
  ``rebuild_after_hours`` since the last rebuild, or when verification failed.

Ids are content hashes of the session, scope, window, strategy and generator (with
versions), the ledger settings and the covered messages' ids and content hashes,
so a re-run over the same sources yields the same ids and checksums.

Defense in depth: a summary line, protected field or trail entry whose text
still matches a secret rule after redaction is left out (``secret_in_text``);
``SessionLedger.dropped`` counts them per section and message, text-free, and
the stage writes each as a dead letter (stage ``ledger_lines``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.pipelines.ledger.boilerplate import (
    is_demonstration,
    request_text,
    sentence_key,
)
from ctxledger.pipelines.ledger.citations import RECENT_MESSAGES
from ctxledger.pipelines.ledger.protected import (
    checksum,
    extract_fields,
    merge_fields,
)
from ctxledger.pipelines.ledger.sections import (
    DroppedLine,
    Span,
    drop_secret_lines,
    finish,
    has_secret,
    merge_sections,
)
from ctxledger.pipelines.ledger.text import sentences
from ctxledger.pipelines.ledger.trail import (
    TrailInput,
    derive_trail,
    text_action_results,
)
from ctxledger.schemas.base import content_hash
from ctxledger.schemas.ledger import (
    ArtifactTrailEntry,
    LedgerEntry,
    ProtectedField,
    SummarySections,
)
from ctxledger.schemas.policy import LedgerSettings
from ctxledger.schemas.transcript import Message, Session, ToolObservation

STRATEGY = "anchored-sections"
STRATEGY_VERSION = "1"
GENERATOR = "rules"
#: 2: boilerplate-free goal and pins, findings, failed attempts, confirmations,
#: latest request/action, sources read, tool-result key facts (issue 13).
#: 3: findings name their source (call, cited output lines), lead-ins keep
#: their list, the latest action its outcome, short artifact refs in text.
#: 4: the goal is the first real request (not an identity line, greeting,
#: closing or pinned statement; the assistant's task as a marked fallback),
#: API reads the rest of the summary repeats are left out of "Sources read",
#: "Dr." and "a.m." no longer end a sentence.
GENERATOR_VERSION = "ledger-rules/4"


@dataclass
class SessionSources:
    """The redacted records of one session the ledger is built from."""

    session: Session
    messages: Sequence[Message]
    observations: Sequence[ToolObservation] = ()
    #: artifact id -> redacted tool output (used for test-run outcomes).
    outputs: Mapping[str, str] = field(default_factory=dict)


@dataclass
class SessionLedger:
    """What the builder produced for one session."""

    entries: list[LedgerEntry]
    trail: list[ArtifactTrailEntry]
    fields: list[ProtectedField]
    #: Lines left out because they held a secret, with how many (no text).
    dropped: list[tuple[DroppedLine, int]] = field(default_factory=list)

    @property
    def session_entry(self) -> LedgerEntry:
        return next(e for e in self.entries if e.scope == "session")

    @property
    def window_entries(self) -> list[LedgerEntry]:
        return [e for e in self.entries if e.scope == "window"]


@dataclass
class _State:
    sections: SummarySections
    fields: list[ProtectedField]
    depth: int
    base_time: datetime | None
    entry: LedgerEntry


def clear_caches() -> None:
    """Empty the per-process text caches (sentences, facts, rules, pins)."""
    from ctxledger.pipelines.ledger import (
        citations,
        findings,
        goal,
        outcome,
        protected,
        results,
        secret_lines,
        text,
        trail,
    )

    for cached in (
        text.sentences,
        text.content_words,
        protected.find_facts,
        protected.find_rules,
        goal.is_pinned,
        secret_lines.has_secret,
        findings.assistant_kind,
        results.output_facts,
        outcome.verdict,
        citations.tokens_of,
        citations.output_lines,
        citations.folded,
        trail.text_action,
    ):
        cached.cache_clear()


def settings_digest(settings: LedgerSettings) -> str:
    """Short hash of the ledger settings (part of every summary id)."""
    return content_hash(settings.model_dump(mode="json"), length=16)


def sources_digest(messages: Sequence[Message]) -> str:
    """Hash over the ids and content hashes of ``messages`` in turn order."""
    return content_hash(
        [(m.message_id, m.content_hash) for m in messages], prefix="src_", length=40
    )


def ordered(messages: Sequence[Message]) -> list[Message]:
    """Messages de-duplicated on id, in (turn, id) order."""
    unique = {m.message_id: m for m in messages}
    return sorted(unique.values(), key=lambda m: (m.turn, m.message_id))


def windows(messages: Sequence[Message], size: int) -> list[list[Message]]:
    """Consecutive windows of ``size`` messages."""
    return [list(messages[i : i + size]) for i in range(0, len(messages), size)]


def _latest_time(messages: Sequence[Message]) -> datetime | None:
    times = [m.created_at for m in messages if m.created_at is not None]
    return max(times) if times else None


def _aged(
    base: datetime | None, messages: Sequence[Message], settings: LedgerSettings
) -> bool:
    if settings.rebuild_after_hours is None or base is None:
        return False
    latest = _latest_time(messages)
    return latest is not None and latest - base > timedelta(
        hours=settings.rebuild_after_hours
    )


def _request_only(message: Message) -> Message:
    """A user message reduced to its request (framework template text holds
    no protected field of the user's); other messages unchanged."""
    if message.role != "user":
        return message
    request = request_text(message.content)
    if request == message.content:
        return message
    return message.model_copy(update={"content": request})


class LedgerBuilder:
    """Builds the ledger of one session (one instance per session)."""

    def __init__(
        self,
        sources: SessionSources,
        settings: LedgerSettings,
        *,
        created_at: datetime | None = None,
        run_id: str = "",
        policy_version: str = "",
    ):
        self.sources = sources
        self.settings = settings
        self.created_at = created_at or datetime.now(UTC)
        self.run_id = run_id
        self.policy_version = policy_version
        self.messages = ordered(sources.messages)
        self._position = {m.message_id: i for i, m in enumerate(self.messages)}
        self.observations = {o.message_id: o for o in sources.observations}
        self.digest = settings_digest(settings)
        session = sources.session
        self.environment = frozenset(
            text_action_results(self.messages, session.source_format)
        )
        #: Framework demonstrations (SWE-agent): not the user's words.
        self.demonstrations = frozenset(
            m.message_id
            for m in self.messages
            if m.role == "user" and is_demonstration(m.content)
        )
        #: System-prompt sentences: a user message repeating one is template.
        self.framework = frozenset(
            sentence_key(s)
            for m in self.messages
            if m.role == "system"
            for s in sentences(m.content)
        )
        #: dropped line -> the distinct texts dropped there (memory only)
        self._dropped: dict[DroppedLine, set[str]] = {}
        trail = derive_trail(
            TrailInput(
                session_id=session.session_id,
                tenant_id=session.tenant_id,
                source_format=session.source_format,
                messages=self.messages,
                observations=self.observations,
                outputs=sources.outputs,
                run_id=run_id,
            )
        )
        self.trail = []
        for entry in trail:
            text = f"{entry.resource}\n{entry.detail}"
            if has_secret(text):
                line = DroppedLine("artifact_trail", entry.message_id, entry.turn)
                self._drop(line, text)
            else:
                self.trail.append(entry)

    def _drop(self, line: DroppedLine, text: str) -> None:
        self._dropped.setdefault(line, set()).add(text)

    @property
    def dropped(self) -> list[tuple[DroppedLine, int]]:
        """Dropped lines so far, each with the number of distinct texts."""
        return sorted(
            ((line, len(texts)) for line, texts in self._dropped.items()),
            key=lambda d: (d[0].turn, d[0].section, d[0].source_message_id),
        )

    def clean(self, sections: SummarySections) -> SummarySections:
        """``sections`` without lines that hold a secret (recorded as dropped)."""
        sections, dropped = drop_secret_lines(sections)
        for line, text in dropped:
            self._drop(line, text)
        return sections

    # -- pieces ------------------------------------------------------------------
    def fields_of(self, messages: Sequence[Message]) -> list[ProtectedField]:
        """Protected fields of ``messages`` (tool output is never a source);
        a field whose value (or summary line) holds a secret is left out."""
        s = self.settings
        found = extract_fields(
            [
                _request_only(m)
                for m in messages
                if m.message_id not in self.environment
                and m.message_id not in self.demonstrations
            ],
            s.protected_kinds,
            s.fact_roles,
            s.rule_roles,
            s.max_statement_chars,
        )
        kept = []
        for f in found:
            line = f"{f.kind}/{f.label}: {f.value}"
            if has_secret(f.value) or has_secret(line):
                self._drop(
                    DroppedLine("protected_fields", f.source_message_id, f.turn), line
                )
            else:
                kept.append(f)
        return kept

    def span(self, messages: Sequence[Message]) -> Span:
        turns = {m.message_id for m in messages}
        position = self._position.get(messages[0].message_id, 0) if messages else 0
        before = self.messages[position - 1] if position > 0 else None
        return Span(
            messages=messages,
            trail=[t for t in self.trail if t.message_id in turns],
            observations=self.observations,
            environment=self.environment,
            outputs=self.sources.outputs,
            framework=self.framework,
            after_result=before is not None
            and (before.role == "tool" or before.message_id in self.environment),
            history=self.messages[max(0, position - RECENT_MESSAGES) : position],
        )

    def _entry(
        self,
        *,
        scope: str,
        window_index: int | None,
        window: Sequence[Message],
        covered: Sequence[Message],
        read: Sequence[Message],
        sections: SummarySections,
        fields: list[ProtectedField],
        depth: int,
        rebuilt: bool,
        reason: str | None,
        parent: LedgerEntry | None,
        base_time: datetime | None,
    ) -> LedgerEntry:
        session = self.sources.session
        first = covered[0].turn if covered else 0
        last = covered[-1].turn if covered else -1
        header = f"Ledger summary, turns {first}-{last}"
        final, text, checks = finish(sections, fields, header)
        missing = [c.field.canonical for c in checks if c.status == "missing"]
        altered = [c.field.canonical for c in checks if c.status == "altered"]
        verified = not missing and not altered
        digest = sources_digest(covered)
        parent_id = parent.summary_id if parent is not None else None
        required: list[str] = []
        if depth >= self.settings.rebuild_after_merges and scope == "window":
            required.append("merges")
        if scope == "window" and _aged(base_time, covered, self.settings):
            required.append("age")
        if not verified:
            required.append("drift")
        summary_id = content_hash(
            session.tenant_id,
            session.session_id,
            scope,
            window_index,
            STRATEGY,
            STRATEGY_VERSION,
            GENERATOR,
            GENERATOR_VERSION,
            self.digest,
            digest,
            parent_id,
            prefix="sum_",
        )
        observed = sum(
            self.observations[m.message_id].token_count
            for m in covered
            if m.message_id in self.observations
        )
        return LedgerEntry(
            summary_id=summary_id,
            tenant_id=session.tenant_id,
            session_id=session.session_id,
            scope=scope,  # type: ignore[arg-type]
            window_index=window_index,
            window_start_turn=window[0].turn if window else 0,
            window_end_turn=window[-1].turn if window else -1,
            covered_from_turn=first,
            covered_to_turn=last,
            strategy=STRATEGY,
            strategy_version=STRATEGY_VERSION,
            generator=GENERATOR,
            generator_version=GENERATOR_VERSION,
            created_at=self.created_at,
            source_ids=[m.message_id for m in read],
            source_hashes=[m.content_hash for m in read],
            sources_digest=digest,
            parent_summary_id=parent_id,
            sections=final,
            summary_text=text,
            summary_tokens=count_tokens(text),
            source_tokens=sum(m.token_count for m in covered) + observed,
            protected_fields=fields,
            protected_checksum=checksum(fields),
            verified=verified,
            missing_fields=missing,
            altered_fields=altered,
            roll_depth=depth,
            rebuilt_from_raw=rebuilt,
            rebuild_reason=reason,
            rebuild_required=bool(required),
            rebuild_required_reasons=required,
            settings_digest=self.digest,
            policy_version=self.policy_version,
            run_id=self.run_id,
        )

    def from_raw(
        self,
        covered: Sequence[Message],
        *,
        scope: str,
        window_index: int | None,
        window: Sequence[Message],
        reason: str,
    ) -> _State:
        """A summary of ``covered`` built from the raw messages only."""
        sections = self.clean(
            merge_sections(SummarySections(), self.span(covered), self.settings)
        )
        fields = self.fields_of(covered)
        base = _latest_time(covered)
        entry = self._entry(
            scope=scope,
            window_index=window_index,
            window=window,
            covered=covered,
            read=covered,
            sections=sections,
            fields=fields,
            depth=0,
            rebuilt=True,
            reason=reason,
            parent=None,
            base_time=base,
        )
        return _State(sections, fields, 0, base, entry)

    def merged(
        self,
        previous: _State,
        window: Sequence[Message],
        covered: Sequence[Message],
        window_index: int,
    ) -> _State:
        """``window`` merged into ``previous``; rebuilt from raw on drift."""
        sections = self.clean(
            merge_sections(previous.sections, self.span(window), self.settings)
        )
        fields = merge_fields(previous.fields, self.fields_of(window))
        depth = previous.depth + 1
        entry = self._entry(
            scope="window",
            window_index=window_index,
            window=window,
            covered=covered,
            read=window,
            sections=sections,
            fields=fields,
            depth=depth,
            rebuilt=False,
            reason=None,
            parent=previous.entry,
            base_time=previous.base_time,
        )
        raw_checksum = checksum(self.fields_of(covered))
        if not entry.verified or entry.protected_checksum != raw_checksum:
            return self.from_raw(
                covered,
                scope="window",
                window_index=window_index,
                window=window,
                reason="drift",
            )
        return _State(sections, fields, depth, previous.base_time, entry)

    # -- the session ---------------------------------------------------------------
    def build(self) -> SessionLedger:
        """Window entries (merged or rebuilt per the rules) plus the session entry."""
        entries: list[LedgerEntry] = []
        state: _State | None = None
        covered: list[Message] = []
        for index, window in enumerate(
            windows(self.messages, self.settings.window_turns)
        ):
            covered = covered + window
            if state is None:
                state = self.from_raw(
                    covered,
                    scope="window",
                    window_index=index,
                    window=window,
                    reason="first",
                )
            else:
                reasons = list(state.entry.rebuild_required_reasons)
                if not reasons and _aged(state.base_time, covered, self.settings):
                    reasons.append("age")
                if reasons:
                    state = self.from_raw(
                        covered,
                        scope="window",
                        window_index=index,
                        window=window,
                        reason=reasons[0],
                    )
                else:
                    state = self.merged(state, window, covered, index)
            entries.append(state.entry)
        if state is not None and state.entry.rebuilt_from_raw:
            # The last window was built from all the raw messages already: the
            # session summary is the same content under its own id.
            entry = self._entry(
                scope="session",
                window_index=None,
                window=self.messages,
                covered=self.messages,
                read=self.messages,
                sections=state.sections,
                fields=state.fields,
                depth=0,
                rebuilt=True,
                reason="session",
                parent=None,
                base_time=state.base_time,
            )
            session = _State(state.sections, state.fields, 0, state.base_time, entry)
        else:
            session = self.from_raw(
                self.messages,
                scope="session",
                window_index=None,
                window=self.messages,
                reason="session",
            )
        entries.append(session.entry)
        return SessionLedger(
            entries=entries,
            trail=self.trail,
            fields=session.fields,
            dropped=self.dropped,
        )


def build_session_ledger(
    sources: SessionSources,
    settings: LedgerSettings,
    *,
    created_at: datetime | None = None,
    run_id: str = "",
    policy_version: str = "",
) -> SessionLedger:
    """The ledger entries and artifact trail of one session (see module docs)."""
    return LedgerBuilder(
        sources,
        settings,
        created_at=created_at,
        run_id=run_id,
        policy_version=policy_version,
    ).build()
