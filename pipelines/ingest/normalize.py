"""Turn a parsed draft session into redacted warehouse records.

Redaction happens here, field by field, *before* ids, token counts, artifacts and
observations are derived, so nothing downstream ever sees a raw value: artifact ids
are hashes of the redacted output and observation key fields are read from it.

The redactor is passed in as a callable (``RedactFn``) so this module stays free of
presidio and of Beam; the redact stage's DoFn supplies the real engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.drafts import DraftMessage, DraftSession
from ctxledger.pipelines.ingest.sources import decode_json
from ctxledger.pipelines.ingest.subjects import declared_subject
from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.schemas import (
    Artifact,
    DeadLetter,
    Message,
    PiiFinding,
    Session,
    ToolCall,
    ToolObservation,
    canonical_json,
    content_hash,
)
from ctxledger.schemas.sources import SourceRegistry, resolve_source

#: Formats whose own session id names a conversation beyond one file's bytes, so a
#: session continued in a later file (an appended JSONL) keeps its id. The id is
#: still scoped (see ``session_id_for``): the sender chooses it, so it is never
#: trusted to be unique across subjects.
STABLE_SESSION_ID_FORMATS = frozenset({"claude_code", "canonical"})
KEY_FIELD_LIMIT = 12
KEY_VALUE_CHARS = 120


class RedactionLike(Protocol):
    text: str
    findings: Sequence[PiiFinding]


RedactFn = Callable[[list[tuple[str, str]]], list[RedactionLike]]


@dataclass(frozen=True)
class SourceInfo:
    """Where a draft session came from and under which run and policy it is built."""

    tenant_id: str
    source_file: str
    source_hash: str
    run_id: str
    policy_version: str
    job_version: str
    #: Session metadata key naming the subject (policy
    #: ``memory.subject_metadata_key``); part of the session id.
    subject_key: str = "subject_id"


@dataclass
class NormalizedSession:
    """Records built from one draft session, plus the messages that failed."""

    session: Session
    messages: list[Message] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    observations: list[ToolObservation] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    messages_in: int = 0


def session_id_for(draft: DraftSession, info: SourceInfo) -> str:
    """Deterministic session id, scoped by tenant and subject.

    The subject is the one ``pipelines.memory.subjects`` resolves (metadata key,
    else a ``subject=<id>/`` folder): anyone can choose a session id, so two
    subjects who both send ``session_id: "chat-1"`` must get two sessions, or one
    could write facts into the other's memory and ``forget`` would miss them.

    * A format with its own session id (``STABLE_SESSION_ID_FORMATS``): tenant +
      subject + that id, so the session continues across files of the subject.
      Without a subject, the landing path stands in for it: an appended file
      (same path, new bytes) continues its sessions, but the same id in another
      file is another session.
    * Other formats: tenant + subject + the file's content hash + where in the
      file the session starts.
    """
    subject = declared_subject(draft.metadata, info.source_file, info.subject_key)
    if draft.external_id and draft.source_format in STABLE_SESSION_ID_FORMATS:
        scope = ("subject", subject) if subject else ("file", info.source_file)
        return content_hash(
            info.tenant_id,
            draft.source_format,
            *scope,
            draft.external_id,
            prefix="ses_",
        )
    return content_hash(
        info.tenant_id,
        draft.source_format,
        info.source_hash,
        draft.source_offset,
        draft.external_id,
        subject,
        prefix="ses_",
    )


def dead_letter(
    info: SourceInfo,
    stage: str,
    offset: str,
    code: str,
    detail: str,
    quarantine_ref=None,
) -> DeadLetter:
    """A dead letter for one record; its id is a hash of where and why it failed."""
    return DeadLetter(
        dead_letter_id=content_hash(
            info.tenant_id, info.source_hash, stage, offset, code, prefix="dl_"
        ),
        run_id=info.run_id,
        stage=stage,
        tenant_id=info.tenant_id,
        source_file=info.source_file,
        source_offset=offset,
        reason_code=code,
        message=detail,
        quarantine_ref=quarantine_ref,
        job_version=info.job_version,
    )


def _fields_of(message: DraftMessage) -> list[tuple[str, str]]:
    """The free-text fields of a draft message that must be redacted, in order.

    A user's or assistant's ``name`` is a speaker (LoCoMo's "Caroline", an
    OpenAI ``name``): a person's name, redacted with the session's other texts
    so it gets the same placeholder as the name in the turns."""
    items = [("content", message.content)]
    if message.name and message.role != "tool":
        items.append(("speaker", message.name))
    if message.thinking:
        items.append(("thinking", message.thinking))
    for call in message.tool_calls:
        items.append(("tool_arguments", call.arguments))
    if message.tool_output is not None:
        items.append(("tool_output", message.tool_output))
    return items


def redaction_texts(draft: DraftSession) -> list[str]:
    """Every text ``normalize_session`` hands the redactor for ``draft`` (what
    the redact stage prefetches for a batch of sessions)."""
    return [text for m in draft.messages for _, text in _fields_of(m)]


_NOT_JSON = object()


def _parse_json(text: str) -> Any:
    """The JSON value of a tool output, or ``_NOT_JSON``.

    ``decode_json``: an escape such as ``\\udc80`` inside the output would decode
    to a lone surrogate and fail the Parquet write of the observation's key fields;
    such an output (or one with a duplicate key) is kept as plain text instead.
    """
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return _NOT_JSON
    try:
        return decode_json(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


_KEY_FIRST = re.compile(
    r"(?:^|_)(?:id|status|state|error|code|type)$|[a-z]Id$", re.IGNORECASE
)


def _key_order(key: str) -> tuple[bool, str]:
    """Identifier and status keys first (``user_id``, ``status``, ``error``):
    they are what a later turn or the memory stage needs from a result whose
    other keys would push them past ``KEY_FIELD_LIMIT``; then alphabetical."""
    return (_KEY_FIRST.search(key) is None, key)


def _key_fields(value: Any) -> dict[str, Any]:
    """Small typed facts about a parsed (redacted) tool output for the observation."""
    if isinstance(value, dict):
        chosen = sorted(value, key=_key_order)[:KEY_FIELD_LIMIT]
        facts: dict[str, Any] = {"keys": sorted(chosen)}
        for key in chosen:
            item = value[key]
            if isinstance(item, str):
                facts[key] = item[:KEY_VALUE_CHARS]
            elif isinstance(item, bool | int | float) or item is None:
                facts[key] = item
            elif isinstance(item, list):
                facts[key] = f"<list of {len(item)}>"
        return facts
    if isinstance(value, list):
        return {"items": len(value)}
    return {}


def _observation_text(
    tool: str | None, status: str, size: int, lines: int, ref: str
) -> str:
    return (
        f"[tool_result tool={tool or 'unknown'} status={status} size={size}B "
        f"lines={lines} artifact={ref}]"
    )


def normalize_session(
    draft: DraftSession,
    info: SourceInfo,
    redact: RedactFn,
    sources: SourceRegistry | None = None,
) -> NormalizedSession:
    """Redact a draft session and build its records.

    A message whose redaction fails becomes a dead letter of stage ``redact``; the
    rest of the session is kept. Tool results are linked to the call they answer
    (``tool_call_id``) and get the tool's name from it. ``sources`` (the policy's
    registry) stamps each artifact's ``source_id`` from that tool name
    (``artifact_source_id``); without it artifacts are left unstamped, which
    only callers that never write the warehouse (eval, bench, tests) do.
    """
    session_id = session_id_for(draft, info)
    out = NormalizedSession(
        session=Session(
            session_id=session_id,
            tenant_id=info.tenant_id,
            source_format=draft.source_format,
            source_file=info.source_file,
            source_hash=info.source_hash,
            external_id=draft.external_id,
            started_at=draft.started_at,
            message_count=0,
            metadata=canonical_json(draft.metadata),
            run_id=info.run_id,
        ),
        messages_in=len(draft.messages),
    )
    fields_per_message = [_fields_of(m) for m in draft.messages]
    flat = [item for fields in fields_per_message for item in fields]
    try:
        redacted_flat: list[RedactionLike] | None = list(redact(flat))
        if len(redacted_flat) != len(flat):
            raise ValueError("redactor returned a different number of texts")
    except Exception:  # noqa: BLE001 - retried per message below to isolate the bad one
        redacted_flat = None

    tool_names: dict[str, str] = {}
    artifacts: dict[str, Artifact] = {}
    position = 0
    turn = 0
    for draft_message, fields in zip(draft.messages, fields_per_message, strict=True):
        if redacted_flat is not None:
            redacted = redacted_flat[position : position + len(fields)]
        else:
            try:
                redacted = list(redact(fields))
            except Exception as exc:  # noqa: BLE001 - terminal for this record
                out.dead_letters.append(
                    dead_letter(
                        info,
                        "redact",
                        draft_message.source_offset,
                        reasons.REDACTION_FAILED,
                        f"redactor raised {type(exc).__name__}",
                    )
                )
                position += len(fields)
                continue
        position += len(fields)
        message, artifact, observation = _build_message(
            draft_message, fields, redacted, session_id, turn, info, tool_names
        )
        turn += 1
        out.messages.append(message)
        if artifact is not None:
            artifact = artifact.model_copy(
                update={"source_id": artifact_source_id(sources, observation)}
            )
            seen = artifacts.get(artifact.artifact_id)
            if seen is None or _sorts_first(artifact.source_id, seen.source_id):
                artifacts[artifact.artifact_id] = artifact
        if observation is not None:
            out.observations.append(observation)
    out.artifacts = list(artifacts.values())
    out.session = out.session.model_copy(update={"message_count": len(out.messages)})
    return out


def artifact_source_id(
    sources: SourceRegistry | None, observation: ToolObservation | None
) -> str | None:
    """The registered source of an artifact: its tool's, by tool name (the
    registry's ``tool_artifact`` matching, as evidence versions of the same
    output are stamped), else the registry's default; None without a registry."""
    if sources is None:
        return None
    tool = observation.tool_name if observation is not None else None
    return resolve_source(sources, "tool_artifact", tool)


def _sorts_first(candidate: str | None, kept: str | None) -> bool:
    """Whether ``candidate`` wins over ``kept`` for one output seen twice: the
    smaller source id, None last (the commit's ``Artifact.dedupe_order``)."""
    if candidate is None:
        return False
    return kept is None or candidate < kept


def _build_message(
    draft: DraftMessage,
    fields: list[tuple[str, str]],
    redacted: Sequence[RedactionLike],
    session_id: str,
    turn: int,
    info: SourceInfo,
    tool_names: dict[str, str],
) -> tuple[Message, Artifact | None, ToolObservation | None]:
    findings: list[PiiFinding] = []
    texts: dict[str, list[str]] = {}
    for (name, _), result in zip(fields, redacted, strict=True):
        texts.setdefault(name, []).append(result.text)
        findings.extend(result.findings)
    content = texts["content"][0]
    thinking = texts["thinking"][0] if "thinking" in texts else None
    calls = []
    for call, arguments in zip(
        draft.tool_calls, texts.get("tool_arguments", []), strict=True
    ):
        calls.append(
            ToolCall(
                call_id=call.call_id, tool_name=call.tool_name, arguments=arguments
            )
        )
        tool_names[call.call_id] = call.tool_name
    artifact = observation = None
    artifact_ref = None
    tool_name = draft.name or (tool_names.get(draft.tool_call_id or ""))
    if "tool_output" in texts:
        output = texts["tool_output"][0]
        size = len(output.encode("utf-8"))
        artifact_ref = content_hash(info.tenant_id, output, prefix="art_")
        parsed = _parse_json(output)
        media = "text/plain" if parsed is _NOT_JSON else "application/json"
        artifact = Artifact(
            artifact_id=artifact_ref,
            tenant_id=info.tenant_id,
            media_type=media,
            size_bytes=size,
            content=output,
            policy_version=info.policy_version,
        )
        lines = output.count("\n") + (1 if output else 0)
        content = (content + "\n" if content else "") + _observation_text(
            tool_name, draft.tool_status, size, lines, artifact_ref
        )
    content_digest = content_hash(
        content, thinking, [c.model_dump() for c in calls], prefix=""
    )
    message_id = content_hash(
        session_id, turn, draft.role, content_digest, prefix="msg_"
    )
    if artifact is not None:
        observation = ToolObservation(
            observation_id=content_hash(message_id, artifact_ref, prefix="obs_"),
            message_id=message_id,
            session_id=session_id,
            tenant_id=info.tenant_id,
            tool_call_id=draft.tool_call_id,
            tool_name=tool_name,
            status=draft.tool_status,
            size_bytes=size,
            line_count=lines,
            token_count=count_tokens(output),
            key_fields=canonical_json(_key_fields(parsed)),
            artifact_ref=artifact_ref,
        )
    message = Message(
        message_id=message_id,
        session_id=session_id,
        tenant_id=info.tenant_id,
        turn=turn,
        role=draft.role,
        name=tool_name if draft.role == "tool" else _first(texts.get("speaker")),
        content=content,
        thinking=thinking,
        content_hash=content_digest,
        created_at=draft.created_at,
        token_count=count_tokens(content) + count_tokens(thinking),
        tool_calls=calls,
        tool_call_id=draft.tool_call_id,
        artifact_ref=artifact_ref,
        pii=findings,
        policy_version=info.policy_version,
        source_ref=f"{info.source_file}#{draft.source_offset}",
        source_id=draft.source_id,
        run_id=info.run_id,
    )
    return message, artifact, observation


def _first(values: list[str] | None) -> str | None:
    return values[0] if values else None
