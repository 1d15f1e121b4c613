"""End-to-end nightly throughput: landing files -> committed snapshot.

Data: every transcript set of ../shared/corpora section A when present (the
``CORPORA`` env var overrides), else the bundled sample landing. Prints messages/s
and MB/s of the whole run, the time of an idempotent re-run (nothing new), and the
ratio of the whole pipeline to the redact stage alone on the same messages (the
baseline: what Beam, parsing, ids, token counts and the commit cost on top).
"""

from __future__ import annotations

import os
import shutil
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


def build_landing(target: Path) -> str:
    corpora = Path(os.environ.get("CORPORA", ROOT.parent / "shared" / "corpora"))
    if not corpora.is_dir():
        shutil.copytree(ROOT / "sample" / "landing", target)
        return "bundled sample landing"
    for name in TRANSCRIPT_SETS:
        if (corpora / name).is_dir():
            shutil.copytree(corpora / name, target / name)
    return f"{corpora} section A ({len(TRANSCRIPT_SETS)} transcript sets)"


def main() -> None:
    from jobs.nightly import run_nightly
    from pipelines.ingest.landing import discover, parse_landing_file
    from pipelines.redact.engine import Redactor
    from pipelines.redact.keys import load_key
    from schemas.policy import load_policy
    from warehouse import Warehouse

    with tempfile.TemporaryDirectory() as tmp:
        landing = Path(tmp) / "landing"
        source = build_landing(landing)
        size = sum(p.stat().st_size for p in landing.rglob("*") if p.is_file())
        started = time.perf_counter()
        result = run_nightly(landing, Path(tmp) / "wh")
        whole = time.perf_counter() - started
        started = time.perf_counter()
        again = run_nightly(landing, Path(tmp) / "wh")
        rerun = time.perf_counter() - started
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
    print(f"nightly pipeline on {source}")
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


if __name__ == "__main__":
    main()
