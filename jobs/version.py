"""The code version stamped on every run and dead letter, and ``--version``.

``version_lines`` is what ``ctxledger --version`` prints: the package, the
policy it runs by default, and what detects PII (each line one entry of
``VERSION_PARTS``, so a detector fingerprint joins the list as one more
function).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from importlib import metadata


@lru_cache(maxsize=1)
def code_version() -> str:
    try:
        return f"ctxledger {metadata.version('ctxledger')}"
    except metadata.PackageNotFoundError:
        return "ctxledger dev"


def _installed(distribution: str) -> str:
    try:
        return f"{distribution} {metadata.version(distribution)}"
    except metadata.PackageNotFoundError:
        return f"{distribution} (not installed)"


def _policy_line() -> str:
    from ctxledger.pipelines.redact.registry import load_checked_policy

    policy = load_checked_policy(None)
    return f"policy {policy.name} {policy.policy_version} (the packaged default)"


def _detector_line() -> str:
    """The detector fingerprint (``pipelines.redact.fingerprint``: recognizer
    code, lexicons, model and library versions) and the distributions behind
    it (no model is loaded)."""
    from ctxledger.pipelines.redact.fingerprint import (
        detector_fingerprint,
        model_identity,
        policy_models,
    )
    from ctxledger.schemas.policy import load_policy

    pii = load_policy(None).pii
    parts = [
        _installed("presidio_analyzer"),
        _installed("spacy"),
        " ".join(model_identity(pii.ner_model)),
    ]
    fingerprint = detector_fingerprint(policy_models(pii))[:8]
    return f"detector {fingerprint}: " + ", ".join(parts)


#: ``--version``'s lines after the package's, in order.
VERSION_PARTS: list[Callable[[], str]] = [_policy_line, _detector_line]


def version_lines() -> list[str]:
    return [code_version(), *(part() for part in VERSION_PARTS)]
