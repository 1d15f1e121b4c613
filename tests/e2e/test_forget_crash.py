"""``forget`` survives ``kill -9`` and finds every copy of the subject's bytes
(issue 32, items 1 and 2).

The landing holds subject ``a`` of tenant ``victim`` (good and rejected lines,
so there are quarantine files), byte-for-byte copies of a's file under
``victim/subject=b`` and ``evil/subject=e`` (a plain copy: nothing stops that),
a symlink from ``evil`` into a's folder (refused: ``cross_scope_link``) and
subject b's own file, which must survive.

* Content identity: after ``forget --tenant victim --subject a`` no byte of a's
  texts is left anywhere under the warehouse (catalog, Parquet, quarantine,
  replica), although the copies were landed as other subjects' sessions.
* Crash safety: ``TRIALS`` times, on a fresh copy of the warehouse, ``forget``
  is killed (SIGKILL to its process group) after a seeded random delay within
  the reference run's duration, then one more command runs (``forget`` again,
  or ``doctor`` when a journal was left, alternately): 0 bytes of a's texts
  anywhere, b's all there, one receipt, no journal left. A last trial is
  finished by ``nightly`` instead.
"""

from __future__ import annotations

import os
import random
import shutil
import time

import pytest
from test_forget_bytes import _all_seen, _forms, _line
from test_memory_api import leaks

from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.erasure import pending_journals

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("CTXLEDGER_FORGET_KILL_TRIALS", "10"))
SEED = 20261204
A = [f"zebra{i} marzipan tuba{i} \u00e9toile" for i in range(10)]
B = ["heron lentil cello", "otter waffle banjo"]


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    base = tmp_path_factory.mktemp("forget-crash")
    landing = base / "landing"
    own = landing / "tenant=victim" / "subject=a"
    own.mkdir(parents=True)
    data = _line("a-1", "user", f"Remember: {A[0]}.") + _line(
        "a-1", "assistant", f"Noted {A[1]}."
    )
    for text in A[2:]:  # rejected (unknown role): one quarantine file each
        data += _line("a-1", "robot", text)
    (own / "a.jsonl").write_text(data)
    for rel in ("tenant=victim/subject=b/a-copy.jsonl",
                "tenant=evil/subject=e/stolen.jsonl"):  # fmt: skip
        (landing / rel).parent.mkdir(parents=True, exist_ok=True)
        (landing / rel).write_text(data)
    os.symlink(
        "../../tenant=victim/subject=a/a.jsonl",
        landing / "tenant=evil" / "subject=e" / "link.jsonl",
    )
    (landing / "tenant=victim" / "subject=b" / "own.jsonl").write_text(
        _line("b-1", "user", f"Remember: {B[0]}.") + _line("b-1", "robot", B[1])
    )
    warehouse = base / "wh"
    result = run_nightly(landing, warehouse, source_format="canonical")
    assert result.manifest is not None
    assert _all_seen(warehouse, A) and _all_seen(warehouse, B)
    with Warehouse.open(warehouse) as wh:
        (reason,) = wh.query(
            "SELECT reason_code FROM dead_letters WHERE source_file = ?",
            ["tenant=evil/subject=e/link.jsonl"],
        ).fetchone()
    assert reason == "cross_scope_link"
    return base, landing, warehouse


FORGET = ["forget", "--tenant", "victim", "--subject", "a"]


def _receipts(root) -> int:
    with Warehouse.open(root) as wh:
        return wh.query("SELECT count(*) FROM erasures").fetchone()[0]


def _check(root, context=""):
    assert leaks(root, _forms(A)) == [], context
    assert _all_seen(root, B), context
    assert pending_journals(root) == [], context
    assert _receipts(root) == 1, context  # one erasure, one receipt


def test_forget_erases_every_copy_of_the_subjects_bytes(landed, tmp_path, job_server):
    _, _, base = landed
    root = tmp_path / "wh"
    shutil.copytree(base, root)
    job = job_server.start([*FORGET, "-w", str(root)], tmp_path / "forget.log")
    assert job.wait(timeout=600) == 0, job.output()[-3000:]
    _check(root)
    with Warehouse.open(root) as wh:
        (note, quarantined) = wh.query(
            "SELECT note, quarantine_files_deleted FROM erasures"
        ).fetchone()
    assert "2 byte-for-byte copies" in note
    assert quarantined == len(A) - 2


def test_kill9_during_forget_then_one_more_command_leaves_no_byte(
    landed, tmp_path, job_server
):
    began = time.monotonic()
    _, landing, base = landed
    log = tmp_path / "jobs.log"
    reference = tmp_path / "reference"
    shutil.copytree(base, reference)
    started = time.monotonic()
    job = job_server.start([*FORGET, "-w", str(reference)], log)
    assert job.wait(timeout=600) == 0, job.output()[-3000:]
    total = time.monotonic() - started
    rng = random.Random(SEED)
    outcomes = []
    for i in range(TRIALS + 1):
        trial = tmp_path / f"trial{i}"
        shutil.copytree(base, trial)
        delay = rng.uniform(0.1 * total, 1.0 * total)
        job = job_server.start([*FORGET, "-w", str(trial)], log)
        if i == TRIALS or i % 2:
            # killed at a random point of the journal's execution (the other
            # trials anywhere, planning included): how long planning takes
            # on a loaded machine must not decide what the test exercises
            while job.poll() is None and not pending_journals(trial):
                time.sleep(0.005)
            delay = rng.uniform(0.0, (0.1 if i == TRIALS else 0.3) * total)
        if job.wait(timeout=delay) is None:
            job.kill()
        journal = bool(pending_journals(trial))
        assert journal or i < TRIALS, "the nightly trial's forget was not cut short"
        if i == TRIALS:  # the last one: the next nightly finishes it
            again = ["nightly", "--landing", str(landing), "-w", str(trial),
                     "--format", "canonical"]  # fmt: skip
        elif (journal and i % 2) or (not journal and _receipts(trial)):
            again = ["doctor", "-w", str(trial)]  # (a finished forget: nothing)
        else:  # finishes the journal (its receipt), or plans anew (none yet)
            again = [*FORGET, "-w", str(trial)]
        job = job_server.start(again, log)
        assert job.wait(timeout=600) == 0, job.output()[-3000:]
        outcomes.append((round(delay, 1), journal, again[0]))
        _check(trial, f"trial {i}: {outcomes}")
        shutil.rmtree(trial)
    print(
        f"\nforget kill -9: reference {total:.1f}s, trials {outcomes}, "
        f"whole test {time.monotonic() - began:.0f}s"
    )
    # Most kills must land while a journal is being executed.
    assert sum(1 for _, journal, _ in outcomes if journal) >= TRIALS // 2, outcomes
