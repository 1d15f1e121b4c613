"""What a search over conversation turns returns (``serving.message_search``).

A hit names the turn three ways: ``message_id`` (ours, a content hash),
``source_id`` (the source's own id, e.g. a LoCoMo ``dia_id``) and
``session_id`` + ``turn``. Texts are the redacted ``messages`` text, names the
redacted speaker: a hit carries placeholders, never a raw value.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TurnContext(_Strict):
    """A neighbouring turn returned around a hit (``context_turns``)."""

    message_id: str
    source_id: str | None = None
    turn: int
    role: str
    speaker: str | None = None
    created_at: datetime | None = None
    text: str


class TurnHit(_Strict):
    """One conversation turn found by ``search_messages``, with its score parts.

    ``score`` orders the hits (``serving.turn_rank``: max-normalised BM25 +
    cosine of the turn + cosine of the turn with the one before it + neighbour
    words); ``bm25`` and ``cosine`` are the raw parts (``cosine`` None when the
    search ran on words only)."""

    kind: str = "message"
    message_id: str
    source_id: str | None = None
    session_id: str
    tenant_id: str
    subject_id: str
    turn: int
    role: str
    speaker: str | None = None
    created_at: datetime | None = None
    text: str
    token_count: int
    score: float
    bm25: float
    cosine: float | None = None
    context: list[TurnContext] = Field(default_factory=list)
