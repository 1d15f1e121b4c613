"""Who is asking: bearer tokens mapped to a tenant, principal groups and subjects.

The tenant, the groups and the subjects a caller may read come from a token
file the operator writes, never from the request: a request may only *name* a
tenant (it must be the token's, else 403) and a subject (one the token allows,
else 403). Tool artifacts are scoped by subject (docs/evidence.md), so a token
reads another subject's artifacts only when its groups include one of the
policy's ``evidence.artifacts.operator_groups``.

Token file (JSON or YAML)::

    tokens:
      - sha256: 9f86d0...   # hex sha256 of the token (preferred), or
        token: s3cret       # the token itself (tests, local use)
        tenant: acme
        groups: [support]
        subjects: [u-1]     # subjects it may read; "*" for any
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator


class AuthError(Exception):
    """A request the caller may not make; ``status`` is the HTTP code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Principal(BaseModel):
    """What a token grants."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str = Field(min_length=1)
    groups: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    name: str | None = Field(default=None, description="For logs; not a secret.")


class TokenEntry(Principal):
    """One line of the token file."""

    token: str | None = Field(default=None, min_length=16)
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _one_secret(self) -> TokenEntry:
        if (self.token is None) == (self.sha256 is None):
            raise ValueError("give exactly one of `token` and `sha256`")
        return self

    def digest(self) -> str:
        if self.sha256 is not None:
            return self.sha256
        return _digest(self.token or "")


class TokenFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Tokens:
    """Token digest -> principal, loaded from a token file."""

    def __init__(self, entries: Iterable[TokenEntry]):
        self._by_digest: dict[str, Principal] = {}
        for entry in entries:
            principal = Principal(
                tenant=entry.tenant,
                groups=entry.groups,
                subjects=entry.subjects,
                name=entry.name,
            )
            self._by_digest[entry.digest()] = principal

    @classmethod
    def load(cls, path: str | Path) -> Tokens:
        data = yaml.safe_load(Path(path).read_text())
        return cls(TokenFile.model_validate(data).tokens)

    def principal(self, token: str | None) -> Principal:
        """The principal of ``token``; 401 when it is missing or unknown."""
        if not token:
            raise AuthError(401, "missing bearer token")
        digest = _digest(token)
        for known, principal in self._by_digest.items():
            # Constant time per comparison; the digest hides the token's length.
            if hmac.compare_digest(known, digest):
                return principal
        raise AuthError(401, "unknown bearer token")

    def key_for(self, authorization: bytes) -> str | None:
        """The rate-limit key of an ``Authorization`` header's token: its
        digest when the token is known, else None (``serving.limits``)."""
        scheme, _, token = authorization.partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        digest = hashlib.sha256(token.strip()).hexdigest()
        return digest if digest in self._by_digest else None

    def from_header(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer <token>`` header."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            raise AuthError(401, "missing bearer token")
        return self.principal(token.strip())


def tenant_for(principal: Principal, requested: str | None) -> str:
    """The tenant to read: the token's; naming another one is a 403."""
    if requested is not None and requested != principal.tenant:
        raise AuthError(403, "this token may not read that tenant")
    return principal.tenant


def subject_for(
    principal: Principal, requested: str | None, operator_groups: Iterable[str]
) -> str | None:
    """The subject to read, if any: one the token lists (or ``*``), or any
    when the token's groups hold a policy operator group; else a 403."""
    if requested is None:
        return None
    if (
        "*" in principal.subjects
        or requested in principal.subjects
        or set(principal.groups) & set(operator_groups)
    ):
        return requested
    raise AuthError(403, "this token may not read that subject")
