"""Ledger continuation probes: ``python -m eval.ledger_probes``.

Does the ledger summary hold what a model needs to continue a session? For each
hand-labelled session of ``eval/ledger_labels/sessions.yaml`` (real SWE-agent,
OpenHands, tau-bench and Claude Code runs from ``../shared/corpora``) five probes
list the key phrases a good context must contain: the current goal and next
action, the changed files, a rejected decision with why, the supporting source,
a pending approval. A probe **hits** when every phrase occurs in the text
(case-insensitive, whitespace normalised, markdown backticks and asterisks
ignored). Two texts are scored per session:

* ``ledger``: the rendered session summary (``summary_text`` of the ``session``
  entry), exactly what a context builder gets from ``compression_ledger``;
* ``window``: the last 12 non-system messages, as a sliding window would give
  them (tool results as their raw output, tool calls as name + arguments).

Tokens (cl100k) of each are reported beside the session's own tokens (every
message, system prompt and raw tool output included). The target (issue 13):
the ledger at least matches the window on every probe type, at <= 0.25 of the
session's tokens (checked per session on sessions of >= 2,000 tokens: smaller
ones fit a context whole and are listed instead).

Sessions go through the real readers and ``normalize_session`` with a no-op
redactor: the probes name files, ids and values that a pseudonym would change,
and this eval measures the ledger, not the redactor. ``until_turn`` cuts a
session after that turn (a context built mid-session: pending approvals).

Labels are split ``dev`` (look at the ledger text while improving the rules:
``--show ID``) and ``measure`` (scored only); both are reported.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ctxledger.pipelines.ingest.drafts import DraftSession, SourceFile
from ctxledger.pipelines.ingest.normalize import (
    NormalizedSession,
    SourceInfo,
    normalize_session,
)
from ctxledger.pipelines.ingest.readers import read_source
from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.pipelines.ledger.build import SessionSources, build_session_ledger
from ctxledger.schemas.policy import load_policy
from ctxledger.schemas.transcript import Message
from eval.corpora import default_corpora

LABELS = Path(__file__).resolve().parent / "ledger_labels" / "sessions.yaml"
PROBES = ("goal", "changed_files", "rejected", "source", "pending_approval")
WINDOW = 12
TARGET_RATIO = 0.25
#: Sessions smaller than this fit any context whole: nobody compacts them, so
#: the token target is checked on the larger ones (the small ones are listed).
MIN_COMPACT_TOKENS = 2_000
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class _Same:
    text: str
    findings: tuple = ()


def _identity(fields: Any) -> list[_Same]:
    """The no-op redactor (see the module docstring)."""
    return [_Same(text) for _, text in fields]


def normalise(text: str) -> str:
    """Lower-case, one space, no markdown backticks or asterisks."""
    return _SPACES.sub(" ", text.replace("`", "").replace("*", "")).strip().lower()


def hits(phrases: list[str], text: str) -> bool:
    """Whether every key phrase occurs in ``text`` (see ``normalise``)."""
    body = normalise(text)
    return all(normalise(p) in body for p in phrases)


def load_session(path: Path, index: int) -> NormalizedSession:
    """Session ``index`` of a transcript file, read and normalised."""
    drafts = [
        d
        for d in read_source(SourceFile(path=str(path), data=path.read_bytes()))
        if isinstance(d, DraftSession)
    ]
    info = SourceInfo("eval", path.name, "hash", "run_eval", "eval+0", "eval")
    return normalize_session(drafts[index], info, _identity)


def _message_text(message: Message, outputs: dict[str, str]) -> str:
    if message.role == "tool":
        return outputs.get(message.artifact_ref or "", message.content)
    calls = "\n".join(f"{c.tool_name} {c.arguments}" for c in message.tool_calls)
    return f"{message.content}\n{calls}".strip()


@dataclass
class Scored:
    """One session's texts and probe results."""

    sid: str
    split: str
    ledger_text: str
    window_text: str
    session_tokens: int
    ledger: dict[str, bool | None]
    window: dict[str, bool | None]

    @property
    def ledger_tokens(self) -> int:
        return count_tokens(self.ledger_text)

    @property
    def window_tokens(self) -> int:
        return count_tokens(self.window_text)


def score_session(label: dict[str, Any], corpora: Path) -> Scored:
    """Build the ledger and the window of one labelled session and score both."""
    built = load_session(corpora / label["source"], int(label.get("index", 0)))
    until = label.get("until_turn")
    messages = [m for m in built.messages if until is None or m.turn <= until]
    kept = {m.message_id for m in messages}
    outputs = {a.artifact_id: a.content for a in built.artifacts}
    observations = [o for o in built.observations if o.message_id in kept]
    ledger = build_session_ledger(
        SessionSources(built.session, messages, observations, outputs),
        load_policy(None).ledger,
    )
    ledger_text = ledger.session_entry.summary_text
    others = [m for m in messages if m.role != "system"]
    window_text = "\n\n".join(_message_text(m, outputs) for m in others[-WINDOW:])
    session_text = "\n\n".join(_message_text(m, outputs) for m in messages)
    probes = label["probes"]

    def run(text: str) -> dict[str, bool | None]:
        return {p: (hits(probes[p], text) if probes.get(p) else None) for p in PROBES}

    return Scored(
        label["id"],
        label["split"],
        ledger_text,
        window_text,
        count_tokens(session_text),
        run(ledger_text),
        run(window_text),
    )


def table(scored: list[Scored], split: str) -> list[dict[str, Any]]:
    """Per probe: labelled sessions, hits of the ledger and of the window."""
    rows = []
    part = [s for s in scored if s.split == split]
    for probe in PROBES:
        applicable = [s for s in part if s.ledger[probe] is not None]
        rows.append(
            {
                "probe": probe,
                "n": len(applicable),
                "ledger": sum(bool(s.ledger[probe]) for s in applicable),
                "window": sum(bool(s.window[probe]) for s in applicable),
            }
        )
    return rows


def _ratio(part: list[Scored], attr: str) -> float:
    total = sum(s.session_tokens for s in part)
    return sum(getattr(s, attr) for s in part) / total if total else 0.0


def report(scored: list[Scored]) -> dict[str, Any]:
    """Tables and token ratios per split, plus per-session detail."""
    out: dict[str, Any] = {"splits": {}, "sessions": []}
    for split in ("dev", "measure"):
        part = [s for s in scored if s.split == split]
        ratios = [
            s.ledger_tokens / s.session_tokens
            for s in part
            if s.session_tokens >= MIN_COMPACT_TOKENS
        ]
        small = [s.sid for s in part if s.session_tokens < MIN_COMPACT_TOKENS]
        out["splits"][split] = {
            "small_sessions": small,
            "sessions": len(part),
            "probes": table(scored, split),
            "ledger_tokens_ratio": round(_ratio(part, "ledger_tokens"), 3),
            "window_tokens_ratio": round(_ratio(part, "window_tokens"), 3),
            "ledger_max_session_ratio": round(max(ratios, default=0.0), 3),
        }
    for s in scored:
        out["sessions"].append(
            {
                "id": s.sid,
                "split": s.split,
                "session_tokens": s.session_tokens,
                "ledger_tokens": s.ledger_tokens,
                "window_tokens": s.window_tokens,
                "ledger": s.ledger,
                "window": s.window,
            }
        )
    return out


def _print(result: dict[str, Any]) -> None:
    print("Ledger continuation probes (hits / labelled sessions)")
    for split, data in result["splits"].items():
        print(f"\n[{split}] {data['sessions']} sessions")
        print(f"  {'probe':<18}{'n':>3}  {'ledger':>7}  {'window(12)':>10}")
        ok = True
        for row in data["probes"]:
            n = row["n"]
            ok &= row["ledger"] >= row["window"]
            print(
                f"  {row['probe']:<18}{n:>3}  {row['ledger']:>3}/{n:<3}"
                f"  {row['window']:>6}/{n:<3}"
            )
        print(
            f"  tokens vs session: ledger {data['ledger_tokens_ratio']:.3f}"
            f" (max per session of >= {MIN_COMPACT_TOKENS} tokens"
            f" {data['ledger_max_session_ratio']:.3f}),"
            f" window {data['window_tokens_ratio']:.3f}"
        )
        if data["small_sessions"]:
            small = ", ".join(data["small_sessions"])
            print(f"  under {MIN_COMPACT_TOKENS} tokens: {small}")
        met = ok and data["ledger_max_session_ratio"] <= TARGET_RATIO
        print(f"  target (ledger >= window on every probe, <= 0.25 tokens): {met}")


def main(argv: list[str] | None = None) -> int:
    """Score every labelled session; print the table (``--json`` for JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=None)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--show", help="print the ledger and window of a dev session")
    args = parser.parse_args(argv)
    corpora = args.corpora or default_corpora()
    if corpora is None or not Path(corpora).is_dir():
        print("ledger probes: corpora not found, skipped", file=sys.stderr)
        return 0
    labels = yaml.safe_load(args.labels.read_text())["sessions"]
    if args.show:
        label = next(x for x in labels if x["id"] == args.show)
        if label["split"] != "dev":
            print("only dev sessions can be shown", file=sys.stderr)
            return 2
        s = score_session(label, Path(corpora))
        print(s.ledger_text)
        print("---- probes", json.dumps({"ledger": s.ledger, "window": s.window}))
        return 0
    scored = [score_session(label, Path(corpora)) for label in labels]
    result = report(scored)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
