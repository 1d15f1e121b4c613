"""Scope of tool artifacts: a tool output is evidence for its own subject (and the
policy's operator groups) only; documents keep their ACL. A seeded property test
of 10,000 requests over three tenants and several subjects on a pure in-memory
``EvidenceIndex``, plus the pieces around it (NUL in queries, the policy)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from ctxledger.schemas.evidence import ArtifactSettings, SearchSettings
from ctxledger.serving.evidence_index import EvidenceIndex

OPERATORS = ("operators",)
TENANTS = ("t0", "t1", "t2")
#: the same subject names in every tenant: the tenant must still separate them
SUBJECTS = ("u0", "u1", "u2", "u3", "session:s9")
GROUPS = ("sre", "billing", "support", "operators", "*")
WORDS = "order refund account balance key rotate pods pending card shipped".split()
DATES = [datetime(2024, m, 1, tzinfo=UTC) for m in range(1, 13)]


def _rows(rng: random.Random) -> list[dict]:
    rows = []
    for tenant in TENANTS:
        for i in range(40):
            start = rng.choice(DATES[:6])
            end = rng.choice([None, None, rng.choice(DATES[6:])])
            rows.append(
                dict(
                    chunk_id=f"{tenant}-doc-{i}",
                    tenant_id=tenant,
                    kind="document",
                    subject_id=None,
                    acl=rng.choice([["*"], ["sre"], ["billing"], ["sre", "support"]]),
                    start=start,
                    end=end,
                )
            )
        for i in range(60):
            # a few artifacts from before subjects were recorded (no subject,
            # tenant-wide ACL): operators only, whatever their ACL says
            legacy = i % 15 == 0
            rows.append(
                dict(
                    chunk_id=f"{tenant}-art-{i}",
                    tenant_id=tenant,
                    kind="tool_artifact",
                    subject_id=None if legacy else rng.choice(SUBJECTS[:4]),
                    acl=["*"] if legacy else list(OPERATORS),
                    start=rng.choice(DATES[:6]),
                    end=None,
                )
            )
    for row in rows:
        row["text"] = " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
    return rows


def _table(rows: list[dict]) -> pa.Table:
    n = len(rows)
    col = lambda name: [r[name] for r in rows]  # noqa: E731
    stamp = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "chunk_id": col("chunk_id"),
            "doc_id": col("chunk_id"),
            "doc_version": ["1"] * n,
            "doc_version_id": col("chunk_id"),
            "kind": col("kind"),
            "tenant_id": col("tenant_id"),
            "subject_id": pa.array(col("subject_id"), pa.string()),
            "section_path": [[]] * n,
            "char_start": [0] * n,
            "char_end": [len(r["text"]) for r in rows],
            "text": col("text"),
            "token_count": [1] * n,
            "content_hash": col("chunk_id"),
            "trust": ["untrusted"] * n,
            "authority": pa.array([None] * n, pa.float64()),
            "effective_from": pa.array(col("start"), stamp),
            "effective_to": pa.array(col("end"), stamp),
            "acl": col("acl"),
        }
    )


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def visible(row: dict, tenant, groups, subject, at) -> bool:
    """The rule, written out plainly (the oracle)."""
    if row["tenant_id"] != tenant:
        return False
    if not (row["start"] <= at and (row["end"] is None or at < row["end"])):
        return False
    if row["kind"] == "tool_artifact":
        return bool(set(groups) & set(OPERATORS)) or (
            row["subject_id"] is not None and row["subject_id"] == subject
        )
    return "*" in row["acl"] or bool(set(row["acl"]) & set(groups))


@pytest.fixture(scope="module")
def world():
    rows = _rows(random.Random(11))
    index = EvidenceIndex.from_rows(
        _table(rows), _unit(np.random.default_rng(11), len(rows)), SearchSettings()
    )
    return rows, index


def test_10000_randomized_requests_never_see_another_tenant_or_subject(world):
    rows, index = world
    by_id = {r["chunk_id"]: r for r in rows}
    chunk_ids = index.meta.column("chunk_id").to_pylist()  # row -> id
    rng = random.Random(2026)
    vectors = _unit(np.random.default_rng(2026), 256)
    foreign = wrong_scope = own_artifacts = operator_views = 0
    for _ in range(10_000):
        tenant = rng.choice([*TENANTS, "nobody"])
        groups = rng.sample(GROUPS, rng.randint(0, 2))
        subject = rng.choice([*SUBJECTS, None, None, "u-unknown"])
        at = rng.choice(DATES)
        query = " ".join(rng.choices(WORDS, k=rng.randint(1, 3)))
        expected = {
            r["chunk_id"] for r in rows if visible(r, tenant, groups, subject, at)
        }
        scope = {
            chunk_ids[i] for i in index.scope(tenant, groups, at, subject, OPERATORS)
        }
        wrong_scope += scope != expected
        ranked = index.search(
            tenant,
            groups,
            query,
            vectors[rng.randrange(len(vectors))],
            10,
            at,
            20,
            subject_id=subject,
            operator_groups=OPERATORS,
        )
        for r in ranked:
            row = by_id[chunk_ids[r.row]]
            other_subject = (
                row["kind"] == "tool_artifact"
                and row["subject_id"] != subject
                and not set(groups) & set(OPERATORS)
            )
            foreign += row["tenant_id"] != tenant or other_subject
            foreign += row["chunk_id"] not in expected
            if row["kind"] == "tool_artifact":
                if row["subject_id"] == subject:
                    own_artifacts += 1
                else:
                    operator_views += 1
    assert foreign == 0 and wrong_scope == 0
    # not vacuous: subjects got their own tool outputs, operators everyone's
    assert own_artifacts > 1_000 and operator_views > 1_000


def test_a_request_without_subject_sees_documents_only(world):
    _, index = world
    at = DATES[-1]
    plain = [index.row(int(i)) for i in index.scope("t0", ["sre"], at, None, OPERATORS)]
    assert plain and {r["kind"] for r in plain} == {"document"}
    ops = [
        index.row(int(i)) for i in index.scope("t0", ["operators"], at, None, OPERATORS)
    ]
    artifacts = [r for r in ops if r["kind"] == "tool_artifact"]
    assert {r["subject_id"] for r in artifacts} >= {None, "u0", "u1"}
    # without operator groups in the policy, the group name means nothing
    none = [index.row(int(i)) for i in index.scope("t0", ["operators"], at, None, ())]
    assert all(r["kind"] == "document" for r in none)


def test_nul_in_a_query_is_text_not_a_parser_error(world):
    _, index = world
    vector = _unit(np.random.default_rng(3), 1)[0]
    with_nul = index.search(
        "t1", ["*"], "refund\x00card", vector, 5, DATES[-1], 20, subject_id="u1"
    )
    spaced = index.search(
        "t1", ["*"], "refund card", vector, 5, DATES[-1], 20, subject_id="u1"
    )
    assert [r.row for r in with_nul] == [r.row for r in spaced]
    assert index._tokenizer.terms("\x00") == []


def test_operator_groups_cannot_be_everyone():
    with pytest.raises(ValidationError):
        ArtifactSettings(operator_groups=("*",))
    with pytest.raises(ValidationError):
        ArtifactSettings(acl=("*",))  # the tenant-wide artifact ACL is gone
    assert ArtifactSettings().operator_groups == ("operators",)


# --------------------------------------------------------------- the SQL macros
def _sql_lake(rows: list[dict], vectors: np.ndarray, has_subjects: bool = True):
    """An in-memory DuckDB with ``documents`` and ``evidence_chunks`` (one
    version per chunk) and the evidence macros; ``has_subjects=False`` builds
    the tables as a lake written before subjects were recorded."""
    from ctxledger.schemas.arrow import to_table  # noqa: PLC0415
    from ctxledger.schemas.evidence import DocumentVersion, EvidenceChunk  # noqa: PLC0415
    from ctxledger.schemas.policy import load_policy  # noqa: PLC0415
    from ctxledger.warehouse.catalog import connect  # noqa: PLC0415
    from ctxledger.warehouse.evidence_api import install_macros  # noqa: PLC0415

    versions, chunks = [], []
    for row, vector in zip(rows, vectors, strict=True):
        common = dict(
            tenant_id=row["tenant_id"], doc_id=row["chunk_id"], kind=row["kind"],
            subject_id=row["subject_id"], effective_from=row["start"],
            policy_version="p",
        )  # fmt: skip
        versions.append(
            DocumentVersion(
                doc_version_id=row["chunk_id"], version="1", version_sort="1",
                source_path="x", source_hash="x", text_hash="x",
                chunker_version="c", **common,
            ).row()
        )  # fmt: skip
        chunks.append(
            EvidenceChunk(
                chunk_id=row["chunk_id"], doc_version_id=row["chunk_id"],
                doc_version="1", acl=row["acl"], ordinal=0, char_start=0,
                char_end=len(row["text"]), text=row["text"],
                content_hash=row["chunk_id"], token_count=1,
                embedding=vector.tolist(), embed_model="m", **common,
            ).row()
        )  # fmt: skip
    con = connect(load=("fts",))
    for name, table in (
        ("documents", to_table(DocumentVersion, versions)),
        ("evidence_chunks", to_table(EvidenceChunk, chunks)),
    ):
        if not has_subjects:
            table = table.drop_columns(["subject_id"])
        con.register("__rows", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM __rows")
        con.unregister("__rows")
    install_macros(con, load_policy(None))
    return con


def test_sql_scope_macro_applies_the_same_rule(world):
    rows, index = world
    open_ended = [{**r, "end": None} for r in rows]  # one version per chunk here
    con = _sql_lake(open_ended, index.vectors[: len(rows)])
    rng = random.Random(7)
    checked = 0
    for _ in range(150):
        tenant = rng.choice([*TENANTS, "nobody"])
        groups = rng.sample(GROUPS, rng.randint(0, 2))
        subject = rng.choice([*SUBJECTS, None])
        at = rng.choice(DATES)
        got = {
            r[0]
            for r in con.execute(
                "SELECT chunk_id FROM evidence_scope(?, ?, as_of := ?, subject := ?)",
                [tenant, groups, at, subject],
            ).fetchall()
        }
        want = {
            r["chunk_id"] for r in open_ended if visible(r, tenant, groups, subject, at)
        }
        assert got == want, (tenant, groups, subject)
        checked += len(want)
    assert checked > 500
    # NUL in a query is text for the BM25 macro too
    sql = "SELECT chunk_id, bm25 FROM evidence_bm25('t1', ['*'], ?, subject := 'u1')"
    spaced = con.execute(sql, ["refund card"]).fetchall()
    assert spaced and con.execute(sql, ["refund\x00card"]).fetchall() == spaced


def test_sql_macros_on_a_lake_from_before_subjects(world):
    rows, index = world
    con = _sql_lake(rows, index.vectors[: len(rows)], has_subjects=False)
    kinds = lambda groups, subject: {  # noqa: E731
        r[0]
        for r in con.execute(
            "SELECT kind FROM evidence_scope('t0', ?, subject := ?)",
            [groups, subject],
        ).fetchall()
    }
    assert kinds(["sre"], "u1") == {"document"}  # no subject known: no artifact
    assert kinds(["operators"], None) == {"document", "tool_artifact"}
