"""A model pass takes the cores other processes leave idle (``pipelines.cpu_share``):
torch's spinning threads made a pass up to 10x slower when another process held
one of the two cores."""

from __future__ import annotations

import subprocess
import sys
import time

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
    """MiniLM with a thread budget of 2 and the torch threads each forward
    pass ran on (``used``); torch's pool restored afterwards."""
    torch = pytest.importorskip("torch")
    from ctxledger.pipelines.evidence.embed import model_path
    from ctxledger.pipelines.minilm import MiniLM

    before = torch.get_num_threads()
    model = MiniLM(model_path("all-MiniLM-L6-v2"))
    model.thread_budget = 2
    used: list[int] = []
    forward = model.forward

    def spy(ids, bf16=False):
        used.append(torch.get_num_threads())
        return forward(ids, bf16)

    monkeypatch.setattr(model, "forward", spy)
    try:
        yield model, used
    finally:
        torch.set_num_threads(before)


def test_each_pass_sizes_torchs_pool_to_the_idle_cores(spied_minilm, monkeypatch):
    model, used = spied_minilm
    monkeypatch.setattr(cpu_share, "available_cores", lambda: 2)
    texts = ["The deploy failed on node 3.", "Roll back the config push."]
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 1)
    busy = model.encode(texts, budget=16)  # one text per pass
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 0)
    quiet = model.encode(texts, budget=16)
    assert used == [1, 1, 2, 2]
    assert (busy * quiet).sum(axis=1).min() > 0.99999  # same vectors either way


def test_a_pass_cap_asked_before_each_pass_changes_threads_not_vectors(
    spied_minilm, monkeypatch
):
    """The embed-ahead helper leaves a core to the run's stages until the
    evidence stage waits for it: its cap is asked before every pass, and the
    vectors do not depend on it (bit-identical in bf16 on this machine's
    CPU; in fp32 the sums split differently across threads: ~1e-7)."""
    model, used = spied_minilm
    monkeypatch.setattr(cpu_share, "running_elsewhere", lambda: 0)
    caps = iter([1, 0, 1])
    texts = ["The deploy failed on node 3.", "Roll back the config push.", "Paged."]
    mixed = model.encode(texts, budget=16, threads=lambda: next(caps))
    whole = model.encode(texts, budget=16)
    assert used == [1, 2, 1, 2, 2, 2]
    assert (mixed * whole).sum(axis=1).min() > 0.99999
