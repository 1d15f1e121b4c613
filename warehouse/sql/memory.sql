-- Memory query macros: the same checks as Context.memories() (docs/memory.md).
-- They read the DuckLake attached as `lake`. Load them on a connection with
--   duckdb> .read warehouse/sql/memory.sql
-- or prepend this file to statements piped into `ctxledger sql`:
--   (cat warehouse/sql/memory.sql; echo "SELECT text FROM memory_facts('acme', 'u-1', 'support');") \
--     | ctxledger sql --warehouse WH
-- Statements are separated by ";" at the end of a line.

-- Is a legal basis for (tenant, subject, purpose) live at time t? A grant at or
-- before t, not ended by itself, and not withdrawn (same purpose or '*', same basis
-- or any) between the grant and t. A grant of unknown source is no basis.
CREATE OR REPLACE TEMP MACRO memory_live_basis(tenant, subject, purp, t) AS (
  EXISTS (
    SELECT 1 FROM lake.consent g
    WHERE g.event = 'grant' AND coalesce(g.source, '') <> 'unknown'
      AND g.tenant_id = tenant AND g.subject_id = subject
      AND g.purpose = purp AND g.effective_at <= t
      AND (g.expires_at IS NULL OR g.expires_at > t)
      AND NOT EXISTS (
        SELECT 1 FROM lake.consent w
        WHERE w.event = 'withdraw' AND w.tenant_id = g.tenant_id
          AND w.subject_id = g.subject_id
          AND (w.purpose = g.purpose OR w.purpose = '*')
          AND (w.basis IS NULL OR w.basis = g.basis)
          AND w.effective_at >= g.effective_at AND w.effective_at <= t
      )
  )
);

-- Memories a context builder may use for (tenant, subject, purpose), with the
-- seed article's four checks plus lifecycle: only this tenant and subject; only
-- this purpose; not expired; only accepted sources with known provenance; valid
-- at at_time (default now); a live basis now (the memory_live_basis rule, over
-- one read of the subject's consent events). served_as: fact | conflict |
-- hypothesis. Every memories column except `embedding` (384 floats per row,
-- for pack's ranking: read it from lake.memories by memory_id when needed); the
-- COLUMNS filter, unlike EXCLUDE, also works on a lake written before vectors.
CREATE OR REPLACE TEMP MACRO memories_served(
    tenant, subject, purp,
    at_time := NULL,
    fact_sources := ['user_stated', 'system_record'],
    hypothesis_sources := ['model_inferred']
) AS TABLE
  WITH clock AS (
    SELECT coalesce(at_time, now()) AS t_valid,
           greatest(coalesce(at_time, now()), now()) AS t_serve
  ),
  events AS MATERIALIZED (
    SELECT event, purpose, basis, effective_at, expires_at FROM lake.consent
    WHERE tenant_id = tenant AND subject_id = subject
      AND (purpose = purp OR purpose = '*')
      AND NOT (event = 'grant' AND coalesce(source, '') = 'unknown')
  ),
  basis AS (
    SELECT count(*) > 0 AS live
    FROM events g, clock
    WHERE g.event = 'grant' AND g.purpose = purp AND g.effective_at <= clock.t_serve
      AND (g.expires_at IS NULL OR g.expires_at > clock.t_serve)
      AND NOT EXISTS (
        SELECT 1 FROM events w
        WHERE w.event = 'withdraw' AND (w.basis IS NULL OR w.basis = g.basis)
          AND w.effective_at >= g.effective_at AND w.effective_at <= clock.t_serve
      )
  ),
  served AS (
    SELECT
      m.*,
      CASE
        WHEN list_contains(hypothesis_sources, m.source) THEN 'hypothesis'
        WHEN m.conflict_with IS NOT NULL THEN 'conflict'
        ELSE 'fact'
      END AS served_as
    FROM lake.memories m, clock, basis
    WHERE basis.live
      AND m.tenant_id = tenant AND m.subject_id = subject AND m.purpose = purp
      AND (list_contains(fact_sources, m.source)
           OR list_contains(hypothesis_sources, m.source))
      AND m.provenance IS NOT NULL
      AND (m.provenance.message_id IS NOT NULL OR m.provenance.input_ref IS NOT NULL)
      AND m.valid_from <= clock.t_valid
      AND (m.valid_to IS NULL OR m.valid_to > clock.t_valid)
      AND m.expires_at > clock.t_serve
  )
  SELECT COLUMNS(c -> c <> 'embedding') FROM served;

CREATE OR REPLACE TEMP MACRO memory_facts(tenant, subject, purp, at_time := NULL) AS TABLE
  SELECT * FROM memories_served(tenant, subject, purp, at_time := at_time)
  WHERE served_as = 'fact';

CREATE OR REPLACE TEMP MACRO memory_hypotheses(tenant, subject, purp, at_time := NULL) AS TABLE
  SELECT * FROM memories_served(tenant, subject, purp, at_time := at_time)
  WHERE served_as = 'hypothesis';

-- Consent as periods: one row per grant (of a known source), with when it stopped
-- (withdrawn or ended).
CREATE OR REPLACE TEMP MACRO consent_periods() AS TABLE
  SELECT
    g.tenant_id, g.subject_id, g.purpose, g.basis, g.effective_at AS granted_at,
    least(
      g.expires_at,
      (SELECT min(w.effective_at) FROM lake.consent w
       WHERE w.event = 'withdraw' AND w.tenant_id = g.tenant_id
         AND w.subject_id = g.subject_id
         AND (w.purpose = g.purpose OR w.purpose = '*')
         AND (w.basis IS NULL OR w.basis = g.basis) AND w.effective_at >= g.effective_at)
    ) AS withdrawn_at,
    g.consent_id
  FROM lake.consent g
  WHERE g.event = 'grant' AND coalesce(g.source, '') <> 'unknown';
