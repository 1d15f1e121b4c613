"""A model pass takes the cores other processes leave idle (``pipelines.cpu_share``):
torch's spinning threads made a pass up to 10x slower when another process held
one of the two cores."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ctxledger.pipelines import cpu_share
from ctxledger.pipelines.cpu_share import running_elsewhere, threads_now


@pytest.mark.parametrize(
    ("budget", "cores", "elsewhere", "threads"),
    [
        (2, 2, 0, 2),  # quiet machine: the whole budget
        (2, 2, 1, 1),  # one busy process beside us: one thread
        (2, 2, 7, 1),  # never fewer than one
        (1, 2, 0, 1),  # a budget of one stays one
        (4, 8, 5, 3),
        (4, 8, 0, 4),  # never more than the budget
    ],
)
def test_threads_now_takes_the_idle_cores_within_the_budget(
    budget, cores, elsewhere, threads
):
    assert threads_now(budget, cores=cores, elsewhere=elsewhere) == threads


def test_without_proc_the_budget_stands(monkeypatch):
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: None)
    assert threads_now(2, cores=2) == 2


def test_sharing_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 1)
    assert threads_now(2, cores=2) == 1
    monkeypatch.setenv(cpu_share.SHARE_ENV, "0")
    assert threads_now(2, cores=2) == 2


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_running_elsewhere_sees_a_busy_process():
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.time()\nwhile time.time() - t < 3: pass",
        ]
    )
    try:
        time.sleep(0.5)
        seen = []
        for _ in range(20):
            seen.append(running_elsewhere())
            time.sleep(0.02)
    finally:
        busy.kill()
        busy.wait()
    assert all(isinstance(n, int) and n >= 0 for n in seen)
    assert max(seen) >= 1  # the spinning child is another process's thread


@pytest.fixture
def spied_minilm(monkeypatch):
    """MiniLM with a thread budget of 2 that records, per forward pass, the
    torch threads it ran on and the Python thread it ran in (``used``);
    torch's pool restored afterwards."""
    torch = pytest.importorskip("torch")
    from ctxledger.pipelines.evidence.embed import model_path
    from ctxledger.pipelines.minilm import MiniLM

    before = torch.get_num_threads()
    model = MiniLM(model_path("all-MiniLM-L6-v2"))
    model.thread_budget = 2
    used: list[tuple[int, str]] = []
    forward = model.forward

    def spy(ids, bf16=False):
        used.append((torch.get_num_threads(), threading.current_thread().name))
        return forward(ids, bf16)

    monkeypatch.setattr(model, "forward", spy)
    try:
        yield model, used
    finally:
        torch.set_num_threads(before)


TEXTS = [
    "The deploy failed on node 3.",
    "Roll back the config push.",
    "Paged the on-call engineer at 02:14.",
    "Disk usage on db-2 reached 91 percent.",
]


def test_a_busy_machine_runs_the_passes_in_turn_on_one_thread(
    spied_minilm, monkeypatch
):
    model, used = spied_minilm
    monkeypatch.setattr(cpu_share, "available_cores", lambda: 2)
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 1)
    model.encode(TEXTS, budget=16)  # one text per pass
    assert used == [(1, threading.current_thread().name)] * len(TEXTS)


def test_a_quiet_machine_runs_passes_side_by_side_with_the_same_vectors(
    spied_minilm, monkeypatch
):
    """Two lanes of one torch thread each: every pass single-threaded, so the
    vectors are those of the passes run in turn on one thread, bit for bit,
    in fp32 and bf16 alike."""
    model, used = spied_minilm
    monkeypatch.setattr(cpu_share, "available_cores", lambda: 2)
    spied, other_lane = model.forward, threading.Event()
    sharing = threading.Event()  # set while the machine is quiet

    def forward(ids, bf16=False):
        if sharing.is_set() and threading.current_thread() is threading.main_thread():
            other_lane.wait(5)  # the caller's lane holds its first pass...
        elif sharing.is_set():
            other_lane.set()  # ...until the second lane has taken one
        return spied(ids, bf16)

    monkeypatch.setattr(model, "forward", forward)
    texts = TEXTS * 6
    for bf16 in (False, True):
        monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 1)
        sharing.clear()
        in_turn = model.encode(texts, bf16=bf16, budget=16)
        used.clear()
        other_lane.clear()
        sharing.set()
        monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 0)
        side_by_side = model.encode(texts, bf16=bf16, budget=16)
        assert np.array_equal(in_turn, side_by_side)
        assert {threads for threads, _ in used} == {1}
        assert len(used) == len(texts)
        assert len({lane for _, lane in used}) == 2


def test_lanes_stop_at_a_failed_pass_and_raise_it(spied_minilm, monkeypatch):
    model, _used = spied_minilm
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 0)
    calls: list[int] = []

    def boom(ids, bf16=False):
        calls.append(len(ids))
        raise RuntimeError("pass failed")

    monkeypatch.setattr(model, "forward", boom)
    with pytest.raises(RuntimeError, match="pass failed"):
        model.encode(TEXTS * 10, budget=16)
    assert len(calls) <= 2  # each lane stops at its failure


def test_a_pass_s_thread_cap_changes_threads_not_vectors(spied_minilm, monkeypatch):
    """The embed-ahead helper leaves a core to the run's stages until the
    evidence stage waits for it (``Embedder.run_pass``): the cap sizes
    torch's pool for that pass, and the vectors do not depend on it
    (bit-identical in bf16 on this machine's CPU; in fp32 the sums split
    differently across threads: ~1e-7)."""
    model, used = spied_minilm
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 0)
    ids = model.plan(TEXTS)[0][1]
    capped = model.forward_pass(ids, threads=1)
    whole = model.forward_pass(ids)
    assert [threads for threads, _ in used] == [1, 2]
    assert (capped * whole).sum(axis=1).min() > 0.99999
