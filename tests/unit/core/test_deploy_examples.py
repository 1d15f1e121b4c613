"""The scheduling examples under deploy/ call real ctxledger commands and options.

Airflow is not installed (nor a dependency): the DAG file is parsed with ``ast``,
its module-level string constants are evaluated, and each ``BashOperator``'s
command is checked with its Jinja rendered against the DAG's own params. Cron and
systemd files are read as text; systemd's ``$VARS`` are expanded from the
example environment file. Every invocation of the ctxledger entry point must name
a registered subcommand and only options that subcommand has; Beam flags only
after ``--``, only on the jobs that run Beam, and only flags Beam defines.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import typer.main

from ctxledger.jobs.cli import app
from ctxledger.jobs.cli_support import BeamCommand, beam_flags

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
ENTRY = re.compile(r"/bin/ctxledger$")


def _commands() -> dict[str, tuple[set[str], bool]]:
    """Subcommand -> (its option names, whether it takes Beam flags after --)."""
    group = typer.main.get_command(app)
    found = {}
    for name, command in group.commands.items():
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        found[name] = (options, isinstance(command, BeamCommand))
    return found


COMMANDS = _commands()


def invocations(command_line: str) -> list[tuple[str, list[str]]]:
    """``(subcommand, options)`` of each ctxledger call in a shell command line."""
    tokens = shlex.split(command_line, comments=False)
    calls = []
    for i, token in enumerate(tokens):
        if ENTRY.search(token):
            rest = []
            for arg in tokens[i + 2 :]:
                if arg in (">>", ">", "2>&1", "|", "&&", ";"):
                    break
                rest.append(arg)
            calls.append((tokens[i + 1], rest))
    return calls


def check_call(subcommand: str, args: list[str]) -> list[str]:
    """Problems with one call (empty when the call is valid)."""
    if subcommand not in COMMANDS:
        return [f"unknown subcommand {subcommand!r}"]
    options, takes_beam = COMMANDS[subcommand]
    own, beam = (args[: args.index("--")], args[args.index("--") + 1 :]) if (
        "--" in args
    ) else (args, [])  # fmt: skip
    problems = []
    for arg in own:
        name = arg.split("=", 1)[0]
        if arg.startswith("-") and name not in options:
            problems.append(f"{subcommand}: unknown option {name!r}")
    if "--" in args and not takes_beam:
        problems.append(f"{subcommand}: takes no Beam flags")
    for arg in beam:
        name = arg.split("=", 1)[0]
        if arg.startswith("-") and name not in beam_flags():
            problems.append(f"{subcommand}: unknown Beam flag {name!r}")
    return problems


def test_the_checker_rejects_what_the_cli_does_not_have():
    assert check_call("nightly", ["--landing", "x", "--", "--runner=FlinkRunner"]) == []
    assert check_call("nightly", ["--landin", "x"]) == [
        "nightly: unknown option '--landin'"
    ]
    # Beam flags before `--` are the deprecated syntax: the examples avoid it.
    assert check_call("nightly", ["--landing", "x", "--runner=FlinkRunner"]) == [
        "nightly: unknown option '--runner'"
    ]
    assert check_call("nightly", ["--landing", "x", "--", "--runnr=X"]) == [
        "nightly: unknown Beam flag '--runnr'"
    ]
    assert check_call("nightlly", []) == ["unknown subcommand 'nightlly'"]
    assert check_call("runs", ["--runner=X"]) == ["runs: unknown option '--runner'"]
    assert check_call("runs", ["--", "--runner=X"]) == ["runs: takes no Beam flags"]


# -- Airflow -----------------------------------------------------------------------


def _render(template: str, params: dict[str, str]) -> str:
    """The Jinja used by the DAG: ``{{ params.x }}`` and ``{% if params.x %}``
    blocks (kept when the param is set), enough to check the commands."""

    def block(match: re.Match) -> str:
        return match.group(2) if params[match.group(1)] else ""

    text = re.sub(
        r"\{%\s*if params\.(\w+)\s*%\}(.*?)\{%\s*endif\s*%\}", block, template
    )
    text = re.sub(r"\{\{\s*params\.(\w+)\s*\}\}", lambda m: params[m.group(1)], text)
    assert "{{" not in text and "{%" not in text, text
    return text


def _dag_file():
    path = DEPLOY / "airflow" / "ctxledger_dag.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    namespace: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            try:
                value = eval(  # noqa: S307 - our own file's constant expressions
                    compile(ast.Expression(node.value), str(path), "eval"),
                    {"__builtins__": {}},
                    dict(namespace),
                )
            except Exception:  # noqa: BLE001 - not a constant (a timedelta, ...)
                continue
            if isinstance(target, ast.Name):
                namespace[target.id] = value
    return tree, namespace


def _evaluate(node: ast.AST, namespace: dict) -> object:
    return eval(  # noqa: S307 - see _dag_file
        compile(ast.Expression(node), "<dag>", "eval"),
        {"__builtins__": {}},
        dict(namespace),
    )


def _dags() -> dict[str, dict]:
    """dag_id -> {"params": ..., "tasks": {task_id: {kwarg: value}}}."""
    tree, namespace = _dag_file()
    dags = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        call = node.items[0].context_expr
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "DAG"):
            continue
        kwargs = {k.arg: k.value for k in call.keywords}
        dag_id = _evaluate(kwargs["dag_id"], namespace)
        params = _evaluate(kwargs["params"], namespace)
        tasks = {}
        for inner in ast.walk(node):
            if (
                isinstance(inner, ast.Call)
                and getattr(inner.func, "id", "") == "BashOperator"
            ):
                found = {k.arg: k.value for k in inner.keywords}
                task_id = _evaluate(found["task_id"], namespace)
                assert task_id not in tasks, f"duplicate task_id {task_id}"
                tasks[task_id] = {
                    "bash_command": _evaluate(found["bash_command"], namespace),
                    "pool": (
                        _evaluate(found["pool"], namespace) if "pool" in found else None
                    ),
                }
        dags[dag_id] = {"params": params, "tasks": tasks}
    return dags


def test_dag_file_is_valid_python_with_the_expected_tasks():
    dags = _dags()
    assert set(dags) == {"ctxledger_nightly", "ctxledger_backfill"}
    assert set(dags["ctxledger_nightly"]["tasks"]) == {"nightly", "verify", "runs"}
    assert set(dags["ctxledger_backfill"]["tasks"]) == {"backfill", "verify"}
    # The two writers share one single-slot pool: they never overlap.
    pools = {
        dags["ctxledger_nightly"]["tasks"]["nightly"]["pool"],
        dags["ctxledger_backfill"]["tasks"]["backfill"]["pool"],
    }
    assert pools == {"ctxledger_warehouse"}


@pytest.mark.parametrize("catalog", ["", "postgresql://ctxledger@db:5432/lake"])
@pytest.mark.parametrize("optional", ["", "set"])
def test_every_dag_command_calls_a_real_subcommand(catalog, optional):
    for dag_id, dag in _dags().items():
        params = {k: (v or "X") for k, v in dag["params"].items()}
        params.update(catalog=catalog, data_path="/mnt/lake/" if catalog else "")
        for name in ("since", "tenant"):
            if name in params:
                params[name] = "2026-10-01" if optional else ""
        for task_id, task in dag["tasks"].items():
            command = _render(task["bash_command"], params)
            calls = invocations(command)
            assert len(calls) == 1, f"{dag_id}.{task_id}: {command}"
            subcommand, args = calls[0]
            expected = {"runs": "runs"}.get(task_id, task_id)
            assert subcommand == expected, f"{dag_id}.{task_id}"
            assert check_call(subcommand, args) == [], f"{dag_id}.{task_id}: {command}"
            if catalog:
                assert "--catalog" in args and "--data-path" in args
            if task_id == "backfill":
                assert ("--since" in args) == bool(optional)


# -- cron and systemd ----------------------------------------------------------------


def test_cron_lines_call_real_subcommands():
    text = (DEPLOY / "cron" / "ctxledger.cron").read_text()
    calls = []
    for line in text.splitlines():
        calls += invocations(line.lstrip("# "))
    assert [c[0] for c in calls] == ["nightly", "nightly", "backfill"]
    for subcommand, args in calls:
        assert check_call(subcommand, args) == []
    schedule = [line for line in text.splitlines() if line and line[0].isdigit()]
    assert len(schedule) == 1
    fields = schedule[0].split()
    assert fields[5] == "ctxledger"  # /etc/cron.d format: the user field


def _env_file() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / "systemd" / "ctxledger.env").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key] = value
    return values


def _unit(name: str) -> dict[str, str]:
    """Key -> value of a unit file (the last one wins; no duplicate keys here)."""
    values = {}
    for line in (DEPLOY / "systemd" / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            values[key] = value
    return values


def _expand(command: str, env: dict[str, str], instance: str) -> str:
    command = command.replace("%i", instance)
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], command)


@pytest.mark.parametrize(
    ("unit", "subcommand"),
    [
        ("ctxledger-nightly.service", "nightly"),
        ("ctxledger-backfill@.service", "backfill"),
    ],
)
def test_systemd_units_call_real_subcommands(unit, subcommand):
    env = _env_file()
    values = _unit(unit)
    assert values["Type"] == "oneshot"
    assert values["EnvironmentFile"] == "/etc/ctxledger/ctxledger.env"
    calls = invocations(_expand(values["ExecStart"], env, "v2"))
    assert [c[0] for c in calls] == [subcommand]
    assert check_call(*calls[0]) == []
    assert "/run/lock/ctxledger.lock" in values["ExecStart"]  # shared lock


def test_the_timer_starts_the_nightly_service():
    timer = _unit("ctxledger-nightly.timer")
    assert timer["Unit"] == "ctxledger-nightly.service"
    assert timer["OnCalendar"].startswith("*-*-*")
    assert timer["Persistent"] == "true"


def test_commented_env_alternatives_use_real_options():
    """The example CTXLEDGER_ARGS / CTXLEDGER_BACKFILL_ARGS, active or commented."""
    text = (DEPLOY / "systemd" / "ctxledger.env").read_text()
    checked = 0
    for line in text.splitlines():
        match = re.match(r"#?\s*CTXLEDGER_(BACKFILL_)?ARGS=(.*)", line)
        if match:
            subcommand = "backfill" if match.group(1) else "nightly"
            assert check_call(subcommand, shlex.split(match.group(2))) == []
            checked += 1
    assert checked >= 4
