"""``pack``: choose what goes into a model's context window, and say why.

Candidates are the request's in-scope evidence (hybrid search, tenant and ACL
filters first) and the subject's memories for the purpose (facts and
hypotheses, through ``Warehouse.memories``). Each is valued

    utility = relevance x authority x freshness - redundancy

* relevance: cosine similarity of the item to the query, clipped to [0, 1];
* authority: the document's own ``authority``, else by trust and kind
  (policy ``evidence.pack``); memories by how they are served;
* freshness: ``0.5 ** (age_days / freshness_half_life_days)``, age from the
  item's effective date to ``as_of`` (or now);
* redundancy: ``redundancy_weight x max(0, (c - 0.5) / 0.5)`` where ``c`` is the
  highest cosine similarity to an item already selected (near-duplicates cost
  almost all of their value; items on the same topic only a little).

Mandatory items go in first (``PackError`` when they do not fit the budget);
then, greedily, the remaining item of highest utility: an item whose utility is
not positive is dropped (``non_positive_utility``), one that does not fit the
remaining budget is dropped (``over_budget``), an exact duplicate of a selected
text is dropped (``duplicate``). Out-of-scope items never become candidates, so
they are never listed. Every item's content is a data envelope
(``pipelines.evidence.envelope``): retrieved text is never instructions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from pipelines.evidence.envelope import instruction_like, wrap_as_data
from pipelines.ingest.tokens import count_tokens
from schemas import content_hash
from schemas.evidence import (
    ContextItem,
    ContextManifest,
    ContextScores,
    DroppedItem,
    PackRequest,
)

if TYPE_CHECKING:
    from schemas.policy import Policy
    from warehouse.catalog import Warehouse

#: Cosine similarity below which two items do not count as redundant at all.
REDUNDANCY_FLOOR = 0.5


class PackError(ValueError):
    """The request cannot be packed (mandatory items do not fit or are unknown)."""


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


def redundancy(vector: np.ndarray, selected: list[np.ndarray], weight: float) -> float:
    """Penalty for overlap with the items already selected (see module doc)."""
    if not selected or weight == 0.0:
        return 0.0
    similarity = max(float(vector @ other) for other in selected)
    return weight * max(0.0, (similarity - REDUNDANCY_FLOOR) / (1 - REDUNDANCY_FLOOR))


def _evidence_candidates(
    wh: Warehouse,
    request: PackRequest,
    policy: Policy,
    query_vec: np.ndarray,
    retrieved_at: datetime,
) -> list[Candidate]:
    from warehouse.evidence_api import load_index  # noqa: PLC0415

    settings = policy.evidence
    index = load_index(wh, settings.search)
    n = request.candidates or settings.pack.candidates
    ranked = index.search(
        request.tenant_id,
        request.principal_groups,
        request.query,
        query_vec,
        n,
        request.as_of,
        n,
    )
    rows = [r.row for r in ranked]
    if request.mandatory:
        scope = set(
            index.scope(
                request.tenant_id, request.principal_groups, request.as_of
            ).tolist()
        )
        for item_id in request.mandatory:
            row = index.row_of(item_id)
            if row is None:
                continue  # maybe a memory id
            if row not in scope:
                raise PackError(f"mandatory item {item_id} is not in the scope")
            if row not in rows:
                rows.append(row)
    out = []
    for row in rows:
        meta = index.row(row)
        if meta["kind"] == "tool_artifact":
            authority = settings.pack.artifact_authority
        elif meta["authority"] is not None:
            authority = float(meta["authority"])
        elif meta["trust"] == "trusted":
            authority = settings.pack.trusted_authority
        else:
            authority = settings.pack.untrusted_authority
        section = "/".join(meta["section_path"])
        out.append(
            Candidate(
                item_id=meta["chunk_id"],
                kind="evidence" if meta["kind"] == "document" else "tool_artifact",
                source=f"{meta['kind']}:{meta['doc_id']}@{meta['doc_version']}"
                + (f"#{section}" if section else ""),
                trust=meta["trust"],
                version=meta["doc_version"],
                text=meta["text"],
                token_count=int(meta["token_count"]),
                vector=index.vectors[row],
                authority=authority,
                effective_from=meta["effective_from"],
                content_key=meta["content_hash"],
                doc_id=meta["doc_id"],
                section_path=list(meta["section_path"]),
                char_start=meta["char_start"],
                char_end=meta["char_end"],
            )
        )
    return out


def _memory_candidates(
    wh: Warehouse, request: PackRequest, policy: Policy, notes: list[str]
) -> list[Candidate]:
    if not (request.include_memories and request.subject_id and request.purpose):
        if request.include_memories:
            notes.append("memories skipped: the request names no subject or purpose")
        return []
    getter = getattr(wh, "memories", None)
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
    from warehouse.evidence_api import embedder  # noqa: PLC0415

    vectors = embedder(policy.evidence.embedding).encode([m.text for m, _ in items])
    settings = policy.evidence.pack
    out = []
    for (memory, served_as), vector in zip(items, vectors, strict=True):
        fact = served_as == "fact"
        recorded = _aware(memory.recorded_at)
        out.append(
            Candidate(
                item_id=memory.memory_id,
                kind=served_as,
                source=f"memory:{memory.source}",
                trust="trusted" if fact else "untrusted",
                version=recorded.isoformat() if recorded else "",
                text=memory.text,
                token_count=count_tokens(memory.text),
                vector=vector,
                authority=settings.fact_authority
                if fact
                else settings.hypothesis_authority,
                effective_from=memory.valid_from,
                content_key=content_hash(memory.text),
            )
        )
    return out


def _item(
    c: Candidate,
    retrieved_at: datetime,
    scores: ContextScores,
    mandatory: bool,
) -> ContextItem:
    flagged = instruction_like(c.text)
    return ContextItem(
        item_id=c.item_id,
        kind=c.kind,  # type: ignore[arg-type]
        source=c.source,
        trust=c.trust,  # type: ignore[arg-type]
        retrieved_at=retrieved_at,
        version=c.version,
        token_count=c.token_count,
        content=wrap_as_data(
            c.text,
            item_id=c.item_id,
            kind=c.kind,
            source=c.source,
            trust=c.trust,
            version=c.version,
            flagged=flagged,
        ),
        mandatory=mandatory,
        instruction_like=flagged,
        doc_id=c.doc_id,
        section_path=c.section_path,
        char_start=c.char_start,
        char_end=c.char_end,
        effective_from=_aware(c.effective_from),
        scores=scores,
    )


def pack_context(
    wh: Warehouse, request: PackRequest, policy: Policy
) -> ContextManifest:
    """Select and explain the context for ``request`` (see the module docstring)."""
    from warehouse.evidence_api import embedder  # noqa: PLC0415

    settings = policy.evidence.pack
    now = _aware(request.now) or datetime.now(UTC)
    at = _aware(request.as_of) or now
    budget = request.budget_tokens
    if budget < 0:
        raise PackError("window_tokens is smaller than max output plus overhead")
    notes: list[str] = []
    query_vec = embedder(policy.evidence.embedding).encode([request.query])[0]
    candidates: list[Candidate] = []
    if request.include_evidence:
        candidates += _evidence_candidates(wh, request, policy, query_vec, now)
    candidates += _memory_candidates(wh, request, policy, notes)
    for c in candidates:
        c.relevance = max(0.0, min(1.0, float(query_vec @ c.vector)))
        c.freshness = freshness(c.effective_from, at, settings.freshness_half_life_days)

    by_id = {c.item_id: c for c in candidates}
    missing = [m for m in request.mandatory if m not in by_id]
    if missing:
        raise PackError(f"mandatory items not found in scope: {', '.join(missing)}")
    selected: list[ContextItem] = []
    dropped: list[DroppedItem] = []
    chosen_vectors: list[np.ndarray] = []
    chosen_keys: set[str] = set()
    used = 0

    def scores_of(c: Candidate) -> ContextScores:
        penalty = redundancy(c.vector, chosen_vectors, settings.redundancy_weight)
        base = c.relevance * c.authority * c.freshness
        return ContextScores(
            relevance=round(c.relevance, 6),
            authority=round(c.authority, 6),
            freshness=round(c.freshness, 6),
            redundancy=round(penalty, 6),
            utility=round(base - penalty, 6),
        )

    mandatory = [by_id[m] for m in dict.fromkeys(request.mandatory)]
    need = sum(c.token_count for c in mandatory)
    if need > budget:
        raise PackError(
            f"mandatory items need {need} tokens but the budget is {budget} "
            f"(window {request.window_tokens} - output {request.max_output_tokens} "
            f"- overhead {request.overhead_tokens})"
        )
    for c in mandatory:
        selected.append(_item(c, now, scores_of(c), True))
        chosen_vectors.append(c.vector)
        chosen_keys.add(c.content_key)
        used += c.token_count
    remaining = [
        c for c in candidates if c.item_id not in {m.item_id for m in mandatory}
    ]
    while remaining:
        scored = [(scores_of(c), c) for c in remaining]
        scored.sort(key=lambda sc: (-sc[0].utility, sc[1].item_id))
        best_scores, best = scored[0]
        remaining.remove(best)
        if best.content_key in chosen_keys:
            dropped.append(
                DroppedItem(
                    item=_item(best, now, best_scores, False), reason="duplicate"
                )
            )
            continue
        if best_scores.utility <= 0:
            for sc, c in scored:  # utilities only fall as more is selected
                dropped.append(
                    DroppedItem(
                        item=_item(c, now, sc, False), reason="non_positive_utility"
                    )
                )
            break
        if used + best.token_count > budget:
            dropped.append(
                DroppedItem(
                    item=_item(best, now, best_scores, False), reason="over_budget"
                )
            )
            continue
        selected.append(_item(best, now, best_scores, False))
        chosen_vectors.append(best.vector)
        chosen_keys.add(best.content_key)
        used += best.token_count
    manifest_id = content_hash(
        request.model_dump(mode="json"),
        [i.item_id for i in selected],
        [(d.item.item_id, d.reason) for d in dropped],
        prefix="ctx_",
    )
    return ContextManifest(
        manifest_id=manifest_id,
        tenant_id=request.tenant_id,
        subject_id=request.subject_id,
        purpose=request.purpose,
        principal_groups=list(request.principal_groups),
        query=request.query,
        created_at=now,
        as_of=_aware(request.as_of),
        window_tokens=request.window_tokens,
        max_output_tokens=request.max_output_tokens,
        overhead_tokens=request.overhead_tokens,
        budget_tokens=budget,
        used_tokens=used,
        selected=selected,
        dropped=dropped,
        notes=notes,
    )


__all__ = ["PackError", "freshness", "pack_context", "redundancy"]
