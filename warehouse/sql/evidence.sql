-- Evidence macros for analysts (installed by warehouse.evidence_api.install_macros).
-- Placeholders in {braces} are filled from the policy when installed (and, on a
-- lake written before tool artifacts had subjects, {doc_subject} and
-- {chunk_subject} read NULL until the next run adds the columns).
--
--   SELECT * FROM evidence_versions();                       -- validity per version
--   SELECT * FROM evidence_scope('acme', ['sre'], as_of := TIMESTAMPTZ '2020-01-01');
--   SELECT * FROM evidence_bm25('acme', ['sre'], 'rotate the key');
--   SELECT * FROM evidence_vector('acme', ['sre'], evidence_embed('rotate the key'));
--   SELECT * FROM evidence_search('acme', ['sre'], 'rotate the key', k := 5);
--   SELECT * FROM evidence_search('acme', [], 'order status', subject := 'u-123');
--
-- Tenant, ACL, subject and validity filters run first (evidence_scope); BM25
-- statistics and both rankings only ever see chunks in that scope. Documents
-- are admitted by their ACL; tool artifacts only to a request for the subject
-- of the session that produced them, or to a policy operator group
-- ({operator_groups}), never by ACL. Query text is only ever a macro argument
-- (a bound value): NUL or quotes in it are plain text. A chunk without a vector
-- (evidence.embedding.mode: deferred, before `ctxledger embed`) is ranked by
-- BM25 only: evidence_search says ranked_by = 'bm25' for it.

CREATE OR REPLACE TEMP MACRO evidence_terms(t) AS
    list_transform(
        list_filter(
            regexp_extract_all(lower(strip_accents(coalesce(t, ''))), '[a-z0-9]+'),
            w -> NOT list_contains({stopwords}, w)
        ),
        w -> stem(w, 'porter')
    );

CREATE OR REPLACE TEMP MACRO evidence_versions() AS TABLE
    SELECT
        doc_version_id, tenant_id, doc_id, kind, {doc_subject} AS subject_id, version,
        effective_from, deleted,
        authority, title,
        lead(effective_from) OVER (
            PARTITION BY tenant_id, doc_id, {doc_subject}
            ORDER BY effective_from, version_sort, doc_version_id
        ) AS effective_to
    FROM documents;

CREATE OR REPLACE TEMP MACRO evidence_scope(
    tenant, groups, as_of := NULL, subject := NULL
) AS TABLE
    SELECT c.*{chunk_subject_column}, v.effective_to, v.authority
    FROM evidence_chunks c
    JOIN evidence_versions() v USING (doc_version_id)
    WHERE c.tenant_id = tenant
      AND CASE WHEN c.kind = 'tool_artifact'
          THEN coalesce({chunk_subject} = subject, false)
            OR len(list_intersect({operator_groups}, coalesce(groups, []))) > 0
          ELSE list_contains(c.acl, '*')
            OR len(list_intersect(c.acl, coalesce(groups, []))) > 0
          END
      AND c.effective_from <= coalesce(as_of, now())
      AND (v.effective_to IS NULL OR v.effective_to > coalesce(as_of, now()));

CREATE OR REPLACE TEMP MACRO evidence_bm25(
    tenant, groups, query, as_of := NULL, n := {candidates}, subject := NULL
) AS TABLE
    WITH scope AS (
        SELECT chunk_id, evidence_terms(text) AS terms
        FROM evidence_scope(tenant, groups, as_of := as_of, subject := subject)
    ),
    stats AS (
        SELECT count(*) AS n_docs, avg(len(terms)) AS avgdl FROM scope
    ),
    q AS (SELECT DISTINCT unnest(evidence_terms(query)) AS term),
    tf AS (
        SELECT chunk_id, term, count(*) AS tf, any_value(dl) AS dl
        FROM (
            SELECT chunk_id, unnest(terms) AS term, len(terms) AS dl FROM scope
        ) t
        SEMI JOIN q USING (term)
        GROUP BY chunk_id, term
    ),
    df AS (SELECT term, count(*) AS df FROM tf GROUP BY term),
    scored AS (
        SELECT
            tf.chunk_id,
            sum(
                ln(1 + (stats.n_docs - df.df + 0.5) / (df.df + 0.5))
                * tf.tf * ({k1} + 1)
                / (tf.tf + {k1} * (1 - {b} + {b} * tf.dl / stats.avgdl))
            ) AS raw
        FROM tf JOIN df USING (term), stats
        GROUP BY tf.chunk_id
    )
    SELECT chunk_id, round(raw, 6) AS bm25,
        row_number() OVER (ORDER BY round(raw, 6) DESC, chunk_id) AS rank
    FROM scored
    ORDER BY rank
    LIMIT n;

CREATE OR REPLACE TEMP MACRO evidence_vector(
    tenant, groups, query_vec, as_of := NULL, n := {candidates}, subject := NULL
) AS TABLE
    SELECT chunk_id, cosine, row_number() OVER (ORDER BY cosine DESC, chunk_id) AS rank
    FROM (
        SELECT
            s.chunk_id,
            round(list_dot_product(s.embedding, q.v) / q.norm, 6) AS cosine
        FROM evidence_scope(tenant, groups, as_of := as_of, subject := subject) s,
            (
                -- the query vector is computed once (it may call evidence_embed)
                SELECT v, greatest(sqrt(list_dot_product(v, v)), 1e-12) AS norm
                FROM (SELECT query_vec::FLOAT[] AS v)
            ) q
        -- a chunk whose embedding is deferred and not filled in yet: BM25 only
        WHERE s.embedding IS NOT NULL
    )
    ORDER BY rank
    LIMIT n;

CREATE OR REPLACE TEMP MACRO evidence_search(
    tenant, groups, query, k := 5, as_of := NULL, candidates := {candidates},
    query_vec := NULL, subject := NULL
) AS TABLE
    WITH b AS (
        SELECT * FROM evidence_bm25(
            tenant, groups, query, as_of := as_of, n := candidates, subject := subject
        )
    ),
    v AS (
        SELECT * FROM evidence_vector(
            tenant, groups, coalesce(query_vec, evidence_embed(query)),
            as_of := as_of, n := candidates, subject := subject
        )
    ),
    fused AS (
        SELECT
            coalesce(b.chunk_id, v.chunk_id) AS chunk_id,
            b.bm25, b.rank AS bm25_rank, v.cosine, v.rank AS cosine_rank,
            coalesce({bm25_weight} / ({rrf_k} + b.rank), 0)
              + coalesce({vector_weight} / ({rrf_k} + v.rank), 0) AS fused
        FROM b FULL OUTER JOIN v ON b.chunk_id = v.chunk_id
    )
    SELECT
        s.chunk_id, s.doc_id, s.doc_version, s.kind, s.subject_id, s.section_path,
        s.char_start,
        s.char_end, s.text, s.trust, s.effective_from, s.effective_to,
        f.bm25, f.bm25_rank, f.cosine, f.cosine_rank, f.fused,
        CASE WHEN s.embedding IS NULL THEN 'bm25' ELSE 'hybrid' END AS ranked_by
    FROM fused f
    JOIN evidence_scope(tenant, groups, as_of := as_of, subject := subject) s
        USING (chunk_id)
    ORDER BY f.fused DESC, s.chunk_id
    LIMIT k;
