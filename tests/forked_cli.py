"""Run ``ctxledger`` jobs as forked children of one pre-imported server process.

A job started as ``python -m jobs.cli`` spends about 10 s importing Beam, torch,
presidio and spaCy and loading the NER model before it does any work. Tests that
start many jobs only to kill them (the kill -9 trials) would spend most of their
time there, and their random kill points would land mostly in imports. The
server imports all of that once (single-threaded, so forking it is safe), then
forks one child per job. Each child is its own OS process in its own process
group, running the real ``jobs.cli`` entry point with its own argv: a SIGKILL
of that group ends it exactly as it ends a job started from the shell.

One job runs at a time. The server writes ``pid N`` when a child starts and
``exit N`` (the exit code, negative for a signal) when it ends.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

_SERVER = r"""
import json, os, sys, threading
import jobs.cli, jobs.nightly, pipelines.graph
from pipelines.evidence.embed import model_path
from pipelines.models import sentence_model
from pipelines.redact.ner import _load_shared
from schemas.policy import load_policy

policy = load_policy()
_load_shared(policy.pii.ner_model)
sentence_model(model_path(policy.evidence.embedding.model))
assert threading.active_count() == 1, "fork needs a single-threaded server"
reply = sys.stdout
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for fd in (1, 2):
            os.dup2(log, fd)
        sys.argv = ["ctxledger", *request["argv"]]
        code = 1
        try:
            jobs.cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    reply.write(f"pid {pid}\n")
    reply.flush()
    _, status = os.waitpid(pid, 0)
    reply.write(f"exit {os.waitstatus_to_exitcode(status)}\n")
    reply.flush()
"""


class ForkedCli:
    """The server process; ``start`` one job at a time, then ``wait`` or ``kill``."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._fd = self.proc.stdout.fileno()
        self._pending = b""
        self.pid: int | None = None
        self.returncode: int | None = None

    def start(self, argv: list[str], log: Path) -> int:
        """Fork a child running ``ctxledger *argv`` (output appended to ``log``)."""
        assert self.pid is None or self.returncode is not None, "one job at a time"
        self.proc.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        started = self._line(timeout=600)
        if started is None:
            raise RuntimeError("the job server did not start the job in 600 s")
        self.pid = int(started.removeprefix("pid "))
        self.returncode = None
        return self.pid

    def poll(self) -> int | None:
        """The job's exit code once it ended, else None (does not block)."""
        return self.wait(timeout=0)

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the job ends (its exit code) or ``timeout`` s pass (None)."""
        if self.returncode is None:
            line = self._line(timeout)
            if line is not None:
                self.returncode = int(line.removeprefix("exit "))
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the job's whole process group, then reap it."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended on its own just now
        self.wait()

    def close(self) -> None:
        if self.pid is not None and self.returncode is None:
            self.kill()
        self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def _line(self, timeout: float | None) -> str | None:
        """The server's next reply line, or None when none came in ``timeout``.

        Reads the pipe's bytes itself: a buffered reader could swallow a second
        line that ``select`` would then never report.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise RuntimeError(f"the job server exited ({self.proc.wait()})")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode().strip()

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
