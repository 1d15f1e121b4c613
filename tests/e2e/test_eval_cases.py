"""``ctxledger eval`` and ``ctxledger sources`` on the seed case set
(eval/cases/): one nightly over its documents, then the cases, a superseded
requirement, the ablations, and the registry read at query time."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ctxledger.jobs import cli
from ctxledger.jobs.eval_cases import load_case_set, run_case
from ctxledger.schemas.policy import load_policy
from ctxledger.schemas.sources import load_registry
from ctxledger.warehouse.catalog import Warehouse
from ctxledger.warehouse.sources import active_registry, row_sources, sync_registry

CASES = Path(__file__).resolve().parents[2] / "eval" / "cases"


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    runner = CliRunner()
    wh = root / "wh"
    result = runner.invoke(
        cli.app,
        [
            "eval",
            "--cases",
            str(CASES / "seed.yaml"),
            "--warehouse",
            str(wh),
            "--docs",
            str(CASES / "docs"),
            "--json",
        ],
    )
    return root, wh, result


def _invoke(*args):
    return CliRunner().invoke(cli.app, [str(a) for a in args])


def test_seed_cases_pass(lake):
    _, _, result = lake
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["passed"] == 2 and report["failed"] == 0
    names = {r["name"]: r for r in report["results"]}
    assert set(names) == {"api_key_not_working", "injected_runbook_span"}
    key = names["api_key_not_working"]
    assert key["tools"] == ["check_api_key_status"]
    assert {c["check"] for c in key["checks"]} == {
        "required_evidence",
        "scope",
        "must_not_contain",
        "tools",
        "injection",
    }
    # the injected span was offered, but only as untrusted data
    assert "runbook-wiki" in names["injected_runbook_span"]["selected_sources"]


def test_superseded_requirement_fails_naming_it(lake, tmp_path):
    root, wh, _ = lake
    cases = yaml.safe_load((CASES / "seed.yaml").read_text())
    cases[0]["required_evidence"] = ["runbook/api-keys@v6#expired-keys"]
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(cases[:1]))
    for name in ("tools.yaml", "sources.yaml"):
        shutil.copy(CASES / name, tmp_path / name)
    result = _invoke("eval", "--cases", path, "--warehouse", wh)
    assert result.exit_code == 1, result.output
    report = _invoke("eval", "--cases", path, "--warehouse", wh, "--json").output
    data = json.loads(report[report.index("{") :])
    check = next(
        c for c in data["results"][0]["checks"] if c["check"] == "required_evidence"
    )
    assert not check["passed"]
    assert (
        "runbook/api-keys@v6#expired-keys is superseded by runbook/api-keys@v7"
        in (check["reason"])
    )


def test_ablation_removing_the_runbook_source_turns_the_case_red(lake, tmp_path):
    _, wh, _ = lake
    out = tmp_path / "out"
    result = _invoke(
        "eval",
        "--cases",
        CASES / "seed.yaml",
        "--warehouse",
        wh,
        "--ablate",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "ablations and perturbations" in result.output
    data = json.loads((out / "eval.json").read_text())
    rows = {(r["perturbation"], r["target"]): r for r in data["ablations"]}
    removed = rows[("remove_source", "support-runbooks")]
    assert removed["turned_red"] == ["api_key_not_working"]
    assert removed["pass_rate_delta"] == -0.5
    stale = [r for (kind, _), r in rows.items() if kind == "stale_version"]
    assert stale and stale[0]["note"].startswith("stale version caught")
    assert "api-keys@v6" in stale[0]["note"]
    assert ("near_duplicate_distractors", "docs-mirror") in rows
    assert "support-runbooks" in (out / "ablation.html").read_text()


def test_every_row_resolves_and_authority_changes_ranking_without_rewrite(
    lake, tmp_path
):
    root, wh, _ = lake
    copy = tmp_path / "wh"
    shutil.copytree(wh, copy)
    policy = load_policy(None)
    registry = load_registry(CASES / "sources.yaml")
    case_set = load_case_set(CASES / "seed.yaml")
    case = case_set.cases[0]
    lake_ = Warehouse.open(copy)
    try:
        from ctxledger.warehouse.sources import ensure_registry

        # the first nightly stored the policy's registry in its own snapshot
        # (pipelines.sink.commit); storing it again adds nothing
        assert lake_.query("SELECT count(*) FROM sources").fetchone()[0] >= 1
        assert ensure_registry(lake_, policy) == 0
        stored = {r[0] for r in lake_.query("SELECT source_id FROM sources").fetchall()}
        for table in ("documents", "evidence_chunks"):
            ids = lake_.query(f"SELECT DISTINCT source_id FROM {table}").fetchall()
            assert {r[0] for r in ids} <= stored
        assert sync_registry(lake_, registry) == len(registry.by_id)
        ids = {r[0] for r in lake_.query("SELECT source_id FROM sources").fetchall()}
        rows = row_sources(lake_, registry)
        assert {r["table"] for r in rows} >= {"documents", "evidence_chunks"}
        assert all(r["source_id"] in ids for r in rows)
        # every stored row carries a source id (the policy's default here)
        for table in ("documents", "evidence_chunks"):
            nulls = lake_.query(
                f"SELECT count(*) FROM {table} WHERE source_id IS NULL"
            ).fetchone()[0]
            assert nulls == 0
        before = lake_.query(
            "SELECT chunk_id, source_id FROM evidence_chunks ORDER BY ALL"
        ).fetchall()
        _, first = run_case(lake_, case, [], policy, registry)
        top = max(first.selected, key=lambda i: i.scores.utility)
        assert top.source_id == "support-runbooks"
        data = registry.model_dump()
        for spec in data["sources"]:
            if spec["source_id"] == "support-runbooks":
                # below the wiki's value less its injection-risk penalty
                spec["authority"] = 0.05
        changed = type(registry).model_validate(data)
        assert sync_registry(lake_, changed) > 0
        active = active_registry(lake_, policy)
        assert active.registry_version == changed.registry_version
        _, second = run_case(lake_, case, [], policy, active)
        top = max(second.selected, key=lambda i: i.scores.utility)
        assert top.source_id == "runbook-wiki"
        after = lake_.query(
            "SELECT chunk_id, source_id FROM evidence_chunks ORDER BY ALL"
        ).fetchall()
        assert after == before  # no row rewritten
    finally:
        lake_.close()
    unreg = _invoke("sources", "--warehouse", copy, "--unregistered", "--json")
    assert unreg.exit_code == 0, unreg.output
    assert json.loads(unreg.output[unreg.output.index("[") :]) == []
    # a transcript adds artifacts (a registered and an unregistered tool) and a
    # memory: every row of the four tables still resolves in ``sources``
    _ingest_transcript(tmp_path, copy)
    lake_ = Warehouse.open(copy)
    try:
        stored = {r[0] for r in lake_.query("SELECT source_id FROM sources").fetchall()}
        counts = {}
        for table in ("documents", "evidence_chunks", "artifacts", "memories"):
            ids = lake_.query(f"SELECT source_id, count(*) FROM {table} GROUP BY 1")
            found = dict(ids.fetchall())
            assert None not in found, table
            assert set(found) <= stored, table
            counts[table] = sum(found.values())
        assert counts["artifacts"] == 2 and counts["memories"] >= 1, counts
        # stamped at write time with the policy's registry (its default) ...
        stamps = lake_.query("SELECT DISTINCT source_id FROM artifacts").fetchall()
        assert stamps == [("unregistered",)]
        # ... and valued by the active one by tool name, as their evidence is
        rows = row_sources(lake_, active_registry(lake_, policy))
    finally:
        lake_.close()
    by_key = {(r["table"], r["key"]): r["source_id"] for r in rows}
    assert by_key[("artifacts", "check_api_key_status")] == "key-tools"
    assert by_key[("evidence_chunks", "check_api_key_status")] == "key-tools"
    assert by_key[("artifacts", "lookup_weather")] == "unregistered"
    assert by_key[("memories", "user_stated:preference")] == "user-statements"
    unreg = _invoke("sources", "--warehouse", copy, "--unregistered", "--json")
    listed = json.loads(unreg.output[unreg.output.index("[") :])
    assert {(r["table"], r["key"]) for r in listed} == {
        ("documents", "lookup_weather"),
        ("evidence_chunks", "lookup_weather"),
        ("artifacts", "lookup_weather"),
    }


def _ingest_transcript(tmp_path: Path, warehouse: Path) -> None:
    """One nightly over a session with two tool outputs and a stated preference."""
    from ctxledger.jobs.nightly import run_nightly

    landing = tmp_path / "landing" / "tenant=demo" / "subject=dana"
    landing.mkdir(parents=True)
    at = datetime.now(UTC) - timedelta(days=1)
    turns = [
        ("user", {"content": "I prefer short answers. Why is my API key failing?"}),
        ("assistant", {"tool_calls": [{"id": "c1", "name": "check_api_key_status"}]}),
        ("tool", {"tool_call_id": "c1", "content": '{"status": "revoked"}'}),
        ("assistant", {"tool_calls": [{"id": "c2", "name": "lookup_weather"}]}),
        ("tool", {"tool_call_id": "c2", "content": "sunny, 21 degrees"}),
        ("assistant", {"content": "The key was revoked; create a new one."}),
    ]
    (landing / "chat.jsonl").write_text(
        "".join(
            json.dumps(
                {"session_id": "dana-1", "turn": i, "role": role,
                 "content": "", "status": "ok",
                 "created_at": (at + timedelta(seconds=i)).isoformat(), **extra}
            ) + "\n"
            for i, (role, extra) in enumerate(turns)
        )
    )  # fmt: skip
    consent = tmp_path / "consent.jsonl"
    consent.write_text(
        json.dumps(
            {"event": "grant", "tenant_id": "demo", "subject_id": "dana",
             "purpose": "support", "basis": "contract",
             "at": (at - timedelta(days=1)).isoformat()}
        ) + "\n"
    )  # fmt: skip
    run_nightly(tmp_path / "landing", warehouse, consent=consent)


def test_every_seed_case_fails_when_its_fixture_is_removed(lake):
    """A case must be able to fail: remove what it stands on (the source of
    its required evidence, or of the span it plants) and it turns red. The
    injected-span case used to pass with the injected source removed (the
    injection check had nothing left to judge)."""
    from ctxledger.jobs.eval_cases import _plain, _with_source
    from ctxledger.serving.context_checks import EvidenceRef, matches_ref

    _, wh, _ = lake
    policy = load_policy(None)
    case_set = load_case_set(CASES / "seed.yaml")
    registry = case_set.registry
    lake_ = Warehouse.open(wh)
    try:
        for case in case_set.cases:
            result, manifest = run_case(lake_, case, case_set.tools, policy, registry)
            assert result.passed, (case.name, result.checks)
            refs = [EvidenceRef.parse(r) for r in case.required_evidence]
            spans = [s.lower() for s in case.injected_spans]
            holders = {
                i.source_id
                for i in manifest.selected
                if any(matches_ref(r, i) for r in refs)
                or any(s in _plain(i) for s in spans)
            }
            assert holders, case.name  # each seed case stands on something
            for source_id in holders:
                removed = _with_source(registry, source_id, True)
                red, _ = run_case(lake_, case, case_set.tools, policy, removed)
                assert not red.passed, (case.name, source_id, red.checks)
            if case.fixture:
                why = {c.check: c for c in red.checks}["fixture"]
                assert not why.passed and "fixture absent" in why.reason
    finally:
        lake_.close()
