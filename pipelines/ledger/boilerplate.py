"""Agent-framework boilerplate: demonstrations, templates and their instructions.

Coding-agent frameworks wrap the user's request in a template: SWE-agent sends a
worked **demonstration** as a user message ("--- DEMONSTRATION --- ... --- END OF
DEMONSTRATION ---") and then the task inside "ISSUE:" followed by "INSTRUCTIONS:"
and "IMPORTANT TIPS:" blocks; OpenHands puts the issue inside
``<issue_description>`` tags followed by numbered steps; resolvers put it under a
"# Problem Statement" heading followed by "IMPORTANT: ..." rules. None of that
template text is the user's goal or a standing rule of the user, yet it reads
like one ("YOU CAN ONLY ENTER ONE COMMAND AT A TIME"). Recognised by structure,
not by the wording of one framework:

* a **demonstration**: a message with a ``--- DEMONSTRATION ---`` style fence or
  that opens by announcing a demonstration; all of it is skipped;
* **labelled blocks**: a line in capitals ending with a colon ("ISSUE:",
  "INSTRUCTIONS:", "NOTE ABOUT THE EDIT COMMAND:"), a markdown heading, or an XML
  style tag opens a block. A block whose label names a request (issue, task,
  problem, question, description, bug, challenge) is the **request**; a block
  whose label names instructions (instructions, tips, notes, rules, important,
  guidelines, steps, environment...) is template text, skipped;
* **repeated system-prompt text**: a sentence the system prompt also holds;
* shell prompt lines of text-action agents (``(Open file: ...)``, ``bash-$``).

``request_text`` returns the part of a user message that is the request (the
whole message when it has no template structure), so the goal and the pinned
statements come from what the user asked, not from the framework.
"""

from __future__ import annotations

import re
from functools import lru_cache

_DEMO_FENCE = re.compile(
    r"^\s*-{2,}\s*(?:END OF\s+)?DEMONSTRATION\s*-{2,}\s*$", re.I | re.M
)
_DEMO_OPENING = re.compile(
    r"^\W*(?:here is|here's|below is) an? (?:\w+ )?demonstration\b", re.I
)
#: "ISSUE:", "IMPORTANT TIPS:", "NOTE ABOUT THE EDIT COMMAND:", "IMPORTANT: rest".
_CAPS_LABEL = re.compile(r"^\s*([A-Z][A-Z0-9 _'/-]{1,60}):(?:\s+(.*))?$")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.+?)\s*#*\s*$")
_BOLD_LABEL = re.compile(r"^\s*(?:\*\*|__)([^*_\n]{2,60}?):?(?:\*\*|__):?\s*$")
_TAG = re.compile(r"^\s*<(/?)([A-Za-z_][\w-]*)>\s*(.*)$")
_PROMPT_LINE = re.compile(
    r"^\s*(?:\((?:Open file|Current directory|Interactive session)[^)]*\)|"
    r"bash-\$|\$)\s*$"
)
_REQUEST = re.compile(
    r"\b(?:issue|task|problem|question|request|description|bug|challenge|ticket|"
    r"goal|objective|user (?:request|query|message)|pr|feature)\b",
    re.I,
)
_INSTRUCTION = re.compile(
    r"\b(?:instructions?|tips?|notes?|rules?|important|guidelines?|steps?|"
    r"environment|uploaded[_ ]files|reminders?|warnings?|commands?|format|"
    r"setting|system|response format|constraints for the agent)\b",
    re.I,
)
_SPACES = re.compile(r"\s+")


def is_demonstration(text: str) -> bool:
    """Whether a message is a framework's worked demonstration, not a request."""
    head = text.lstrip()[:200]
    return bool(_DEMO_FENCE.search(text) or _DEMO_OPENING.match(head))


def _label(line: str) -> tuple[str, str, str] | None:
    """``(kind, label, rest)`` when ``line`` opens a labelled block."""
    caps = _CAPS_LABEL.match(line)
    if caps and sum(c.isalpha() for c in caps[1]) >= 3:
        return "caps", caps[1], caps[2] or ""
    bold = _BOLD_LABEL.match(line)
    if bold:
        return "heading", bold[1], ""
    heading = _HEADING.match(line)
    if heading:
        return "heading", heading[1], ""
    tag = _TAG.match(line)
    if tag:
        return ("close" if tag[1] else "tag"), tag[2].replace("_", " "), tag[3]
    return None


def _kind_of(label: str) -> str:
    if _REQUEST.search(label):
        return "request"
    if _INSTRUCTION.search(label):
        return "instruction"
    return "other"


@lru_cache(maxsize=16_384)
def request_text(text: str) -> str:
    """The request part of a user message (see the module docstring).

    Blocks labelled as a request win; without one, the text before the first
    instruction block (the preamble) is the request. Shell prompt lines go.
    A message without any labelled block is returned whole.
    """
    lines = text.splitlines()
    blocks: list[tuple[str, list[str]]] = [("preamble", [])]
    structured = False
    for line in lines:
        if _PROMPT_LINE.match(line):
            continue
        found = _label(line)
        if found is not None:
            kind, label, rest = found
            structured = True
            if kind == "close":
                blocks.append(("other", []))
                continue
            blocks.append((_kind_of(label), [rest] if rest else []))
            continue
        blocks[-1][1].append(line)
    if not structured:
        return "\n".join(line for line in lines if not _PROMPT_LINE.match(line))
    requests = [b for kind, b in blocks if kind == "request"]
    if requests and any(line.strip() for b in requests for line in b):
        return "\n".join(line for b in requests for line in b)
    kept: list[str] = []
    for kind, body in blocks:
        if kind == "instruction":
            break
        kept.extend(body)
    return "\n".join(kept)


def sentence_key(sentence: str) -> str:
    """A sentence compared across messages: lower-case, single spaces."""
    return _SPACES.sub(" ", sentence).strip().lower()


def is_lead_in(sentence: str) -> bool:
    """A sentence that only announces what follows ("Here's the issue text:")."""
    stripped = sentence.strip()
    return stripped.endswith(":") or bool(
        re.search(r"\bthe following\b", stripped, re.I) and len(stripped.split()) <= 14
    )


def is_prompt_line(line: str) -> bool:
    """A text-action agent's shell prompt line (``(Open file: ...)``,
    ``bash-$``): framework chrome, never part of what a tool returned."""
    return bool(_PROMPT_LINE.match(line))
