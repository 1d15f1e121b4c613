"""Context-policy replay: what each policy keeps at each turn, in tokens by bucket.

At every turn ``t`` of a session (every message, in order) a policy decides which
context the model would get if it were called after that message:

* ``full``: every message so far;
* ``sliding:N``: the system messages plus the last ``N`` other messages;
* ``pinned-user+last:K``: the system messages, the pinned user statements of the
  earlier messages (verbatim: the user's standing rules and facts, as in the
  ledger's ``pinned_user_statements``) and the last ``K`` messages;
* ``elide-tool-results``: every message, but tool results other than the latest
  are replaced by their typed observation line (``artifact_ref``) when that line
  is shorter than the output;
* ``ledger``: the system messages, the ledger summary of the completed compaction
  windows before the current one, and the raw messages of the current window.

Tokens are counted per bucket: ``system``, ``tool_definitions`` (an estimate: one
JSON schema per tool the session calls, naming the argument keys seen in its
calls, sent on every turn by every policy), ``tool_results`` (the raw output's
tokens from ``tool_observations``, or the observation line when elided) and
``conversation`` (user and assistant messages with their tool-call arguments; the
ledger summary counts here too). Message tokens come from ``messages``.

At the end of the session each policy's context is checked for the session's
protected fields, so the report says which facts each policy still carries.

**Defined but never called.** When the session's metadata lists the tools its
requests defined (``tools``: OpenAI/Anthropic tool definitions or names), or a
catalogue of definitions is passed in, ``tool_definitions`` counts every
defined tool, and ``SessionView.tool_usage`` says which defined tools were never
called and what their definitions cost: per turn, and over the session (every
turn sends them). Without either, only called tools are known (``defined`` is
the called set and nothing is reported as unused).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.pipelines.ledger.build import LedgerBuilder, SessionSources
from ctxledger.pipelines.ledger.protected import check_fields
from ctxledger.pipelines.ledger.sections import pinned_statements
from ctxledger.schemas.base import canonical_json
from ctxledger.schemas.ledger import LedgerEntry, ProtectedField
from ctxledger.schemas.policy import LedgerSettings
from ctxledger.schemas.transcript import Message

BUCKETS = ("system", "tool_definitions", "tool_results", "conversation")
DEFAULT_POLICIES = (
    "full",
    "sliding:12",
    "pinned-user+last:4",
    "elide-tool-results",
    "ledger",
)
_SPEC = re.compile(
    r"^(?:(?P<full>full)|sliding:(?P<sliding>\d+)|pinned-user\+last:(?P<pinned>\d+)|"
    r"(?P<elide>elide-tool-results)|(?P<ledger>ledger))$"
)


@dataclass(frozen=True)
class ReplayPolicy:
    """A parsed ``--policy`` value."""

    spec: str
    kind: str
    n: int = 0


def parse_policy(spec: str) -> ReplayPolicy:
    """``full``, ``sliding:N``, ``pinned-user+last:K``, ``elide-tool-results``,
    ``ledger``; anything else raises ``ValueError``."""
    match = _SPEC.match(spec.strip())
    if match is None:
        raise ValueError(
            f"unknown policy {spec!r}; use full, sliding:N, pinned-user+last:K, "
            "elide-tool-results or ledger"
        )
    kind = next(k for k, v in match.groupdict().items() if v is not None)
    n = int(match[kind]) if kind in ("sliding", "pinned") else 0
    if kind in ("sliding", "pinned") and n < 1:
        raise ValueError(f"{spec!r}: N must be at least 1")
    return ReplayPolicy(spec.strip(), kind, n)


@dataclass(frozen=True)
class Item:
    """One piece of context: where it came from, its bucket, tokens and text."""

    turn: int
    bucket: str
    tokens: int
    text: str
    label: str


@dataclass
class PolicyResult:
    """A policy's replay over one session."""

    policy: str
    per_turn: list[dict[str, int]] = field(default_factory=list)
    final_items: list[Item] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def final(self) -> dict[str, int]:
        return self.per_turn[-1] if self.per_turn else dict.fromkeys(BUCKETS, 0)

    @property
    def session_total(self) -> dict[str, int]:
        """Tokens summed over every turn (what the session would have sent)."""
        return {b: sum(t[b] for t in self.per_turn) for b in (*BUCKETS, "total")}


class SessionView:
    """A session prepared for replay: message items, pinned statements, windows."""

    def __init__(
        self,
        sources: SessionSources,
        settings: LedgerSettings,
        tool_catalogue: dict[str, str] | None = None,
    ):
        builder = LedgerBuilder(sources, settings)
        self.settings = settings
        self.messages: list[Message] = builder.messages
        self.observations = builder.observations
        self.outputs = sources.outputs
        ledger = builder.build()
        self.fields: list[ProtectedField] = ledger.fields
        environment = builder.environment
        self.windows: list[LedgerEntry] = ledger.window_entries
        defined = _defined_tools(sources.session.metadata, tool_catalogue)
        self.tool_usage = tool_usage(self.messages, defined)
        self.tool_definition_tokens = (
            self.tool_usage.defined_tokens
            if defined
            else _tool_definition_tokens(self.messages)
        )
        self.full: list[Item] = []
        self.elided: list[Item | None] = []
        self.pinned: list[list[Item]] = []
        for message in self.messages:
            is_result = message.role == "tool" or message.message_id in environment
            full = self._full_item(message, is_result)
            elided = self._elided_item(message) if is_result else None
            self.full.append(full)
            self.elided.append(
                elided if elided is not None and elided.tokens < full.tokens else None
            )
            self.pinned.append(
                [
                    Item(message.turn, "conversation", count_tokens(s), s, "pinned")
                    for s in pinned_statements(message, settings.max_statement_chars)
                ]
                if not is_result
                else []
            )

    def _full_item(self, message: Message, is_result: bool) -> Item:
        if message.role == "system":
            return Item(
                message.turn, "system", message.token_count, message.content, "system"
            )
        if is_result:
            observation = self.observations.get(message.message_id)
            if observation is not None:
                text = self.outputs.get(observation.artifact_ref, message.content)
                return Item(
                    message.turn, "tool_results", observation.token_count, text, "tool"
                )
            return Item(
                message.turn,
                "tool_results",
                message.token_count,
                message.content,
                "tool",
            )
        calls = " ".join(f"{c.tool_name} {c.arguments}" for c in message.tool_calls)
        tokens = message.token_count + (count_tokens(calls) if calls else 0)
        text = f"{message.content}\n{calls}" if calls else message.content
        return Item(message.turn, "conversation", tokens, text, message.role)

    def _elided_item(self, message: Message) -> Item:
        if message.role == "tool":
            return Item(
                message.turn,
                "tool_results",
                message.token_count,
                message.content,
                "elided",
            )
        line = f"[observation elided: {message.token_count} tokens]"
        return Item(message.turn, "tool_results", count_tokens(line), line, "elided")

    # -- policies ----------------------------------------------------------------
    def context(self, policy: ReplayPolicy, position: int) -> list[Item]:
        """The items ``policy`` keeps after message ``position`` (0-based)."""
        upto = range(position + 1)
        system = [self.full[i] for i in upto if self.messages[i].role == "system"]
        others = [i for i in upto if self.messages[i].role != "system"]
        if policy.kind == "full":
            return [self.full[i] for i in upto]
        if policy.kind == "sliding":
            return system + [self.full[i] for i in others[-policy.n :]]
        if policy.kind == "pinned":
            tail = others[-policy.n :]
            start = tail[0] if tail else position + 1
            pinned = [item for i in others if i < start for item in self.pinned[i]]
            return system + pinned + [self.full[i] for i in tail]
        if policy.kind == "elide":
            results = [i for i in upto if self.elided[i] is not None]
            latest = results[-1] if results else None
            return [
                self.elided[i]
                if self.elided[i] is not None and i != latest
                else self.full[i]
                for i in upto
            ]
        if policy.kind == "ledger":
            size = self.settings.window_turns
            window = position // size
            if window == 0:
                return [self.full[i] for i in upto]
            summary = self.windows[window - 1]
            start = window * size
            kept = [
                Item(
                    summary.covered_to_turn,
                    "conversation",
                    summary.summary_tokens,
                    summary.summary_text,
                    "summary",
                )
            ]
            return system + kept + [self.full[i] for i in others if i >= start]
        raise ValueError(f"unknown policy kind {policy.kind!r}")

    def tokens(self, items: Sequence[Item]) -> dict[str, int]:
        """Tokens per bucket (tool definitions included) and their total."""
        counts = dict.fromkeys(BUCKETS, 0)
        counts["tool_definitions"] = self.tool_definition_tokens
        for item in items:
            counts[item.bucket] += item.tokens
        counts["total"] = sum(counts[b] for b in BUCKETS)
        return counts


@dataclass(frozen=True)
class ToolUsage:
    """Defined tools against the tools the session called."""

    defined: tuple[str, ...]
    called: tuple[str, ...]
    never_called: tuple[str, ...]
    defined_tokens: int
    #: Tokens of the never-called definitions in one turn's context...
    never_called_tokens: int
    #: ...and over the session (they are sent on every turn).
    never_called_session_tokens: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "defined": list(self.defined),
            "called": list(self.called),
            "never_called": list(self.never_called),
            "defined_tokens": self.defined_tokens,
            "never_called_tokens": self.never_called_tokens,
            "never_called_session_tokens": self.never_called_session_tokens,
        }


def _tool_name(definition: object) -> str | None:
    if isinstance(definition, str):
        return definition
    if isinstance(definition, dict):
        inner = definition.get("function")
        if isinstance(inner, dict) and isinstance(inner.get("name"), str):
            return inner["name"]
        if isinstance(definition.get("name"), str):
            return definition["name"]
    return None


def _defined_tools(
    metadata: str | None, catalogue: dict[str, str] | None
) -> dict[str, str]:
    """Tool name -> definition text: the session metadata's ``tools`` list
    (definitions or bare names), then ``catalogue`` entries (which win)."""
    import json

    out: dict[str, str] = {}
    try:
        meta = json.loads(metadata or "{}")
    except ValueError:
        meta = {}
    tools = meta.get("tools") if isinstance(meta, dict) else None
    for definition in tools if isinstance(tools, list) else []:
        name = _tool_name(definition)
        if name:
            out[name] = (
                canonical_json(definition)
                if isinstance(definition, dict)
                else canonical_json({"name": name})
            )
    out.update(catalogue or {})
    return out


def tool_usage(messages: Sequence[Message], defined: dict[str, str]) -> ToolUsage:
    """Which ``defined`` tools (name -> definition) the session never called,
    and their definitions' tokens per turn and over every turn."""
    called = sorted({c.tool_name for m in messages for c in m.tool_calls})
    if not defined:
        return ToolUsage((), tuple(called), (), 0, 0, 0)
    cost = {name: count_tokens(text) for name, text in defined.items()}
    never = sorted(set(defined) - set(called))
    per_turn = sum(cost[n] for n in never)
    return ToolUsage(
        defined=tuple(sorted(defined)),
        called=tuple(called),
        never_called=tuple(never),
        defined_tokens=sum(cost.values()),
        never_called_tokens=per_turn,
        never_called_session_tokens=per_turn * len(messages),
    )


def _tool_definition_tokens(messages: Sequence[Message]) -> int:
    import json

    keys: dict[str, set[str]] = {}
    for message in messages:
        for call in message.tool_calls:
            seen = keys.setdefault(call.tool_name, set())
            try:
                args = json.loads(call.arguments) if call.arguments.strip() else {}
            except ValueError:
                args = {}
            if isinstance(args, dict):
                seen.update(str(k) for k in args)
    return sum(
        count_tokens(
            canonical_json(
                {
                    "name": name,
                    "parameters": {
                        "type": "object",
                        "properties": {k: {} for k in sorted(args)},
                    },
                }
            )
        )
        for name, args in sorted(keys.items())
    )


def replay(view: SessionView, policies: Sequence[ReplayPolicy]) -> list[PolicyResult]:
    """Replay every policy over every turn of the session."""
    results = []
    for policy in policies:
        result = PolicyResult(policy.spec)
        items: list[Item] = []
        for position in range(len(view.messages)):
            items = view.context(policy, position)
            result.per_turn.append(view.tokens(items))
        result.final_items = items
        text = "\n".join(item.text for item in items)
        for check in check_fields(text, view.fields):
            target = result.carried if check.status == "present" else result.missing
            target.append(check.field.canonical)
        results.append(result)
    return results


def render_context(items: Sequence[Item], width: int = 160) -> str:
    """A readable listing of a context: one line per item, clipped."""
    lines = []
    for item in items:
        text = " ".join(item.text.split())
        if len(text) > width:
            text = text[: width - 1] + "…"
        lines.append(f"[t{item.turn} {item.label} {item.bucket} {item.tokens}] {text}")
    return "\n".join(lines)
