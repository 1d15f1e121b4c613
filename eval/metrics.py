"""Span-overlap precision/recall bookkeeping for the redaction evaluation."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A labelled half-open character span."""

    start: int
    end: int
    label: str

    def overlaps(self, other: Span) -> bool:
        """Whether the two spans share at least one character."""
        return self.start < other.end and other.start < self.end


@dataclass
class Counts:
    """Per-label true positives, false negatives, false positives."""

    tp: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    fn: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    fp: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: gold spans removed by a prediction of *any* type (the privacy view)
    covered_any: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(
        self,
        gold: list[Span],
        predicted: list[Span],
        ignored: list[Span] = (),  # type: ignore[assignment]
    ) -> None:
        """Score one document.

        A gold span is recalled when a prediction of the same label overlaps it.
        A prediction is a false positive when it overlaps no gold span of its label
        and no ``ignored`` (out-of-scope gold) span.
        """
        for g in gold:
            if any(p.label == g.label and p.overlaps(g) for p in predicted):
                self.tp[g.label] += 1
            else:
                self.fn[g.label] += 1
            if any(p.overlaps(g) for p in predicted):
                self.covered_any[g.label] += 1
        for p in predicted:
            if any(g.label == p.label and p.overlaps(g) for g in gold):
                continue
            if any(p.overlaps(s) for s in ignored):
                continue
            self.fp[p.label] += 1

    def table(self) -> dict[str, dict[str, float | int]]:
        """label -> recall, precision, f1, support, counts; plus ``ALL``."""
        labels = sorted(set(self.tp) | set(self.fn) | set(self.fp))
        out: dict[str, dict[str, float | int]] = {}
        total = {"tp": 0, "fn": 0, "fp": 0, "any": 0}
        for label in labels:
            tp, fn, fp = self.tp[label], self.fn[label], self.fp[label]
            cov = self.covered_any[label]
            total["tp"] += tp
            total["fn"] += fn
            total["fp"] += fp
            total["any"] += cov
            out[label] = _row(tp, fn, fp, cov)
        out["ALL"] = _row(total["tp"], total["fn"], total["fp"], total["any"])
        return out


def _row(tp: int, fn: int, fp: int, covered: int) -> dict[str, float | int]:
    support = tp + fn
    recall = tp / support if support else float("nan")
    precision = tp / (tp + fp) if tp + fp else float("nan")
    f1 = (
        2 * precision * recall / (precision + recall)
        if support and tp + fp and precision + recall
        else float("nan")
    )
    return {
        "recall": round(recall, 4),
        "precision": round(precision, 4),
        "f1": round(f1, 4),
        "recall_any_type": round(covered / support, 4) if support else float("nan"),
        "support": support,
        "tp": tp,
        "fn": fn,
        "fp": fp,
    }
