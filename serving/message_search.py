"""Search over conversation turns: "what did this user say before that matters now?".

``search_messages`` answers within one tenant and one subject, always: the
subject's sessions are found first (``subject_for`` over the tenant's
``sessions``, as erasure finds them) and only their user and assistant turns are
ever read, tokenised or scored; another tenant's or subject's turns never enter
the index, so they can neither be returned nor move a score. Time filters
(``since``/``until`` on the turn's time) also apply before the top k is taken.

The question meets storage in the same form: it is redacted and pseudonymised
with the tenant's key before matching (``query_redactor``), so "What did
Caroline say..." matches the ``<PERSON:...>`` the turns hold. Hits carry
placeholders, never raw values.

Ranking is ``serving.turn_rank`` (BM25 and MiniLM fused by score, measured on
LoCoMo: docs/conversation_recall.md). A subject's turn index is built once per
snapshot and process; turn vectors are kept per text across snapshots
(``_VECTORS``), so a nightly that adds turns embeds only the new ones here.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxledger.schemas.turns import TurnContext, TurnHit
from ctxledger.serving.evidence_index import TermTokenizer
from ctxledger.serving.turn_rank import TurnRanker

if TYPE_CHECKING:
    from ctxledger.schemas.policy import Policy
    from ctxledger.warehouse.catalog import Warehouse

#: Roles whose turns are searched (tool results are artifacts: evidence search).
ROLES = ("user", "assistant")
#: Subject indexes kept per process (two snapshots of a few busy subjects).
INDEXES_KEPT = 64
#: Turn vectors kept per process, by (model settings, text).
VECTORS_KEPT = 200_000
#: Neighbouring turns returned around a hit at most.
MAX_CONTEXT_TURNS = 10


class MessageSearchError(ValueError):
    """A message search that cannot run (no pseudonym key, a bad argument)."""


@dataclass(frozen=True)
class _Turn:
    message_id: str
    source_id: str | None
    session_id: str
    turn: int
    role: str
    speaker: str | None
    created_at: datetime | None
    text: str
    token_count: int


class TurnIndex:
    """One subject's turns at one snapshot, in session and turn order."""

    def __init__(self, tenant_id: str, subject_id: str, turns: list[_Turn], ranker):
        self.tenant_id = tenant_id
        self.subject_id = subject_id
        self.turns = turns
        self.ranker = ranker
        self.micros = np.array([_micros(t.created_at) for t in turns], dtype=np.float64)


def _micros(when: datetime | None) -> float:
    if when is None:
        return np.nan
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp() * 1e6


def indexed_text(speaker: str | None, text: str) -> str:
    """What a turn is indexed as: ``speaker: text`` (questions name people)."""
    return f"{speaker}: {text}" if speaker else text


_INDEXES: OrderedDict[tuple[Any, ...], TurnIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()
_VECTORS: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_VECTOR_LOCK = threading.Lock()
_TOKENIZER: TermTokenizer | None = None


def _tokenizer() -> TermTokenizer:
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = TermTokenizer()
    return _TOKENIZER


def _vectors(encode: Callable[[list[str]], Any], model: str, texts: list[str]):
    """Unit vectors of ``texts``: cached ones, the rest encoded in one call."""
    out = np.zeros((len(texts), 384), dtype=np.float32)
    missing: dict[str, list[int]] = {}
    with _VECTOR_LOCK:
        for i, text in enumerate(texts):
            hit = _VECTORS.get((model, text))
            if hit is None:
                missing.setdefault(text, []).append(i)
            else:
                _VECTORS.move_to_end((model, text))
                out[i] = hit
    if missing:
        fresh = np.asarray(encode(list(missing)), dtype=np.float32)
        with _VECTOR_LOCK:
            for text, vector in zip(missing, fresh, strict=True):
                for i in missing[text]:
                    out[i] = vector
                _VECTORS[(model, text)] = vector
            while len(_VECTORS) > VECTORS_KEPT:
                _VECTORS.popitem(last=False)
    return out


def subject_turns(
    wh: Warehouse, tenant_id: str, subject_id: str, metadata_key: str
) -> list[_Turn]:
    """The subject's user and assistant turns, in session and turn order;
    the subject's sessions are found as erasure finds them."""
    from ctxledger.warehouse.memory_api import subject_sessions  # noqa: PLC0415

    sessions, _ = subject_sessions(wh, tenant_id, subject_id, metadata_key)
    if not sessions:
        return []
    rows = wh.query(
        "SELECT message_id, source_id, session_id, turn, role, name, created_at, "
        "content, token_count FROM messages WHERE tenant_id = ? "
        "AND session_id IN (SELECT unnest(?::VARCHAR[])) AND role IN ('user', "
        "'assistant') ORDER BY session_id, turn",
        [tenant_id, sessions],
    ).fetchall()
    return [_Turn(*row) for row in rows]


def load_turn_index(
    wh: Warehouse, tenant_id: str, subject_id: str, policy: Policy
) -> TurnIndex:
    """The subject's turn index at ``wh``'s snapshot (built once per process)."""
    snapshot = wh.snapshot if wh.snapshot is not None else wh.current_snapshot()
    embedding = policy.evidence.embedding
    model = embedding.model_dump_json()
    key = (wh.catalog, wh.data_path, snapshot, tenant_id, subject_id, model)
    with _INDEX_LOCK:
        if key in _INDEXES:
            _INDEXES.move_to_end(key)
            return _INDEXES[key]
    turns = subject_turns(wh, tenant_id, subject_id, policy.memory.subject_metadata_key)
    texts = [indexed_text(t.speaker, t.text) for t in turns]
    context = [
        (
            texts[i - 1] + "\n"
            if i and turns[i - 1].session_id == turns[i].session_id
            else ""
        )
        + texts[i]
        for i in range(len(turns))
    ]
    tokenizer = _tokenizer()
    vectors = context_vectors = None
    if turns:
        from ctxledger.warehouse.evidence_api import embedder  # noqa: PLC0415

        encode = embedder(embedding).encode
        vectors = _vectors(encode, model, texts)
        context_vectors = _vectors(encode, model, context)
    ranker = TurnRanker(
        [tokenizer.terms(t) for t in texts],
        [t.session_id for t in turns],
        vectors=vectors,
        context_vectors=context_vectors,
    )
    index = TurnIndex(tenant_id, subject_id, turns, ranker)
    with _INDEX_LOCK:
        _INDEXES[key] = index
        while len(_INDEXES) > INDEXES_KEPT:
            _INDEXES.popitem(last=False)
    return index


# -- the question in the turns' form ----------------------------------------------

_REDACTORS: dict[tuple[str, bytes], Any] = {}
_REDACTOR_LOCK = threading.Lock()


def stored_key() -> bytes:
    """The pseudonym key the nightly used, read only: a search never creates one
    (a new key would make pseudonyms that match nothing stored)."""
    from ctxledger.pipelines.redact.keys import (  # noqa: PLC0415
        ENV_VAR,
        default_key_path,
        load_key,
    )

    if not os.environ.get(ENV_VAR) and not Path(default_key_path()).exists():
        raise MessageSearchError(
            "message search needs the pseudonym key the nightly used "
            f"(${ENV_VAR} or {default_key_path()}): questions are pseudonymised "
            "with it to match the stored turns"
        )
    return load_key()


def query_redactor(policy: Policy, key: bytes | None = None):
    """The redactor that puts a question in the stored form (one per process)."""
    from ctxledger.pipelines.redact.engine import Redactor  # noqa: PLC0415

    key = stored_key() if key is None else key
    cache_key = (policy.policy_version, key)
    with _REDACTOR_LOCK:
        redactor = _REDACTORS.get(cache_key)
        if redactor is None:
            redactor = Redactor(policy, key)
            redactor.setup()
            _REDACTORS[cache_key] = redactor
    return redactor


# -- search -------------------------------------------------------------------------


def search_messages(
    wh: Warehouse,
    tenant_id: str,
    subject_id: str,
    query: str,
    k: int = 5,
    *,
    policy: Policy,
    since: datetime | None = None,
    until: datetime | None = None,
    context_turns: int = 0,
    redact: Callable[[str, str], str] | None = None,
    query_vector: Sequence[float] | None = None,
) -> list[TurnHit]:
    """The subject's ``k`` turns that best answer ``query`` (see the module
    docstring). ``redact(text, tenant)``: how the question is put in the stored
    form (default: ``query_redactor``); ``context_turns``: neighbouring turns of
    the same session returned with each hit (at most ``MAX_CONTEXT_TURNS``)."""
    if not 0 <= context_turns <= MAX_CONTEXT_TURNS:
        raise MessageSearchError(
            f"context_turns must be between 0 and {MAX_CONTEXT_TURNS}"
        )
    if redact is None:
        redactor = query_redactor(policy)

        def redact(text: str, tenant: str) -> str:
            return redactor.redact_text(text, tenant).text

    asked = redact(query, tenant_id)
    index = load_turn_index(wh, tenant_id, subject_id, policy)
    if not index.turns:
        return []
    if query_vector is None and index.ranker.vectors is not None:
        from ctxledger.serving.evidence_search import embed_query  # noqa: PLC0415

        query_vector = embed_query(policy.evidence.embedding, asked)
    vector = None if query_vector is None else np.asarray(query_vector, np.float32)
    ranked = index.ranker.rank(_tokenizer().terms(asked), vector, k=index.ranker.n)
    allowed = np.ones(len(index.turns), dtype=bool)
    if since is not None:
        allowed &= index.micros >= _micros(since)
    if until is not None:
        allowed &= index.micros <= _micros(until)
    hits: list[TurnHit] = []
    for r in ranked:
        if len(hits) >= k:
            break
        if not allowed[r.row]:
            continue
        turn = index.turns[r.row]
        hits.append(
            TurnHit(
                message_id=turn.message_id,
                source_id=turn.source_id,
                session_id=turn.session_id,
                tenant_id=tenant_id,
                subject_id=subject_id,
                turn=turn.turn,
                role=turn.role,
                speaker=turn.speaker,
                created_at=turn.created_at,
                text=turn.text,
                token_count=turn.token_count,
                score=round(r.score, 6),
                bm25=round(r.bm25, 6),
                cosine=None if r.cosine is None else round(r.cosine, 6),
                context=_around(index, r.row, context_turns),
            )
        )
    return hits


def _around(index: TurnIndex, row: int, width: int) -> list[TurnContext]:
    if not width:
        return []
    hit = index.turns[row]
    out = []
    for other in range(max(0, row - width), min(len(index.turns), row + width + 1)):
        turn = index.turns[other]
        if other == row or turn.session_id != hit.session_id:
            continue
        out.append(
            TurnContext(
                message_id=turn.message_id,
                source_id=turn.source_id,
                turn=turn.turn,
                role=turn.role,
                speaker=turn.speaker,
                created_at=turn.created_at,
                text=turn.text,
            )
        )
    return out
