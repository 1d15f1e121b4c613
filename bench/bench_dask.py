"""Scaling on a real cluster: the nightly on 1 and 2 single-threaded dask
workers, beside the DirectRunner and an EXTERNAL Beam worker pool.

Data: the transcript sets of ../shared/corpora section A (``CORPORA``
overrides; ``--sets a,b`` picks a subset), else the bundled sample landing,
built as ``bench_pipeline`` builds it. Every runner gets the same landing and
a fresh warehouse; the cluster (``dask scheduler`` + ``dask worker
--nthreads 1`` on 127.0.0.1) and the worker pool are started by this script
(``tests/dask_cluster.py``) and stopped by pid.

Prints, per runner: wall seconds, CPU seconds of the launcher and of every
worker process (``psutil``: user + system, children included), CPU seconds
per 1,000 messages, the speed-up of 2 dask workers over 1, and whether every
table equals the DirectRunner's (``tests/table_digest.py``: counts and content
hashes less wall-clock columns). Model loads and imports on the workers are
part of the figure (a worker loads each model once, ``jobs.dask_compat``).
On a machine whose cores are shared the figures swing: say so with them.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from bench_pipeline import TRANSCRIPT_SETS, build_landing  # noqa: E402
from dask_cluster import start_cluster, start_worker_pool  # noqa: E402
from table_digest import table_digests  # noqa: E402


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` and their live children."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for one in procs:
            try:
                t = one.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.NoSuchProcess:
                continue
    return total


def _own_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _messages(warehouse: Path) -> int:
    from ctxledger.warehouse import Warehouse

    with Warehouse.open(warehouse) as wh:
        return wh.query("SELECT count(*) FROM messages").fetchone()[0]


def run_one(name: str, landing: Path, warehouse: Path, args, pids) -> dict:
    from ctxledger.jobs.nightly import run_nightly

    cpu0, workers0, t0 = _own_cpu(), _cpu(pids), time.perf_counter()
    run_nightly(landing, warehouse, beam_args=args)
    wall = time.perf_counter() - t0
    launcher = _own_cpu() - cpu0
    workers = _cpu(pids) - workers0
    messages = _messages(warehouse)
    report = {
        "runner": name,
        "wall_s": wall,
        "launcher_cpu_s": launcher,
        "worker_cpu_s": workers,
        "messages": messages,
        "cpu_s_per_1k_msgs": (launcher + workers) / max(messages, 1) * 1000,
    }
    print(
        f"{name:<22} {wall:7.1f} s wall  cpu launcher {launcher:6.1f} s  "
        f"workers {workers:6.1f} s  {report['cpu_s_per_1k_msgs']:6.1f} "
        f"cpu-s/1k msgs  ({messages} messages)",
        flush=True,
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(TRANSCRIPT_SETS))
    parser.add_argument(
        "--runners",
        default="dask-1,dask-2,direct,external",
        help="which of dask-1, dask-2, direct, external (in this order)",
    )
    args = parser.parse_args()
    runners = args.runners.split(",")
    with tempfile.TemporaryDirectory(prefix="bench_dask_") as tmp:
        root = Path(tmp)
        landing = root / "landing"
        source = build_landing(landing, tuple(args.sets.split(",")))
        print(f"data: {source}; cores: {os.cpu_count()}", flush=True)
        reports = {}
        for name in runners:
            warehouse = root / f"wh_{name}"
            if name.startswith("dask-"):
                workers = int(name.split("-", 1)[1])
                cluster = start_cluster(root / f"cluster_{name}", workers=workers)
                pids = [p.pid for p in cluster.procs]
                try:
                    reports[name] = run_one(
                        name, landing, warehouse, cluster.beam_args(), pids
                    )
                finally:
                    cluster.stop()
            elif name == "external":
                pool = start_worker_pool(root / "pool")
                try:
                    reports[name] = run_one(
                        name, landing, warehouse, pool.beam_args(), [pool.proc.pid]
                    )
                finally:
                    pool.stop()
            else:
                reports[name] = run_one(name, landing, warehouse, [], [])
        if "dask-1" in reports and "dask-2" in reports:
            speedup = reports["dask-1"]["wall_s"] / reports["dask-2"]["wall_s"]
            print(f"speed-up, 2 dask workers over 1: {speedup:.2f}x", flush=True)
        digests = {name: table_digests(root / f"wh_{name}") for name in reports}
        first = next(iter(digests.values()))
        same = all(d == first for d in digests.values())
        print(f"every table equal across runners: {'yes' if same else 'NO'}")
        if not same:
            for name, digest in digests.items():
                bad = [t for t in digest if digest[t] != first[t]]
                print(f"  {name}: differs in {', '.join(bad) or '-'}")
            sys.exit(1)


if __name__ == "__main__":
    main()
