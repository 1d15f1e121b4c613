"""Locating ``../shared/corpora`` and reading its sets for evaluation and benches.

Readers here are deliberately small and lenient: they pull the free-text fields
(content, thinking, tool arguments, tool output) out of each transcript format so
the redactor can be measured on real agent text. They are not the ingest readers.
Credit: every set's origin is listed in ``../shared/corpora/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent

Item = tuple[str, str]  # (field, text)
MessageItems = list[Item]
SessionItems = list[MessageItems]


def default_corpora() -> Path | None:
    """``../shared/corpora`` relative to the repository root, when present."""
    for candidate in (
        REPO_ROOT.parent / "shared" / "corpora",
        REPO_ROOT / "shared" / "corpora",
    ):
        if candidate.is_dir():
            return candidate
    return None


def _text_of(content: Any) -> str:
    """Plain text of a message ``content`` (string or list of blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                for key in ("text", "thinking", "content"):
                    value = block.get(key)
                    if isinstance(value, str):
                        parts.append(value)
                    elif isinstance(value, list):
                        parts.append(_text_of(value))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    return str(content)


def _chat_message(msg: dict[str, Any]) -> MessageItems:
    """OpenAI/Anthropic-style chat message -> items."""
    role = msg.get("role")
    items: MessageItems = []
    content = msg.get("content")
    if role in ("tool", "function"):
        items.append(("tool_output", _text_of(content)))
    elif isinstance(content, list):
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "thinking":
                items.append(("thinking", block.get("thinking", "")))
            elif kind == "tool_use":
                items.append(("tool_arguments", json.dumps(block.get("input", {}))))
            elif kind == "tool_result":
                items.append(("tool_output", _text_of(block.get("content"))))
            elif isinstance(block.get("text"), str):
                texts.append(block["text"])
        items.insert(0, ("content", "\n".join(texts)))
    else:
        items.append(("content", _text_of(content)))
    for call in msg.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, dict) else {}
        args = fn.get("arguments", "")
        items.append(
            ("tool_arguments", args if isinstance(args, str) else json.dumps(args))
        )
    fc = msg.get("function_call")
    if isinstance(fc, dict):
        items.append(("tool_arguments", str(fc.get("arguments", ""))))
    return [(f, t) for f, t in items if t is not None]


def _tau(path: Path) -> Iterator[SessionItems]:
    for conv in json.loads(path.read_text()):
        yield [_chat_message(m) for m in conv.get("traj", [])]


def _swe(path: Path) -> Iterator[SessionItems]:
    data = json.loads(path.read_text())
    history = data.get("history") or []
    if history:
        yield [_chat_message(m) for m in history if isinstance(m, dict)]


def _mini(path: Path) -> Iterator[SessionItems]:
    data = json.loads(path.read_text())
    messages = data if isinstance(data, list) else data.get("messages", [])
    yield [_chat_message(m) for m in messages if isinstance(m, dict)]


def _toolbench(path: Path) -> Iterator[SessionItems]:
    data = json.loads(path.read_text())
    for conv in (data.get("answer_generation") or {}).get("train_messages") or []:
        yield [_chat_message(m) for m in conv if isinstance(m, dict)]


def _apibank(path: Path) -> Iterator[SessionItems]:
    session: SessionItems = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        turn = json.loads(line)
        if turn.get("role") == "API":
            session.append(
                [
                    ("tool_arguments", json.dumps(turn.get("param_dict", {}))),
                    ("tool_output", json.dumps(turn.get("result", {}))),
                ]
            )
        else:
            session.append([("content", str(turn.get("text", "")))])
    yield session


def _openhands_events(history: list[Any]) -> SessionItems:
    session: SessionItems = []
    for event in history:
        if not isinstance(event, dict):
            continue
        items: MessageItems = []
        if isinstance(event.get("message"), str):
            items.append(("content", event["message"]))
        if "observation" in event and isinstance(event.get("content"), str):
            items.append(("tool_output", event["content"]))
        elif isinstance(event.get("args"), dict):
            items.append(("tool_arguments", json.dumps(event["args"])))
        if items:
            session.append(items)
    return session


def _openhands(path: Path) -> Iterator[SessionItems]:
    if path.suffix == ".jsonl":
        for line in path.read_text().splitlines():
            if line.strip():
                yield _openhands_events(json.loads(line).get("history") or [])
    else:
        data = json.loads(path.read_text())
        yield _openhands_events(data if isinstance(data, list) else [])


def _claude_code(path: Path) -> Iterator[SessionItems]:
    session: SessionItems = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        msg = record.get("message") if isinstance(record, dict) else None
        if isinstance(msg, dict):
            session.append(_chat_message(msg))
    yield session


def _pydantic_ai(path: Path) -> Iterator[SessionItems]:
    for line in path.read_text().splitlines():
        if line.strip():
            request = json.loads(line).get("request") or {}
            yield [_chat_message(m) for m in request.get("messages", [])]


_READERS = (
    ("tau-bench-airline-gpt4o", "*.json", _tau),
    ("swe-agent-trajectories", "*.traj", _swe),
    ("mini-swe-agent-trajectories", "*.json", _mini),
    ("toolbench-dfsdt-answers", "*.json", _toolbench),
    ("api-bank-dialogues", "**/*.jsonl", _apibank),
    ("openhands-trajectories", "*.json*", _openhands),
    ("claude-code-session-fixtures", "**/*.jsonl", _claude_code),
    ("pydantic-ai-recorded-tool-conversations", "*.jsonl", _pydantic_ai),
)


def transcript_sessions(
    root: Path, only: frozenset[str] | None = None
) -> dict[str, list[SessionItems]]:
    """Every transcript set under ``root`` (or those in ``only``): set -> sessions."""
    out: dict[str, list[SessionItems]] = {}
    for name, pattern, reader in _READERS:
        if only is not None and name not in only:
            continue
        folder = root / name
        if not folder.is_dir():
            continue
        sessions: list[SessionItems] = []
        for path in sorted(folder.glob(pattern)):
            try:
                for session in reader(path):
                    session = [
                        [(f, t) for f, t in msg if isinstance(t, str)]
                        for msg in session
                    ]
                    session = [m for m in session if any(t for _, t in m)]
                    if session:
                        sessions.append(session)
            except (ValueError, OSError, AttributeError, TypeError):
                continue
        if sessions:
            out[name] = sessions
    return out
