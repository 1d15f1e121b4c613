"""Comparison detectors for ``make eval``: plain presidio, detect-secrets, CredSweeper.

Each one is optional: when its package is not installed the evaluation prints
"not installed" for its column instead of failing. Pins that were measured:
``detect-secrets==1.5.0``, ``credsweeper==1.19.5`` (pulls onnxruntime, pandas,
lxml and document parsers; its ML model ships inside the wheel, no download).

* ``PlainPresidio``: presidio's ``AnalyzerEngine`` with its default recognizers on
  spaCy's small English model, restricted to the entity types the
  gold data is scored on, score threshold 0.35: what a team gets without our
  detectors. The model is the policy's ``ner_model`` (the same spaCy small
  model ours uses), so the comparison is about the detectors, not the model.
* ``secret_values_detect_secrets`` / ``secret_values_credsweeper``: the values each
  tool reports for a file, scored like ours (a gold value counts as found when a
  reported value contains it or it contains a reported value of 8+ characters).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from eval.metrics import Span

NOT_INSTALLED = "not installed"


class PlainPresidio:
    """presidio ``AnalyzerEngine`` out of the box (spaCy small model)."""

    def __init__(
        self, entities: Iterable[str], model: str, threshold: float = 0.35
    ) -> None:
        from presidio_analyzer import AnalyzerEngine  # noqa: PLC0415
        from presidio_analyzer.nlp_engine import NlpEngineProvider  # noqa: PLC0415

        from ctxledger.pipelines.redact.offline import ensure_offline_tldextract  # noqa: PLC0415

        ensure_offline_tldextract()
        nlp = NlpEngineProvider(
            nlp_configuration={
                "nlp_engine_name": "spacy",
                "models": [{"lang_code": "en", "model_name": model}],
            }
        ).create_engine()
        self.engine = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"])
        self.entities = sorted(entities)
        self.threshold = threshold

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        """Non-overlapping predicted spans per text (longest, then best score)."""
        out = []
        for text in texts:
            results = self.engine.analyze(
                text=text,
                language="en",
                entities=self.entities,
                score_threshold=self.threshold,
            )
            results.sort(key=lambda r: (-(r.end - r.start), -r.score, r.start))
            kept: list[Span] = []
            for r in results:
                span = Span(r.start, r.end, r.entity_type)
                if not any(span.overlaps(k) for k in kept):
                    kept.append(span)
            out.append(sorted(kept, key=lambda s: s.start))
        return out


def plain_presidio(entities: Iterable[str], model: str) -> PlainPresidio | str:
    """A ``PlainPresidio`` or ``NOT_INSTALLED`` (presidio or the model missing)."""
    import spacy.util  # noqa: PLC0415

    if not spacy.util.is_package(model):  # presidio would try to download it
        return f"{NOT_INSTALLED} ({model})"
    try:
        return PlainPresidio(entities, model)
    except (ImportError, OSError) as exc:
        return f"{NOT_INSTALLED} ({type(exc).__name__})"


def secret_values_detect_secrets(paths: Sequence[Path]) -> dict[Path, list[str]] | str:
    """detect-secrets' reported values per file (default plugins and filters)."""
    try:
        from detect_secrets import SecretsCollection  # noqa: PLC0415
        from detect_secrets.settings import default_settings  # noqa: PLC0415
    except ImportError:
        return NOT_INSTALLED
    out: dict[Path, list[str]] = {}
    with default_settings():
        for path in paths:
            collection = SecretsCollection()
            collection.scan_file(str(path))
            out[path] = [
                s.secret_value
                for secrets in collection.data.values()
                for s in secrets
                if s.secret_value
            ]
    return out


def secret_values_credsweeper(paths: Sequence[Path]) -> dict[Path, list[str]] | str:
    """CredSweeper's reported values per file (its default ML validation on)."""
    try:
        from credsweeper.app import CredSweeper  # noqa: PLC0415
        from credsweeper.file_handler.files_provider import (  # noqa: PLC0415
            FilesProvider,
        )
    except ImportError:
        return NOT_INSTALLED
    out: dict[Path, list[str]] = {p: [] for p in paths}
    by_name = {str(p): p for p in paths}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweeper = CredSweeper()
        sweeper.run(FilesProvider([str(p) for p in paths]))
    for candidate in sweeper.credential_manager.get_credentials():
        for line in candidate.line_data_list:
            path = by_name.get(str(line.path))
            if path is not None and line.value:
                out[path].append(line.value)
    return out


def found(value: str, reported: Iterable[str]) -> bool:
    """Whether a reported value covers the gold ``value``."""
    return any(value in r or (len(r) >= 8 and r in value) for r in reported)


def describe(result: Any) -> str:
    """Short status of an optional comparison (for the printed table)."""
    return result if isinstance(result, str) else "ok"
