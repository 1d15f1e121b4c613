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
    from ctxledger.schemas.policy import load_policy

    policy = load_policy(None)
    return f"policy {policy.name} {policy.policy_version} (the packaged default)"


def _detector_line() -> str:
    """The detectors' code: our recognizers are this package's version; the
    NER model and presidio are their distributions' (no model is loaded)."""
    from ctxledger.schemas.policy import load_policy

    model = load_policy(None).pii.ner_model
    parts = [_installed("presidio_analyzer"), _installed("spacy"), _installed(model)]
    return "detector " + ", ".join(parts)


#: ``--version``'s lines after the package's, in order.
VERSION_PARTS: list[Callable[[], str]] = [_policy_line, _detector_line]


def version_lines() -> list[str]:
    return [code_version(), *(part() for part in VERSION_PARTS)]
