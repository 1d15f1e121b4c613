-- The end of `make run`: what the nightly built, read back with SQL
-- (ctxledger sql --warehouse W < sample/summary.sql; any landing works).
-- PII and secrets redacted, by type: counts only, values are never stored.
SELECT entity_type AS redacted, sum(spans) AS spans, sum(messages) AS messages
FROM pii_per_tenant GROUP BY ALL ORDER BY spans DESC, redacted;
-- Memories stored (only where consent covers the purpose: sample/consent.jsonl).
SELECT subject_id AS "memories of", purpose, kind, source, text
FROM memories WHERE superseded_at IS NULL ORDER BY ALL LIMIT 12;
-- Memory candidates the gate refused, and why (no_basis: no consent on file).
SELECT reason AS "not stored", count(*) AS candidates,
       count(DISTINCT subject_id) AS subjects
FROM memory_rejections GROUP BY ALL ORDER BY ALL;
-- Evidence chunks, embedded for search (tool outputs; documents with --docs).
SELECT kind AS "evidence chunks", count(*) AS chunks, sum(token_count) AS tokens,
       count(embedding) AS embedded
FROM evidence_chunks GROUP BY ALL ORDER BY ALL;
-- One compression-ledger entry, empty sections left out: the sample's support
-- chat if present, else the session summary with the most protected fields.
SELECT s.external_id AS session, l.verified,
       regexp_replace(l.summary_text, '## [^\n]+\n- none\n', '', 'g') AS ledger
FROM compression_ledger AS l JOIN sessions AS s USING (session_id)
WHERE l.scope = 'session'
ORDER BY s.external_id = 'acme-support-0001' DESC, len(l.protected_fields) DESC,
         l.summary_id
LIMIT 1;
