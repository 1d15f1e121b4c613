"""Evidence search for context builders: the in-process index of a snapshot and
the hybrid search over it (moved from ``warehouse.evidence_api``, which keeps the
pipeline's lookups, the SQL macros and the embedder).

``search_evidence`` ranks only what the principal may see: tenant, ACL groups,
subject (tool artifacts) and validity at ``as_of`` filter first, exactly as the
SQL macros do (``warehouse.evidence_api.install_macros``). The index of a
snapshot (``load_index``) is built once per process and kept for the two most
recent snapshots; query vectors are cached per text (``embed_query``).
``ctxledger.Context`` calls these on its current snapshot.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxledger.schemas.evidence import EMBEDDING_DIM, SearchHit, SearchSettings
from ctxledger.serving.evidence_index import EvidenceIndex
from ctxledger.warehouse.evidence_api import (
    _default_policy,
    _has_subjects,
    embedder,
    install_macros,
)

if TYPE_CHECKING:
    from ctxledger.schemas.policy import Policy
    from ctxledger.warehouse.catalog import Warehouse

_INDEXES: OrderedDict[tuple[Any, ...], EvidenceIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()


#: Query vectors by (model settings, query text): a context builder asks the
#: same questions again (a retry, the next turn, several users of one
#: assistant), and a MiniLM query embedding is most of a warm pack (measured
#: 5-11 ms of ~20 ms on 2 cores). A vector is a pure function of the text.
_QUERY_VECTORS: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_QUERY_LOCK = threading.Lock()
QUERY_CACHE_SIZE = 4096


def embed_query(settings, query: str) -> np.ndarray:
    """``query``'s vector (read-only), from the per-process cache or the model."""
    key = (settings.model_dump_json(), query)
    with _QUERY_LOCK:
        vector = _QUERY_VECTORS.get(key)
        if vector is not None:
            _QUERY_VECTORS.move_to_end(key)
            return vector
    vector = np.array(embedder(settings).encode([query])[0], dtype=np.float32)
    vector.flags.writeable = False
    with _QUERY_LOCK:
        _QUERY_VECTORS[key] = vector
        while len(_QUERY_VECTORS) > QUERY_CACHE_SIZE:
            _QUERY_VECTORS.popitem(last=False)
    return vector


def _snapshot_of(wh: Warehouse) -> int:
    return wh.snapshot if wh.snapshot is not None else wh.current_snapshot()


def load_index(wh: Warehouse, settings: SearchSettings) -> EvidenceIndex:
    """The search index of ``wh``'s snapshot (built once per process)."""
    snapshot = _snapshot_of(wh)
    key = (wh.catalog, wh.data_path, snapshot, settings.model_dump_json())
    with _INDEX_LOCK:
        if key in _INDEXES:
            _INDEXES.move_to_end(key)
            return _INDEXES[key]
    index = build_index(wh, settings, snapshot)
    with _INDEX_LOCK:
        _INDEXES[key] = index
        while len(_INDEXES) > 2:
            _INDEXES.popitem(last=False)
    return index


def build_index(
    wh: Warehouse, settings: SearchSettings, snapshot: int | None = None
) -> EvidenceIndex:
    """Read every chunk version with its validity and build the index."""
    import pyarrow as pa  # noqa: PLC0415

    con = wh.connection()
    install_macros(con)
    subject = "c.subject_id" if _has_subjects(con) else "NULL::VARCHAR"
    if "evidence_chunks" not in wh.existing_tables():
        table = None
    else:
        table = con.execute(
            "SELECT c.chunk_id, c.doc_id, c.doc_version, c.doc_version_id, c.kind, "
            f"c.tenant_id, {subject} AS subject_id, c.section_path, c.char_start, "
            "c.char_end, c.text, c.token_count, c.content_hash, c.trust, "
            "v.authority, c.effective_from, v.effective_to, c.acl, c.embedding "
            "FROM evidence_chunks c JOIN evidence_versions() v USING (doc_version_id) "
            # one order in every process: the IVF lists are trained on a
            # sample drawn by position, and equal scores rank by row (a join's
            # rows come in the order its threads finish)
            "ORDER BY c.chunk_id, c.doc_version_id"
        ).arrow()
        if hasattr(table, "read_all"):
            table = table.read_all()
    if table is None or table.num_rows == 0:
        from ctxledger.schemas.arrow import arrow_schema  # noqa: PLC0415
        from ctxledger.schemas.evidence import EvidenceChunk  # noqa: PLC0415

        schema = arrow_schema(EvidenceChunk)
        table = (
            schema.empty_table()
            .append_column("authority", pa.array([], pa.float64()))
            .append_column("effective_to", pa.array([], pa.timestamp("us", tz="UTC")))
        )
    vectors, has_vector = _vectors(table.column("embedding"))
    return EvidenceIndex.from_rows(
        table.drop_columns(["embedding"]), vectors, settings, snapshot, has_vector
    )


def _vectors(column) -> tuple[np.ndarray, np.ndarray]:
    """``(n, EMBEDDING_DIM)`` float32 rows and which rows have a vector: a NULL
    embedding (deferred, not filled in yet) is an all-zero row and False."""
    embeddings = column.combine_chunks()
    has_vector = np.asarray(
        embeddings.is_valid().to_numpy(zero_copy_only=False), dtype=bool
    ).reshape(len(embeddings))
    flat = embeddings.flatten().to_numpy(zero_copy_only=False)  # skips NULL rows
    present = np.asarray(flat, dtype=np.float32).reshape(-1, EMBEDDING_DIM)
    if has_vector.all():
        return present, has_vector
    vectors = np.zeros((len(embeddings), EMBEDDING_DIM), dtype=np.float32)
    vectors[has_vector] = present
    return vectors, has_vector


def search_evidence(
    wh: Warehouse,
    tenant_id: str,
    principal_groups: Sequence[str],
    query: str,
    k: int = 5,
    as_of: datetime | None = None,
    candidates: int = 20,
    *,
    query_embedding: Sequence[float] | None = None,
    policy: Policy | None = None,
    subject_id: str | None = None,
) -> list[SearchHit]:
    """Hybrid BM25 + cosine search within the principal's scope.

    Tenant, ACL groups (``*`` on a document admits every group), subject (tool
    artifacts: only ``subject_id``'s own, unless ``principal_groups`` holds a
    policy operator group) and validity at ``as_of`` (default: now) filter
    first; only chunks in that scope are ranked. A chunk whose embedding is
    still pending (deferred mode) is ranked by BM25 only (``ranked_by="bm25"``).
    Both top-``candidates`` lists are fused by weighted reciprocal rank fusion
    (weights from the policy). ``query_embedding`` skips embedding ``query``.
    """
    policy = policy or _default_policy()
    settings = policy.evidence.search
    index = load_index(wh, settings)
    if query_embedding is None:
        vector = embed_query(policy.evidence.embedding, query)
    else:
        vector = np.asarray(query_embedding, dtype=np.float32)
    ranked = index.search(
        tenant_id,
        list(principal_groups),
        query,
        vector,
        k,
        as_of,
        candidates,
        subject_id=subject_id,
        operator_groups=policy.evidence.artifacts.operator_groups,
    )
    hits = []
    for r in ranked:
        row = index.row(r.row)
        hits.append(
            SearchHit(
                **row,
                bm25=r.bm25,
                bm25_rank=r.bm25_rank,
                cosine=r.cosine,
                cosine_rank=r.cosine_rank,
                fused=r.fused,
                ranked_by="hybrid" if index.has_vector[r.row] else "bm25",
            )
        )
    return hits
