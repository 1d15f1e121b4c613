"""The artifact trail against real runs: the files each run edited vs its diff.

SWE-agent ``.traj`` files carry the submitted patch in ``info.submission``;
OpenHands outputs carry it in ``test_result.git_patch`` (or ``git_patch``). For
every such run in ``../shared/corpora`` (SWE-agent/SWE-agent and
OpenHands/OpenHands, MIT; see its README) the files the trail says the run left
written or created must be exactly the files of the diff: every diff file is in
the trail, and every trail file inside the repository is in the diff (files
created and then deleted, and scratch files outside the repository, are not).
Skipped when the corpora are absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxledger.pipelines.ledger.trail import TrailInput, derive_trail, net_changes

CORPORA = Path(__file__).resolve().parents[4] / "shared" / "corpora"
SWE = CORPORA / "swe-agent-trajectories"
OPENHANDS = CORPORA / "openhands-trajectories"

pytestmark = pytest.mark.skipif(
    not SWE.is_dir() or not OPENHANDS.is_dir(), reason="shared corpora absent"
)


def _diff_files(patch: str | None) -> set[str]:
    text = (patch or "").replace("\r", "")
    return set(re.findall(r"^diff --git a/(\S+) b/", text, re.MULTILINE))


def _runs() -> list[tuple[Path, int, set[str]]]:
    runs = []
    if SWE.is_dir():
        for path in sorted(SWE.glob("*.traj")):
            info = json.loads(path.read_text()).get("info") or {}
            files = _diff_files(info.get("submission"))
            if files:
                runs.append((path, 0, files))
    if OPENHANDS.is_dir():
        for path in sorted(OPENHANDS.glob("*.jsonl")):
            for index, line in enumerate(path.read_text().splitlines()):
                record = json.loads(line)
                result = record.get("test_result")
                patch = (
                    result.get("git_patch") if isinstance(result, dict) else None
                ) or record.get("git_patch")
                files = _diff_files(patch)
                if files:
                    runs.append((path, index, files))
    return runs


RUNS = _runs()


def _matches(resource: str, path: str) -> bool:
    return resource == path or resource.endswith("/" + path)


@pytest.fixture(scope="module")
def sessions(load):
    cache: dict[Path, list] = {}

    def get(path: Path, index: int):
        if path not in cache:
            cache[path] = load(path)
        return cache[path][index]

    return get


def test_enough_runs_with_diffs_from_both_agents():
    kinds = {path.parent.name for path, _, _ in RUNS}
    assert len(RUNS) >= 3
    assert kinds == {SWE.name, OPENHANDS.name}


@pytest.mark.parametrize(
    ("path", "index", "diff"),
    RUNS,
    ids=[f"{p.stem[:40]}-{i}" for p, i, _ in RUNS],
)
def test_trail_lists_exactly_the_files_in_the_diff(sessions, path, index, diff):
    built = sessions(path, index)
    trail = derive_trail(
        TrailInput(
            built.session.session_id,
            built.session.tenant_id,
            built.session.source_format,
            built.messages,
            {o.message_id: o for o in built.observations},
            {a.artifact_id: a.content for a in built.artifacts},
        )
    )
    edited = {r for r, op in net_changes(trail).items() if op != "delete"}
    missing = sorted(f for f in diff if not any(_matches(r, f) for r in edited))
    assert missing == []
    # The repository root: an edited resource minus its diff path.
    roots = {r[: len(r) - len(f)] for r in edited for f in diff if _matches(r, f)}
    extra = sorted(
        r
        for r in edited
        if not any(_matches(r, f) for f in diff)
        and (any(r.startswith(root) for root in roots if root) or not r.startswith("/"))
    )
    assert extra == []
