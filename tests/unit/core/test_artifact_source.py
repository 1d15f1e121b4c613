"""Raw ``artifacts`` rows carry the registered source of the tool that produced
them (docs/sources.md): stamped when built, kept deterministic when one output
comes from several tools, added to older lakes, resolved by ``--unregistered``."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from ctxledger.pipelines.ingest.drafts import DraftMessage, DraftSession, DraftToolCall
from ctxledger.pipelines.ingest.normalize import SourceInfo, normalize_session
from ctxledger.schemas import Artifact, ToolObservation
from ctxledger.schemas.arrow import to_table
from ctxledger.schemas.sources import SourceRegistry, SourceSpec
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.replace import register_scope, replace_scope
from ctxledger.warehouse.sources import row_sources, unregistered

INFO = SourceInfo("acme", "tenant=acme/a.jsonl", "f" * 64, "run_1", "v1+abc", "t")
REGISTRY = SourceRegistry(
    sources=(
        SourceSpec(source_id="key-tools", kind="tool_artifact", match=("*api_key*",)),
        SourceSpec(source_id="booking", kind="tool_artifact", match=("get_booking",)),
    )
)
SHARED = '{"status": "ok"}'


@dataclass
class _Same:
    text: str
    findings: tuple = ()


def _identity(fields):
    return [_Same(text) for _, text in fields]


def _draft(calls: list[tuple[str, str]]) -> DraftSession:
    messages = []
    for i, (tool, output) in enumerate(calls):
        call = f"c{i}"
        messages += [
            DraftMessage(
                role="assistant",
                tool_calls=[DraftToolCall(call_id=call, tool_name=tool)],
                source_offset=f"{i}a",
            ),
            DraftMessage(
                role="tool", tool_call_id=call, tool_output=output, source_offset=f"{i}"
            ),
        ]
    return DraftSession(
        external_id="s-1",
        source_format="canonical",
        source_offset="line:1",
        messages=messages,
    )


def _sources(calls, registry=REGISTRY) -> dict[str, str | None]:
    built = normalize_session(_draft(calls), INFO, _identity, registry)
    return {a.content: a.source_id for a in built.artifacts}


def test_artifacts_are_stamped_by_tool_name_else_the_default():
    calls = [("check_api_key_status", '{"k": 1}'), ("lookup_weather", "sunny")]
    assert _sources(calls) == {'{"k": 1}': "key-tools", "sunny": "unregistered"}
    # the caller's registry names the default (a policy may call it otherwise)
    other = REGISTRY.model_copy(update={"default_source": "misc"})
    assert _sources(calls[1:], other) == {"sunny": "misc"}
    # no registry (eval, bench): left unstamped rather than guessed
    assert _sources(calls, None) == {'{"k": 1}': None, "sunny": None}


def test_one_output_from_two_tools_keeps_the_smallest_source_in_any_order():
    calls = [("check_api_key_status", SHARED), ("get_booking", SHARED)]
    assert _sources(calls) == {SHARED: "booking"}
    assert _sources(calls[::-1]) == {SHARED: "booking"}
    # the default sorts like any id; a registered source still wins over None
    assert _sources([("lookup", SHARED), ("get_booking", SHARED)]) == {
        SHARED: "booking"
    }


def _artifact(source_id: str | None, artifact_id: str = "art_1") -> dict:
    return Artifact(
        artifact_id=artifact_id,
        tenant_id="acme",
        size_bytes=len(SHARED),
        content=SHARED,
        policy_version="v1+abc",
        source_id=source_id,
    ).row()


def _stage(tmp_path, name: str, model, rows: list[dict]) -> str:
    path = tmp_path / "staging" / model.table / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(model, rows), path)
    return str(path)


def test_commit_and_backfill_keep_the_same_duplicate_whatever_the_order(tmp_path):
    """Sessions of one run stage the same output under two tools' sources; the
    commit and a backfill's replacement both keep the smaller id (NULL last)."""
    rows = [_artifact(None), _artifact("key-tools"), _artifact("booking")]
    for i, ordered in enumerate((rows, rows[::-1])):
        shard = _stage(tmp_path, f"s{i}", Artifact, ordered)
        with Warehouse.open(tmp_path / f"wh{i}", create=True) as wh:
            wh.commit_staged("r", {"artifacts": [shard]}, {}, {})
            stored = wh.query("SELECT source_id FROM artifacts").fetchall()
            assert stored == [("booking",)]
            con = wh.connection()
            with wh.transaction():
                register_scope(con, [], "SELECT 'art_1' AS artifact_id")
                change = replace_scope(
                    con,
                    "artifacts",
                    f"SELECT * FROM read_parquet('{shard}')",
                )
            assert change.unchanged == 1 and change.inserted == 0


def test_an_older_lake_gains_the_column_and_unregistered_lists_by_tool(tmp_path):
    observation = ToolObservation(
        observation_id="obs_1",
        message_id="msg_1",
        session_id="ses_1",
        tenant_id="acme",
        tool_name="check_api_key_status",
        artifact_ref="art_old",
    ).row()
    with Warehouse.open(tmp_path, create=True) as wh:
        wh.connection().execute("ALTER TABLE artifacts DROP COLUMN source_id")
        wh.commit_staged(
            "r",
            {
                "tool_observations": [
                    _stage(tmp_path, "o", ToolObservation, [observation])
                ]
            },
            {},
            {},
        )
        old = _stage(tmp_path, "a", Artifact, [_artifact(None, "art_old")])
        wh.connection().execute(
            "INSERT INTO artifacts SELECT * EXCLUDE (source_id) "
            f"FROM read_parquet('{old}')"
        )
    with Warehouse.open(tmp_path, create=True) as wh:  # opening adds the column
        assert wh.query("SELECT source_id FROM artifacts").fetchall() == [(None,)]
        new = _stage(
            tmp_path,
            "n",
            Artifact,
            [_artifact("booking", "art_b"), _artifact("unregistered", "art_u")],
        )
        wh.commit_staged("r2", {"artifacts": [new]}, {}, {})
        rows = row_sources(wh, REGISTRY)
        by_stored = {r["stored_source_id"]: r for r in rows}
        # the old row resolves through its tool, a stamped one by its stamp
        assert by_stored[None]["key"] == "check_api_key_status"
        assert by_stored[None]["source_id"] == "key-tools"
        assert by_stored["booking"]["source_id"] == "booking"
        # only the row stamped with the default falls through
        assert [
            (r["table"], r["key"], r["rows"]) for r in unregistered(wh, REGISTRY)
        ] == [("artifacts", None, 1)]
