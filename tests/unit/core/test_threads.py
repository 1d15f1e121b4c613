"""Worker thread budgets and lazy start-up (issue 14: a faster nightly).

Local Beam workers must share the cores, not each take all of them
(``pipelines.models``); the nightly graph must build without importing Beam ML
or torch (seconds of start-up for runs that embed nothing); the evidence reuse
lookup must open one warehouse connection per worker, not one per batch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxledger.pipelines import models
from ctxledger.pipelines.models import (
    THREAD_POOL_ENVS,
    WORKER_THREADS_ENV,
    local_workers,
    quiet_worker_args,
    shares_process,
    sized_worker_threads,
    threads_per_worker,
    worker_thread_env,
    worker_threads,
)

ROOT = Path(__file__).resolve().parents[3]


def test_available_cores_follows_the_affinity():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    assert models.available_cores() == (expected or os.cpu_count())


@pytest.mark.parametrize(
    ("cores", "workers", "threads"),
    [
        (2, 1, 2),
        (2, 2, 1),
        (2, 4, 1),  # never zero threads
        (16, 4, 4),
        (16, 3, 5),
        (None, 2, 1),  # os.cpu_count() may say None
        (1, 1, 1),
        (8, 0, 8),
    ],
)
def test_threads_per_worker_shares_the_cores(cores, workers, threads):
    assert threads_per_worker(cores, workers) == threads


@pytest.mark.parametrize(
    ("args", "workers"),
    [
        ([], 1),
        (["--direct_num_workers=2", "--direct_running_mode=multi_processing"], 2),
        (["--direct_num_workers", "3", "--direct_running_mode=multi_threading"], 3),
        (["--direct_running_mode=multi_processing", "--direct_num_workers=0"], 8),
        # in_memory mode runs one worker whatever the count says (Beam warns)
        (["--direct_num_workers=2"], 1),
        (
            [
                "--runner=DirectRunner",
                "--direct_num_workers=2",
                "--direct_running_mode=multi_processing",
            ],
            2,
        ),
        # remote workers have machines of their own
        (
            [
                "--runner=DataflowRunner",
                "--direct_num_workers=2",
                "--direct_running_mode=multi_processing",
            ],
            1,
        ),
        (["--direct_num_workers=x", "--direct_running_mode=multi_processing"], 1),
    ],
)
def test_local_workers_from_beam_args(args, workers):
    assert local_workers(args, cores=8) == workers


@pytest.mark.parametrize(
    ("args", "shared"),
    [
        ([], True),  # the in-memory DirectRunner: every stage in this process
        (["--direct_num_workers=2", "--direct_running_mode=multi_threading"], True),
        (["--direct_num_workers=2", "--direct_running_mode=multi_processing"], False),
        (["--direct_running_mode", "multi_processing"], False),
        (["--runner=apache_beam.runners.direct.DirectRunner"], True),
        (["--runner=DataflowRunner"], False),
        (["--runner=FlinkRunner", "--direct_running_mode=in_memory"], False),
    ],
)
def test_shares_process_only_where_every_stage_runs_in_this_process(args, shared):
    """Where the embed-ahead helper may run (``pipelines.evidence.ahead``):
    its vectors are only found by an evidence stage in the same process."""
    assert shares_process(args) is shared


def test_worker_env_sizes_every_pool_but_keeps_user_settings():
    env = worker_thread_env(1, {"OMP_NUM_THREADS": "3"})
    assert "OMP_NUM_THREADS" not in env  # the user's explicit choice stays
    assert env[WORKER_THREADS_ENV] == "1"
    for name in set(THREAD_POOL_ENVS) - {"OMP_NUM_THREADS"}:
        assert env[name] == "1"
    assert env["TOKENIZERS_PARALLELISM"] == "false"


@pytest.mark.parametrize(
    ("args", "added"),
    [
        (["--direct_num_workers=2", "--direct_running_mode=multi_processing"], True),
        # the user's own level wins
        (
            [
                "--direct_num_workers=2",
                "--direct_running_mode=multi_processing",
                "--default_sdk_harness_log_level=DEBUG",
            ],
            False,
        ),
        ([], False),  # one process: no worker processes to quiet
        (["--direct_num_workers=2", "--direct_running_mode=multi_threading"], False),
        (
            [
                "--runner=DataflowRunner",
                "--direct_num_workers=2",
                "--direct_running_mode=multi_processing",
            ],
            False,
        ),
    ],
)
def test_quiet_worker_args_only_for_local_worker_processes(args, added):
    out = quiet_worker_args(args)
    assert out[: len(args)] == args
    flag = "--default_sdk_harness_log_level=ERROR"
    assert (out == [*args, flag]) is added
    assert (out == args) is not added


def test_sized_worker_threads_exports_then_restores(monkeypatch):
    for name in (*THREAD_POOL_ENVS, WORKER_THREADS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(models, "available_cores", lambda: 4)
    with sized_worker_threads(2) as added:
        assert os.environ["OMP_NUM_THREADS"] == "2"
        assert worker_threads() == 2
        assert set(added) >= {*THREAD_POOL_ENVS, WORKER_THREADS_ENV}
    assert "OMP_NUM_THREADS" not in os.environ
    assert worker_threads() == 0
    with sized_worker_threads(1) as added:  # one worker: torch's own default
        assert added == {}
        assert worker_threads() == 0


def test_graph_builds_without_beam_ml_or_torch():
    """Importing the nightly graph must not import ``apache_beam.ml`` (it pulls
    in torch): a run with nothing to embed would pay seconds for it."""
    code = (
        "import sys, pipelines.graph, jobs.nightly\n"
        "heavy = sorted(m for m in ('apache_beam.ml', 'torch', "
        "'sentence_transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_reuse_lookup_opens_one_connection_per_worker(monkeypatch, tmp_path):
    import ctxledger.warehouse.evidence_api as api
    from ctxledger.pipelines.config import JobConfig
    from ctxledger.pipelines.evidence.transforms import LookupEmbeddingsFn

    opened, closed, lookups = [], [], []

    class Con:
        def close(self):
            closed.append(self)

    def connect(root, catalog=None, data_path=None):
        opened.append(Con())
        return opened[-1]

    def lookup(root, keys, model, catalog=None, data_path=None, con=None):
        lookups.append(con)
        return {}

    monkeypatch.setattr(api, "lookup_connection", connect)
    monkeypatch.setattr(api, "lookup_embeddings", lookup)
    config = JobConfig(
        job="nightly",
        run_id="run_x",
        landing=str(tmp_path),
        warehouse=str(tmp_path / "wh"),
        policy_version="p",
        code_version="c",
    )
    fn = LookupEmbeddingsFn(config, "m")
    fn.setup()

    class Draft:
        text = "t"

    for _ in range(3):  # three batches of one bundle
        list(fn.process([(("tenant", "hash"), [Draft()])]))
    assert len(opened) == 1
    assert lookups == [opened[0]] * 3
    fn.finish_bundle()
    assert closed == opened
    fn.teardown()  # already closed: nothing twice
    assert closed == opened
