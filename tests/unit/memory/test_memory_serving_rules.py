"""The replica's serving rules (``serving.memories.serve_rows``) give
exactly what the ``memories_served`` SQL macro gives, on generated memories and
consent events: NULLs, wildcard and basis-less withdrawals, expiring grants,
validity windows, conflicts, unknown sources and provenance, and ``at`` in the
past or future. The macro runs in plain DuckDB over tables named like the lake's.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.serving.memories import ConsentRow, live_basis, serve_rows
from ctxledger.warehouse.memory_api import macro_statements
from ctxledger.warehouse.memory_serving import MEMORY_COLUMNS

NOW = datetime.now(UTC).replace(microsecond=0)
FACTS = ("user_stated", "system_record")
HYPOTHESES = ("model_inferred",)

purposes = st.sampled_from(["support", "billing"])


def _t(d: int | None) -> datetime | None:
    return None if d is None else NOW + timedelta(days=d)


# Offsets in days from now: a small set, so equal timestamps happen, and never
# near now (the macro's now() and ours differ by milliseconds). Weighted towards
# servable rows and live grants (a base grant per purpose most of the time,
# withdrawals often), so a rule that differs from the macro shows up.
OFFSETS = [-400, -60, -45, -20, -5, 5, 40, 500]
EVENT_OPTIONS = (
    ["grant", "withdraw", "withdraw", None],
    ["support", "billing", "*", "*", None],
    ["contract", "consent", None, None],
    [*OFFSETS, None],
    [None, None, None, -20, -5, 5, 500],
    [None, None, None, "unknown", "user_stated"],  # source: unknown grants no basis
)
MEMORY_OPTIONS = (
    [*FACTS, *FACTS, *HYPOTHESES, "bogus", None],  # source
    ["support", "support", "billing"],  # purpose
    ["msg", "msg", "msg", "input", "none", "null"],  # provenance
    [-400, -60, -45, -45, -20, -5, 5, None],  # valid_from
    [None, None, None, -20, -5, 5, 40],  # valid_to
    [500, 500, 40, 5, -5, -20, None],  # expires_at
)
BASES = [[], [("grant", "support", "contract", -60, None)]] + [
    [("grant", p, "contract", -60, None) for p in ("support", "billing")]
] * 3
ATS = [None, None, -45, -20, -5, 5, 40, 500]
events = st.builds(
    lambda b, extra: b + extra,
    st.sampled_from(BASES),
    st.lists(st.tuples(*(st.sampled_from(o) for o in EVENT_OPTIONS)), max_size=4),
)
memories = st.lists(
    st.tuples(*(st.sampled_from(o) for o in MEMORY_OPTIONS), st.booleans()),
    min_size=1,
    max_size=5,
)
ats = st.sampled_from(ATS)

DDL = [
    "CREATE SCHEMA lake",
    "CREATE TABLE lake.consent (consent_id VARCHAR, tenant_id VARCHAR, "
    "subject_id VARCHAR, purpose VARCHAR, basis VARCHAR, event VARCHAR, "
    "effective_at TIMESTAMPTZ, "
    "expires_at TIMESTAMPTZ, source VARCHAR)",
    "CREATE TABLE lake.memories (memory_id VARCHAR, tenant_id VARCHAR, "
    "subject_id VARCHAR, text VARCHAR, kind VARCHAR, source VARCHAR, "
    "purpose VARCHAR, slot VARCHAR, value VARCHAR, confidence DOUBLE, "
    "provenance STRUCT(message_id VARCHAR, input_ref VARCHAR), basis VARCHAR, "
    "valid_from TIMESTAMPTZ, valid_to TIMESTAMPTZ, recorded_at TIMESTAMPTZ, "
    "expires_at TIMESTAMPTZ, conflict_with VARCHAR)",
]


def _con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for statement in DDL + macro_statements():
        con.execute(statement)
    return con


CON = _con()


def _provenance(kind: str) -> dict | None:
    return {
        "msg": {"message_id": "m1", "input_ref": None},
        "input": {"message_id": None, "input_ref": "f#line:1"},
        "none": {"message_id": None, "input_ref": None},
        "null": None,
    }[kind]


TS = pa.timestamp("us", tz="UTC")
CONSENT_SCHEMA = pa.schema(
    [("subject_id", pa.string()), ("purpose", pa.string()), ("basis", pa.string()),
     ("event", pa.string()), ("effective_at", TS), ("expires_at", TS),
     ("source", pa.string())]
)  # fmt: skip
MEMORY_SCHEMA = pa.schema(
    [("memory_id", pa.string()), ("subject_id", pa.string()), ("text", pa.string()),
     ("kind", pa.string()), ("source", pa.string()), ("purpose", pa.string()),
     ("slot", pa.string()), ("value", pa.string()), ("confidence", pa.float64()),
     ("provenance", pa.struct([("message_id", pa.string()),
                               ("input_ref", pa.string())])),
     ("basis", pa.string()), ("valid_from", TS), ("valid_to", TS),
     ("recorded_at", TS), ("expires_at", TS), ("conflict_with", pa.string())]
)  # fmt: skip


def _scenario(subject, events, memories):
    """((consent row, source) pairs, memory rows) of one subject."""
    consent_rows = [
        (ConsentRow(ev, p, b, _t(eff), _t(exp)), src[0] if src else None)
        for ev, p, b, eff, exp, *src in events
    ]
    rows = []
    for i, (source, purp, prov, vf, vt, exp, conflict) in enumerate(memories):
        rows.append((
            f"mem_{i:02d}", f"text {i}", "fact", source, purp, None, None, 1.0,
            _provenance(prov), "contract", _t(vf), _t(vt), _t(-1), _t(exp),
            "mem_x" if conflict else None,
        ))  # fmt: skip
    return consent_rows, rows


def _replica(consent_rows):
    """The consent rows a replica holds (``memory_serving._EXCLUDED``): no grant
    of unknown source, which is no basis."""
    return [
        r for r, src in consent_rows if not (r.event == "grant" and src == "unknown")
    ]


def _load(con, scenarios):
    """Insert the rows of every (subject, consent rows, memory rows) at once."""
    consent = [
        (subject, e.purpose, e.basis, e.event, e.effective_at, e.expires_at, src)
        for subject, events, _ in scenarios
        for e, src in events
    ]
    memories = [(r[0], subject, *r[1:]) for subject, _, rows in scenarios for r in rows]
    for table, schema, data in (
        ("consent", CONSENT_SCHEMA, consent),
        ("memories", MEMORY_SCHEMA, memories),
    ):
        arrow = pa.Table.from_pylist(
            [dict(zip(schema.names, row, strict=True)) for row in data], schema
        )
        con.register("__rows", arrow)
        con.execute(
            f"INSERT INTO lake.{table} BY NAME SELECT 'acme' AS tenant_id, * "
            "FROM __rows"
        )
        con.unregister("__rows")


def _check(con, cases):
    """serve_rows and live_basis against the macros, for each (subject, consent
    rows, memory rows, purpose, at)."""
    columns = ", ".join(MEMORY_COLUMNS)
    now = datetime.now(UTC)
    for subject, consent_rows, rows, purpose, at in cases:
        expected = con.execute(
            f"SELECT {columns}, served_as FROM memories_served('acme', ?, ?, "
            "at_time := ?::TIMESTAMPTZ) ORDER BY valid_from, memory_id",
            [subject, purpose, _t(at)],
        ).fetchall()
        got = serve_rows(
            rows, _replica(consent_rows), purpose, _t(at), now, FACTS, HYPOTHESES
        )
        assert [(r[0], r[-1]) for r in got] == [(r[0], r[-1]) for r in expected]
    times = [max(_t(at) or now, now) for *_, at in cases]
    con.register(
        "__asks",
        pa.table(
            {
                "i": list(range(len(cases))),
                "subject_id": [c[0] for c in cases],
                "purpose": [c[3] for c in cases],
                "t": pa.array(times, TS),
            }
        ),
    )
    live = con.execute(
        "SELECT memory_live_basis('acme', subject_id, purpose, t) FROM __asks "
        "ORDER BY i"
    ).fetchall()
    con.unregister("__asks")
    assert [r[0] for r in live] == [
        live_basis(_replica(c[1]), c[3], t) for c, t in zip(cases, times, strict=True)
    ]


def test_serve_rows_matches_the_sql_macro_on_seeded_cases():
    """400 random scenarios (one subject each, loaded at once): every rule of
    the macro, including the rare combinations hypothesis seldom builds."""
    rnd = random.Random(20261130)
    con = _con()
    cases = []
    for n in range(400):
        events = list(rnd.choice(BASES)) + [
            tuple(rnd.choice(options) for options in EVENT_OPTIONS)
            for _ in range(rnd.randint(0, 4))
        ]
        memories = [
            (*(rnd.choice(options) for options in MEMORY_OPTIONS), rnd.random() < 0.3)
            for _ in range(rnd.randint(1, 5))
        ]
        consent_rows, rows = _scenario(f"u{n}", events, memories)
        purpose = rnd.choice(["support", "support", "billing"])
        cases.append((f"u{n}", consent_rows, rows, purpose, rnd.choice(ATS)))
    _load(con, [(c[0], c[1], c[2]) for c in cases])
    _check(con, cases)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events, memories=memories, purpose=purposes, at=ats)
def test_serve_rows_matches_the_sql_macro(events, memories, purpose, at):
    con = CON
    con.execute("DELETE FROM lake.consent")
    con.execute("DELETE FROM lake.memories")
    consent_rows, rows = _scenario("u1", events, memories)
    # another subject's grant must not count
    other, _ = _scenario("u2", [("grant", purpose, "contract", -400, None)], [])
    _load(con, [("u1", consent_rows, rows), ("u2", other, [])])
    _check(con, [("u1", consent_rows, rows, purpose, at)])


def test_replica_rows_have_the_api_column_order():
    from ctxledger.serving.memories import _SERVED_COLUMNS, ServedMemory

    assert (*MEMORY_COLUMNS, "served_as") == _SERVED_COLUMNS
    assert tuple(ServedMemory.__dataclass_fields__) == _SERVED_COLUMNS


def test_wildcard_withdrawal_ends_every_purpose_and_a_later_grant_restores():
    grant = ConsentRow("grant", "billing", "consent", _t(-30), None)
    withdraw = ConsentRow("withdraw", "*", None, _t(-10), None)
    regrant = ConsentRow("grant", "billing", "contract", _t(-3), None)
    assert live_basis([grant], "billing", NOW)
    assert not live_basis([grant, withdraw], "billing", NOW)
    assert live_basis([grant, withdraw], "billing", _t(-20))  # before it
    assert live_basis([grant, withdraw, regrant], "billing", NOW)
    assert not live_basis([grant], "support", NOW)  # another purpose


def test_a_grant_of_unknown_source_is_no_basis_in_sql_and_replica():
    con = _con()
    memories = [("user_stated", "support", "msg", -45, None, 500, False)]
    cases = []
    for subject, source in (("u1", "unknown"), ("u2", "user_stated")):
        events = [("grant", "support", "contract", -60, None, source)]
        consent_rows, rows = _scenario(subject, events, memories)
        cases.append((subject, consent_rows, rows, "support", None))
    _load(con, [c[:3] for c in cases])
    _check(con, cases)
    served = con.execute(
        "SELECT subject_id, count(*) FROM memories_served('acme', 'u1', 'support') "
        "GROUP BY ALL UNION ALL "
        "SELECT subject_id, count(*) FROM memories_served('acme', 'u2', 'support') "
        "GROUP BY ALL"
    ).fetchall()
    assert served == [("u2", 1)]
    periods = con.execute("SELECT subject_id FROM consent_periods()").fetchall()
    assert periods == [("u2",)]
