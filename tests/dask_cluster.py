"""A real dask.distributed cluster on 127.0.0.1 for the distributed tests.

Importable as ``dask_cluster`` (pytest puts this folder on ``sys.path``).
``start_cluster`` runs ``dask scheduler`` (port 0, a scheduler file) and
``workers`` single-threaded ``dask worker`` processes from this venv, waits
until all have registered, and ``stop`` ends exactly those processes by pid.
Every distributed test also runs under a hard timeout (``hard_timeout``):
a hung cluster fails the test instead of the CI job.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Seconds a cluster may take to come up (measured 1.2-3 s on an idle machine).
START_TIMEOUT = 60.0


@dataclass
class Cluster:
    """A running scheduler and its workers."""

    scheduler_file: Path
    address: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    def beam_args(self) -> list[str]:
        """The Beam flags that run a job on this cluster."""
        return ["--runner=DaskRunner", f"--dask_client_address={self.address}"]

    def worker_count(self) -> int:
        from distributed import Client

        with Client(self.address, timeout=10) as client:
            return len(client.scheduler_info()["workers"])

    def stop(self) -> None:
        """Terminate every process this cluster started (by pid), workers first."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def _dask_cmd(*args: str) -> list[str]:
    # The venv's own dask CLI (its python, its packages): ``python -m dask``.
    return [sys.executable, "-m", "dask", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    # the launcher's import path: workers unpickle DoFns defined in tests too
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # the venv's bin first: workers (and anything they start) use its python
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603 - our own venv's dask CLI
        cmd,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=_env(),
        start_new_session=True,  # its own group: stop() ends it and its children
    )


def start_cluster(folder: Path, workers: int = 2) -> Cluster:
    """Scheduler + ``workers`` single-threaded workers; returns once all are up."""
    folder.mkdir(parents=True, exist_ok=True)
    sched_file = folder / "scheduler.json"
    procs = [
        _spawn(
            _dask_cmd(
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--dashboard-address",
                ":0",
                "--no-show",
                "--scheduler-file",
                str(sched_file),
            ),
            folder / "scheduler.log",
        )
    ]
    cluster = Cluster(sched_file, "", procs)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not sched_file.exists():
            _check_alive(cluster, deadline, folder)
        cluster.address = json.loads(sched_file.read_text())["address"]
        for index in range(workers):
            cluster.procs.append(
                _spawn(
                    _dask_cmd(
                        "worker",
                        "--scheduler-file",
                        str(sched_file),
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--dashboard-address",
                        ":0",
                        "--no-nanny",
                        "--local-directory",
                        str(folder / f"worker-{index}"),
                    ),
                    folder / f"worker-{index}.log",
                )
            )
        while cluster.worker_count() < workers:
            _check_alive(cluster, deadline, folder)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _check_alive(cluster: Cluster, deadline: float, folder: Path) -> None:
    for proc in cluster.procs:
        if proc.poll() is not None:
            raise RuntimeError(f"a dask process exited early; see logs in {folder}")
    if time.monotonic() > deadline:
        raise TimeoutError(f"dask cluster not up in {START_TIMEOUT:g} s ({folder})")
    time.sleep(0.2)


@contextlib.contextmanager
def hard_timeout(seconds: int) -> Iterator[None]:
    """Fail the enclosed code with ``TimeoutError`` after ``seconds`` (SIGALRM)."""

    def expire(_signum, _frame):
        raise TimeoutError(f"distributed test exceeded its hard timeout of {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class WorkerPool:
    """Beam's EXTERNAL worker pool (``worker_pool_main``), as Flink and Spark
    reach their Python workers; it starts the literal ``python`` on PATH for
    each worker, so PATH starts with this venv's bin (``_env``)."""

    address: str
    proc: subprocess.Popen

    def beam_args(self) -> list[str]:
        """Portable runner, embedded job server, workers from this pool."""
        return [
            "--runner=PortableRunner",
            "--job_endpoint=embed",
            "--environment_type=EXTERNAL",
            f"--environment_config={self.address}",
        ]

    def stop(self) -> None:
        Cluster(Path(), "", [self.proc]).stop()


def start_worker_pool(folder: Path) -> WorkerPool:
    """``python -m apache_beam.runners.worker.worker_pool_main`` on a free port;
    returns once it listens (the port read from its log)."""
    import re

    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "worker-pool.log"
    proc = _spawn(
        [
            sys.executable,
            "-m",
            "apache_beam.runners.worker.worker_pool_main",
            "--service_port=0",
        ],
        log,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        found = re.search(r"servicer at port: \S+:(\d+)", log.read_text())
        if found:
            return WorkerPool(f"127.0.0.1:{found.group(1)}", proc)
        if proc.poll() is not None or time.monotonic() > deadline:
            Cluster(Path(), "", [proc]).stop()
            raise RuntimeError(f"worker pool did not start; see {log}")
        time.sleep(0.2)
