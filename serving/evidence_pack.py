"""``pack``: choose what goes into a model's context window, and say why.

Candidates are the request's in-scope evidence (hybrid search, tenant, ACL and
subject filters first: a tool artifact only for ``request.subject_id`` or an
operator group, see ``serving.evidence_search``) and the subject's memories for
the purpose (facts and hypotheses, through ``serving.memories``). Each is
valued

    utility = relevance x authority x freshness - redundancy - injection_risk

* relevance: cosine similarity of the item to the query, clipped to [0, 1];
  below ``min_relevance`` an item is dropped (``low_relevance``);
* authority: the document's own ``authority``, else by trust and kind
  (policy ``evidence.pack``); memories by how they are served;
* freshness: ``0.5 ** (age_days / freshness_half_life_days)``, age from the
  item's effective date to ``as_of`` (or now);
* injection_risk: ``medium_risk_penalty`` / ``high_risk_penalty`` by the
  item's risk (its source's ``injection_risk``; text that reads as
  instructions counts as ``high`` and is served ``untrusted`` whatever its
  document says). An item
  of high risk or ``untrusted`` trust whose relevance is below
  ``untrusted_min_relevance`` is dropped (``untrusted_low_relevance``): it
  goes in for what it says about the query, never as filler;
* redundancy: repeated *text*, not a shared topic or document.
  ``redundancy_weight x (relevance x authority x freshness) x overlap``, where
  overlap is the share of the item's word shingles already present in the
  selected text. An item whose overlap reaches ``near_duplicate_overlap``, or
  whose cosine to a selected item reaches ``near_duplicate_cosine``, is a
  near-duplicate and is dropped (``near_duplicate``). Sibling chunks of one
  document say different things: they cost nothing (cosine alone between
  sections of one runbook is 0.89-0.95, which used to drop them all).

Mandatory items go in first (``PackError`` when they do not fit the budget);
then, greedily, the remaining item of highest utility: an exact duplicate of a
selected text is dropped (``duplicate``), a near-duplicate too
(``near_duplicate``); an item whose utility is not positive is dropped
(``non_positive_utility``, with every item after it), one that does not fit the
remaining budget is dropped (``over_budget``). That loop is
``serving.context_pack.greedy_select``, shared with the pure
``context_pack.pack_context`` of the design example; this module brings the
candidates, the redundancy scorer and the cost of joined neighbours. To fill
a large budget, ``pack``
fetches more candidates (doubling up to ``max_candidates``) until they hold
``fill_factor`` x the budget. Selected chunks that are neighbours in one
document version become one item, in reading order (``ContextItem.chunk_ids``).
For each selected document, the chunk of the version it replaced that best
matches the query is listed as dropped (``superseded``) when the principal may
see that version, so a reader knows an older text exists and why it is not in.

Out-of-scope items never become candidates, so they are never listed; a
mandatory id out of scope gets the same error as one that does not exist at
all. Every item's content is a data envelope (``pipelines.evidence.envelope``):
retrieved text is never instructions.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxledger.pipelines.evidence.envelope import instruction_like, wrap_as_data
from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.schemas import content_hash
from ctxledger.schemas.evidence import (
    ContextManifest,
    PackRequest,
)
from ctxledger.schemas.sources import SourceRegistry, SourceSpec, above_clearance
from ctxledger.serving.context_pack import PackError, greedy_select

try:  # the serve extra; without it manifest ids take ``content_hash``
    import orjson as _orjson
except ImportError:  # pragma: no cover - the core install
    _orjson = None

if TYPE_CHECKING:
    from ctxledger.schemas.evidence import PackSettings
    from ctxledger.schemas.policy import Policy
    from ctxledger.serving.evidence_index import EvidenceIndex
    from ctxledger.serving.memories import MemoryView
    from ctxledger.warehouse.catalog import Warehouse

#: The date older runs gave tool outputs whose messages had none
#: (``pipelines.evidence.documents.EPOCH``): read as unknown.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: ``(tenant_id, subject_id, purpose, at) -> MemoryView``: how a pack reads
#: the subject's memories.
MemoryReader = Callable[[str, str, str, "datetime | None"], "MemoryView"]
#: What separates neighbouring chunks joined into one item.
JOIN = "\n\n"
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class Candidate:
    """An item ``pack`` may select, before scoring."""

    item_id: str
    kind: str
    source: str
    trust: str
    version: str
    text: str
    token_count: int
    vector: np.ndarray
    authority: float
    effective_from: datetime | None
    content_key: str
    doc_id: str | None = None
    section_path: list[str] = field(default_factory=list)
    char_start: int | None = None
    char_end: int | None = None
    relevance: float = 0.0
    freshness: float = 1.0
    #: Index row of an evidence chunk (None for memories).
    row: int | None = None
    doc_version_id: str | None = None
    shingles: frozenset[int] = frozenset()
    #: ``shingles`` as an int64 array (``_shingle_array``), kept with a row's
    #: candidate so a selection state gets it without a cache lookup.
    shingle_ids: np.ndarray | None = None
    #: What the source registry is matched on: the key kind and its keys.
    source_kind: str = "document"
    source_keys: tuple[str | None, ...] = ()
    #: The item's own authority (a document's ``authority``) beats its source's.
    own_authority: bool = False
    source_id: str | None = None
    source_owner: str | None = None
    registry_version: str | None = None
    injection_risk: str | None = None
    #: The registered source ``_stamp_source`` gave it (None: not stamped).
    spec: SourceSpec | None = None
    #: What its injection risk takes off its utility (``_guard``).
    risk: float = 0.0


def _copy(c: Candidate) -> Candidate:
    """A shallow copy of ``c`` (its fields, not ``dataclasses.replace``'s
    re-initialisation: ~0.3 us instead of ~4 us; nothing a call sets on its
    copy is shared with the original). The field dict is copied whole
    (``dict.copy``), not re-inserted key by key (``update``: twice the time
    on ~160 candidates a pack)."""
    out = object.__new__(Candidate)
    out.__dict__ = c.__dict__.copy()
    return out


def _aware(when: datetime | None) -> datetime | None:
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when


def freshness(effective_from: datetime | None, at: datetime, half_life: float) -> float:
    """``0.5 ** (age_days / half_life)``; 1.0 for unknown or future dates."""
    effective_from = _aware(effective_from)
    if effective_from is None:
        return 1.0
    age_days = max(0.0, (at - effective_from).total_seconds() / 86_400.0)
    return 0.5 ** (age_days / half_life)


def round6(values: list[float]) -> list[float]:
    """``[round(v, 6) for v in values]``, vectorised.

    ``round(v, 6)`` is the float nearest ``k / 10**6``, ``k`` the integer
    nearest ``v * 10**6``; ``rint(v * 1e6) / 1e6`` finds the same ``k``
    unless the product's rounding moves it across a half (checked: values
    within 1e-3 of a half, and any huge or non-finite one, go through
    ``round`` itself), and IEEE division then gives the same float."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return []
    with np.errstate(over="ignore", invalid="ignore"):  # huge: ``unsafe``
        scaled = v * 1e6
        out = (np.rint(scaled) / 1e6).tolist()
        near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-3
        unsafe = near_half | ~(np.abs(scaled) < 2.0**52)
    for i in np.flatnonzero(unsafe).tolist():
        out[i] = round(float(v[i]), 6)
    return out


def shingles(text: str, words: int = 5) -> frozenset[int]:
    """Hashes of the overlapping ``words``-word runs of ``text`` (lower case,
    ``[a-z0-9]+`` words); a text shorter than that is one shingle."""
    tokens = _WORD.findall(text.lower())
    if not tokens:
        return frozenset()
    if len(tokens) <= words:
        return frozenset((hash(tuple(tokens)),))
    return frozenset(
        hash(tuple(tokens[i : i + words])) for i in range(len(tokens) - words + 1)
    )


def overlap(candidate: frozenset[int], selected: set[int]) -> float:
    """Share of ``candidate``'s shingles already in ``selected`` (0..1)."""
    if not candidate or not selected:
        return 0.0
    return len(candidate & selected) / len(candidate)


def redundancy(
    base: float, shared: float, cosine: float, settings: PackSettings
) -> tuple[float, bool]:
    """``(penalty, near_duplicate)`` of an item worth ``base`` whose shingle
    overlap with the selected text is ``shared`` and whose highest cosine to
    a selected item is ``cosine`` (module doc)."""
    if settings.redundancy_weight == 0.0:
        return 0.0, False
    near = (
        shared >= settings.near_duplicate_overlap
        or cosine >= settings.near_duplicate_cosine
    )
    return settings.redundancy_weight * base * (1.0 if near else shared), near


# ------------------------------------------------------------ reading order
_ORDER: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_ORDER_LOCK = threading.Lock()


def _reading_order(index: EvidenceIndex) -> dict[str, Any]:
    """Per index (built once): the next and previous chunk of each row in its
    document version (-1: none), by ``char_start``; and the rows of each
    ``(tenant, doc_id)``, for the superseded versions."""
    with _ORDER_LOCK:
        cached = _ORDER.get(index)
    if cached is not None:
        return cached
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    meta = index.meta
    keyed = pa.table(
        {
            "v": meta.column("doc_version_id"),
            "s": meta.column("char_start"),
        }
    )
    order = pc.sort_indices(
        keyed, sort_keys=[("v", "ascending"), ("s", "ascending")]
    ).to_numpy()
    versions = np.asarray(
        meta.column("doc_version_id").combine_chunks().dictionary_encode().indices,
        dtype=np.int64,
    )
    following = np.full(index.n, -1, dtype=np.int64)
    preceding = np.full(index.n, -1, dtype=np.int64)
    if index.n > 1:
        same = versions[order[1:]] == versions[order[:-1]]
        following[order[:-1][same]] = order[1:][same]
        preceding[order[1:][same]] = order[:-1][same]
    by_doc: dict[tuple[str, str], list[int]] = {}
    tenants = meta.column("tenant_id").to_pylist()
    docs = meta.column("doc_id").to_pylist()
    for row, key in enumerate(zip(tenants, docs, strict=True)):
        by_doc.setdefault(key, []).append(row)
    doc_rows = {key: np.asarray(rows, dtype=np.int64) for key, rows in by_doc.items()}
    cached = {
        "next": following,
        "prev": preceding,
        # arrays, once: ``_superseded`` indexes them for every selected document
        "by_doc": doc_rows,
        # the earliest ``effective_to`` of each document's rows: a document
        # none of whose versions ended by ``as_of`` has nothing superseded,
        # known without an array call (most selected documents, ~30 a pack)
        "first_end": {
            key: int(index.eff_to[rows].min()) for key, rows in doc_rows.items()
        },
    }
    with _ORDER_LOCK:
        _ORDER[index] = cached
    return cached


# --------------------------------------------------------------- candidates
def _authority(meta: dict[str, Any], settings: PackSettings) -> float:
    if meta["kind"] == "tool_artifact":
        return settings.artifact_authority
    if meta["authority"] is not None:
        return float(meta["authority"])
    if meta["trust"] == "trusted":
        return settings.trusted_authority
    return settings.untrusted_authority


def _chunk_candidate(
    index: EvidenceIndex, row: int, settings: PackSettings
) -> Candidate:
    """The candidate of index row ``row``. What depends on the row alone
    (``_chunk_fields``) is worked out once per index and row; the candidate
    itself is new on every call (``pack`` stamps its scores and source)."""
    fields, meta = _chunk_fields(index, row)
    shingled = _chunk_shingles(fields["text"], settings.shingle_words)
    return Candidate(
        **fields,
        vector=index.vectors[row],
        section_path=list(meta["section_path"]),
        authority=_authority(meta, settings),
        shingles=shingled,
        shingle_ids=_shingle_array(shingled),
    )


_FIELDS: weakref.WeakKeyDictionary[Any, dict[int, tuple[dict, dict]]] = (
    weakref.WeakKeyDictionary()
)
_FIELDS_KEPT = 32_768


def _chunk_fields(index: EvidenceIndex, row: int) -> tuple[dict, dict]:
    """``(Candidate fields, row metadata)`` of a row that do not depend on the
    request or the policy, built once per index and row
    (``_chunk_candidate_fields``): the same rows come back for similar
    questions, and building them was ~9 us of each of ~160 candidates."""
    cached = _FIELDS.get(index)
    if cached is None:
        with _ORDER_LOCK:
            cached = _FIELDS.setdefault(index, {})
    found = cached.get(row)
    if found is None:
        if len(cached) >= _FIELDS_KEPT:  # bounded: ~1 KB a row
            cached.clear()
        found = cached[row] = _chunk_candidate_fields(index, row)
    return found


def _chunk_candidate_fields(index: EvidenceIndex, row: int) -> tuple[dict, dict]:
    meta = index.row(row)
    section = "/".join(meta["section_path"])
    artifact = meta["kind"] == "tool_artifact"
    tool = meta["section_path"][0] if artifact and meta["section_path"] else None
    effective = _aware(meta["effective_from"])
    if meta["kind"] == "tool_artifact" and effective == EPOCH:
        # written before undated outputs took their run's time: the date is
        # unknown, not 1970 (which would make its freshness 0)
        effective = None
    fields = {
        "item_id": meta["chunk_id"],
        "kind": "evidence" if meta["kind"] == "document" else "tool_artifact",
        "source": f"{meta['kind']}:{meta['doc_id']}@{meta['doc_version']}"
        + (f"#{section}" if section else ""),
        "trust": meta["trust"],
        "version": meta["doc_version"],
        "text": meta["text"],
        "token_count": int(meta["token_count"]),
        "effective_from": effective,
        "content_key": meta["content_hash"],
        "doc_id": meta["doc_id"],
        "char_start": meta["char_start"],
        "char_end": meta["char_end"],
        "row": row,
        "doc_version_id": meta["doc_version_id"],
        "source_kind": "tool_artifact" if artifact else "document",
        "source_keys": (tool,) if artifact else (meta["doc_id"],),
        "own_authority": not artifact and meta["authority"] is not None,
    }
    kept = ("kind", "authority", "trust", "section_path")  # what varies by call
    return fields, {name: meta[name] for name in kept}


_STAMPED: weakref.WeakKeyDictionary[Any, dict[tuple, dict[int, Candidate]]] = (
    weakref.WeakKeyDictionary()
)
#: Registries (and pack settings) whose stamped rows one index keeps: the
#: snapshot's own, and a few what-if ones (``ctxledger eval --ablate``).
_STAMPED_KEYS = 4


def _chunk_candidates(
    index: EvidenceIndex,
    rows: list[int],
    registry: SourceRegistry,
    settings: PackSettings,
) -> list[Candidate]:
    """The candidates of index ``rows``, stamped with their source under
    ``registry`` (``_stamp_source``). A row's stamped candidate is a pure
    function of the row, the registry and the pack settings, so it is built
    once per index and (registry version, settings) and every call scores a
    shallow copy of it (its relevance and freshness are the call's): building
    and stamping ~160 candidates was ~1.5 ms of every pack."""
    by_key = _STAMPED.get(index)
    if by_key is None:
        with _ORDER_LOCK:
            by_key = _STAMPED.setdefault(index, {})
    key = (registry.registry_version, settings)
    stamped = by_key.get(key)
    if stamped is None:
        if len(by_key) >= _STAMPED_KEYS:
            by_key.clear()
        stamped = by_key.setdefault(key, {})
    out = []
    for row in rows:
        template = stamped.get(row)
        if template is None:
            if len(stamped) >= _FIELDS_KEPT:  # bounded like ``_FIELDS``
                stamped.clear()
            template = _chunk_candidate(index, row, settings)
            _stamp_source(template, registry, settings)
            stamped[row] = template
        out.append(_copy(template))
    return out


@lru_cache(maxsize=8192)
def _shingle_array(hashes: frozenset[int]) -> np.ndarray:
    """A shingle set as an int64 array, cached like ``_chunk_shingles`` (whose
    sets come back as the same objects: a lookup is an identity hit)."""
    return np.fromiter(hashes, dtype=np.int64, count=len(hashes))


@lru_cache(maxsize=8192)
def _joined_tokens(first: str, second: str) -> int:
    """Tokens of two neighbouring texts joined (``JOIN``), cached: ``pack``
    asks for the same pairs again as it weighs neighbours of the selection."""
    return count_tokens(first + JOIN + second)


@lru_cache(maxsize=4096)
def _joined_text(texts: tuple[str, ...]) -> tuple[str, int, str]:
    """Neighbouring texts joined: the text, its tokens and its content key."""
    text = JOIN.join(texts)
    return text, count_tokens(text), content_hash(text)


@lru_cache(maxsize=8192)
def _chunk_shingles(text: str, words: int) -> frozenset[int]:
    """``shingles`` of a chunk text, cached: the same chunks come back for
    similar questions, and shingling 160 candidates is ~5 ms of a pack."""
    return shingles(text, words)


def _evidence_candidates(
    wh: Warehouse,
    request: PackRequest,
    policy: Policy,
    query_vec: np.ndarray,
    registry: SourceRegistry,
) -> tuple[EvidenceIndex, list[Candidate]]:
    from ctxledger.serving.evidence_search import load_index  # noqa: PLC0415

    settings = policy.evidence
    index = load_index(wh, settings.search)
    operators = settings.artifacts.operator_groups
    n = request.candidates or settings.pack.candidates
    wanted = settings.pack.fill_factor * request.budget_tokens
    # scope and scores once; each round of "more candidates" only re-selects
    searcher = index.searcher(
        request.tenant_id,
        request.principal_groups,
        request.query,
        query_vec,
        request.as_of,
        subject_id=request.subject_id,
        operator_groups=operators,
    )
    counts = index.token_counts()
    while True:
        # ``top_rows``: the rows of ``searcher.top(n, n)`` without a Python
        # object per row (four rounds of 20-320 fused rows were ~1.5 ms)
        found = searcher.top_rows(n, n)
        held = int(counts[found].sum())
        if (
            request.candidates
            or held >= wanted
            or len(found) < n
            or n >= settings.pack.max_candidates
        ):
            break
        n = min(2 * n, settings.pack.max_candidates)
    rows: list[int] = found.tolist()
    if request.mandatory:
        scope = set(searcher.scope.tolist())
        for item_id in request.mandatory:
            row = index.row_of(item_id)
            # out of scope reads exactly like absent (maybe a memory id): the
            # error must not tell whether an id exists in another tenant/subject
            if row is not None and row in scope and row not in rows:
                rows.append(row)
    return index, _chunk_candidates(index, rows, registry, settings.pack)


#: Vectors by (model, text) for texts the lake holds no vector for (memories, and
#: chunks still waiting for ``ctxledger embed``): each is embedded once per
#: process, not on every ``pack`` call (the vectors are pure functions of the text).
_TEXT_VECTORS: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_TEXT_LOCK = threading.Lock()
_TEXT_CACHE_SIZE = 100_000


def _text_vectors(policy: Policy, texts: list[str]) -> list[np.ndarray]:
    from ctxledger.warehouse.evidence_api import embedder  # noqa: PLC0415

    model = policy.evidence.embedding.model_dump_json()
    with _TEXT_LOCK:
        known = {t: _TEXT_VECTORS.get((model, t)) for t in texts}
    missing = sorted(t for t, v in known.items() if v is None)
    if missing:
        vectors = embedder(policy.evidence.embedding).encode(missing)
        with _TEXT_LOCK:
            for text, vector in zip(missing, vectors, strict=True):
                known[text] = _TEXT_VECTORS[(model, text)] = vector
            while len(_TEXT_VECTORS) > _TEXT_CACHE_SIZE:
                _TEXT_VECTORS.popitem(last=False)
    return [known[t] for t in texts]  # type: ignore[misc]


def _memory_candidates(
    wh: Warehouse,
    request: PackRequest,
    policy: Policy,
    notes: list[str],
    memories: MemoryReader | None = None,
) -> list[Candidate]:
    if not (request.include_memories and request.subject_id and request.purpose):
        if request.include_memories:
            notes.append("memories skipped: the request names no subject or purpose")
        return []
    getter = memories or getattr(wh, "memories", None) or _memory_reader(wh, policy)
    if getter is None:
        notes.append("memories skipped: this warehouse has no memory API")
        return []
    if "memories" not in wh.existing_tables():
        notes.append("memories skipped: no memories table")
        return []
    view = getter(request.tenant_id, request.subject_id, request.purpose, request.as_of)
    items: list[tuple[Any, str]] = []
    for served_as in ("fact", "hypothesis"):
        items.extend((m, served_as) for m in view.items_as(served_as))
    if not items:
        return []
    # vectors stored when the nightly wrote the memories (of the model queries
    # use); only memories without one (older runs) are embedded here, cached
    model = policy.evidence.embedding.model
    stored = getattr(view, "vectors", None) or {}
    known = {
        m.memory_id: found[1]
        for m, _ in items
        if (found := stored.get(m.memory_id)) is not None and found[0] == model
    }
    missing = [m.text for m, _ in items if m.memory_id not in known]
    embedded = iter(_text_vectors(policy, missing) if missing else [])
    vectors = [
        known[m.memory_id] if m.memory_id in known else next(embedded) for m, _ in items
    ]
    if missing:
        notes.append(
            f"{len(missing)} memory(ies) without a stored vector were embedded "
            "for this request"
        )
    settings = policy.evidence.pack
    out = []
    for (memory, served_as), vector in zip(items, vectors, strict=True):
        fact = served_as == "fact"
        recorded = _aware(memory.recorded_at)
        tokens, key, shingled = _memory_text(memory.text, settings.shingle_words)
        out.append(
            Candidate(
                item_id=memory.memory_id,
                kind=served_as,
                source=f"memory:{memory.source}",
                trust="trusted" if fact else "untrusted",
                version=recorded.isoformat() if recorded else "",
                text=memory.text,
                token_count=tokens,
                vector=vector,
                authority=settings.fact_authority
                if fact
                else settings.hypothesis_authority,
                effective_from=memory.valid_from,
                content_key=key,
                shingles=shingled,
                shingle_ids=_shingle_array(shingled),
                source_kind="memory",
                source_keys=(
                    memory.source,
                    f"{memory.source}:{getattr(memory, 'kind', served_as)}",
                ),
                source_id=getattr(memory, "source_id", None),
            )
        )
    return out


@lru_cache(maxsize=16_384)
def _memory_text(text: str, words: int) -> tuple[int, str, frozenset[int]]:
    """A memory text's tokens, content key and shingles: pure functions of the
    text, cached (a subject's memories come back on every pack for it; the
    token count alone was ~20 us a memory)."""
    return count_tokens(text), content_hash(text), shingles(text, words)


def _memory_reader(wh: Warehouse, policy: Policy) -> MemoryReader | None:
    """``serving.memories.memories`` on ``wh`` under the policy's memory
    settings (a one-off replica read per call; ``Context`` passes its own
    store's); None for a warehouse object without a lake (test doubles)."""
    if not hasattr(wh, "connection"):
        return None
    from ctxledger.serving.memories import memories  # noqa: PLC0415

    def read(tenant_id: str, subject_id: str, purpose: str, at: Any) -> MemoryView:
        return memories(wh, tenant_id, subject_id, purpose, at, settings=policy.memory)

    return read


# -------------------------------------------------------------------- items
@lru_cache(maxsize=8192)
def _envelope(
    text: str, item_id: str, kind: str, source: str, trust: str, version: str
) -> tuple[str, bool]:
    """An item's data envelope and ``instruction_like`` flag, cached like
    ``_chunk_shingles``: both depend on these fields alone, the same chunks
    come back for similar questions, and a manifest lists ~150 items (the
    injection patterns and the JSON encoding were ~2 ms of every pack)."""
    flagged = instruction_like(text)
    content = wrap_as_data(
        text,
        item_id=item_id,
        kind=kind,
        source=source,
        trust=trust,
        version=version,
        flagged=flagged,
    )
    return content, flagged


@lru_cache(maxsize=65_536)
def _flagged(text: str) -> bool:
    """``instruction_like(text)``, once per text (the same chunks come back
    for similar questions)."""
    return instruction_like(text)


def _guard(candidates: list[Candidate], settings: PackSettings) -> np.ndarray:
    """Each candidate's relevance floor, and its injection-risk penalty
    (``Candidate.risk``): text that reads as instructions is of high risk and
    served ``untrusted``; an item of high risk gets ``high_risk_min_relevance``
    as its floor, another ``untrusted`` one ``untrusted_min_relevance``, any
    other 0."""
    penalty = {
        "medium": settings.medium_risk_penalty,
        "high": settings.high_risk_penalty,
    }
    floor = settings.untrusted_min_relevance
    high_floor = settings.high_risk_min_relevance
    floors = np.zeros(len(candidates))
    for k, c in enumerate(candidates):
        risk = c.injection_risk or "low"
        if risk != "high" and _flagged(c.text):
            risk = "high"
        if risk == "high":
            c.trust = "untrusted"
        c.risk = penalty.get(risk, 0.0)
        if risk == "high":
            floors[k] = max(high_floor, floor)
        elif c.trust == "untrusted":
            floors[k] = floor
    return floors


def _item(
    c: Candidate,
    retrieved_at: datetime,
    scores: dict[str, float],
    mandatory: bool,
) -> dict[str, Any]:
    """``c`` as a ``ContextItem``'s data: its fields in the model's order,
    JSON-ready Python values (``manifest_data``)."""
    content, flagged = _envelope(
        c.text, c.item_id, c.kind, c.source, c.trust, c.version
    )
    return {
        "item_id": c.item_id,
        "kind": c.kind,
        "source": c.source,
        "trust": c.trust,
        "retrieved_at": retrieved_at,
        "version": c.version,
        "token_count": c.token_count,
        "content": content,
        "mandatory": mandatory,
        "instruction_like": flagged,
        "doc_id": c.doc_id,
        "section_path": list(c.section_path),
        "char_start": c.char_start,
        "char_end": c.char_end,
        "effective_from": _aware(c.effective_from),
        "chunk_ids": [c.item_id] if c.row is not None else [],
        "scores": scores,
        "source_id": c.source_id,
        "source_owner": c.source_owner,
        "registry_version": c.registry_version,
        "injection_risk": c.injection_risk,
    }


def _dropped(
    c: Candidate,
    retrieved_at: datetime,
    scores: dict[str, float],
    reason: str,
    *,
    duplicate_of: str | None = None,
    superseded_by: str | None = None,
    full: bool = False,
) -> dict[str, Any]:
    """A dropped candidate as a ``DroppedItem``'s data: its summary, and with
    ``full`` (``PackRequest.include_dropped_content``) the whole item."""
    return {
        "item_id": c.item_id,
        "kind": c.kind,
        "source": c.source,
        "token_count": c.token_count,
        "scores": scores,
        "reason": reason,
        "duplicate_of": duplicate_of,
        "superseded_by": superseded_by,
        "item": _item(c, retrieved_at, scores, False) if full else None,
    }


def _join(parts: list[Candidate]) -> Candidate:
    """Neighbouring chunks of one version (in reading order) as one candidate."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    text, tokens, key = _joined_text(tuple(p.text for p in parts))
    ids = [p.item_id for p in parts]
    path: list[str] = []  # the sections the parts share
    for titles in zip(*(p.section_path for p in parts), strict=False):
        if len(set(titles)) > 1:
            break
        path.append(titles[0])
    source = first.source.split("#", 1)[0] + ("#" + "/".join(path) if path else "")
    return Candidate(
        item_id=content_hash(ids, prefix="mrg_"),
        kind=first.kind,
        source=source,
        trust=first.trust,
        version=first.version,
        text=text,
        token_count=tokens,
        vector=first.vector,
        authority=first.authority,
        effective_from=first.effective_from,
        content_key=key,
        doc_id=first.doc_id,
        section_path=path,
        char_start=first.char_start,
        char_end=parts[-1].char_end,
        row=first.row,
        doc_version_id=first.doc_version_id,
        source_id=first.source_id,
        source_owner=first.source_owner,
        registry_version=first.registry_version,
        injection_risk=first.injection_risk,
    )


def _merge_selected(
    chosen: list[tuple[Candidate, dict[str, float], bool]],
    order: dict[str, Any] | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """Selected items, neighbouring chunks of one version joined in reading
    order; a joined item keeps the scores of its best part and its place."""
    if order is None:
        return [_item(c, now, s, m) for c, s, m in chosen]
    by_row = {c.row: (c, s, m) for c, s, m in chosen if c.row is not None}
    following, preceding = order["next"], order["prev"]
    out: list[dict[str, Any]] = []
    done: set[int] = set()
    for c, scores, mandatory in chosen:
        if c.row is None:
            out.append(_item(c, now, scores, mandatory))
            continue
        if c.row in done:
            continue
        start = c.row
        while int(preceding[start]) in by_row:
            start = int(preceding[start])
        run = [start]
        while int(following[run[-1]]) in by_row:
            run.append(int(following[run[-1]]))
        done.update(run)
        parts = [by_row[r][0] for r in run]
        joined = _join(parts)
        item = _item(joined, now, scores, any(by_row[r][2] for r in run))
        if len(parts) > 1:  # one part: ``_item`` gave it its own id already
            item["chunk_ids"] = [p.item_id for p in parts]
        out.append(item)
    return out


# ---------------------------------------------------------------- superseded
def _superseded(
    index: EvidenceIndex,
    order: dict[str, Any],
    request: PackRequest,
    policy: Policy,
    selected: list[Candidate],
    query_vec: np.ndarray,
    at: datetime,
) -> list[tuple[Candidate, str]]:
    """For each selected document, the best-matching chunk of the version it
    replaced, when the principal may see that version (its own ACL then)."""
    from ctxledger.serving.evidence_index import to_micros  # noqa: PLC0415

    out: list[tuple[Candidate, str]] = []
    seen: set[str] = set()
    t = to_micros(request.as_of)
    operators = policy.evidence.artifacts.operator_groups
    for c in selected:
        if c.kind != "evidence" or c.row is None or c.doc_id in seen:
            continue
        seen.add(c.doc_id or "")
        key = (request.tenant_id, c.doc_id)
        rows = order["by_doc"].get(key)
        if rows is None or not len(rows) or order["first_end"][key] > t:
            continue
        ended = rows[(index.eff_to[rows] <= t)]
        if not len(ended):
            continue
        last = ended[index.eff_to[ended] == index.eff_to[ended].max()]
        starts = index.eff_from[last]
        when = datetime.fromtimestamp(int(starts.max()) / 1_000_000, UTC)
        visible = index.scope(
            request.tenant_id, request.principal_groups, when, None, operators
        )
        last = last[np.isin(last, visible)]
        if not len(last):
            continue
        best = int(last[np.argmax(index.vectors[last] @ query_vec)])
        out.append(
            (
                _chunk_candidate(index, best, policy.evidence.pack),
                f"{c.doc_id}@{c.version}",
            )
        )
    return out


# ------------------------------------------------------------------ sources
def _registry(wh: Warehouse, policy: Policy) -> SourceRegistry:
    """The active source registry (``warehouse.sources``); the policy's own for
    a warehouse object without tables (test doubles)."""
    if not hasattr(wh, "existing_tables") or not hasattr(wh, "connection"):
        return policy.sources
    from ctxledger.warehouse.sources import active_registry  # noqa: PLC0415

    return active_registry(wh, policy)


def _stamp_source(
    c: Candidate, registry: SourceRegistry, settings: PackSettings
) -> SourceSpec:
    """Give ``c`` its source (id, owner, registry version, injection risk) and
    the source's authority (unless the item has its own): what depends on the
    item and the registry alone, not on the request."""
    from ctxledger.warehouse.sources import source_of  # noqa: PLC0415

    spec = registry.spec(
        source_of(registry, c.source_id, c.source_kind, *c.source_keys)
    )
    c.source_id = spec.source_id
    c.source_owner = spec.owner
    c.registry_version = registry.registry_version
    c.injection_risk = spec.injection_risk
    if spec.injection_risk == "high":
        c.trust = "untrusted"  # whatever the document said of itself
    if spec.authority is not None and not c.own_authority:
        c.authority = spec.authority
    c.spec = spec
    return spec


def _stamp(
    c: Candidate,
    registry: SourceRegistry,
    settings: PackSettings,
    at: datetime,
) -> SourceSpec:
    """Give ``c`` its source (``_stamp_source``, unless a stamped row under
    this registry already has it) and its freshness at ``at``."""
    spec = c.spec
    if spec is None or c.registry_version != registry.registry_version:
        spec = _stamp_source(c, registry, settings)
    half_life = spec.freshness_half_life_days or settings.freshness_half_life_days
    c.freshness = freshness(c.effective_from, at, half_life)
    return spec


def _apply_sources(
    candidates: list[Candidate],
    registry: SourceRegistry,
    settings: PackSettings,
    at: datetime,
    clearance: str,
) -> tuple[list[Candidate], list[tuple[Candidate, str]], int]:
    """``(kept, dropped with reason, withheld)``: items of an invalidated
    source are dropped ``source_invalidated``, items older than their
    source's TTL ``source_expired``; items of a source more sensitive than the
    principal's clearance are withheld (never listed: their text must not
    reach the manifest), counted only."""
    kept: list[Candidate] = []
    dropped: list[tuple[Candidate, str]] = []
    withheld = 0
    # Per call, by value: the freshness of each (date, half-life) and the
    # clearance of each source. Chunks of one document version share a date
    # and most candidates share a few sources, so ~160 candidates need a
    # few dozen ``freshness`` and ``above_clearance`` calls (the same
    # values: both are pure functions of these arguments).
    fresh: dict[tuple[datetime | None, float], float] = {}
    cleared: dict[int, bool] = {}
    version = registry.registry_version
    for c in candidates:
        spec = c.spec
        if spec is None or c.registry_version != version:
            spec = _stamp_source(c, registry, settings)
        half_life = spec.freshness_half_life_days or settings.freshness_half_life_days
        key = (c.effective_from, half_life)
        value = fresh.get(key)
        if value is None:
            value = fresh[key] = freshness(c.effective_from, at, half_life)
        c.freshness = value
        above = cleared.get(id(spec))
        if above is None:
            above = cleared[id(spec)] = above_clearance(spec.sensitivity, clearance)
        if above:
            withheld += 1
        elif spec.invalidated:
            dropped.append((c, "source_invalidated"))
        elif (
            spec.ttl_days is not None
            and c.effective_from is not None
            and (at - _aware(c.effective_from)).total_seconds() / 86_400.0  # type: ignore[operator]
            > spec.ttl_days
        ):
            dropped.append((c, "source_expired"))
        else:
            kept.append(c)
    return kept, dropped, withheld


# ----------------------------------------------------------------- greedy
def _stacked(candidates: list[Candidate]) -> np.ndarray:
    """The candidates' vectors as one float32 matrix, a row each (one array
    call: ``np.stack`` of ~160 rows took ~0.2 ms); its rows hold the values
    of each ``np.asarray(c.vector, dtype=np.float32)``."""
    if not candidates:
        return np.zeros((0, 1), dtype=np.float32)
    return np.array([c.vector for c in candidates], dtype=np.float32)


def _relevance(vectors: np.ndarray, query_vec: np.ndarray) -> list[float]:
    """Each row's cosine to the query (unit vectors), clipped to [0, 1]: one
    matrix-vector product for all candidates (166 ``dot`` calls were ~5% of
    a pack). Float32 throughout, like the stored vectors; a row's value may
    differ from its own ``dot`` in the last bit (another summation order)."""
    if not len(vectors):
        return []
    scores = vectors @ np.asarray(query_vec, dtype=np.float32)
    return [max(0.0, min(1.0, v)) for v in scores.tolist()]


class _Greedy:
    """Each candidate's redundancy against the selected items, kept up to date
    as items are selected: a selection updates every candidate's highest
    cosine (one matrix-vector product) and shingle overlap (through an
    inverted list of shingles), so utilities are one vector expression per
    step and a pack over hundreds of candidates stays in milliseconds."""

    def __init__(
        self,
        candidates: list[Candidate],
        settings: PackSettings,
        vectors: np.ndarray | None = None,
    ):
        self.candidates = candidates
        self.settings = settings
        n = len(candidates)
        #: the candidates' vectors as float32 rows (``_stacked``; ``pack``
        #: passes the matrix it scored relevance with)
        self.vectors = _stacked(candidates) if vectors is None else vectors
        values = [c.relevance * c.authority * c.freshness for c in candidates]
        self.base = np.array(values, dtype=float)
        #: ``base`` less each candidate's injection-risk penalty (fixed):
        #: what redundancy is taken from (``base`` itself when no risk)
        self.risk = np.array([c.risk for c in candidates], dtype=float)
        self._risky = bool(self.risk.any())
        self.net = self.base - self.risk if self._risky else self.base
        # the fixed parts of every candidate's ``ContextScores``, rounded at
        # once (``round6``: the same values as ``round(x, 6)`` one by one)
        parts = round6(
            [c.relevance for c in candidates]
            + [c.authority for c in candidates]
            + [c.freshness for c in candidates]
            + values
        )
        self._fixed = list(
            zip(
                parts[:n],
                parts[n : 2 * n],
                parts[2 * n : 3 * n],
                parts[3 * n :],
                strict=True,
            )
        )
        self._values = values
        self.shared = np.zeros(n)
        self.max_cos = np.full(n, -1.0)
        # Shingles as small integer ids (one sort of every candidate's
        # hashes). A shingle only one candidate holds counts for that
        # candidate alone, and it is new when that candidate is selected
        # (nobody else can have brought it in): ``_solo`` counts them. For
        # the ids two or more hold, ``holders`` has a row saying which, so a
        # selection adds ``holders[its new shared rows].sum(0)`` to
        # ``shared``; ``_rows`` lists each candidate's shared rows
        # (``_rows[ptr[i]:ptr[i + 1]]``) and ``seen_rows`` says which rows
        # the selected text holds. The matrix stays small (most shingles of
        # a pack are in one candidate only).
        arrays = [
            _shingle_array(c.shingles) if c.shingle_ids is None else c.shingle_ids
            for c in candidates
        ]
        lengths = [len(a) for a in arrays]
        # ``max(1, len(c.shingles))``: an array holds its set's hashes
        self.sizes = np.maximum(np.array(lengths, dtype=float), 1.0)
        hashes = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        _, ids, counts = np.unique(hashes, return_inverse=True, return_counts=True)
        many = counts > 1
        rows = np.where(many, np.cumsum(many) - 1, -1)[ids]
        owners = np.repeat(np.arange(n), lengths)
        in_many = rows >= 0
        # the shared rows, still grouped by candidate (``hashes`` is)
        self._rows = rows[in_many]
        held = np.bincount(owners[in_many], minlength=n)
        self.ptr = [0, *itertools.accumulate(held.tolist())]
        self.holders = np.zeros((int(many.sum()), n), dtype=bool)
        self.holders[self._rows, owners[in_many]] = True
        self.seen_rows = np.zeros(len(self.holders), dtype=bool)
        self._solo = (np.asarray(lengths, dtype=np.int64) - held).tolist()
        #: Each selection's cosines to every candidate, in selection order
        #: (``closest``: which selection gave a candidate its highest).
        self._sims: list[np.ndarray] = []
        self._added = [False] * n
        self._sizes_of = self.sizes.tolist()
        #: ``_penalty_of`` per candidate since the last selection: the lazy
        #: rounds ask for a candidate's utility, then its decision records
        #: the same penalty (~320 asks a pack, about half of them repeats).
        self._memo: dict[int, tuple[float, bool]] = {}
        self.selected: list[int] = []
        #: ``(penalty, near_duplicate)`` of every candidate against the
        #: selection so far; None after a selection (``_now``).
        self._current: tuple[np.ndarray, np.ndarray] | None = None
        self._weighted = settings.redundancy_weight * self.base
        # Python floats of the same values, for one candidate at a time
        # (``utility_of``, ``penalty``)
        self._base_of = self.net.tolist()
        self._weighted_of = self._weighted.tolist()
        #: Utilities only fall as items are selected (``LazyScorer``): the
        #: shared shingles and closest cosines only grow, and with no
        #: negative ``weight x base`` the penalty grows with them.
        self.monotone = bool((self._weighted >= 0).all())

    @property
    def seen(self) -> set[int]:
        """The shingles of the selected text (what ``scores_outside`` reads,
        for a superseded item, once or twice a pack)."""
        out: set[int] = set()
        for i in self.selected:
            out |= self.candidates[i].shingles
        return out

    def add(self, i: int) -> None:
        """Item ``i`` was selected: update every candidate's redundancy."""
        self._current = None
        self._memo = {}
        if not self._added[i]:  # its solo shingles: new, and its own
            self._added[i] = True
            self.shared[i] += self._solo[i]
        rows = self._rows[self.ptr[i] : self.ptr[i + 1]]
        rows = rows[~self.seen_rows.take(rows)]
        if len(rows):
            # every candidate holding a new shared shingle gains one
            self.seen_rows[rows] = True
            self.shared += self.holders.take(rows, axis=0).sum(axis=0)
        # OpenBLAS's sgemv of the whole matrix, as before (its bits decide
        # near-duplicates); ``fmax`` keeps the highest like ``sims >
        # max_cos`` did (a NaN never replaces a value)
        sims = self.vectors @ self.vectors[i]
        np.fmax(self.max_cos, sims, out=self.max_cos)
        self._sims.append(sims)
        self.selected.append(i)

    @property
    def closest(self) -> np.ndarray:
        """Per candidate, the selected index that gave it its highest cosine
        (the first selection reaching it), -1 while none beat -1.0."""
        out = np.full(len(self.candidates), -1, dtype=np.int64)
        for k in range(len(self._sims) - 1, -1, -1):
            out[self._sims[k] == self.max_cos] = self.selected[k]
        out[self.max_cos == -1.0] = -1
        return out

    def _closest_of(self, i: int) -> int:
        """``closest[i]`` alone."""
        best = self.max_cos[i]
        for k, sims in enumerate(self._sims):
            if sims[i] == best:
                return self.selected[k]
        return -1

    def _now(self) -> tuple[np.ndarray, np.ndarray]:
        """``(penalty, near_duplicate)`` of every candidate now, computed once
        per selection: the loop ranks by it and every decision until the next
        selection reads its penalty from it (element for element the same
        float operations as ``redundancy``: ``weight x base`` first, then
        the factor)."""
        if self._current is None:
            s = self.settings
            shared = self.shared / self.sizes
            near = shared >= s.near_duplicate_overlap
            near |= self.max_cos >= s.near_duplicate_cosine
            if s.redundancy_weight == 0.0:
                self._current = np.zeros_like(self.base), np.zeros_like(near)
            else:
                np.copyto(shared, 1.0, where=near)
                self._current = self._weighted * shared, near
        return self._current

    def utilities(self) -> tuple[np.ndarray, np.ndarray]:
        """Utility (rounded like the manifest) and near-duplicate flag of all."""
        penalty, near = self._now()
        return (self.net - penalty).round(6), near

    def penalty(self, i: int) -> float:
        """Candidate ``i``'s redundancy penalty now (``redundancy``)."""
        return self._penalty_of(i)[0]

    def _penalty_of(self, i: int) -> tuple[float, bool]:
        """``_now()``'s ``(penalty, near_duplicate)`` at ``i`` alone, in
        Python floats: the same operations on the same values (share, the
        two thresholds, ``weight x base`` times the share or 1.0)."""
        found = self._memo.get(i)
        if found is not None:
            return found
        s = self.settings
        if s.redundancy_weight == 0.0:
            return 0.0, False
        shared = float(self.shared[i]) / self._sizes_of[i]
        near = (
            shared >= s.near_duplicate_overlap
            or float(self.max_cos[i]) >= s.near_duplicate_cosine
        )
        found = self._memo[i] = (
            self._weighted_of[i] * (1.0 if near else shared),
            near,
        )
        return found

    def utility_of(self, i: int) -> tuple[float, bool]:
        """``utilities()`` at ``i`` alone (``LazyScorer``): ``base -
        penalty`` rounded as ``ndarray.round(6)`` rounds (times 1e6, to the
        nearest integer, ties to even, divided by 1e6)."""
        penalty, near = self._penalty_of(i)
        return round((self._base_of[i] - penalty) * 1e6) / 1e6, near

    def closest_selected(self, i: int) -> str | None:
        """The selected item candidate ``i`` repeats most, now: by cosine when
        that made it a near-duplicate, else by shared shingles (None unless
        it is a near-duplicate)."""
        if not self._penalty_of(i)[1]:
            return None
        if self.max_cos[i] >= self.settings.near_duplicate_cosine:
            return self.candidates[self._closest_of(i)].item_id
        mine = self.candidates[i].shingles
        return max(
            (self.candidates[j] for j in self.selected),
            key=lambda sel: len(sel.shingles & mine),
        ).item_id

    def scores_of(
        self, rows: list[int], penalties: list[float]
    ) -> list[dict[str, float]]:
        """``ContextScores`` data of each decided candidate at the penalty it
        was decided at: the fixed parts rounded once (``_fixed``), the
        penalised ones in one array pass. ``np.round``, not Python's
        ``round``: the penalty is a numpy float, and ``round`` of a numpy
        float is numpy's rounding (they differ in ~1% of the last digits), so
        the values are those per-decision ``round`` calls gave."""
        if not rows:
            return []
        p = np.asarray(penalties, dtype=np.float64)
        values = np.asarray(self._values, dtype=np.float64)[rows]
        if self._risky:
            values = values - self.risk[rows]
            hit = ((p != 0) | (self.risk[rows] != 0)).tolist()
        else:
            hit = (p != 0).tolist()
        redundancy = np.round(p, 6).tolist()
        utility = np.round(values - p, 6).tolist()
        raw = p.tolist()
        out = []
        for k, i in enumerate(rows):
            relevance, authority, freshness, base = self._fixed[i]
            out.append(
                {
                    "relevance": relevance,
                    "authority": authority,
                    "freshness": freshness,
                    "redundancy": redundancy[k] if hit[k] else raw[k],
                    "utility": utility[k] if hit[k] else base,
                }
            )
        return out

    def _scores(self, c: Candidate, penalty: float) -> dict[str, float]:
        """``ContextScores`` data of ``c`` at ``penalty`` (Python floats)."""
        base = c.relevance * c.authority * c.freshness
        return {
            "relevance": round(c.relevance, 6),
            "authority": round(c.authority, 6),
            "freshness": round(c.freshness, 6),
            "redundancy": round(penalty, 6),
            "utility": round(base - c.risk - penalty, 6),
        }

    def scores_outside(self, c: Candidate) -> dict[str, float]:
        """Scores of an item that was never a candidate (a superseded chunk)."""
        shared = overlap(c.shingles, self.seen)
        cosine = -1.0
        if self.selected:
            picked = self.vectors[self.selected]
            cosine = float(np.max(picked @ np.asarray(c.vector, dtype=np.float32)))
        base = c.relevance * c.authority * c.freshness
        penalty, _ = redundancy(base, shared, cosine, self.settings)
        return self._scores(c, penalty)


# --------------------------------------------------------------------- pack
def _manifest_id(
    request: dict[str, Any], selected: list[str], dropped: list[tuple[str, str]]
) -> str:
    """``content_hash(request, selected, dropped, prefix="ctx_")``, with the
    canonical JSON written by orjson when it is installed (the serve extra):
    for these values (strings, bools, None, 64-bit integers, lists and
    string-keyed dicts; no floats) its compact, key-sorted UTF-8 is the
    same text ``canonical_json`` writes (``tests/unit/evidence/
    test_pack_fast_paths.py``), in ~3 us instead of ~40 us. Anything orjson
    refuses (a larger integer, a lone surrogate) takes ``content_hash``."""
    parts = [request, selected, dropped]
    if _orjson is not None:
        try:
            text = _orjson.dumps(parts, option=_orjson.OPT_SORT_KEYS)
        except TypeError:
            pass
        else:
            return "ctx_" + hashlib.sha256(text).hexdigest()[:32]
    return content_hash(*parts, prefix="ctx_")


def manifest_data(
    wh: Warehouse,
    request: PackRequest,
    policy: Policy,
    registry: SourceRegistry | None = None,
    *,
    memories: MemoryReader | None = None,
) -> dict[str, Any]:
    """``pack_context``'s manifest as the data of a ``ContextManifest``: plain
    dicts and lists in the models' field order, JSON-ready Python values,
    not validated.

    The HTTP server serialises this as it is (``orjson``: the same bytes as
    the model's ``model_dump_json``, ``tests/unit/evidence/
    test_manifest_data.py``), because validating ~160 items, their scores and
    the manifest into pydantic objects and dumping them again was ~1 ms of a
    ~6 ms /pack; ``pack_context`` validates it into the model. Every value
    comes from validated inputs (the request, the index, the registry)."""
    from ctxledger.serving.evidence_search import embed_query  # noqa: PLC0415

    settings = policy.evidence.pack
    now = _aware(request.now) or datetime.now(UTC)
    at = _aware(request.as_of) or now
    budget = request.budget_tokens
    if budget < 0:
        raise PackError("window_tokens is smaller than max output plus overhead")
    notes: list[str] = []
    query_vec = embed_query(policy.evidence.embedding, request.query)
    candidates: list[Candidate] = []
    index = None
    registry = registry or _registry(wh, policy)
    if request.include_evidence:
        index, found = _evidence_candidates(wh, request, policy, query_vec, registry)
        pending = [c for c in found if not index.has_vector[c.row]]
        if pending:
            # deferred embeddings: chunks waiting for ``ctxledger embed`` get a
            # vector for this request (cached), so relevance is not 0 for them
            vectors = _text_vectors(policy, [c.text for c in pending])
            for c, vector in zip(pending, vectors, strict=True):
                c.vector = vector
            notes.append(
                f"{len(pending)} chunk(s) without a stored vector were embedded "
                "for this request"
            )
        candidates += found
        operators = set(policy.evidence.artifacts.operator_groups)
        if not request.subject_id and not operators & set(request.principal_groups):
            notes.append("tool artifacts skipped: the request names no subject")
    candidates += _memory_candidates(wh, request, policy, notes, memories)
    clearance = registry.clearance_of(request.principal_groups)
    vectors = _stacked(candidates)
    for c, relevance in zip(candidates, _relevance(vectors, query_vec), strict=True):
        c.relevance = relevance
    kept, source_drops, withheld = _apply_sources(
        candidates, registry, settings, at, clearance
    )
    if len(kept) < len(candidates):  # the matrix keeps the kept rows only
        ids = {id(c) for c in kept}
        vectors = vectors[[k for k, c in enumerate(candidates) if id(c) in ids]]
    candidates = kept
    floors = _guard(candidates, settings)
    if withheld:
        notes.append(
            f"{withheld} item(s) withheld: their source is above the "
            f"principal's sensitivity clearance ({clearance})"
        )

    by_id = {c.item_id: c for c in candidates}
    missing = [m for m in request.mandatory if m not in by_id]
    if missing:
        raise PackError(f"mandatory items not found in scope: {', '.join(missing)}")
    order = _reading_order(index) if index is not None and index.n else None
    state = _Greedy(candidates, settings, vectors)
    chosen_rows: dict[int, Candidate] = {}
    chosen_keys: dict[str, str] = {}
    # Decisions are recorded as indices and the redundancy penalty they were
    # taken at; their scores and manifest entries are built once the loop is
    # done (``_Greedy.scores_of``: one array pass instead of ~165 scalar ones).
    picks: list[tuple[int, bool]] = []
    drops: list[tuple[int, str, str | None]] = []
    decided: list[int] = []
    penalties: list[float] = []

    # each candidate's neighbour rows in reading order (-1: none), as Python
    # ints read once: ``cost`` asks for them ~125 times a pack
    neighbours: list[tuple[int, int]] = []
    if order is not None:
        at_rows = np.array(
            [-1 if c.row is None else c.row for c in candidates], dtype=np.int64
        )
        neighbours = list(
            zip(
                order["prev"][at_rows].tolist(),
                order["next"][at_rows].tolist(),
                strict=True,
            )
        )

    def cost(i: int) -> int:
        """Candidate ``i``'s tokens, plus what each join with a selected
        neighbour adds (the blank line is one cl100k token, or none when it
        merges into the text beside it; tokens never span the blank line,
        so pairs suffice)."""
        c = candidates[i]
        if order is None or c.row is None:
            return c.token_count
        extra = 0
        before, after = neighbours[i]
        other = chosen_rows.get(before)
        if other is not None:
            extra += _joined_tokens(other.text, c.text) - other.token_count
            extra -= c.token_count
        other = chosen_rows.get(after)
        if other is not None:
            extra += _joined_tokens(c.text, other.text) - c.token_count
            extra -= other.token_count
        return c.token_count + extra

    def select(i: int, mandatory: bool) -> None:
        # called by ``greedy_select`` before the scorer (``state``) moves on
        c = candidates[i]
        picks.append((i, mandatory))
        decided.append(i)
        penalties.append(state.penalty(i))
        chosen_keys[c.content_key] = c.item_id
        if c.row is not None:
            chosen_rows[c.row] = c

    def drop(i: int, reason: str) -> None:
        c = candidates[i]
        duplicate_of = None
        if reason == "duplicate":
            duplicate_of = chosen_keys[c.content_key]
        elif reason == "near_duplicate":
            duplicate_of = state.closest_selected(i)
        drops.append((i, reason, duplicate_of))
        decided.append(i)
        penalties.append(state.penalty(i))

    positions = {c.item_id: i for i, c in enumerate(candidates)}
    # the selection loop is the pure one (``serving.context_pack``); this
    # path adds text redundancy (``state``) and the cost of joined neighbours
    greedy_select(
        candidates,
        budget,
        state,
        mandatory=[positions[m] for m in request.mandatory],
        min_relevance=settings.min_relevance,
        floors=floors,
        cost=cost,
        on_select=select,
        on_drop=drop,
        budget_detail=(
            f" (window {request.window_tokens} - output "
            f"{request.max_output_tokens} - overhead {request.overhead_tokens})"
        ),
    )
    scored = dict(zip(decided, state.scores_of(decided, penalties), strict=True))
    chosen = [(candidates[i], scored[i], mandatory) for i, mandatory in picks]
    selected = _merge_selected(chosen, order, now)
    used = sum(i["token_count"] for i in selected)
    if used > budget:  # not seen; the parts alone always fit
        selected = _merge_selected(chosen, None, now)
        used = sum(i["token_count"] for i in selected)
    joined_into = {part: i["item_id"] for i in selected for part in i["chunk_ids"]}
    full = request.include_dropped_content
    dropped = [
        _dropped(c, now, state._scores(c, 0.0), reason, full=full)
        for c, reason in source_drops
    ]
    for i, reason, duplicate_of in drops:
        dropped.append(
            _dropped(
                candidates[i],
                now,
                scored[i],
                reason,
                duplicate_of=joined_into.get(duplicate_of, duplicate_of),
                full=full,
            )
        )
    if index is not None and order is not None:
        for old, current in _superseded(
            index, order, request, policy, [c for c, _, _ in chosen], query_vec, at
        ):
            if old.item_id in by_id:
                continue
            old.relevance = max(0.0, min(1.0, float(query_vec @ old.vector)))
            _stamp(old, registry, settings, at)
            _guard([old], settings)
            dropped.append(
                _dropped(
                    old,
                    now,
                    state.scores_outside(old),
                    "superseded",
                    superseded_by=current,
                    full=full,
                )
            )
    manifest_id = _manifest_id(
        # the decision, not the view: asking for dropped texts keeps the id
        request.model_dump(mode="json", exclude={"include_dropped_content"}),
        [i["item_id"] for i in selected],
        [(d["item_id"], d["reason"]) for d in dropped],
    )
    return {
        "manifest_id": manifest_id,
        "tenant_id": request.tenant_id,
        "subject_id": request.subject_id,
        "purpose": request.purpose,
        "principal_groups": list(request.principal_groups),
        "query": request.query,
        "created_at": now,
        "as_of": _aware(request.as_of),
        "window_tokens": request.window_tokens,
        "max_output_tokens": request.max_output_tokens,
        "overhead_tokens": request.overhead_tokens,
        "budget_tokens": budget,
        "used_tokens": used,
        "registry_version": registry.registry_version,
        "selected": selected,
        "dropped": dropped,
        "notes": notes,
    }


def pack_context(
    wh: Warehouse,
    request: PackRequest,
    policy: Policy,
    registry: SourceRegistry | None = None,
    *,
    memories: MemoryReader | None = None,
) -> ContextManifest:
    """Select and explain the context for ``request`` (see the module docstring).

    ``registry``: value items with this source registry instead of the active
    one (``warehouse.sources.active_registry``): what-if runs and ablations.
    ``memories``: reads the subject's memories (``Context``: from its replica
    store; default: ``serving.memories.memories`` on ``wh``).
    """
    return ContextManifest.model_validate(
        manifest_data(wh, request, policy, registry, memories=memories)
    )


def pack(
    wh: Warehouse,
    request: PackRequest,
    *,
    policy: Policy | None = None,
    registry: SourceRegistry | None = None,
    memories: MemoryReader | None = None,
) -> ContextManifest:
    """Select context items for ``request`` (see ``pack_context``);
    ``registry``: the source registry to value items with (default: the
    warehouse's active one, read per call; a server reads it once per
    snapshot); ``memories``: see ``pack_context``."""
    from ctxledger.warehouse.evidence_api import _default_policy  # noqa: PLC0415

    return pack_context(
        wh, request, policy or _default_policy(), registry, memories=memories
    )


def pack_data(
    wh: Warehouse,
    request: PackRequest,
    *,
    policy: Policy | None = None,
    registry: SourceRegistry | None = None,
    memories: MemoryReader | None = None,
) -> dict[str, Any]:
    """``pack`` as the manifest's unvalidated data (``manifest_data``): what
    the HTTP server serialises."""
    from ctxledger.warehouse.evidence_api import _default_policy  # noqa: PLC0415

    return manifest_data(
        wh, request, policy or _default_policy(), registry, memories=memories
    )


__all__ = [
    "MemoryReader",
    "PackError",
    "freshness",
    "overlap",
    "manifest_data",
    "pack",
    "pack_context",
    "pack_data",
    "redundancy",
    "shingles",
]
