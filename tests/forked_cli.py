"""Run ``ctxledger`` jobs as forked children of one pre-imported server process.

A job started as ``python -m jobs.cli`` spends 10-15 s importing Beam, torch,
presidio and spaCy and loading its models before it does any work. The e2e
tests start dozens of jobs (the kill -9 trials alone start 13), so the server
imports and loads all of that once per test worker (single-threaded, so forking
it is safe), then forks one child per job. Each child is its own OS process in
its own process group, running the real ``jobs.cli`` entry point with its own
argv, environment and output file: signals and SIGKILL reach it exactly as
they reach a job started from the shell. ``tests/e2e/test_nightly.py`` still
starts the real ``python -m jobs.cli`` entry point as a plain subprocess.

Protocol (lines): the client writes one JSON request per job; the server
answers ``pid N`` for each request in order, and ``exit N CODE`` when child N
ends (CODE negative for a signal). Several jobs may run at once.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

_SERVER = r"""
import json, os, select, signal, sys, threading

import ctxledger.jobs.cli, ctxledger.jobs.nightly, ctxledger.pipelines.graph
from ctxledger.pipelines.evidence.embed import model_path
from ctxledger.pipelines.models import sentence_model
from ctxledger.pipelines.redact.ner import _load_shared
from ctxledger.schemas.policy import load_policy

policy = load_policy()
_load_shared(policy.pii.ner_model)
# One torch thread, as `make test` runs (OMP_NUM_THREADS=1): GNU OpenMP is not
# fork-safe once a parallel region has run (loading the model runs some with
# two threads), and a forked job's first parallel region then hangs for good.
sentence_model(model_path(policy.evidence.embedding.model), threads=1)
assert threading.active_count() == 1, "fork needs a single-threaded server"


def run_child(request, ready):
    # The job, in the forked child. Never returns: the server's loop must not
    # run on in a child, whatever fails.
    code = 1
    try:
        os.setsid()  # before the server names the pid: its group exists to kill
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True)
        os.write(ready, b"+")
        os.close(ready)
        sys.argv = ["ctxledger", *request["argv"]]
        ctxledger.jobs.cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


children = set()


def reply(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def reap(block=False):
    while children:
        pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        children.discard(pid)
        reply(f"exit {pid} {os.waitstatus_to_exitcode(status)}")


pending = b""
while True:
    ready, _, _ = select.select([0], [], [], 0.02)
    if ready:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            ready_r, ready_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(ready_r)
                run_child(json.loads(line), ready_w)
            os.close(ready_w)
            os.read(ready_r, 1)  # empty if the child failed before it was ready
            os.close(ready_r)
            children.add(pid)
            reply(f"pid {pid}")
    reap()
for pid in list(children):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
reap(block=True)
"""


class Job:
    """One forked job: its pid (also its process group) and exit code."""

    def __init__(self, server: JobServer, pid: int, log: Path):
        self.server = server
        self.pid = pid
        self.log = log

    @property
    def returncode(self) -> int | None:
        return self.server.exits.get(self.pid)

    def poll(self) -> int | None:
        """The exit code once the job ended, else None (does not block)."""
        return self.wait(timeout=0)

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the job ends (its exit code) or ``timeout`` s pass (None)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left < 0:
                break
            self.server.pump(left)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the job's process (as ``Popen.send_signal`` does)."""
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL the job's whole process group, then reap it."""
        if self.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended on its own just now
        self.wait()

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


class JobServer:
    """The server process; ``start`` jobs, each a ``Job``."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.cwd = cwd
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._fd = self.proc.stdout.fileno()
        self._pending = b""
        self._started: deque[int] = deque()
        self.exits: dict[int, int] = {}

    def start(
        self, argv: list[str], log: Path, env: dict[str, str] | None = None
    ) -> Job:
        """Fork a child running ``ctxledger *argv`` with ``env`` added to the
        server's environment, its output appended to ``log``."""
        request = {"argv": argv, "log": str(log), "env": env or {}}
        request["cwd"] = str(self.cwd)
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + 600  # the first start waits for the imports
        while not self._started:
            if not self.pump(max(0.0, deadline - time.monotonic())):
                raise RuntimeError("the job server did not start the job in 600 s")
        return Job(self, self._started.popleft(), log)

    def pump(self, timeout: float | None) -> bool:
        """Read one reply line (waiting up to ``timeout`` s); False when none came.

        Reads the pipe's bytes itself: a buffered reader could swallow a second
        line that ``select`` would then never report.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], left)
            if not ready:
                return False
            chunk = os.read(self._fd, 65536)
            if not chunk:
                raise RuntimeError(f"the job server exited ({self.proc.wait()})")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        kind, *values = line.decode().split()
        if kind == "pid":
            self._started.append(int(values[0]))
        else:
            self.exits[int(values[0])] = int(values[1])
        return True

    def close(self) -> None:
        """End the server; it SIGKILLs any job still running."""
        self.proc.stdin.close()
        self.proc.wait(timeout=120)
