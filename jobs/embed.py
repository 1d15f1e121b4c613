"""``ctxledger embed``: fill the vectors of chunks and memories committed without one.

With ``evidence.embedding.mode: deferred`` the nightly commits new evidence
chunks with ``embedding`` NULL: their text and BM25 are searchable at once and
the nightly never loads the model. This job (on the same machine later, or on a
GPU worker) finds those chunks, reuses a vector the warehouse already holds for
the same ``(tenant, content hash, model)``, embeds each remaining distinct text
once, and writes all the vectors in ONE snapshot (``embed``), updating the rows
in place: chunk ids and every other column stay as the nightly wrote them.

Memories are filled the same way and in the same snapshot: every memory
without a vector of the policy's model (deferred runs, re-admissions in a
deferred run, a failed batch, a model change) gets one, each distinct text
embedded once, so ``pack`` stops embedding them per process.

Idempotent: a second run finds nothing pending and commits nothing. Safe
beside a nightly: the update takes the warehouse commit lock, only touches rows
still without a vector of the model, and is retried when it loses a race.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxledger.pipelines.batching import CALL_TEXTS

#: Texts per model call when ``--batch`` is not given: large, so each call
#: sorts many texts into passes of one length (``batching.CALL_TEXTS``).
DEFAULT_BATCH = CALL_TEXTS


@dataclass(frozen=True)
class EmbedResult:
    """What one ``embed`` run did (counts only: no text)."""

    pending: int  # chunks without a vector when the run started (up to --limit)
    texts: int  # distinct (tenant, text) among them
    reused: int  # texts whose vector the warehouse already held
    embedded: int  # texts that went through the model
    updated: int  # chunks that got a vector in this run's snapshot
    snapshot_id: int | None
    seconds: float
    memories_pending: int = 0  # memories without a vector of the model
    memory_texts: int = 0  # distinct (tenant, text) among them (all embedded)
    memories_updated: int = 0  # memories that got a vector in the snapshot

    @property
    def changed(self) -> bool:
        """Did the run write anything (and so make a snapshot)?"""
        return bool(self.updated or self.memories_updated)


def pending_chunks(con, limit: int | None = None) -> list[tuple[str, str, str, str]]:
    """``(chunk_id, tenant_id, content_hash, text)`` of chunks without a vector,
    in a stable order (``limit``: at most that many distinct texts)."""
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = current_database()"
        ).fetchall()
    }
    if "evidence_chunks" not in tables:
        return []
    cap = "" if limit is None else f"WHERE k.n <= {int(limit)}"
    return con.execute(
        "WITH p AS (SELECT chunk_id, tenant_id, content_hash, text "
        "  FROM evidence_chunks WHERE embedding IS NULL), "
        "k AS (SELECT tenant_id, content_hash, "
        "  row_number() OVER (ORDER BY tenant_id, content_hash) AS n "
        "  FROM (SELECT DISTINCT tenant_id, content_hash FROM p)) "
        f"SELECT p.chunk_id, p.tenant_id, p.content_hash, p.text "
        f"FROM p JOIN k USING (tenant_id, content_hash) {cap} "
        "ORDER BY p.tenant_id, p.content_hash, p.chunk_id"
    ).fetchall()


def _has_memory_vectors(con) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_name = 'memories' "
            "AND column_name = 'embed_model'"
        ).fetchone()[0]
    )


def pending_memories(
    con, model: str, limit: int | None = None
) -> list[tuple[str, str, str, str]]:
    """``(memory_id, tenant_id, text hash, text)`` of memories without a vector
    of ``model`` (none, or another model's), in a stable order (``limit``: at
    most that many distinct texts). The text hash keys ``vectors_for``."""
    if not _has_memory_vectors(con):
        return []  # a lake written before memory vectors: nothing to fill
    cap = "" if limit is None else f"WHERE k.n <= {int(limit)}"
    return con.execute(
        "WITH p AS (SELECT memory_id, tenant_id, md5(text) AS h, text "
        "  FROM memories WHERE embedding IS NULL "
        "  OR embed_model IS DISTINCT FROM ?), "
        "k AS (SELECT tenant_id, h, row_number() OVER (ORDER BY tenant_id, h) AS n "
        "  FROM (SELECT DISTINCT tenant_id, h FROM p)) "
        "SELECT p.memory_id, p.tenant_id, p.h, p.text "
        f"FROM p JOIN k USING (tenant_id, h) {cap} "
        "ORDER BY p.tenant_id, p.h, p.memory_id",
        [model],
    ).fetchall()


def vectors_for(
    pending: Sequence[tuple[str, str, str, str]],
    known: dict[tuple[str, str], Sequence[float]],
    encode: Callable[[list[str]], np.ndarray],
    batch: int,
) -> tuple[dict[tuple[str, str], tuple[list[float], bool]], int]:
    """Vector (and whether it was reused) per ``(tenant, content hash)`` of
    ``pending``: from ``known`` first, else embedded (each text once, in
    batches of ``batch``). Returns it and the number of texts embedded."""
    out: dict[tuple[str, str], tuple[list[float], bool]] = {}
    texts: dict[tuple[str, str], str] = {}
    for _chunk_id, tenant, content_hash, text in pending:
        key = (tenant, content_hash)
        if key in out or key in texts:
            continue
        if key in known:
            out[key] = ([float(v) for v in known[key]], True)
        else:
            texts[key] = text
    keys = list(texts)
    for start in range(0, len(keys), batch):
        part = keys[start : start + batch]
        vectors = encode([texts[k] for k in part])
        for key, vector in zip(part, vectors, strict=True):
            out[key] = ([float(v) for v in vector], False)
    return out, len(keys)


def _vector_table(id_name: str, pending, vectors):
    """``(id, embedding, reused)`` rows of ``pending`` as an Arrow table."""
    import pyarrow as pa

    from ctxledger.schemas.evidence import EMBEDDING_DIM

    rows = [(row_id, *vectors[(tenant, key)]) for row_id, tenant, key, _t in pending]
    return pa.table(
        {
            id_name: pa.array([r[0] for r in rows], pa.string()),
            "embedding": pa.array(
                [r[1] for r in rows], pa.list_(pa.float32(), EMBEDDING_DIM)
            ),
            "reused": pa.array([r[2] for r in rows], pa.bool_()),
        }
    )


def _write(
    wh, pending, vectors, model: str, memories=(), memory_vectors=None
) -> tuple[int, int]:
    """One transaction: set the vectors of the chunks still without one and of
    the memories still without one of ``model``; the two counts."""
    con = wh.connection()
    updated = memories_updated = 0
    with wh.transaction():
        wh.take_commit_lock()
        if pending:
            con.register("__vectors", _vector_table("chunk_id", pending, vectors))
            try:
                before = con.execute(
                    "SELECT count(*) FROM evidence_chunks WHERE embedding IS NULL"
                ).fetchone()[0]
                con.execute(
                    "UPDATE evidence_chunks SET embedding = v.embedding::FLOAT[], "
                    "embedding_reused = v.reused, embed_model = ? "
                    "FROM __vectors v WHERE evidence_chunks.chunk_id = v.chunk_id "
                    "AND evidence_chunks.embedding IS NULL",
                    [model],
                )
                after = con.execute(
                    "SELECT count(*) FROM evidence_chunks WHERE embedding IS NULL"
                ).fetchone()[0]
            finally:
                con.unregister("__vectors")
            updated = int(before - after)
        if memories:
            con.register(
                "__memory_vectors",
                _vector_table("memory_id", memories, memory_vectors),
            )
            try:
                row = con.execute(
                    "UPDATE memories SET embedding = v.embedding, embed_model = ? "
                    "FROM __memory_vectors v WHERE memories.memory_id = v.memory_id "
                    "AND (memories.embedding IS NULL "
                    "OR memories.embed_model IS DISTINCT FROM ?)",
                    [model, model],
                ).fetchone()
            finally:
                con.unregister("__memory_vectors")
            memories_updated = int(row[0] or 0) if row else 0
        wh.set_commit_message(
            "embed",
            {"kind": "embed", "chunks": updated, "memories": memories_updated},
        )
    return updated, memories_updated


def run_embed(
    warehouse: str | Path,
    *,
    policy_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    batch: int = DEFAULT_BATCH,
    limit: int | None = None,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> EmbedResult:
    """Fill pending chunk and memory vectors in one snapshot (``encode``:
    tests pass a stub; default: the policy's model, loaded only when a text
    needs it). ``limit`` caps the distinct texts of each kind."""
    from ctxledger.pipelines.redact.registry import load_checked_policy
    from ctxledger.warehouse.catalog import Warehouse
    from ctxledger.warehouse.concurrency import retry_on_conflict
    from ctxledger.warehouse.evidence_api import lookup_embeddings

    if batch < 1:
        raise ValueError("--batch must be >= 1")
    if limit is not None and limit < 1:
        raise ValueError("--limit must be >= 1")
    started = time.monotonic()
    settings = load_checked_policy(policy_file).evidence.embedding
    model = settings.model
    wh = Warehouse.open(warehouse, catalog=catalog, data_path=data_path)
    try:
        con = wh.connection()
        pending = pending_chunks(con, limit)
        memories = pending_memories(con, model, limit)
        if not pending and not memories:
            return EmbedResult(0, 0, 0, 0, 0, None, time.monotonic() - started)
        keys = sorted({(t, h) for _c, t, h, _x in pending})
        known = lookup_embeddings(warehouse, keys, model, con=con) if keys else {}
        if encode is None:
            from ctxledger.pipelines.evidence.embed import Embedder

            embedder = Embedder(settings)
            encode = embedder.encode
        vectors, embedded = vectors_for(pending, known, encode, batch)
        memory_vectors, memory_texts = vectors_for(memories, {}, encode, batch)
        updated, memories_updated = retry_on_conflict(
            lambda: _write(wh, pending, vectors, model, memories, memory_vectors)
        )
        snapshot = wh.current_snapshot() if updated or memories_updated else None
        return EmbedResult(
            pending=len(pending),
            texts=len(keys),
            reused=len(keys) - embedded,
            embedded=embedded,
            updated=updated,
            snapshot_id=snapshot,
            seconds=time.monotonic() - started,
            memories_pending=len(memories),
            memory_texts=memory_texts,
            memories_updated=memories_updated,
        )
    finally:
        wh.close()
