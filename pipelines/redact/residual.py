"""Is a secret still there? A cheap check for text that was already redacted.

Downstream stages (memories, ledger entries, evidence chunks) keep text that went
through the redact stage, so a secret found in it now is one the redactor missed
(or text that never went through it). Those stages reject such a row with reason
``secret_in_text`` rather than store it: a lost row costs less than a leaked
password. Pure Python, no presidio or spaCy: the same rules as the redact stage's
fast path (``secrets.SecretDetector``), with our own placeholders excluded.
"""

from __future__ import annotations

from ctxledger.pipelines.redact import identifiers
from ctxledger.pipelines.redact.secrets import SecretDetector
from ctxledger.pipelines.redact.spans import PLACEHOLDER_RE, SECRET_TYPES

_DETECTOR = SecretDetector()


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, entity_type)`` of each secret in ``text`` that is not inside
    one of our placeholders (``<PASSWORD:1a2b3c4d>``, ``<SECRET>``)."""
    if not text:
        return []
    found = _DETECTOR.detect(text)
    if not found:
        return []
    holes = [m.span() for m in PLACEHOLDER_RE.finditer(text)] if "<" in text else []
    out = []
    for det in found:
        if any(det.start < b and a < det.end for a, b in holes):
            continue
        out.append((det.start, det.end, det.entity_type))
    return sorted(set(out))


def secret_in_text(text: str) -> bool:
    """Whether ``text`` still holds something a secret rule matches.

    Covers token formats (``ghp_...``, ``AKIA...``, JWTs, PEM keys), keyword
    assignments (``password=...``, ``"api_key": "..."``), secrets told in prose
    ("my password is adminpass", "PIN: 4821"), credentials in URLs and command
    lines, and long random tokens. Placeholders (``<TYPE:hex>``) never count, so
    ``secret_in_text(redacted)`` is False for anything the redactor handled.
    Cost: a few substring tests for most texts.
    """
    return bool(secret_spans(text))


def secret_placeholder(text: str) -> bool:
    """Whether ``text`` holds the placeholder of a secret (``<SECRET:1a2b>``,
    ``<PASSWORD>``): a statement whose value is a credential ("always use my
    account pin <SECRET:..>") is no memory, even redacted (issue 29)."""
    if not text or "<" not in text:
        return False
    return any(
        m.group().strip("<>").split(":", 1)[0] in SECRET_TYPES
        for m in PLACEHOLDER_RE.finditer(text)
    )


def identifier_in_text(text: str) -> bool:
    """Whether ``text`` still holds a passport number, a national id or a
    birth date the identifier rules find (``pipelines.redact.identifiers``)
    outside our placeholders: defense in depth for stored memories."""
    if not text:
        return False
    found = identifiers.detect(text, identifiers.IDENTIFIER_TYPES)
    if not found:
        return False
    holes = [m.span() for m in PLACEHOLDER_RE.finditer(text)] if "<" in text else []
    return any(not any(d.start < b and a < d.end for a, b in holes) for d in found)
