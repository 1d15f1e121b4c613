"""Policy model: loading, strictness, and version-hash stability."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from ctxledger.schemas.policy import DEFAULT_POLICY_PATH, Policy, load_policy

REPO = Path(__file__).resolve().parents[3]


def test_default_policy_loads_and_matches_documented_copy() -> None:
    packaged = load_policy(None)
    documented = load_policy(REPO / "policies" / "default.yaml")
    assert packaged == documented
    assert packaged.policy_version == documented.policy_version
    assert DEFAULT_POLICY_PATH.name == "default_policy.yaml"


def test_defaults_and_shape() -> None:
    p = load_policy(None)
    assert p.pseudonym_hex_length == 8
    assert p.limits.max_record_bytes == 8 * 1024 * 1024
    assert p.retention.artifacts_days is None  # artifacts kept forever
    assert p.history.keep_snapshots_days == 30
    for off in ("DATE_TIME", "URL", "NRP", "ORGANIZATION"):
        assert p.rule(off) is None
    assert p.rule("PHONE_NUMBER").score_threshold <= 0.4
    assert {"PERSON", "EMAIL_ADDRESS", "GITHUB_TOKEN", "PASSWORD"} <= p.entity_types


def test_version_is_label_plus_content_hash(tmp_path) -> None:
    p = load_policy(None)
    label, digest = p.policy_version.split("+")
    assert label == p.version and len(digest) == 8
    # same settings, other key order and no comments: same version
    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    reordered = dict(reversed(list(data.items())))
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(reordered, sort_keys=False))
    assert load_policy(path).policy_version == p.policy_version
    # any change changes the hash
    data["pseudonym_hex_length"] = 10
    path.write_text(yaml.safe_dump(data))
    assert load_policy(path).policy_version != p.policy_version


def test_strict_and_frozen() -> None:
    with pytest.raises(ValidationError):
        Policy.model_validate({"name": "x", "surprise": 1})
    with pytest.raises(ValidationError):
        Policy.model_validate(
            {"pii": {"entities": [{"type": "PERSON", "operator": "shred"}]}}
        )
    with pytest.raises(ValidationError):
        Policy.model_validate(
            {"pii": {"entities": [{"type": "PERSON"}, {"type": "PERSON"}]}}
        )
    p = load_policy(None)
    with pytest.raises(ValidationError):
        p.name = "other"  # type: ignore[misc]


def test_retention_history_and_limits_sections() -> None:
    p = Policy.model_validate(
        {
            "retention": {"artifacts_days": 90},
            "history": {"keep_snapshots_days": 7, "orphan_grace_hours": 1},
            "limits": {"max_record_bytes": 1024},
        }
    )
    assert p.retention.artifacts_days == 90
    assert p.history.keep_snapshots_days == 7
    assert p.limits.max_record_bytes == 1024
    assert Policy.model_validate({"history": {"keep_snapshots_days": None}})
    for bad in (
        {"retention": {"artifacts_days": -1}},
        {"retention": {"artifact_days": 9}},  # a typo is an error, not a no-op
        {"history": {"keep_snapshots_days": -1}},
    ):
        with pytest.raises(ValidationError):
            Policy.model_validate(bad)
    assert p.policy_version != Policy().policy_version
