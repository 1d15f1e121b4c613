"""Keyed, deterministic, per-tenant pseudonyms and the value normalisation behind them.

``<TYPE:hex>`` where ``hex = HMAC-SHA256(key, tenant \\x1f TYPE \\x1f normalized)``
truncated to the policy's length. The same value (after normalisation) in the same
tenant always maps to the same pseudonym, so analysts can join on it; another tenant
or another key gives unrelated pseudonyms; without the key nothing is reversible.

Within one text, a one-word PERSON that is the first or last word of exactly one
longer PERSON of the same text ("Dana Whitfield ... Dana said") takes that
name's pseudonym (``person_aliases``), so an analyst counts one person once.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import unicodedata
from collections.abc import Iterable

_SPACE = re.compile(r"\s+")
_NON_DIGIT = re.compile(r"\D")
_CARDLIKE_SEPARATORS = re.compile(r"[\s\-.]")


def normalize_value(entity_type: str, value: str) -> str:
    """Canonical form of ``value`` so spelling variants pseudonymise alike."""
    text = unicodedata.normalize("NFKC", value).strip()
    if entity_type == "EMAIL_ADDRESS":
        return text.casefold()
    if entity_type == "PHONE_NUMBER":
        main = re.split(r"(?i)\s*(?:x|ext\.?|extension)\s*", text, maxsplit=1)
        digits = _NON_DIGIT.sub("", main[0])
        if digits.startswith("00"):
            digits = digits[2:]
        ext = _NON_DIGIT.sub("", main[1]) if len(main) > 1 else ""
        return digits + (f"x{ext}" if ext else "")
    if entity_type in ("CREDIT_CARD", "US_SSN"):
        return _NON_DIGIT.sub("", text)
    if entity_type == "IBAN_CODE":
        return _CARDLIKE_SEPARATORS.sub("", text).upper()
    if entity_type == "IP_ADDRESS":
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            return text.lower()
    if entity_type in ("PERSON", "LOCATION", "ORGANIZATION", "NRP"):
        return _SPACE.sub(" ", text).casefold()
    return text  # secrets and the rest: exact value


def person_aliases(values: Iterable[str]) -> dict[str, str]:
    """Normalised one-word names -> the longer name of the same text they stand for.

    ``values`` are the PERSON values detected in one text (message or
    document). A one-word value that is the first or the last word of exactly
    one longer value ("dana" and "whitfield" for "Dana Whitfield") maps to that
    value, so the operator pseudonymises it as the full name. Two candidates
    ("Dana Whitfield" and "Dana Scully") make it ambiguous: no alias, the word
    keeps its own pseudonym. Pure and order-free, so the result, and with it
    every pseudonym, is deterministic for a given text.
    """
    longer: dict[str, set[str]] = {}
    singles: set[str] = set()
    for value in values:
        norm = normalize_value("PERSON", value)
        words = norm.split(" ")
        if len(words) == 1:
            singles.add(norm)
            continue
        for word in {words[0], words[-1]}:
            longer.setdefault(word, set()).add(norm)
    return {
        single: next(iter(names))
        for single in sorted(singles)
        if len(names := longer.get(single, set())) == 1
    }


class Pseudonymizer:
    """Computes pseudonyms for one key; bind a tenant with ``for_tenant``."""

    def __init__(self, key: bytes, hex_length: int = 8) -> None:
        if not isinstance(key, bytes | bytearray) or len(key) < 16:
            raise ValueError("pseudonym key must be at least 16 bytes")
        self._key = bytes(key)
        self.hex_length = hex_length

    def digest(self, tenant_id: str, entity_type: str, value: str) -> str:
        """Truncated hex HMAC of the normalised value."""
        normalized = normalize_value(entity_type, value)
        message = "\x1f".join((tenant_id, entity_type, normalized))
        mac = hmac.new(self._key, message.encode("utf-8"), hashlib.sha256)
        return mac.hexdigest()[: self.hex_length]

    def placeholder(self, tenant_id: str, entity_type: str, value: str) -> str:
        """``<TYPE:hex>``."""
        return f"<{entity_type}:{self.digest(tenant_id, entity_type, value)}>"

    def __repr__(self) -> str:  # never show the key
        return f"Pseudonymizer(hex_length={self.hex_length})"
