"""Query API over the evidence tables: hybrid search, context packing, SQL macros.

Context builders call ``Warehouse.open(path).search_evidence(...)`` and
``.pack(request)`` (thin methods delegating here). Analysts get the same search
as SQL macros (``install_macros``; the ``ctxledger sql`` command installs them):
``evidence_versions()``, ``evidence_scope(tenant, groups, as_of, subject)``,
``evidence_bm25(...)``, ``evidence_vector(...)``, ``evidence_search(...)`` and the
scalar ``evidence_embed(text)``.

Scope: a document is served to the principal groups of its ACL; a tool artifact
(kind ``tool_artifact``) only to a request for the subject of the session that
produced it (``subject_id``), or to a principal in one of the policy's
``evidence.artifacts.operator_groups``. A request without a subject sees
documents only (plus every artifact when it is an operator). Python search and
the SQL macros apply the same rule, before anything is ranked.

Versions are append-only: a version is effective from its ``effective_from``
until the next version (or deletion tombstone) of the same document, so
``as_of=`` answers "what did the document say then" from the current snapshot,
and ``Warehouse(..., snapshot=n)`` answers "what did we know at snapshot n".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from ctxledger.schemas.evidence import EMBEDDING_DIM, SearchHit, SearchSettings
from ctxledger.warehouse.evidence_index import STOPWORDS, EvidenceIndex

if TYPE_CHECKING:
    from ctxledger.schemas.evidence import ContextManifest, PackRequest
    from ctxledger.schemas.policy import Policy
    from ctxledger.schemas.sources import SourceRegistry
    from ctxledger.warehouse.catalog import Warehouse

SQL_FILE = Path(__file__).resolve().parent / "sql" / "evidence.sql"
_INDEXES: OrderedDict[tuple[Any, ...], EvidenceIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()
_EMBEDDERS: dict[str, Any] = {}
_EMBEDDER_LOCK = threading.Lock()


# ------------------------------------------------------------ pipeline helpers
def _read_only(
    root: str | Path, catalog: str | None, data_path: str | None
) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection to the lake, or None when there is no warehouse."""
    from ctxledger.warehouse.catalog import (
        CATALOG_FILE,
        LAKE_ALIAS,
        attach_lake,
        connect,
        lake_extensions,
    )

    root = Path(root).resolve()
    catalog = catalog or str(root / CATALOG_FILE)
    if (
        not catalog.startswith(("postgres:", "postgresql:"))
        and not Path(catalog).exists()
    ):
        return None
    con = connect(load=lake_extensions(catalog))
    attach_lake(
        con, catalog, data_path or str(root / "lake"),
        default_data_path=data_path is None, options=", READ_ONLY",
    )  # fmt: skip
    con.execute(f"USE {LAKE_ALIAS}")
    return con


def _has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_catalog = 'lake' AND table_name = ?",
            [table],
        ).fetchone()[0]
    )


def processed_document_files(
    root: str | Path, catalog: str | None = None, data_path: str | None = None
) -> list[tuple[str, str, str]]:
    """``(file_hash, tenant_id, path)`` of document files a committed run
    processed (their landing identity: ``pipelines.ingest.landing``)."""
    con = _read_only(root, catalog, data_path)
    if con is None:
        return []
    try:
        if not _has_table(con, "document_files"):
            return []
        return con.execute(
            "SELECT DISTINCT file_hash, tenant_id, path FROM document_files "
            "WHERE status = 'processed'"
        ).fetchall()
    finally:
        con.close()


def lookup_connection(
    root: str | Path, catalog: str | None = None, data_path: str | None = None
) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection for many ``lookup_embeddings(..., con=)`` calls
    (one per pipeline worker: attaching the catalog per batch cost seconds a
    run); the caller closes it. None when there is no warehouse yet."""
    return _read_only(root, catalog, data_path)


def lookup_embeddings(
    root: str | Path,
    keys: Sequence[tuple[str, str]],
    model: str,
    catalog: str | None = None,
    data_path: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> dict[tuple[str, str], list[float]]:
    """Stored vectors for ``(tenant_id, content_hash)`` keys embedded by ``model``.

    With ``con`` (``lookup_connection``) the lookup runs on it and leaves it
    open; without, it opens and closes a connection of its own.
    """
    if not keys:
        return {}
    owned = con is None
    if owned:
        con = _read_only(root, catalog, data_path)
    if con is None:
        return {}
    try:
        if not _has_table(con, "evidence_chunks"):
            return {}
        import pyarrow as pa  # noqa: PLC0415

        wanted = pa.table(
            {
                "tenant_id": [k[0] for k in keys],
                "content_hash": [k[1] for k in keys],
            }
        )
        con.register("__wanted", wanted)
        try:
            rows = con.execute(
                "SELECT c.tenant_id, c.content_hash, any_value(c.embedding) "
                "FROM evidence_chunks c "
                "SEMI JOIN __wanted w "
                "ON c.tenant_id = w.tenant_id AND c.content_hash = w.content_hash "
                "WHERE c.embed_model = ? AND c.embedding IS NOT NULL GROUP BY ALL",
                [model],
            ).fetchall()
        finally:
            con.unregister("__wanted")
        return {(t, h): list(v) for t, h, v in rows if v is not None}
    finally:
        if owned:
            con.close()


# ------------------------------------------------------------------- macros
def _sql_list(values: Sequence[str]) -> str:
    """A VARCHAR[] literal (quotes doubled; ``[]`` typed so it never is NULL[])."""
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"[{quoted}]::VARCHAR[]"


def macros_sql(
    settings: SearchSettings,
    operator_groups: Sequence[str] = (),
    has_subjects: bool = True,
) -> list[str]:
    """The evidence macros, filled from the policy's search settings and the
    operator groups that see every tool artifact of their tenant.

    ``has_subjects=False``: the lake predates ``subject_id`` on ``documents``
    and ``evidence_chunks`` (the next run's ``ensure_tables`` adds it; a reader
    may not): the macros read it as NULL, so artifacts are for operators only.
    """
    words = "[" + ", ".join("'" + w + "'" for w in STOPWORDS) + "]"
    null = "NULL::VARCHAR"
    text = SQL_FILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    filled = (
        "\n".join(lines)
        .replace("{stopwords}", words)
        .replace("{candidates}", str(settings.candidates))
        .replace("{k1}", repr(float(settings.bm25_k1)))
        .replace("{b}", repr(float(settings.bm25_b)))
        .replace("{rrf_k}", str(int(settings.rrf_k)))
        .replace("{bm25_weight}", repr(float(settings.bm25_weight)))
        .replace("{vector_weight}", repr(float(settings.vector_weight)))
        .replace("{operator_groups}", _sql_list(operator_groups))
        .replace("{doc_subject}", "subject_id" if has_subjects else null)
        .replace("{chunk_subject}", "c.subject_id" if has_subjects else null)
        .replace(
            "{chunk_subject_column}",
            "" if has_subjects else f", {null} AS subject_id",
        )
    )
    return [s.strip() for s in filled.split(";") if s.strip()]


def _has_subjects(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the lake's evidence tables carry ``subject_id`` (True when they
    do not exist yet: they will be created with it)."""
    try:
        rows = con.execute(
            "SELECT table_name, count(*) FILTER (column_name = 'subject_id') "
            "FROM information_schema.columns WHERE table_catalog = current_database() "
            "AND table_name IN ('documents', 'evidence_chunks') GROUP BY ALL"
        ).fetchall()
    except duckdb.Error:
        return True
    return all(n > 0 for _, n in rows)


def install_macros(
    con: duckdb.DuckDBPyConnection, policy: Policy | None = None
) -> None:
    """Create the evidence macros and ``evidence_embed`` on a lake connection."""
    policy = policy or _default_policy()
    from ctxledger.warehouse.catalog import load_extensions

    load_extensions(con, "fts")
    embedder_settings = policy.evidence.embedding

    def evidence_embed(text: str) -> list[float]:
        return embedder(embedder_settings).encode([text or ""])[0].tolist()

    try:
        con.create_function(
            "evidence_embed", evidence_embed, ["VARCHAR"], "FLOAT[]", side_effects=False
        )
    except duckdb.Error:
        pass  # already registered on this connection
    statements = macros_sql(
        policy.evidence.search,
        policy.evidence.artifacts.operator_groups,
        _has_subjects(con),
    )
    for statement in statements:
        con.execute(statement)


# ------------------------------------------------------------------- search
@lru_cache(maxsize=1)
def _default_policy() -> Policy:
    from ctxledger.schemas.policy import load_policy  # noqa: PLC0415

    return load_policy(None)


class _SerialEmbedder:
    """A loaded ``Embedder`` whose ``encode`` runs one call at a time.

    Two threads encoding with one sentence-transformers model at once crashed
    the server (segfault under 10 concurrent /pack requests), so the model is
    serialised here, around the model call only: a server's requests pack in
    parallel and queue just for the few milliseconds of a query embedding."""

    def __init__(self, inner: Any):
        self._inner = inner
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *args: Any, **kwargs: Any) -> np.ndarray:
        with self._lock:
            return self._inner.encode(texts, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def embedder(settings) -> Any:
    """One loaded ``Embedder`` per process and model (queries embed here);
    ``encode`` is serialised (``_SerialEmbedder``)."""
    from ctxledger.pipelines.evidence.embed import Embedder  # noqa: PLC0415

    key = settings.model_dump_json()
    with _EMBEDDER_LOCK:
        if key not in _EMBEDDERS:
            instance = Embedder(settings)
            instance.load()
            _EMBEDDERS[key] = _SerialEmbedder(instance)
        return _EMBEDDERS[key]


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
            "FROM evidence_chunks c JOIN evidence_versions() v USING (doc_version_id)"
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


def pack(
    wh: Warehouse,
    request: PackRequest,
    *,
    policy: Policy | None = None,
    registry: SourceRegistry | None = None,
) -> ContextManifest:
    """Select context items for ``request`` (see ``warehouse.evidence_pack``);
    ``registry``: the source registry to value items with (default: the
    warehouse's active one, read per call; a server reads it once per
    snapshot)."""
    from ctxledger.warehouse.evidence_pack import pack_context  # noqa: PLC0415

    return pack_context(wh, request, policy or _default_policy(), registry)
