"""``ctxledger policy check FILE``: the effective policy and its version, or
one ``file:line`` line per problem and exit 1; a job given a bad policy stops
the same way before it touches the warehouse (issue 29: fail closed)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from ctxledger.jobs.cli import app
from ctxledger.pipelines.redact.registry import load_checked_policy

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "policies" / "default.yaml"


def _invoke(*argv: str):
    return CliRunner().invoke(app, list(argv), env={"COLUMNS": "300"})


def test_check_prints_the_effective_policy_and_its_version(tmp_path):
    result = _invoke("policy", "check", str(DEFAULT))
    assert result.exit_code == 0, result.output
    expected = load_checked_policy(DEFAULT)
    assert f"# policy_version: {expected.policy_version}" in result.output
    assert f"# detector: {expected.detector}" in result.output
    # the body is the effective policy: it loads back to the same settings
    effective = yaml.safe_load(result.output)
    assert effective["pii"]["entities"][0]["type"] == "PERSON"
    saved = tmp_path / "effective.yaml"
    saved.write_text(result.output)
    assert load_checked_policy(saved).policy_version == expected.policy_version
    # defaults a short file leaves out are filled in
    short = tmp_path / "short.yaml"
    short.write_text("pii:\n  entities: [{type: EMAIL_ADDRESS}]\n")
    result = _invoke("policy", "check", str(short))
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.output)
    assert body["pii"]["entities"] == [
        {"type": "EMAIL_ADDRESS", "score_threshold": 0.5,
         "operator": "pseudonymize", "mask_char": "*", "keep_last": 0}
    ]  # fmt: skip
    assert body["history"]["keep_snapshots_days"] == 30


def test_check_fails_with_one_line_per_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "pii:\n  entities:\n    - {type: PERSN}\n    - {type: PERSON, operator: x}\n"
    )
    result = _invoke("policy", "check", str(bad))
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 2, result.output
    assert lines[0].startswith(f"error: {bad}:3: pii.entities[0].type: unknown")
    assert lines[1].startswith(f"error: {bad}:4: pii.entities[1].operator: ")
    for text in ("", "[]\n"):
        bad.write_text(text)
        result = _invoke("policy", "check", str(bad))
        assert result.exit_code == 1 and f"{bad}:1: " in result.output


def test_nightly_with_an_empty_policy_stops_before_the_warehouse(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "chat.jsonl").write_text(
        '{"session_id": "s", "turn": 0, "role": "user", '
        '"content": "mail me at mia@example.com"}\n'
    )
    for text in ("", "[]\n", "{}\n", "pii:\n  entities: []\n"):
        policy = tmp_path / "policy.yaml"
        policy.write_text(text)
        result = _invoke(
            "nightly", "--landing", str(landing), "-w", str(tmp_path / "wh"),
            "--policy", str(policy),
        )  # fmt: skip
        assert result.exit_code != 0
        assert isinstance(result.exception, ValueError)
        assert str(policy) in str(result.exception)
        assert not (tmp_path / "wh").exists()
