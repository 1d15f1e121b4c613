"""Who a session is about: its memory subject.

In order:

1. the canonical session metadata key ``subject_id`` (policy
   ``memory.subject_metadata_key``), e.g. ``"metadata": {"subject_id": "u-123"}``
   on a canonical JSONL line;
2. a ``subject=<id>/`` folder on the landing path, like ``tenant=<id>/``
   (``tenant=acme/subject=u-123/chat.jsonl``); works for every format;
3. otherwise the session itself: ``session:<session_id>``. Memories of a session
   whose user is unknown stay scoped to that one session; they are never pooled
   under a shared default subject, where they would leak between users.

Steps 1 and 2 (``declared_subject``) are also part of the session id
(``pipelines.ingest.normalize.session_id_for``): two subjects who send the same
``session_id`` get two sessions, so neither can write into the other's memory and
``forget`` finds each one's sessions. The id, the memory stage and erasure all
call these functions (the memory stage through ``pipelines.memory.subjects``), so
they cannot drift apart. They live in ingest, the first stage that needs them.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

SUBJECT_SEGMENT = "subject="
SESSION_PREFIX = "session:"


def subject_from_path(source_file: str) -> str | None:
    """The ``subject=<id>`` folder on a landing path, if any (innermost wins)."""
    found = None
    for part in PurePosixPath(source_file).parts[:-1]:
        if part.startswith(SUBJECT_SEGMENT) and len(part) > len(SUBJECT_SEGMENT):
            found = part[len(SUBJECT_SEGMENT) :]
    return found


def subject_from_metadata(metadata: str | dict | None, key: str) -> str | None:
    """The subject named in session metadata (a JSON object or its text)."""
    if not metadata:
        return None
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return None
    if not isinstance(metadata, dict):
        return None
    value = metadata.get(key)
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
        return str(value)
    return None


def declared_subject(
    metadata: str | dict | None, source_file: str, metadata_key: str = "subject_id"
) -> str | None:
    """The subject a session's metadata or landing path names (steps 1 and 2)."""
    return subject_from_metadata(metadata, metadata_key) or subject_from_path(
        source_file
    )


def subject_for(
    session_id: str,
    source_file: str,
    metadata: str | dict | None,
    metadata_key: str = "subject_id",
) -> str:
    """The subject of a session (see the module docstring for the order)."""
    return (
        declared_subject(metadata, source_file, metadata_key)
        or f"{SESSION_PREFIX}{session_id}"
    )
