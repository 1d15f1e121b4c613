"""What comes next: the latest action, the latest request, confirmations asked.

A stale plan is not the next step: the section keeps the latest cue sentences,
the latest user request and the latest assistant action (its tool calls or its
text action); an assistant turn asking the user to confirm is kept whole (its
list lines hold the ids and amounts) until the user answers.
"""

from __future__ import annotations

import json
import re

from ctxledger.pipelines.ledger.cues import MARKDOWN
from ctxledger.pipelines.ledger.text import clip, cut, text_lines
from ctxledger.pipelines.ledger.trail import text_action
from ctxledger.schemas.transcript import Message, ToolCall

CONFIRM_PREFIX = "confirmation asked: "
REQUEST_PREFIX = "latest request: "
ACTION_PREFIX = "latest action: "
#: Cue sentences kept under "Next steps" (the latest ones: older ones are stale).
NEXT_CUES_KEPT = 4
SPACES = re.compile(r"\s+")
#: An editor sub-command (``view``, ``str_replace``): shown with its ``path``.
EDITOR_COMMAND = re.compile(r"[a-z_]{2,20}")


def confirmation_text(message: Message, limit: int) -> str:
    """The whole natural-language text of a confirmation request (the ids and
    amounts to confirm sit in its list lines), markdown removed."""
    lines = [MARKDOWN.sub("", line) for line in text_lines(message.content)]
    return clip(" ".join(lines), limit)


def call_text(call: ToolCall) -> str:
    """One tool call as ``tool argument``: its main argument (an editor
    sub-command keeps the path it acts on), else every ``key=value``."""
    args = call.arguments.strip()
    try:
        value = json.loads(args) if args else {}
    except ValueError:
        value = args
    if isinstance(value, dict):
        main = next(
            (
                value[k]
                for k in ("command", "code", "message", "path", "query")
                if isinstance(value.get(k), str)
            ),
            None,
        )
        path = value.get("path")
        if (
            main is not None
            and main == value.get("command")
            and isinstance(path, str)
            and EDITOR_COMMAND.fullmatch(main)
        ):
            # ``str_replace_editor view`` says nothing without the file.
            main = f"{main} {path}"
        args = (
            main
            if main is not None
            else " ".join(
                f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                for k, v in value.items()
            )
        )
    return SPACES.sub(" ", f"{call.tool_name} {args}".strip())


def action_text(message: Message, limit: int = 200) -> str | None:
    """What an assistant message does: its tool calls or its text action."""
    if message.tool_calls:
        return cut(" ; ".join(call_text(c) for c in message.tool_calls), limit)
    action = text_action(message.content)
    if action:
        return cut(SPACES.sub(" ", action).strip(), limit)
    return None
