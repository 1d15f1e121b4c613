"""End-to-end nightly throughput: landing files -> committed snapshot.

Data: every transcript set of ../shared/corpora section A when present (the
``CORPORA`` env var overrides), else the bundled sample landing.

The throughput table (issue 14): the nightly in four modes, each in a fresh
interpreter on a fresh warehouse, as a user runs it (imports, model loads and
the commit included): ``inline`` (evidence vectors in the run; tool outputs
embedded ahead by the helper process, whose CPU and RSS are shown apart),
``plain`` (inline without that helper: ``evidence.embedding.ahead: false``),
``deferred``
(``evidence.embedding.mode: deferred``; then ``ctxledger embed`` fills the
vectors, timed apart) and ``rules`` (deferred, and MiniLM swapped for a stub:
every stage but the models, the ceiling of the non-model stages). Each mode's
messages/s against its target (inline 300, deferred 600) and beside the stage
ceilings as ratios: the rules-only run and the redact engine alone on the same
messages (in this process). Then an idempotent re-run (nothing new) and peak
RSS (``ru_maxrss``).

Then the documented local-worker flags against one process: the same landing
through ``ctxledger``'s nightly in a fresh interpreter, once with the default
DirectRunner, once with ``--direct_num_workers=N
--direct_running_mode=multi_processing`` and once with ``multi_threading``, each
without any ``OMP_NUM_THREADS`` style variable (as a user runs it;
``--keep-thread-env`` keeps the caller's): wall and CPU seconds (workers
included) and the speed-ups. The launcher sizes each worker to cores / workers
threads (``pipelines.models``); without that the workers oversubscribe the
cores and the flags made the nightly 4x slower.

Flags: ``--sets a,b`` picks transcript sets (quick subsets), ``--modes a,b``
the table's modes, ``--deferred`` (= ``--modes deferred``),
``--runner-modes a,b`` the runner comparison's (inline, deferred),
``--repeat N`` rounds of the table's modes (each row the mode's median run:
on the shared machine runs of the same code vary by 1-2 s), ``--workers N``
(default 2; 0 skips the runner comparison), ``--skip-baseline`` skips the
table, ``--skip-startup`` skips the start-up check (a fresh-interpreter
nightly with one new file that needs no model, and an idempotent re-run:
medians of 3).
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
import json, os, resource, sys, time
from ctxledger.jobs.nightly import run_nightly
policy = os.environ.get("BENCH_POLICY") or None
started = time.perf_counter()
result = run_nightly(sys.argv[1], sys.argv[2], policy_file=policy,
                     beam_args=sys.argv[3:])
wall = time.perf_counter() - started
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "new": result.files_new, "rss_kb": own,
                  "worker_rss_kb": workers}))
"""

#: One nightly mode of the throughput table in a fresh interpreter:
#: argv = landing, warehouse, policy file ("" for the default), mode.
#: ``rules`` swaps MiniLM for a stub (zero vectors: no classifier label clears
#: its threshold) and defers the evidence vectors: every stage but the models.
_MODE_CHILD = """
import json, resource, sys, time
import numpy as np
landing, warehouse, policy, mode = sys.argv[1:5]
if mode == "rules":
    from ctxledger.pipelines.memory import classify
    def stub(self, texts):
        return np.zeros((len(texts), 384), dtype=np.float32)
    classify.MiniLMEncoder.__call__ = stub
from ctxledger.jobs.nightly import run_nightly
started = time.perf_counter()
result = run_nightly(landing, warehouse, policy_file=policy or None)
wall = time.perf_counter() - started
cpu = time.process_time()
helper = resource.getrusage(resource.RUSAGE_CHILDREN)  # the embed-ahead helper
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
embed = None
if mode == "deferred":
    from ctxledger.jobs.embed import run_embed
    started = time.perf_counter()
    filled = run_embed(warehouse, policy_file=policy)
    embed = {"wall": time.perf_counter() - started, "updated": filled.updated,
             "embedded": filled.embedded}
timings = result.manifest.stage_timings if result.manifest else []
stages = {t.stage: round(t.seconds, 2) for t in timings}
print(json.dumps({"wall": wall, "cpu": cpu, "rss_kb": rss, "embed": embed,
                  "stages": stages,
                  "helper_cpu": helper.ru_utime + helper.ru_stime,
                  "helper_rss_kb": helper.ru_maxrss}))
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


def _python_child(code: str, argv: list[str], env: dict[str, str], what: str):
    """Run ``code`` in a fresh interpreter of this venv from the repository
    root: (its last stdout line as JSON, wall seconds, CPU seconds of it and
    the processes it waited for)."""
    env = {**env, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"nightly {what} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout.strip().splitlines()[-1]), wall, cpu


def run_child(
    landing: Path,
    warehouse: Path,
    beam_args: list[str],
    keep_env: bool,
    policy: Path | None = None,
):
    """One nightly in a fresh interpreter: (wall s, CPU s incl. its workers,
    peak RSS MB of the launcher, of its largest worker process)."""
    env = dict(os.environ)
    if not keep_env:
        for name in THREAD_ENV:
            env.pop(name, None)
    env["BENCH_POLICY"] = str(policy or "")
    report, wall, cpu = _python_child(
        _CHILD, [str(landing), str(warehouse), *beam_args], env, str(beam_args)
    )
    return wall, cpu, report["rss_kb"] / 1024, report["worker_rss_kb"] / 1024


def compare_runners(
    landing: Path, tmp: Path, workers: int, keep_env: bool, mode_name: str = "inline"
) -> None:
    """One process vs ``workers`` local workers on the same landing, in both
    of the DirectRunner's local modes: worker processes (``multi_processing``)
    and worker threads of one process (``multi_threading``); ``mode_name``
    ``deferred`` runs them with deferred evidence vectors."""
    policy = _deferred_policy(tmp) if mode_name == "deferred" else None
    tmp = tmp / mode_name
    one_wall, one_cpu, one_rss, _ = run_child(
        landing, tmp / "wh_one", [], keep_env, policy
    )
    env = "caller's thread env" if keep_env else "no OMP_NUM_THREADS-style env"
    print(
        f"  runners, {mode_name} nightly ({os.cpu_count()} cores, {env}, "
        "fresh interpreters):"
    )
    print(
        f"    one process:       {one_wall:6.1f}s wall, {one_cpu:6.1f}s CPU, "
        f"peak RSS {one_rss:,.0f} MB"
    )
    for mode in ("multi_processing", "multi_threading"):
        flags = [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
        wall, cpu, rss, worker_rss = run_child(
            landing, tmp / f"wh_{mode}", flags, keep_env, policy
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
    parser.add_argument(
        "--modes",
        default="inline,plain,deferred,rules",
        help="nightly modes of the throughput table (inline, plain, deferred, rules)",
    )
    parser.add_argument(
        "--deferred", action="store_true", help="same as --modes deferred"
    )
    parser.add_argument("--skip-startup", action="store_true")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of the throughput table's modes (rows: each mode's median)",
    )
    parser.add_argument(
        "--runner-modes",
        default="inline,deferred",
        help="nightly modes of the runner comparison (inline, deferred)",
    )
    args = parser.parse_args()
    sets = tuple(args.sets.split(",")) if args.sets else TRANSCRIPT_SETS
    if not args.skip_startup:
        with tempfile.TemporaryDirectory() as tmp:
            startup(Path(tmp))
    if not args.skip_baseline:
        modes = ("deferred",) if args.deferred else tuple(args.modes.split(","))
        unknown = set(modes) - set(MODE_LABELS)
        if unknown:
            parser.error(f"unknown mode(s): {', '.join(sorted(unknown))}")
        in_process(sets, modes, args.repeat)
    if args.workers:
        with tempfile.TemporaryDirectory() as tmp:
            landing = Path(tmp) / "landing"
            source = build_landing(landing, sets)
            print(f"runner comparison on {source}")
            for mode in args.runner_modes.split(","):
                compare_runners(
                    landing, Path(tmp), args.workers, args.keep_thread_env, mode
                )


def _embedding_policy(folder: Path, name: str, **embedding) -> Path:
    """The default policy with ``evidence.embedding`` settings changed."""
    import yaml

    from ctxledger.schemas.policy import DEFAULT_POLICY_PATH

    data = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    data.setdefault("evidence", {}).setdefault("embedding", {}).update(embedding)
    path = folder / f"policy_{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _deferred_policy(folder: Path) -> Path:
    """The default policy with ``evidence.embedding.mode: deferred``."""
    return _embedding_policy(folder, "deferred", mode="deferred")


#: Issue 14's targets for the whole nightly on 2 cores, messages/s.
TARGETS = {"inline": 300, "plain": 300, "deferred": 600}
MODE_LABELS = {
    "inline": "inline",
    "plain": "inline, no helper",
    "deferred": "deferred",
    "rules": "rules only",
}


def _median_run(reports: list[dict]) -> dict:
    """The run of median wall (the lower middle one of an even count)."""
    ordered = sorted(reports, key=lambda r: r["wall"])
    return ordered[(len(ordered) - 1) // 2]


def run_mode(landing: Path, warehouse: Path, policy: Path | None, mode: str) -> dict:
    """One nightly in a fresh interpreter (``_MODE_CHILD``), the caller's
    environment kept: its wall, CPU, peak RSS, stage work and (deferred) the
    ``ctxledger embed`` that fills the vectors afterwards."""
    argv = [str(landing), str(warehouse), str(policy or ""), mode]
    report, _, _ = _python_child(_MODE_CHILD, argv, dict(os.environ), f"({mode})")
    return report


def redact_alone(landing: Path) -> float:
    """Seconds of the redact engine alone over the landing's drafts, in this
    process (the baseline: what Beam, parsing, ids, the ledger, memories,
    evidence and the commit cost on top)."""
    from ctxledger.pipelines.ingest.landing import discover, parse_landing_file
    from ctxledger.pipelines.redact.engine import Redactor
    from ctxledger.pipelines.redact.keys import load_key
    from ctxledger.schemas.policy import load_policy

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
    return time.perf_counter() - started


def in_process(sets: tuple[str, ...], modes: tuple[str, ...], repeat: int = 1) -> None:
    """The throughput table: each mode's nightly in a fresh interpreter on a
    fresh warehouse (start-up, model loads and the commit included, as a user
    runs it), against issue 14's targets and the stage ceilings. With
    ``repeat`` above one the modes run in turn, round after round (so a slow
    spell of a shared machine falls on every mode), and each row is the
    mode's median run, its walls listed beside it."""
    from ctxledger.pipelines.ingest.landing import discover
    from ctxledger.warehouse import Warehouse

    with tempfile.TemporaryDirectory() as tmp:
        landing = Path(tmp) / "landing"
        source = build_landing(landing, sets)
        size = sum(p.stat().st_size for p in landing.rglob("*") if p.is_file())
        files = len(discover(landing, "default").items)
        deferred_policy = _deferred_policy(Path(tmp))
        plain_policy = _embedding_policy(Path(tmp), "plain", ahead=False)
        policies = {
            m: {"inline": None, "plain": plain_policy}.get(m, deferred_policy)
            for m in modes
        }
        load_before = os.getloadavg()[0]
        runs: dict[str, list[dict]] = {mode: [] for mode in modes}
        for round_ in range(max(1, repeat)):
            for mode in modes:
                warehouse = Path(tmp) / f"wh_{mode}_{round_}"
                runs[mode].append(run_mode(landing, warehouse, policies[mode], mode))
        results = {mode: _median_run(reports) for mode, reports in runs.items()}
        first = modes[0]
        again = run_mode(landing, Path(tmp) / f"wh_{first}_0", policies[first], "rerun")
        load_after = os.getloadavg()[0]
        with Warehouse.open(Path(tmp) / f"wh_{first}_0") as wh:
            messages = wh.row_counts()["messages"]
        redact_only = redact_alone(landing)

    print(
        f"nightly pipeline on {source}: {files} files, {size / 1e6:.2f} MB, "
        f"{messages} messages"
    )
    print(
        "  each mode in a fresh interpreter on a fresh warehouse (imports, model "
        f"loads, commit included); load average {load_before:.1f} -> "
        f"{load_after:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"  {'mode':<11} {'wall':>7} {'CPU':>7} {'msg/s':>6} {'target':>6} "
        f"{'reached':>7} {'peak RSS':>9}  stage work (s)"
    )
    for mode, r in results.items():
        rate = messages / r["wall"]
        target = TARGETS.get(mode)
        reached = f"{rate / target:.2f}" if target else "-"
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages"].items() if v >= 0.05)
        print(
            f"  {MODE_LABELS[mode]:<11} {r['wall']:6.1f}s {r['cpu']:6.1f}s "
            f"{rate:6.0f} {target or '-':>6} {reached:>7} "
            f"{r['rss_kb'] / 1024:7,.0f}MB  {stages}"
        )
        if len(runs[mode]) > 1:
            walls = ", ".join(f"{x['wall']:.1f}" for x in runs[mode])
            print(f"  {'':<11} median of {len(runs[mode])} runs, walls (s): {walls}")
        if r.get("helper_cpu"):
            print(
                f"  {'':<11} + embed-ahead helper process: "
                f"{r['helper_cpu']:.1f}s CPU, peak RSS "
                f"{r['helper_rss_kb'] / 1024:,.0f} MB"
            )
    redact_rate = messages / redact_only
    print(
        f"  redact stage alone (engine only, in-process baseline): "
        f"{redact_only:.1f}s, {redact_rate:.0f} messages/s"
    )
    rules = results.get("rules")
    for mode, r in results.items():
        rate = messages / r["wall"]
        beside = f"{rate / redact_rate:.2f} of redact alone"
        if rules is not None and mode != "rules":
            beside += f", {rate / (messages / rules['wall']):.2f} of rules only"
        print(f"  {MODE_LABELS[mode]} rate = {beside}")
    deferred = results.get("deferred")
    if deferred is not None and deferred["embed"] is not None:
        embed = deferred["embed"]
        print(
            f"  ctxledger embed after the deferred nightly: {embed['wall']:.1f}s "
            f"for {embed['updated']} chunk(s), {embed['embedded']} text(s) "
            f"through the model; nightly + embed "
            f"{messages / (deferred['wall'] + embed['wall']):.0f} messages/s"
        )
    print(f"  idempotent re-run (fresh interpreter): {again['wall']:.2f}s")
    print(
        f"  peak RSS of a one-process nightly: "
        f"{max(r['rss_kb'] for r in results.values()) / 1024:,.0f} MB "
        "(target < 2,048 MB)"
    )


if __name__ == "__main__":
    main()
