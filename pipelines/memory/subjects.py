"""Who a session is about: its memory subject (see ``pipelines.ingest.subjects``).

The one definition lives in the ingest stage, because the session id is scoped by
the same subject (``pipelines.ingest.normalize.session_id_for``); this module keeps
the memory stage's and erasure's import path.
"""

from __future__ import annotations

from ctxledger.pipelines.ingest.subjects import (
    SESSION_PREFIX,
    SUBJECT_SEGMENT,
    declared_subject,
    subject_for,
    subject_from_metadata,
    subject_from_path,
)

__all__ = [
    "SESSION_PREFIX",
    "SUBJECT_SEGMENT",
    "declared_subject",
    "subject_for",
    "subject_from_metadata",
    "subject_from_path",
]
