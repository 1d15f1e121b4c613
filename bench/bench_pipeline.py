"""End-to-end nightly throughput: landing files -> committed snapshot.

Data: every transcript set of ../shared/corpora section A when present (the
``CORPORA`` env var overrides), else the bundled sample landing. Prints messages/s
and MB/s of the whole run, the time of an idempotent re-run (nothing new), and the
ratio of the whole pipeline to the redact stage alone on the same messages (the
baseline: what Beam, parsing, ids, token counts and the commit cost on top).

Then the documented local-worker flags against one process (issue 14): the same
landing through ``ctxledger``'s nightly in a fresh interpreter, once with the
default DirectRunner, once with ``--direct_num_workers=N
--direct_running_mode=multi_processing`` and once with ``multi_threading``, each
without any ``OMP_NUM_THREADS`` style variable (as a user runs it;
``--keep-thread-env`` keeps the caller's): wall and CPU seconds (workers
included) and the speed-ups. The launcher sizes
each worker to cores / workers threads (``pipelines.models``); without that the
workers oversubscribe the cores and the flags made the nightly 4x slower.

Flags: ``--sets a,b`` picks transcript sets (quick subsets), ``--workers N``
(default 2; 0 skips the comparison), ``--skip-baseline`` skips the in-process
run and the redact baseline, ``--deferred`` runs the in-process nightly with
``evidence.embedding.mode: deferred`` (no vectors in the nightly) and then times
``ctxledger embed`` filling them (``jobs.embed``), ``--skip-startup`` skips the
start-up check (a fresh-interpreter nightly with one new file that needs no
model, and an idempotent re-run: medians of 3).

Peak RSS (``ru_maxrss``) is printed for the in-process nightly and for each
fresh-interpreter run (launcher, and the largest Beam worker process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRANSCRIPT_SETS = (
    "tau-bench-airline-gpt4o",
    "swe-agent-trajectories",
    "mini-swe-agent-trajectories",
    "openhands-trajectories",
    "toolbench-dfsdt-answers",
    "api-bank-dialogues",
    "pydantic-ai-recorded-tool-conversations",
    "claude-code-session-fixtures",
)


#: Thread-pool variables dropped for the runner comparison (a user's shell).
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "CTXLEDGER_WORKER_THREADS",
)

_CHILD = """
import json, resource, sys, time
from ctxledger.jobs.nightly import run_nightly
started = time.perf_counter()
result = run_nightly(sys.argv[1], sys.argv[2], beam_args=sys.argv[3:])
wall = time.perf_counter() - started
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "new": result.files_new, "rss_kb": own,
                  "worker_rss_kb": workers}))
"""


def peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident set size in MB (``ru_maxrss`` is KiB on Linux): for
    ``RUSAGE_CHILDREN``, that of the largest child waited for."""
    return resource.getrusage(who).ru_maxrss / 1024


def build_landing(target: Path, sets: tuple[str, ...] = TRANSCRIPT_SETS) -> str:
    corpora = Path(os.environ.get("CORPORA", ROOT.parent / "shared" / "corpora"))
    if not corpora.is_dir():
        shutil.copytree(ROOT / "sample" / "landing", target)
        return "bundled sample landing"
    for name in sets:
        if (corpora / name).is_dir():
            shutil.copytree(corpora / name, target / name)
    return f"{corpora} section A ({len(sets)} transcript sets)"


def run_child(landing: Path, warehouse: Path, beam_args: list[str], keep_env: bool):
    """One nightly in a fresh interpreter: (wall s, CPU s incl. its workers,
    peak RSS MB of the launcher, of its largest worker process)."""
    env = dict(os.environ)
    if not keep_env:
        for name in THREAD_ENV:
            env.pop(name, None)
    env["PYTHONPATH"] = str(ROOT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(landing), str(warehouse), *beam_args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"nightly {beam_args} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, cpu, report["rss_kb"] / 1024, report["worker_rss_kb"] / 1024


def compare_runners(landing: Path, tmp: Path, workers: int, keep_env: bool) -> None:
    """One process vs ``workers`` local workers on the same landing, in both
    of the DirectRunner's local modes: worker processes (``multi_processing``)
    and worker threads of one process (``multi_threading``)."""
    one_wall, one_cpu, one_rss, _ = run_child(landing, tmp / "wh_one", [], keep_env)
    env = "caller's thread env" if keep_env else "no OMP_NUM_THREADS-style env"
    print(f"  runners ({os.cpu_count()} cores, {env}, fresh interpreters):")
    print(
        f"    one process:       {one_wall:6.1f}s wall, {one_cpu:6.1f}s CPU, "
        f"peak RSS {one_rss:,.0f} MB"
    )
    for mode in ("multi_processing", "multi_threading"):
        flags = [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
        wall, cpu, rss, worker_rss = run_child(
            landing, tmp / f"wh_{mode}", flags, keep_env
        )
        kind = "processes" if mode == "multi_processing" else "threads  "
        workers_rss = (
            f" + {worker_rss:,.0f} MB largest worker"
            if mode == "multi_processing"
            else ""
        )
        print(
            f"    {workers} {kind}:       {wall:6.1f}s wall, {cpu:6.1f}s CPU, "
            f"peak RSS {rss:,.0f} MB{workers_rss} ({' '.join(flags)})"
        )
        print(f"    speed-up of {mode}: {one_wall / wall:.2f}x")


_TINY = (
    '{"session_id": "tiny-%d", "turn": 0, "role": "assistant", '
    '"content": "Build finished."}\n'
)


def startup(tmp: Path, repeats: int = 3) -> None:
    """Fixed cost of a nightly in a fresh interpreter (issue 14), median of
    ``repeats``: with one new file that needs no model (no prose for NER, no
    PII, no tool output to embed, no user turn to classify) and an idempotent
    re-run (nothing new), on a warehouse that already holds the sample."""
    import statistics

    landing = tmp / "startup_landing"
    shutil.copytree(ROOT / "sample" / "landing", landing)
    warehouse = tmp / "wh_startup"
    run_child(landing, warehouse, [], keep_env=True)
    fresh, again = [], []
    for n in range(repeats):
        tiny = landing / "tenant=acme" / "canonical" / f"tiny-{n}.jsonl"
        tiny.write_text(_TINY % n)
        fresh.append(run_child(landing, warehouse, [], keep_env=True))
        again.append(run_child(landing, warehouse, [], keep_env=True))
    print(f"start-up (fresh interpreter, median of {repeats}, wall target < 5 s):")
    for label, runs in (
        ("one new file, no model needed", fresh),
        ("idempotent re-run (nothing new)", again),
    ):
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        print(f"  {label}: {wall:.2f}s wall, {cpu:.2f}s CPU, peak RSS {rss:,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", help="comma-separated transcript sets (a subset)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--keep-thread-env", action="store_true")
    parser.add_argument("--deferred", action="store_true")
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()
    sets = tuple(args.sets.split(",")) if args.sets else TRANSCRIPT_SETS
    if not args.skip_startup:
        with tempfile.TemporaryDirectory() as tmp:
            startup(Path(tmp))
    if not args.skip_baseline:
        in_process(sets, deferred=args.deferred)
    if args.workers:
        with tempfile.TemporaryDirectory() as tmp:
            landing = Path(tmp) / "landing"
            source = build_landing(landing, sets)
            print(f"runner comparison on {source}")
            compare_runners(landing, Path(tmp), args.workers, args.keep_thread_env)


def _deferred_policy(folder: Path) -> Path:
    """The default policy with ``evidence.embedding.mode: deferred``."""
    import yaml

    from ctxledger.schemas.policy import DEFAULT_POLICY_PATH

    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data.setdefault("evidence", {}).setdefault("embedding", {})["mode"] = "deferred"
    path = folder / "policy_deferred.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def in_process(sets: tuple[str, ...], deferred: bool = False) -> None:
    from ctxledger.jobs.embed import run_embed
    from ctxledger.jobs.nightly import run_nightly
    from ctxledger.pipelines.ingest.landing import discover, parse_landing_file
    from ctxledger.pipelines.redact.engine import Redactor
    from ctxledger.pipelines.redact.keys import load_key
    from ctxledger.schemas.policy import load_policy
    from ctxledger.warehouse import Warehouse

    with tempfile.TemporaryDirectory() as tmp:
        landing = Path(tmp) / "landing"
        source = build_landing(landing, sets)
        size = sum(p.stat().st_size for p in landing.rglob("*") if p.is_file())
        policy_file = _deferred_policy(Path(tmp)) if deferred else None
        started = time.perf_counter()
        result = run_nightly(landing, Path(tmp) / "wh", policy_file=policy_file)
        whole = time.perf_counter() - started
        nightly_rss = peak_rss_mb()
        started = time.perf_counter()
        again = run_nightly(landing, Path(tmp) / "wh", policy_file=policy_file)
        rerun = time.perf_counter() - started
        filled = (
            run_embed(Path(tmp) / "wh", policy_file=policy_file) if deferred else None
        )
        with Warehouse.open(Path(tmp) / "wh") as wh:
            counts = wh.row_counts()

        # Baseline: the redact engine alone over the same drafts.
        policy = load_policy(None)
        redactor = Redactor(policy, load_key())
        redactor.setup()
        drafts = []
        for item in discover(landing, "default").items:
            parsed = parse_landing_file(item, None, policy.limits.max_record_bytes)
            drafts.extend(parsed.sessions)
        started = time.perf_counter()
        for draft in drafts:
            fields = []
            for m in draft.messages:
                fields.append(("content", m.content))
                if m.tool_output is not None:
                    fields.append(("tool_output", m.tool_output))
            redactor.redact_batch(fields, "bench")
        redact_only = time.perf_counter() - started

    messages = counts["messages"]
    mode = "deferred" if deferred else "inline"
    print(f"nightly pipeline on {source} (evidence.embedding.mode: {mode})")
    files = len(result.discovery.items)
    print(f"  files {files}, {size / 1e6:.2f} MB, messages {messages}")
    print(
        f"  whole run {whole:.1f}s: {messages / whole:.0f} messages/s, "
        f"{size / 1e6 / whole:.2f} MB/s (DirectRunner, includes model load and commit)"
    )
    print(
        f"  redact stage alone (baseline) {redact_only:.1f}s: "
        f"{messages / redact_only:.0f} messages/s"
    )
    print(f"  ratio whole-pipeline / redact-alone time: {whole / redact_only:.2f}x")
    print(f"  idempotent re-run: {rerun:.2f}s, new files {again.files_new}")
    print(
        f"  peak RSS of the nightly (one process, DirectRunner): {nightly_rss:,.0f} MB"
        " (target < 2,048 MB)"
    )
    if filled is not None:
        print(
            f"  ctxledger embed afterwards: {filled.seconds:.1f}s for "
            f"{filled.updated} chunk(s), {filled.embedded} text(s) through the "
            f"model, {filled.reused} reused; nightly + embed "
            f"{messages / (whole + filled.seconds):.0f} messages/s"
        )


if __name__ == "__main__":
    main()
