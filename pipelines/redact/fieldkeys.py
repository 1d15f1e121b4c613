"""Values under secret-bearing field names, redacted whatever they look like.

A value's name often says more than the value: ``"pin": "482913"`` has no
entropy for the secret rules to find, yet it is a credential (issue 29: it
reached tool observations, artifacts, evidence chunks and the catalog's inlined
rows). Any value whose key names a secret is taken outright:

* JSON (and Python-repr) objects, at any depth: ``"pin": "4829"``,
  ``"apiKey": "x"``, ``"cvv": 123`` (a bare number or boolean is quoted when
  replaced, ``engine._quote_bare_values``, so the document stays valid JSON);
* ``key: value`` / ``key=value`` lines (YAML, logs, env files);
* prose for the short numeric codes the secret rules cannot judge by entropy
  ("always use my account pin 7342", "passcode 903317", "OTP is 551234").

Keys match by words, case- and separator-insensitively: ``API_KEY``,
``api-key``, ``apiKey`` and ``apikey`` all match "api key"; ``shipping`` does
not match "pin", and ``token_count`` is a count, not a token (``_NOT_SECRET``).
The policy's ``pii.secret_keys`` extends ``DEFAULT_SECRET_KEYS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from ctxledger.pipelines.redact.lexicon import common_english
from ctxledger.pipelines.redact.spans import Detection
from ctxledger.pipelines.redact.textkind import json_literals

#: Recognizer prefix of a bare JSON value (number, boolean) whose placeholder
#: must be quoted.
UNQUOTED = "field_key_bare:"

#: Key phrases (words) that name a secret. ``pii.secret_keys`` adds to them.
DEFAULT_SECRET_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "passcode",
    "pass code",
    "pin",
    "pin code",
    "otp",
    "totp",
    "one time code",
    "cvv",
    "cvc",
    "cvv2",
    "csc",
    "security code",
    "verification code",
    "secret",
    "token",
    "credential",
    "credentials",
    "private key",
    "privkey",
    "api key",
    "access key",
    "secret key",
    "client secret",
    "session key",
    "recovery code",
    "backup code",
    "seed phrase",
    "mnemonic",
    "security answer",
)

#: A key whose last word is one of these describes a secret, it is not one
#: (``token_type``, ``password_policy``, ``pin_length``, ``secret_name``).
_NOT_SECRET = frozenset(
    "type types count len length size expires expiry expiration ttl at url uri "
    "endpoint name names id hint policy required enabled set present rotated "
    "created updated changed reset status valid validated format field fields "
    "label prompt min max limit usage used remaining strength version".split()
)
#: Password-like keys give PASSWORD, the rest SECRET.
_PASSWORD_WORDS = ("password", "passwd", "pwd", "passphrase", "passcode")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def key_words(key: str) -> tuple[str, ...]:
    """``"apiKey"`` -> ``("api", "key")``; ``"API_KEY"`` -> the same."""
    return tuple(w.lower() for w in _SEPARATORS.split(_CAMEL.sub(" ", key)) if w)


#: ``"key": <number | true | false>`` in JSON / Python repr.
_BARE = re.compile(
    r"""(?P<q>["'])(?P<key>[^"'\\\n]{1,64})(?P=q)\s*:\s*"""
    r"(?P<value>-?\d[\d.eE+\-]*|true|false|True|False)(?=\s*[,}\]\n])"
)
#: ``\"key\": \"value\"``: JSON inside a JSON string (a tool result whose
#: ``body`` is a serialized document), one or more levels down.
_NESTED = re.compile(
    r'(?P<q>\\+)"(?P<key>[^"\\\n]{1,64})(?P=q)"\s*:\s*(?P=q)"'
    r'(?P<value>[^"\\\n]{1,256})(?P=q)"'
)
#: ``key: value`` / ``key = value`` on a line (YAML, env, logs); the value runs
#: to the end of the line or a separator.
_ASSIGN = re.compile(
    r"(?m)(?:^|(?<=[\s,;{(?&]))(?P<key>[A-Za-z][A-Za-z0-9_.\-]{0,48})[ \t]*[:=][ \t]*"
    r"(?P<value>[^\s,;\"'<>&?]{1,128})"
)
#: Short codes told in prose: "pin 7342", "my passcode is 903317", "OTP: 5512".
_PROSE_CODE = re.compile(
    r"(?i)\b(?:pin(?:[ \t]+(?:code|number))?|passcode|pass[ \t]code|otp|totp|"
    r"one[ \t-]time[ \t](?:pass)?code|cvv2?|cvc|security[ \t]code|"
    r"verification[ \t]code)"
    r"(?:[ \t]+(?:is|was|=|:|of)|[ \t]*[:=#]|[ \t]+(?:number|no\.?)?)[ \t]*"
    r"(?P<value>\d{3,12})\b"
)
#: An assigned value that is code, not data (``get_token()``, ``os.environ[``).
_CODE_VALUE = re.compile(r"[()\[\]{}$]|^[A-Za-z_]\w*\.[A-Za-z_]")
#: Where ``_PROSE_CODE`` can start (it is matched only there: a regex search
#: over every position of a long tool output costs more than these finds).
_PROSE_WORDS = (
    "pin",
    "passcode",
    "pass code",
    "otp",
    "totp",
    "one time",
    "one-time",
    "cvv",
    "cvc",
    "security code",
    "verification code",
)
_KEY_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
)


def _occurrences(lower: str, words: Iterable[str]) -> list[int]:
    """Sorted start offsets of each of ``words`` in ``lower`` (``str.find``)."""
    found = set()
    for word in words:
        pos = lower.find(word)
        while pos >= 0:
            found.add(pos)
            pos = lower.find(word, pos + 1)
    return sorted(found)


class SecretKeys:
    """The secret-bearing keys of a policy and the detector built from them."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        phrases = {key_words(k) for k in (*DEFAULT_SECRET_KEYS, *extra)}
        self._phrases = frozenset(p for p in phrases if p)
        self._joined = frozenset("".join(p) for p in self._phrases)
        self._longest = max((len(p) for p in self._phrases), default=0)
        # a key matching a phrase holds each of its words: the longest word of
        # each phrase, as a substring of the text, is a cheap necessary test
        hints = {max(p, key=len) for p in self._phrases}
        self._hints = tuple(
            sorted(h for h in hints if not any(o != h and o in h for o in hints))
        )

    @lru_cache(maxsize=4096)  # noqa: B019 - keys repeat; one instance per policy
    def entity_for(self, key: str) -> str | None:
        """``PASSWORD`` / ``SECRET`` when ``key`` names a secret, else None."""
        words = key_words(key)
        if not words or words[-1] in _NOT_SECRET:
            return None
        hit = None
        joined = "".join(words)
        if joined in self._joined:
            hit = words
        else:
            for size in range(min(self._longest, len(words)), 0, -1):
                for i in range(len(words) - size + 1):
                    if words[i : i + size] in self._phrases:
                        hit = words[i : i + size]
                        break
                if hit:
                    break
            if hit is None:  # "userpassword", "clientsecret"
                hit = next(
                    ((j,) for j in self._joined if len(j) >= 6 and joined.endswith(j)),
                    None,
                )
        if hit is None:
            return None
        return (
            "PASSWORD" if any(w.startswith(_PASSWORD_WORDS) for w in hit) else "SECRET"
        )

    def _assignments(self, text: str, lower: str):
        """``_ASSIGN`` matches whose key holds a hint word: each hint found
        with ``str.find``, the key around it matched from its first char."""
        seen = set()
        for pos in _occurrences(lower, self._hints):
            start = pos
            while start > 0 and pos - start < 48 and text[start - 1] in _KEY_CHARS:
                start -= 1
            if start in seen:
                continue
            seen.add(start)
            m = _ASSIGN.match(text, start)
            if m is not None:
                yield m

    def detect(
        self,
        text: str,
        is_json: bool,
        literals: list[tuple[str | None, int, int]] | None = None,
    ) -> list[Detection]:
        """Values under secret keys in ``text`` (whole value, score 0.95);
        ``literals``: ``textkind.json_literals(text)`` when already listed."""
        out: list[Detection] = []
        if is_json or '":' in text:
            if literals is None:
                literals = list(json_literals(text))
            for key, start, end in literals:
                if key is None or start == end:
                    continue
                etype = self.entity_for(key)
                if etype is not None and _value_ok(text[start:end]):
                    out.append(Detection(start, end, etype, 0.95, f"field_key:{key}"))
            if '\\"' in text:
                for m in _NESTED.finditer(text):
                    etype = self.entity_for(m.group("key"))
                    if etype is not None and _value_ok(m.group("value")):
                        out.append(
                            Detection(
                                m.start("value"),
                                m.end("value"),
                                etype,
                                0.95,
                                f"field_key:{m.group('key')}",
                            )
                        )
            for m in _BARE.finditer(text):
                etype = self.entity_for(m.group("key"))
                if etype is not None:
                    out.append(
                        Detection(
                            m.start("value"),
                            m.end("value"),
                            etype,
                            0.95,
                            f"{UNQUOTED}{m.group('key')}",
                        )
                    )
        lower = text.lower()
        if not is_json and (":" in text or "=" in text):
            for m in self._assignments(text, lower):
                etype = self.entity_for(m.group("key"))
                value = m.group("value")
                if (
                    etype is not None
                    and _value_ok(value)
                    and _CODE_VALUE.search(value) is None
                    and not (value.isalpha() and common_english(value))
                ):
                    out.append(
                        Detection(
                            m.start("value"),
                            m.end("value"),
                            etype,
                            0.9,
                            f"field_key:{m.group('key')}",
                        )
                    )
        for pos in _occurrences(lower, _PROSE_WORDS):
            m = _PROSE_CODE.match(text, pos)
            if m is not None:
                out.append(
                    Detection(
                        m.start("value"), m.end("value"), "SECRET", 0.9, "prose_code"
                    )
                )
        return out


def _value_ok(value: str) -> bool:
    """Not empty, not a template or a mask, not null, not our placeholder."""
    v = value.strip()
    if not v or v.lower() in ("null", "none", "nil", "n/a", "true", "false", "{}"):
        return False
    if v.startswith(("<", "${", "{{", "****", "[redacted", "[REDACTED")):
        return False
    return not set(v) <= set("*x•.-_ ")
