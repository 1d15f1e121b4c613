"""``ctxledger embed``: fill the vectors of chunks committed without one.

With ``evidence.embedding.mode: deferred`` the nightly commits new evidence
chunks with ``embedding`` NULL: their text and BM25 are searchable at once and
the nightly never loads the model. This job (on the same machine later, or on a
GPU worker) finds those chunks, reuses a vector the warehouse already holds for
the same ``(tenant, content hash, model)``, embeds each remaining distinct text
once, and writes all the vectors in ONE snapshot (``embed``), updating the rows
in place: chunk ids and every other column stay as the nightly wrote them.

Idempotent: a second run finds nothing pending and commits nothing. Safe
beside a nightly: the update takes the warehouse commit lock, only touches rows
whose embedding is still NULL, and is retried when it loses a race.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Texts per model call when ``--batch`` is not given.
DEFAULT_BATCH = 64


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


def _write(wh, pending, vectors, model: str) -> int:
    """One transaction: set the vectors of the still-NULL rows; the count."""
    import pyarrow as pa

    from schemas.evidence import EMBEDDING_DIM

    rows = [
        (chunk_id, *vectors[(tenant, content_hash)])
        for chunk_id, tenant, content_hash, _text in pending
    ]
    table = pa.table(
        {
            "chunk_id": pa.array([r[0] for r in rows], pa.string()),
            "embedding": pa.array(
                [r[1] for r in rows], pa.list_(pa.float32(), EMBEDDING_DIM)
            ),
            "reused": pa.array([r[2] for r in rows], pa.bool_()),
        }
    )
    con = wh.connection()
    with wh.transaction():
        wh.take_commit_lock()
        con.register("__vectors", table)
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
        wh.set_commit_message("embed", {"kind": "embed", "chunks": updated})
    return updated


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
    """Fill pending vectors in one snapshot (``encode``: tests pass a stub;
    default: the policy's model, loaded only when a text needs it)."""
    from schemas.policy import load_policy
    from warehouse.catalog import Warehouse
    from warehouse.concurrency import retry_on_conflict
    from warehouse.evidence_api import lookup_embeddings

    if batch < 1:
        raise ValueError("--batch must be >= 1")
    if limit is not None and limit < 1:
        raise ValueError("--limit must be >= 1")
    started = time.monotonic()
    settings = load_policy(policy_file).evidence.embedding
    model = settings.model
    wh = Warehouse.open(warehouse, catalog=catalog, data_path=data_path)
    try:
        con = wh.connection()
        pending = pending_chunks(con, limit)
        if not pending:
            return EmbedResult(0, 0, 0, 0, 0, None, time.monotonic() - started)
        keys = sorted({(t, h) for _c, t, h, _x in pending})
        known = lookup_embeddings(warehouse, keys, model, con=con)
        if encode is None:
            from pipelines.evidence.embed import Embedder

            embedder = Embedder(settings)
            encode = embedder.encode
        vectors, embedded = vectors_for(pending, known, encode, batch)
        updated = retry_on_conflict(lambda: _write(wh, pending, vectors, model))
        snapshot = wh.current_snapshot() if updated else None
        return EmbedResult(
            pending=len(pending),
            texts=len(keys),
            reused=len(keys) - embedded,
            embedded=embedded,
            updated=updated,
            snapshot_id=snapshot,
            seconds=time.monotonic() - started,
        )
    finally:
        wh.close()
