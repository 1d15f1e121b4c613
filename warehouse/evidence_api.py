"""The evidence tables' lake-side helpers: the pipeline's lookups, the SQL macros,
and the process's query embedder.

The pipeline asks the lake what it already holds (``processed_document_files``,
``lookup_connection``/``lookup_embeddings``: vectors to reuse). Analysts get the
evidence search as SQL macros (``install_macros``; the ``ctxledger sql`` command
installs them): ``evidence_versions()``, ``evidence_scope(tenant, groups,
as_of, subject)``, ``evidence_bm25(...)``, ``evidence_vector(...)``,
``evidence_search(...)`` and the scalar ``evidence_embed(text)`` (``embedder``,
also the read path's model). Context builders search and pack through
``ctxledger.Context`` (``serving.evidence_search``, ``serving.evidence_pack``),
which apply the same rules in Python.

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
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from ctxledger.schemas.evidence import SearchSettings

if TYPE_CHECKING:
    from ctxledger.schemas.policy import Policy

SQL_FILE = Path(__file__).resolve().parent / "sql" / "evidence.sql"
#: English stop words dropped by ``evidence_terms`` (Python and SQL alike).
STOPWORDS = tuple(
    sorted(
        set(
            """a about above after again against all am an and any are as at be
            because been before being below between both but by can could did do
            does doing down during each few for from further had has have having he
            her here hers herself him himself his how i if in into is it its itself
            just me more most my myself no nor not now of off on once only or other
            our ours ourselves out over own same she should so some such than that
            the their theirs them themselves then there these they this those
            through to too under until up very was we were what when where which
            while who whom why will with would you your yours yourself yourselves
            s t don shall may might must also""".split()
        )
    )
)
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
    from ctxledger.warehouse.concurrency import retry_on_conflict

    def attach() -> duckdb.DuckDBPyConnection:
        con = connect(load=lake_extensions(catalog))
        try:
            attach_lake(
                con, catalog, data_path or str(root / "lake"),
                default_data_path=data_path is None, options=", READ_ONLY",
            )  # fmt: skip
            con.execute(f"USE {LAKE_ALIAS}")
        except BaseException:
            con.close()
            raise
        return con

    # A stage's attach waits for a job holding the local catalog file like the
    # commit does, and stops with the same one line (``warehouse.concurrency``).
    return retry_on_conflict(attach)


def _has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_catalog = 'lake' AND table_name = ?",
            [table],
        ).fetchone()[0]
    )


def processed_document_files(
    root: str | Path,
    catalog: str | None = None,
    data_path: str | None = None,
    wh=None,
) -> list[tuple[str, str, str]]:
    """``(file_hash, tenant_id, path)`` of document files a committed run
    processed (their landing identity: ``pipelines.ingest.landing``). ``wh``:
    an open ``Warehouse`` to read on (a second attach of a local catalog file
    in the process that holds it open fails); else a read-only connection."""
    sql = (
        "SELECT DISTINCT file_hash, tenant_id, path FROM document_files "
        "WHERE status = 'processed'"
    )
    if wh is not None:
        if "document_files" not in wh.existing_tables():
            return []
        return wh.query(sql).fetchall()
    con = _read_only(root, catalog, data_path)
    if con is None:
        return []
    try:
        if not _has_table(con, "document_files"):
            return []
        return con.execute(sql).fetchall()
    finally:
        con.close()


def lookup_connection(
    root: str | Path, catalog: str | None = None, data_path: str | None = None
) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection for many ``lookup_embeddings(..., con=)`` calls
    (one per pipeline worker: attaching the catalog per batch cost seconds a
    run); the caller closes it. None when there is no warehouse yet."""
    return _read_only(root, catalog, data_path)


class StoredVectors:
    """``lookup_embeddings`` for many batches on one read-only connection
    (``lookup_connection``), opened on the first call; ``close`` lets it go
    and a later call opens a new one. Its users (the evidence stage's
    lookups, the embed-ahead helper) close it before the run's commit: a
    held read-only attach of a local catalog would block it."""

    def __init__(
        self,
        root: str | Path,
        model: str,
        catalog: str | None = None,
        data_path: str | None = None,
    ):
        self.root = root
        self.model = model
        self.catalog = catalog
        self.data_path = data_path
        self._con = None
        self._opened = False

    def __call__(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[float]]:
        if not self._opened:
            self._con = lookup_connection(self.root, self.catalog, self.data_path)
            self._opened = True
        if self._con is None:  # no warehouse yet: nothing stored
            return {}
        return lookup_embeddings(self.root, keys, self.model, con=self._con)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
        self._con, self._opened = None, False


def has_stored_vectors(wh, model: str) -> bool:
    """Whether the warehouse (an open ``Warehouse``) holds any chunk vector
    embedded by ``model``: without one, no text of a run can reuse a vector
    and the evidence stage skips its lookups (a fresh warehouse, a new model)."""
    if "evidence_chunks" not in wh.existing_tables():
        return False
    row = wh.query(
        "SELECT 1 FROM evidence_chunks "
        "WHERE embed_model = ? AND embedding IS NOT NULL LIMIT 1",
        [model],
    ).fetchone()
    return row is not None


def export_stored_vectors(wh, model: str, target: str | Path) -> int:
    """Write one vector per ``(tenant_id, content_hash)`` embedded by
    ``model`` to the Parquet file ``target`` (temp name + rename), read on the
    open warehouse ``wh`` (the launcher's): the evidence stage looks vectors
    up in it instead of attaching the catalog (``pipelines.evidence.stored``).
    Returns how many vectors it holds."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = wh.query(
        "SELECT tenant_id, content_hash, any_value(embedding) AS embedding "
        "FROM evidence_chunks WHERE embed_model = ? AND embedding IS NOT NULL "
        "GROUP BY ALL",
        [model],
    ).arrow()
    if hasattr(table, "read_all"):
        table = table.read_all()
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    pq.write_table(table, partial)
    partial.replace(target)
    return table.num_rows


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


# ------------------------------------------------------------- the embedder
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
