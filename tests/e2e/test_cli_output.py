"""The CLI cannot be misdirected, and its read commands feed programs (issue 15).

Through the real Typer app on a small real lake (no pipeline run):
* a typo'd option exits 2 with one line and writes nothing;
* Beam flags go after ``--``, are checked against Beam's own flags, and the old
  syntax still works with a deprecation warning;
* ``CTXLEDGER_WAREHOUSE`` / ``ctxledger.toml`` supply the default warehouse;
* ``-o json`` of every read command parses with ``json.loads``; ``-o jsonl`` is
  one object per line;
* without a terminal, a job logs one line per step as it happens.
"""

from __future__ import annotations

import io
import json

import pytest
import typer.main
from rich.console import Console
from test_memory_api import SEED, _commit, _event
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.jobs.cli_support import job_progress, split_beam_args
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.memory_api import record_consent

RUNNER = CliRunner()


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-out") / "wh"
    with Warehouse.open(root, create=True) as wh:
        _commit(wh, "seed", SEED)
        record_consent(wh, [_event("u1", "grant")])
        with wh.transaction() as con:
            con.execute(
                "INSERT INTO lake.runs (run_id, job, status, started_at, "
                "finished_at, policy_version, code_version, runner, files_new, "
                "stage_counts) VALUES ('seed', 'nightly', 'committed', "
                "'2026-11-02 03:00:00+00', '2026-11-02 03:05:00+00', 'p', 'c', "
                "'DirectRunner', 2, [{'stage': 'ingest', 'records_in': 3, "
                "'records_out': 2, 'dead': 1}])"
            )
            con.execute(
                "INSERT INTO lake.dead_letters (dead_letter_id, run_id, stage, "
                "tenant_id, source_file, source_offset, reason_code, message, "
                "job_version) VALUES ('d1', 'seed', 'ingest', 'acme', 'a.jsonl', "
                "'7', 'invalid_json', 'line 7: not JSON', 'v')"
            )
    return root


def _invoke(*args, env=None):
    return RUNNER.invoke(app, [str(a) for a in args], env=env)


# -- options ---------------------------------------------------------------------


def test_a_typo_exits_2_with_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "landing").mkdir()
    done = _invoke("nightly", "--landing", "landing", "--warehous", tmp_path / "x")
    assert done.exit_code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "No such option: --warehous" in lines[0] and "--warehouse" in lines[0]
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["runs", "--runner=DirectRunner"], "No such option: --runner"),
        (["nightly", "--landing", "l", "--", "--runnr=FlinkRunner"],
         "unknown Beam option '--runnr'"),
        (["nightly", "--landing", "l", "stray"], "unexpected argument(s) 'stray'"),
        (["sql", "-o", "yaml", "SELECT 1"], "--output must be"),
        (["runs", "-o", "yaml"], "Invalid value for '--output'"),
    ],
)  # fmt: skip
def test_bad_command_lines_fail_with_one_line(args, expected, tmp_path):
    done = _invoke(*args, "-w", tmp_path / "none") if args[0] != "nightly" else (
        _invoke(*args)
    )  # fmt: skip
    assert done.exit_code != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


def _beam_args(*args):
    """``ctx.args`` (the Beam flags) the nightly command parses from ``args``."""
    command = typer.main.get_command(app).commands["nightly"]
    with command.make_context("nightly", list(args)) as ctx:
        return ctx.args, ctx.params


def test_beam_flags_after_the_double_dash():
    beam, params = _beam_args(
        "--landing", "l", "-w", "wh", "--", "--runner=PortableRunner",
        "--job_endpoint", "embed", "--environment_type=LOOPBACK",
    )  # fmt: skip
    assert beam == [
        "--runner=PortableRunner", "--job_endpoint", "embed",
        "--environment_type=LOOPBACK",
    ]  # fmt: skip
    assert str(params["warehouse"]) == "wh"


def test_beam_flags_before_the_double_dash_still_work_with_a_warning():
    warnings = []
    own, beam = split_beam_args(
        ["--landing", "l", "--runner=DirectRunner", "--direct_num_workers", "2",
         "-w", "wh", "--", "--direct_running_mode=multi_processing"],
        {"--landing", "-w", "--warehouse"},
        warnings.append,
    )  # fmt: skip
    assert own == ["--landing", "l", "-w", "wh"]
    assert beam == [
        "--runner=DirectRunner", "--direct_num_workers", "2",
        "--direct_running_mode=multi_processing",
    ]  # fmt: skip
    assert len(warnings) == 1 and "deprecated" in warnings[0]
    beam, _ = _beam_args("--landing", "l", "--runner=DirectRunner")
    assert beam == ["--runner=DirectRunner"]


def test_the_default_warehouse_comes_from_the_environment_or_the_toml(
    lake, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    done = _invoke("runs", "-o", "json", env={"CTXLEDGER_WAREHOUSE": str(lake)})
    assert done.exit_code == 0, done.stderr
    assert [r["run_id"] for r in json.loads(done.stdout)] == ["seed"]
    project = tmp_path / "project" / "notebooks"
    project.mkdir(parents=True)
    (tmp_path / "project" / "ctxledger.toml").write_text(
        f'[ctxledger]\nwarehouse = "{lake}"\n'
    )
    monkeypatch.chdir(project)  # found in a parent folder
    done = _invoke("runs", "-o", "json", env={"CTXLEDGER_WAREHOUSE": None})
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)[0]["run_id"] == "seed"
    # -w wins over both (the entry point prints the WarehouseError on one line)
    done = _invoke("runs", "-w", tmp_path / "nowhere")
    assert "no warehouse at" in str(done.exception)
    assert "nowhere" in str(done.exception)


# -- machine output ----------------------------------------------------------------

READS = {
    "sql": ["sql", "SELECT memory_id, created_at, provenance FROM memories"],
    "runs": ["runs"],
    "dead-letters": ["dead-letters"],
    "memories": ["memories", "--tenant", "acme", "--subject", "u1",
                 "--purpose", "support"],
    "sources": ["sources"],
}  # fmt: skip


def test_sources_json_is_a_hidden_deprecated_alias_of_o_json(lake):
    """``sources`` took ``--json`` where every other read takes ``-o json``
    (issue 32): the old flag still works, says it is deprecated, and is no
    longer offered in the help."""
    new = _invoke("sources", "-w", lake, "-o", "json")
    old = _invoke("sources", "-w", lake, "--json")
    assert new.exit_code == old.exit_code == 0, old.output
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert "deprecated" in old.stderr
    assert "--json" not in _invoke("sources", "--help").stdout
    assert "--output" in _invoke("eval", "--help").stdout


@pytest.mark.parametrize("command", sorted(READS))
def test_json_is_one_array_and_jsonl_one_object_per_line(lake, command):
    as_json = _invoke(*READS[command], "-w", lake, "-o", "json")
    assert as_json.exit_code == 0, as_json.stderr
    records = json.loads(as_json.stdout)
    assert isinstance(records, list) and records
    assert all(isinstance(r, dict) for r in records)
    as_jsonl = _invoke(*READS[command], "-w", lake, "-o", "jsonl")
    assert as_jsonl.exit_code == 0, as_jsonl.stderr
    lines = as_jsonl.stdout.splitlines()
    assert [json.loads(line) for line in lines] == records


def test_json_keeps_nested_values_and_iso_times(lake):
    runs = json.loads(_invoke("runs", "-w", lake, "-o", "json").stdout)
    assert runs[0]["stage_counts"][0]["records_in"] == 3
    assert runs[0]["started_at"].startswith("2026-11-02T03:00:00")
    dead = json.loads(_invoke("dead-letters", "-w", lake, "-o", "json").stdout)
    assert dead == [
        {"stage": "ingest", "reason_code": "invalid_json", "count": 1,
         "examples": ["a.jsonl#7"]}
    ]  # fmt: skip
    served = json.loads(_invoke(*READS["memories"], "-w", lake, "-o", "json").stdout)
    assert {m["served_as"] for m in served} <= {"fact", "hypothesis", "conflict"}


def test_sql_json_is_one_array_over_several_statements(lake):
    done = RUNNER.invoke(
        app, ["sql", "-w", str(lake), "-o", "json"],
        input="SELECT 1 AS a;\nSELECT 2 AS a, 'x' AS b;\n",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == [{"a": 1}, {"a": 2, "b": "x"}]


# -- progress ----------------------------------------------------------------------


def test_without_a_terminal_each_step_is_logged_when_it_happens():
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, force_terminal=False)
    err_console = Console(file=err, force_terminal=False, width=200)
    with job_progress(console, err_console, "nightly: starting") as progress:
        progress("scanning landing")
        assert len(err.getvalue().splitlines()) == 2  # written already
        progress("retention: history purge")
    lines = err.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "nightly: starting", "scanning landing", "retention: history purge",
    ]  # fmt: skip
    assert all(line[:4].isdigit() and line[19] == "Z" for line in lines)
    assert out.getvalue() == ""
