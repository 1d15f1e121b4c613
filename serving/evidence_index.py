"""In-memory search index over the evidence chunks of one warehouse snapshot.

Built once per process and snapshot (``EvidenceIndex.from_warehouse``) and queried
by ``serving.evidence_search.search_evidence``. Rows are sorted by tenant, so a
tenant is one contiguous slice; within it the ACL, subject and validity filters
give the *scope* (the rows this principal may see at ``as_of``), and only scope
rows are ever scored:

* documents: a bitmask over the tenant's ACL groups (one AND per row);
* tool artifacts: never by ACL; only a request for the artifact's own subject
  (one integer compare per row against the subject's per-index code) or a
  principal in a policy operator group sees them. An artifact without a
  subject (written before subjects were recorded) is for operators only.

* BM25 over the scope, with statistics (document count, document frequency,
  average length) of the scope itself, so other tenants' text does not even
  move the IDF. Tokens: ``evidence_terms`` (DuckDB: lower-case, accents
  stripped, ``[a-z0-9]+``, English stop words dropped, Porter stems), the same
  function the SQL macros use (``warehouse.evidence_api.STOPWORDS``).
* Cosine similarity (vectors are normalised: a dot product), exact over the
  scope. When the index holds an IVF partition (built from
  ``search.ivf_min_rows`` chunks on) and the scope is larger than
  ``search.exact_max_rows``, only the scope rows of the closest IVF lists are
  scored (``search.ivf_probe_fraction`` of them).
* Weighted reciprocal rank fusion of the two top-``candidates`` lists.

A chunk committed without a vector (``evidence.embedding.mode: deferred``,
before ``ctxledger embed`` ran) has an all-zero row and ``has_vector`` False:
it takes part in BM25 only and is never a cosine candidate.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from ctxledger.schemas.evidence import EMBEDDING_DIM, SearchSettings
from ctxledger.warehouse.evidence_api import STOPWORDS

#: Scores are rounded before ranking, so equal texts tie exactly (float sums
#: differ in the last bits between code paths) and ties break by chunk id.
SCORE_DECIMALS = 6
_FAR_FUTURE = np.iinfo(np.int64).max
_OVERFLOW_BIT = np.uint64(1 << 63)
_META_COLUMNS = (
    "chunk_id",
    "doc_id",
    "doc_version",
    "doc_version_id",
    "kind",
    "tenant_id",
    "subject_id",
    "section_path",
    "char_start",
    "char_end",
    "text",
    "token_count",
    "content_hash",
    "trust",
    "authority",
    "effective_from",
    "effective_to",
)


def terms_sql() -> str:
    """The ``evidence_terms`` macro (shared with warehouse/sql/evidence.sql)."""
    words = ", ".join("'" + w + "'" for w in STOPWORDS)
    return (
        "CREATE OR REPLACE TEMP MACRO evidence_terms(t) AS list_transform("
        "list_filter(regexp_extract_all(lower(strip_accents(coalesce(t, ''))), "
        f"'[a-z0-9]+'), w -> NOT list_contains([{words}], w)), "
        "w -> stem(w, 'porter'))"
    )


def to_micros(when: datetime | None) -> int:
    """Microseconds since the epoch (UTC); naive datetimes are taken as UTC."""
    if when is None:
        when = datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1_000_000)


#: Bytes of gathered scope vectors an index keeps (``scope_vectors``): a
#: sparse scope of the exact path holds at most ``search.exact_max_rows``
#: rows (20,000: 30 MB); a bench scope (~2,000 rows) is 3 MB.
SCOPE_VECTORS_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Ranked:
    """One fused result row (``row`` indexes the index's metadata)."""

    row: int
    fused: float
    bm25: float | None
    bm25_rank: int | None
    cosine: float | None
    cosine_rank: int | None


class _Tokenizer:
    """``evidence_terms`` on a private in-memory DuckDB connection.

    Query words are looked up in a per-process cache shared by every index
    (a word's terms do not depend on the index), so after warm-up a query costs
    no DuckDB call at all."""

    _words: dict[str, tuple[str, ...]] = {}
    _words_lock = threading.Lock()

    def __init__(self) -> None:
        from ctxledger.warehouse.catalog import connect  # noqa: PLC0415

        self._con = connect(load=("fts",))
        self._con.execute(terms_sql())
        self._lock = threading.Lock()

    def terms(self, text: str) -> list[str]:
        """``evidence_terms(text)``: computed per whitespace-separated word (the
        macro never joins across whitespace), each word once per process.

        NUL is not a term character, so it separates words like a space does
        (DuckDB's parser refuses NUL inside the literal rows below)."""
        words = (text or "").replace("\x00", " ").split()
        known = {w: self._words.get(w) for w in set(words)}
        missing = sorted(w for w, terms in known.items() if terms is None)
        if missing:
            # literal rows bind faster than a list parameter; quotes doubled
            values = ", ".join("('" + w.replace("'", "''") + "')" for w in missing)
            with self._lock:
                rows = self._con.execute(
                    f"SELECT w, evidence_terms(w) FROM (VALUES {values}) t(w)"
                ).fetchall()
            with self._words_lock:
                if len(self._words) > 200_000:
                    self._words.clear()
                for word, terms in rows:
                    known[word] = self._words[word] = tuple(terms or ())
        return [term for w in words for term in known[w] or ()]

    def postings(
        self, texts: pa.Array
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The vocabulary (sorted), then ``(term id, row, tf)`` arrays sorted by
        term id and row, and the number of terms (document length) per text."""
        table = pa.table({"row": pa.array(np.arange(len(texts))), "text": texts})
        with self._lock:
            self._con.register("__texts", table)
            try:
                self._con.execute(
                    "CREATE OR REPLACE TEMP TABLE __terms AS "
                    "SELECT row, evidence_terms(text) AS terms FROM __texts"
                )
                lengths = self._con.execute(
                    "SELECT len(terms)::INTEGER AS n FROM __terms ORDER BY row"
                ).fetchnumpy()["n"]
                self._con.execute(
                    "CREATE OR REPLACE TEMP TABLE __vocab AS "
                    "SELECT term, (row_number() OVER (ORDER BY term) - 1)::INTEGER "
                    "AS tid FROM (SELECT DISTINCT unnest(terms) AS term FROM __terms)"
                )
                vocab = [
                    r[0]
                    for r in self._con.execute(
                        "SELECT term FROM __vocab ORDER BY tid"
                    ).fetchall()
                ]
                cols = self._con.execute(
                    "SELECT v.tid, t.row::INTEGER AS row, count(*)::INTEGER AS tf "
                    "FROM (SELECT row, unnest(terms) AS term FROM __terms) t "
                    "JOIN __vocab v USING (term) GROUP BY ALL ORDER BY v.tid, row"
                ).fetchnumpy()
                self._con.execute("DROP TABLE __terms")
                self._con.execute("DROP TABLE __vocab")
            finally:
                self._con.unregister("__texts")
        return (
            vocab,
            np.asarray(cols["tid"], dtype=np.int64),
            np.asarray(cols["row"], dtype=np.int32),
            np.asarray(cols["tf"], dtype=np.float32),
            np.asarray(lengths, dtype=np.float32),
        )


#: The index's tokenizer (``evidence_terms`` with a per-process word cache), for
#: other rankers that must stem exactly as evidence search does
#: (``serving.turn_rank`` through ``eval.locomo_recall``).
TermTokenizer = _Tokenizer


def _kmeans(vectors: np.ndarray, lists: int, seed: int = 0, rounds: int = 8):
    """Spherical k-means centroids (trained on a sample) for the IVF partition."""
    rng = np.random.default_rng(seed)
    sample_size = min(len(vectors), max(lists * 40, 20_000))
    sample = vectors[rng.choice(len(vectors), size=sample_size, replace=False)]
    centroids = sample[rng.choice(len(sample), size=lists, replace=False)].copy()
    for _ in range(rounds):
        assign = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        empty = norms[:, 0] == 0
        sums[empty] = centroids[empty]
        norms[empty] = 1.0
        centroids = (sums / norms).astype(np.float32)
    return centroids


def _assign(vectors: np.ndarray, centroids: np.ndarray, batch: int = 65_536):
    out = np.empty(len(vectors), dtype=np.int32)
    for start in range(0, len(vectors), batch):
        out[start : start + batch] = np.argmax(
            vectors[start : start + batch] @ centroids.T, axis=1
        )
    return out


class EvidenceIndex:
    """Sorted rows, ACL bitmasks, validity, BM25 postings, vectors, IVF lists."""

    def __init__(
        self,
        meta: pa.Table,
        acl: list[list[str]],
        vectors: np.ndarray,
        settings: SearchSettings,
        snapshot: int | None = None,
        ivf: tuple[np.ndarray, np.ndarray] | None = None,
        has_vector: np.ndarray | None = None,
    ):
        """``meta``: rows sorted by tenant (``_META_COLUMNS``), then IVF list;
        ``vectors``: one normalised float32 row per meta row, same order;
        ``ivf``: centroids and each row's list; ``has_vector``: False for rows
        whose embedding is pending (default: every row has one). Prefer
        ``from_rows``."""
        self.settings = settings
        self.snapshot = snapshot
        self.meta = meta
        self.n = meta.num_rows
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.vectors.shape != (self.n, EMBEDDING_DIM):
            raise ValueError("one vector per row expected")
        self.has_vector = (
            np.ones(self.n, dtype=bool)
            if has_vector is None
            else np.asarray(has_vector, dtype=bool).reshape(self.n)
        )
        self.all_vectors = bool(self.has_vector.all())
        tenants = meta.column("tenant_id").to_pylist()
        self.tenant_slices: dict[str, tuple[int, int]] = {}
        start = 0
        for i in range(1, self.n + 1):
            if i == self.n or tenants[i] != tenants[start]:
                if tenants[start] in self.tenant_slices:
                    raise ValueError("rows must be sorted by tenant")
                self.tenant_slices[tenants[start]] = (start, i)
                start = i
        self._build_acl(tenants, acl)
        self._build_subjects(meta)
        self.eff_from = self._micros(meta.column("effective_from"), 0)
        self.eff_to = self._micros(meta.column("effective_to"), _FAR_FUTURE)
        self._tokenizer = _Tokenizer()
        self._build_postings(meta.column("text"))
        #: Python lists of the metadata columns, filled on first use: ``row``
        #: is a few list reads, not 17 pyarrow scalar conversions (measured:
        #: 0.1 ms a row, 16 ms of a 160-candidate pack on a loaded machine).
        self._columns: dict[str, list[Any]] = {}
        self._columns_lock = threading.Lock()
        self._row_columns: list[list[Any]] | None = None
        #: Arrays built on first use (``chunk_rank``, ``token_counts``); two
        #: threads building one at once build the same array.
        self._chunk_rank: np.ndarray | None = None
        self._token_counts: np.ndarray | None = None
        #: ``scope_vectors``: gathered vectors by scope rows, least recent first
        self._scope_vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._scope_bytes = 0
        self._scope_lock = threading.Lock()
        self._ivf: np.ndarray | None = None  # centroids
        self._lists: dict[str, np.ndarray] = {}  # tenant -> list bounds (rows)
        if ivf is not None:
            centroids, assign = ivf
            self._ivf = centroids
            wanted = np.arange(len(centroids) + 1)
            for tenant, (lo, hi) in self.tenant_slices.items():
                if np.any(np.diff(assign[lo:hi]) < 0):
                    raise ValueError("rows must be sorted by IVF list in a tenant")
                self._lists[tenant] = lo + np.searchsorted(assign[lo:hi], wanted)

    # ------------------------------------------------------------------ build
    @staticmethod
    def _micros(column: pa.ChunkedArray, fill: int) -> np.ndarray:
        values = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        return np.asarray(values.fill_null(fill).to_numpy(), dtype=np.int64)

    def _build_acl(self, tenants: list[str], acl: list[list[str]]) -> None:
        """Per tenant, each group gets a bit (``*`` is bit 0); groups beyond 62
        per tenant share an overflow bit and are checked exactly."""
        self.group_bits: dict[str, dict[str, int]] = {}
        self.acl_mask = np.zeros(self.n, dtype=np.uint64)
        self.acl_sets: dict[int, frozenset[str]] = {}
        for tenant, (lo, hi) in self.tenant_slices.items():
            counts: dict[str, int] = {}
            for groups in acl[lo:hi]:
                for group in groups:
                    counts[group] = counts.get(group, 0) + 1
            ordered = sorted(counts, key=lambda g: (g != "*", -counts[g], g))
            bits = {"*": 0}
            for group in ordered:
                if group != "*" and len(bits) < 63:
                    bits[group] = len(bits)
            self.group_bits[tenant] = bits
            for row in range(lo, hi):
                mask = 0
                for group in acl[row]:
                    bit = bits.get(group)
                    if bit is None:
                        mask |= int(_OVERFLOW_BIT)
                        self.acl_sets[row] = frozenset(acl[row])
                    else:
                        mask |= 1 << bit
                self.acl_mask[row] = mask

    def _build_subjects(self, meta: pa.Table) -> None:
        """Artifact rows and their subjects as integer codes (-1: none), so the
        subject filter is a vectorised compare, like the ACL mask."""
        import pyarrow.compute as pc  # noqa: PLC0415

        artifact = pc.fill_null(pc.equal(meta.column("kind"), "tool_artifact"), False)
        self.is_artifact = np.asarray(
            artifact.to_numpy(zero_copy_only=False), dtype=bool
        ).reshape(self.n)
        owners = pc.if_else(
            artifact, meta.column("subject_id"), pa.scalar(None, pa.string())
        )
        encoded = owners.combine_chunks().dictionary_encode()
        self.subject_codes: dict[str, int] = {
            subject: code for code, subject in enumerate(encoded.dictionary.to_pylist())
        }
        self.subject_code = np.asarray(
            encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False),
            dtype=np.int64,
        ).reshape(self.n)

    def _build_postings(self, texts: pa.ChunkedArray) -> None:
        vocab, tids, rows, tf, self.doc_len = self._tokenizer.postings(
            texts.combine_chunks()
        )
        if len(self.doc_len) != self.n:
            self.doc_len = np.zeros(self.n, dtype=np.float32)
        self.term_ids = {term: i for i, term in enumerate(vocab)}
        self.term_ptr = np.searchsorted(tids, np.arange(len(vocab) + 1)).astype(
            np.int64
        )
        self.post_rows = rows
        self.post_tf = tf

    @classmethod
    def from_rows(
        cls,
        meta: pa.Table,
        vectors: np.ndarray,
        settings: SearchSettings,
        snapshot: int | None = None,
        has_vector: np.ndarray | None = None,
    ) -> EvidenceIndex:
        """Sort ``meta`` (with an ``acl`` column) and ``vectors`` by tenant (and,
        with an IVF partition, by list inside a tenant, so that every list of a
        tenant is one contiguous block of vectors), then build. ``has_vector``:
        False for rows without an embedding yet (their ``vectors`` row is
        ignored: zeros)."""
        import pyarrow.compute as pc  # noqa: PLC0415

        vectors = np.asarray(vectors, dtype=np.float32)
        if has_vector is None:
            has_vector = np.ones(meta.num_rows, dtype=bool)
        has_vector = np.asarray(has_vector, dtype=bool)
        ivf = None
        assign = np.zeros(meta.num_rows, dtype=np.int32)
        if settings.ivf_min_rows and int(has_vector.sum()) >= settings.ivf_min_rows:
            centroids = _kmeans(
                vectors[has_vector], max(16, int(math.sqrt(int(has_vector.sum()))))
            )
            assign = _assign(vectors, centroids)
            ivf = centroids
        keyed = pa.table(
            {
                "tenant_id": meta.column("tenant_id"),
                "list": pa.array(assign),
                "chunk_id": meta.column("chunk_id"),
            }
        )
        order = pc.sort_indices(
            keyed,
            sort_keys=[
                ("tenant_id", "ascending"),
                ("list", "ascending"),
                ("chunk_id", "ascending"),
            ],
        ).to_numpy()
        meta = meta.take(pa.array(order))
        if "subject_id" not in meta.column_names:  # rows from before subjects
            meta = meta.append_column(
                "subject_id", pa.nulls(meta.num_rows, pa.string())
            )
        acl = meta.column("acl").to_pylist()
        return cls(
            meta.select(list(_META_COLUMNS)),
            acl,
            vectors[order],
            settings,
            snapshot,
            (ivf, assign[order]) if ivf is not None else None,
            has_vector[order],
        )

    # ------------------------------------------------------------------ query
    def scope(
        self,
        tenant_id: str,
        principal_groups: Sequence[str],
        as_of: datetime | None,
        subject_id: str | None = None,
        operator_groups: Sequence[str] = (),
    ) -> np.ndarray:
        """Row ids this principal may see at ``as_of`` (sorted, one tenant).

        Documents by ACL; tool artifacts only when they are ``subject_id``'s or
        ``principal_groups`` holds one of ``operator_groups`` (module doc)."""
        span = self.tenant_slices.get(tenant_id)
        if span is None:
            return np.zeros(0, dtype=np.int64)
        lo, hi = span
        bits = self.group_bits[tenant_id]
        wanted = 1
        for group in principal_groups:
            if group in bits:
                wanted |= 1 << bits[group]
        acl = self.acl_mask[lo:hi]
        allowed = (acl & np.uint64(wanted)) != 0
        overflow = np.nonzero((acl & _OVERFLOW_BIT) != 0)[0]
        if len(overflow):
            groups = set(principal_groups)
            for offset in overflow:
                if not allowed[offset] and self.acl_sets[lo + offset] & groups:
                    allowed[offset] = True
        artifact = self.is_artifact[lo:hi]
        if set(principal_groups) & set(operator_groups):
            own = artifact
        else:
            code = self.subject_codes.get(subject_id) if subject_id else None
            own = artifact & (
                self.subject_code[lo:hi] == (-2 if code is None else code)
            )
        allowed = np.where(artifact, own, allowed)
        t = to_micros(as_of)
        allowed &= (self.eff_from[lo:hi] <= t) & (self.eff_to[lo:hi] > t)
        return lo + np.nonzero(allowed)[0]

    def bm25(self, query: str, scope: np.ndarray, n: int) -> list[tuple[int, float]]:
        """Top ``n`` (row, score) by BM25 with the scope's own statistics."""
        return self._top(*self.bm25_scores(query, scope), n)

    def bm25_scores(
        self, query: str, scope: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, scores)`` of every scope row the query's terms hit (BM25
        with the scope's own statistics, rounded), unordered.

        A scope lies inside one tenant's slice ``[lo, hi)``; postings are sorted
        by row within a term, so only the tenant's part of each posting list is
        read, and masks and accumulators span the slice, not the index."""
        none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
        if not len(scope):
            return none
        # term ids in order, not in the hash order of a set of strings: a
        # row's score is summed term by term, and another order can move its
        # last bits (per process: string hashes are salted)
        terms = set(self._tokenizer.terms(query))
        ids = sorted(self.term_ids[t] for t in terms if t in self.term_ids)
        if not ids:
            return none
        lo, hi = int(scope[0]), int(scope[-1]) + 1
        in_scope = np.zeros(hi - lo, dtype=bool)
        in_scope[scope - lo] = True
        n_docs = float(len(scope))
        avgdl = float(self.doc_len[scope].mean()) or 1.0
        k1, b = self.settings.bm25_k1, self.settings.bm25_b
        totals = np.zeros(hi - lo, dtype=np.float64)
        touched = False
        for term in ids:
            start, end = int(self.term_ptr[term]), int(self.term_ptr[term + 1])
            postings = self.post_rows[start:end]
            first = start + int(np.searchsorted(postings, lo))
            last = start + int(np.searchsorted(postings, hi))
            rows = self.post_rows[first:last] - lo
            keep = in_scope[rows]
            rows = rows[keep]
            if not len(rows):
                continue
            tf = self.post_tf[first:last][keep]
            df = float(len(rows))
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * self.doc_len[rows + lo] / avgdl)
            totals[rows] += idf * tf * (k1 + 1.0) / (tf + norm)  # rows are unique
            touched = True
        if not touched:
            return none
        hit = np.flatnonzero(totals)
        return hit + lo, np.round(totals[hit], SCORE_DECIMALS)

    def vector(
        self, query_vec: np.ndarray, scope: np.ndarray, n: int
    ) -> list[tuple[int, float]]:
        """Top ``n`` (row, cosine) over the scope (exact, or IVF-probed)."""
        return self._top(*self.vector_scores(query_vec, scope), n)

    def vector_scores(
        self, query_vec: np.ndarray, scope: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, cosines)`` of the scope rows with a vector (exact, or the
        IVF-probed lists), rounded, unordered."""
        if not self.all_vectors:
            scope = scope[self.has_vector[scope]]  # pending rows: BM25 only
        if not len(scope):
            return scope[:0], np.zeros(0, dtype=np.float64)
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm:
            q = q / norm
        if self._ivf is not None and len(scope) > self.settings.exact_max_rows:
            rows, scores = self._probe(q, scope)
        else:
            rows = scope
            lo, hi = int(rows[0]), int(rows[-1]) + 1
            if len(rows) * 2 >= hi - lo:  # dense: one pass over the slice
                scores = (self.vectors[lo:hi] @ q)[rows - lo]
            else:
                scores = self.scope_vectors(rows) @ q
        return rows, np.round(scores.astype(np.float64), SCORE_DECIMALS)

    def scope_vectors(self, rows: np.ndarray) -> np.ndarray:
        """``self.vectors[rows]``: the gathered vectors of a sparse scope,
        kept for the last few scopes (``SCOPE_VECTORS_BYTES`` in all).

        A scope is a pure function of the request's tenant, groups, subject
        and date, so the same rows come back request after request; the
        gather was a copy of every scope row (~2,000 rows, 3 MB, ~0.3 ms of
        a pack, cache-cold) before the product itself. The product must run
        on this gathered matrix, not the tenant's slice: OpenBLAS's sgemv
        gives a row different last bits depending on where it sits in the
        matrix (280 of 300 questions differed), and the cosines are ranked
        and rounded. Keyed by the rows' bytes (exact; a dict compares them
        on a hash hit)."""
        key = rows.tobytes()
        with self._scope_lock:
            found = self._scope_vectors.get(key)
            if found is not None:
                self._scope_vectors.move_to_end(key)
                return found
        found = self.vectors[rows]
        found.flags.writeable = False
        if found.nbytes <= SCOPE_VECTORS_BYTES // 2:
            with self._scope_lock:
                self._scope_vectors[key] = found
                self._scope_bytes += found.nbytes
                while self._scope_bytes > SCOPE_VECTORS_BYTES:
                    _, old = self._scope_vectors.popitem(last=False)
                    self._scope_bytes -= old.nbytes
        return found

    def _probe(self, q: np.ndarray, scope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scope rows of the IVF lists nearest to ``q``, with their cosines.

        Each list of a tenant is a contiguous block of vectors, so a probe is a
        matrix-vector product over a view; the scope mask applies before any
        score is kept."""
        centroids = self._ivf
        assert centroids is not None
        tenant = self.meta.column("tenant_id")[int(scope[0])].as_py()
        bounds = self._lists[tenant]
        lo, hi = int(bounds[0]), int(bounds[-1])
        mask = np.zeros(hi - lo, dtype=bool)
        mask[scope - lo] = True
        probes = max(1, math.ceil(len(centroids) * self.settings.ivf_probe_fraction))
        nearest = np.argpartition(-(centroids @ q), probes - 1)[:probes]
        rows_out, scores_out = [], []
        for lst in np.sort(nearest):
            start, end = int(bounds[lst]), int(bounds[lst + 1])
            if start == end:
                continue
            keep = mask[start - lo : end - lo]
            if not keep.any():
                continue
            scores = self.vectors[start:end] @ q
            rows_out.append(np.arange(start, end)[keep])
            scores_out.append(scores[keep])
        if not rows_out:
            return scope[:0], np.zeros(0, dtype=np.float32)
        return np.concatenate(rows_out), np.concatenate(scores_out)

    @staticmethod
    def _top(rows: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[int, float]]:
        rows, scores = EvidenceIndex._top_arrays(rows, scores, n)
        return list(zip(rows.tolist(), scores.tolist(), strict=True))

    @staticmethod
    def _top_arrays(
        rows: np.ndarray, scores: np.ndarray, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``_top`` as two arrays (rows, scores), best first: what ``pack``'s
        candidate rounds read without a Python tuple per row."""
        if not len(rows):
            return rows[:0], scores[:0]
        if len(rows) > n:
            keep = np.argpartition(-scores, n - 1)[:n]
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((rows, -scores))  # score desc, then row (stable)
        return rows[order], scores[order]

    def chunk_rank(self) -> np.ndarray:
        """Each row's position in chunk-id order (built once): ties of the
        fused ranking break by chunk id with one integer compare."""
        ranks = self._chunk_rank
        if ranks is None:
            import pyarrow.compute as pc  # noqa: PLC0415

            order = pc.sort_indices(self.meta.column("chunk_id")).to_numpy()
            ranks = np.empty(self.n, dtype=np.int64)
            ranks[order] = np.arange(self.n, dtype=np.int64)
            self._chunk_rank = ranks
        return ranks

    def token_counts(self) -> np.ndarray:
        """``token_count`` of every row as an int64 array (built once)."""
        counts = self._token_counts
        if counts is None:
            counts = self._token_counts = np.asarray(
                self.meta.column("token_count").fill_null(0).to_numpy(),
                dtype=np.int64,
            )
        return counts

    def search(
        self,
        tenant_id: str,
        principal_groups: list[str],
        query: str,
        query_vec: np.ndarray,
        k: int,
        as_of: datetime | None,
        candidates: int,
        *,
        subject_id: str | None = None,
        operator_groups: Sequence[str] = (),
    ) -> list[Ranked]:
        """Fused top ``k`` within the principal's scope (see ``scope``)."""
        return self.searcher(
            tenant_id,
            principal_groups,
            query,
            query_vec,
            as_of,
            subject_id=subject_id,
            operator_groups=operator_groups,
        ).top(k, candidates)

    def searcher(
        self,
        tenant_id: str,
        principal_groups: Sequence[str],
        query: str,
        query_vec: np.ndarray,
        as_of: datetime | None,
        *,
        subject_id: str | None = None,
        operator_groups: Sequence[str] = (),
    ) -> Searcher:
        """One query's scope and scores, computed once: ``top(k, candidates)``
        then answers ``search`` for any ``k`` and ``candidates`` (``pack``
        asks for more candidates until they fill its budget) by top-n
        selection alone."""
        scope = self.scope(
            tenant_id, principal_groups, as_of, subject_id, operator_groups
        )
        return Searcher(
            self,
            scope,
            self.bm25_scores(query, scope),
            self.vector_scores(query_vec, scope),
        )

    def column(self, name: str) -> list[Any]:
        """One metadata column as a Python list (converted once, then cached)."""
        values = self._columns.get(name)
        if values is None:
            with self._columns_lock:
                values = self._columns.get(name)
                if values is None:
                    values = self.meta.column(name).to_pylist()
                    self._columns[name] = values
        return values

    def warm(self) -> None:
        """Convert the metadata columns now (a server's warm-up), not on the
        first request."""
        for name in _META_COLUMNS:
            self.column(name)
        self.chunk_rank()
        self.token_counts()

    def row(self, row: int) -> dict[str, Any]:
        """The metadata of one row as a dict."""
        columns = self._row_columns
        if columns is None:
            columns = self._row_columns = [self.column(n) for n in _META_COLUMNS]
        return dict(zip(_META_COLUMNS, [v[row] for v in columns], strict=True))

    def row_of(self, chunk_id: str) -> int | None:
        """Row of a chunk id (linear scan; used for mandatory pack items)."""
        try:
            return self.column("chunk_id").index(chunk_id)
        except ValueError:
            return None


class Searcher:
    """A query's scope and its BM25 and cosine scores over that scope
    (``EvidenceIndex.searcher``); ``top`` fuses the best of both."""

    def __init__(
        self,
        index: EvidenceIndex,
        scope: np.ndarray,
        bm25: tuple[np.ndarray, np.ndarray],
        cosine: tuple[np.ndarray, np.ndarray],
    ):
        self.index = index
        self.scope = scope
        self._bm25 = bm25
        self._cosine = cosine

    def top(self, k: int, candidates: int) -> list[Ranked]:
        """Fused top ``k`` of the top-``candidates`` lists of both rankings,
        by weighted reciprocal rank fusion; ties by chunk id."""
        index = self.index
        bm25 = index._top(*self._bm25, candidates)
        cosine = index._top(*self._cosine, candidates)
        s = index.settings
        fused: dict[int, dict[str, Any]] = {}
        for rank, (row, score) in enumerate(bm25, start=1):
            fused.setdefault(row, {})["bm25"] = (score, rank)
        for rank, (row, score) in enumerate(cosine, start=1):
            fused.setdefault(row, {})["cosine"] = (score, rank)
        results = []
        for row, parts in fused.items():
            b = parts.get("bm25")
            v = parts.get("cosine")
            value = (s.bm25_weight / (s.rrf_k + b[1]) if b else 0.0) + (
                s.vector_weight / (s.rrf_k + v[1]) if v else 0.0
            )
            results.append(
                Ranked(
                    row,
                    value,
                    b[0] if b else None,
                    b[1] if b else None,
                    v[0] if v else None,
                    v[1] if v else None,
                )
            )
        chunk_ids = index.column("chunk_id")
        results.sort(key=lambda r: (-r.fused, chunk_ids[r.row]))
        return results[:k]

    def top_rows(self, k: int, candidates: int) -> np.ndarray:
        """The rows of ``top(k, candidates)``, in its order, computed on
        arrays: the same fused values (the same float operations: each
        ranking's ``weight / (rrf_k + rank)``, bm25's part first, 0.0 for a
        ranking that misses the row) and the same ties by chunk id, without
        a ``Ranked`` per row (``pack`` asks for up to four rounds of 20-320)."""
        index = self.index
        s = index.settings
        b_rows, _ = index._top_arrays(*self._bm25, candidates)
        v_rows, _ = index._top_arrays(*self._cosine, candidates)
        both = np.concatenate([b_rows, v_rows])
        if not len(both):
            return both.astype(np.int64)
        rows, where = np.unique(both, return_inverse=True)
        fused = np.zeros(len(rows), dtype=np.float64)
        b_ranks = np.arange(1, len(b_rows) + 1, dtype=np.float64)
        v_ranks = np.arange(1, len(v_rows) + 1, dtype=np.float64)
        fused[where[: len(b_rows)]] += s.bm25_weight / (s.rrf_k + b_ranks)
        fused[where[len(b_rows) :]] += s.vector_weight / (s.rrf_k + v_ranks)
        order = np.lexsort((index.chunk_rank()[rows], -fused))
        return rows[order[:k]].astype(np.int64)
