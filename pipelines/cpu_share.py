"""How many threads a model pass should use now: the cores other processes
leave idle (no torch or Beam import here).

Why: torch's OpenMP threads (GNU libgomp in the Linux wheels) spin while they
wait for each other at the end of every operation, and that spinning is what
makes MiniLM's small matrix products fast on two threads: 1.35-1.45 s for 600
texts against 2.5 s on one thread (2 cores, bf16). But when another process
holds one of the cores, the thread that lost its core keeps the other one
spinning at every barrier: the same pass took 5.8-29.6 s with one busy process
beside it (``docs/performance.md``), and a one-process nightly on a shared
machine took 291 s instead of 85 s. Letting the threads sleep instead
(``OMP_WAIT_POLICY=PASSIVE``) removes the collapse but costs the quiet machine
as much as a single thread does (2.2-3.5 s).

So before each forward pass the model asks ``threads_now``: how many threads
other processes have ready to run (``procs_running`` of ``/proc/stat``, less
this process's own running threads) and uses at most the cores they leave,
never more than its budget (``cores // workers``, ``pipelines.models``) and
never fewer than one: its whole budget on a quiet machine, one thread on a
busy one. Off Linux (no ``/proc``) the budget stands, and so it does with
``CTXLEDGER_SHARE_CORES=0`` (fixed threads: a benchmark on a machine whose
other runnable threads are known to be of low priority, say).

The same count decides how many passes of one call ``MiniLM.encode`` runs
side by side, each on one thread (``MiniLM.lanes_now``: faster on 2 cores
than one pass on two threads, and a lane of one thread never spins).
"""

from __future__ import annotations

import os

#: Set to 0 to keep the thread budget whatever else runs.
SHARE_ENV = "CTXLEDGER_SHARE_CORES"
_STAT = "/proc/stat"
_TASKS = "/proc/self/task"


def running_elsewhere() -> int | None:
    """Threads of other processes that are running or ready to run now (None
    where ``/proc`` does not say)."""
    try:
        with open(_STAT, "rb") as handle:
            total = next(
                int(line.split()[1])
                for line in handle
                if line.startswith(b"procs_running")
            )
        own = 0
        for task in os.listdir(_TASKS):
            try:
                with open(f"{_TASKS}/{task}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:  # the thread ended meanwhile
                continue
            # state is the first field after "(comm)"; comm may hold spaces
            state = stat.rindex(b")") + 2
            if stat[state : state + 1] == b"R":
                own += 1
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return max(0, total - own)


def available_cores() -> int:
    """Cores this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_now(
    budget: int, cores: int | None = None, elsewhere: int | None = None
) -> int:
    """Threads for the next pass: ``budget`` capped by the cores that the
    threads ``elsewhere`` (default: ``running_elsewhere()``) leave, at least 1.
    A budget of one needs no look at the machine."""
    if budget <= 1:
        return 1
    if elsewhere is None and os.environ.get(SHARE_ENV, "1") == "0":
        return budget
    if elsewhere is None:
        elsewhere = running_elsewhere()
        if elsewhere is None:
            return budget
    cores = available_cores() if cores is None else cores
    return max(1, min(budget, cores - elsewhere))
