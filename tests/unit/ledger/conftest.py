"""Fixtures of the ledger unit tests: sessions read and normalised without presidio.

The ledger works on redacted records; these tests are about the ledger, so the
redactor is replaced by the identity (the real one runs in the e2e tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxledger.pipelines.ingest.drafts import DraftSession, SourceFile
from ctxledger.pipelines.ingest.normalize import (
    NormalizedSession,
    SourceInfo,
    normalize_session,
)
from ctxledger.pipelines.ingest.readers import read_source
from ctxledger.pipelines.ledger.build import SessionSources
from ctxledger.schemas.policy import LedgerSettings, load_policy

ROOT = Path(__file__).resolve().parents[3]
PLANTED = ROOT / "tests" / "fixtures" / "planted" / "forty_turns.jsonl"
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"


@dataclass
class _Same:
    text: str
    findings: tuple = ()


def identity(fields):
    return [_Same(text) for _, text in fields]


def normalized(path: Path, data: bytes | None = None) -> list[NormalizedSession]:
    """Every session of a transcript file, normalised with the identity redactor."""
    data = path.read_bytes() if data is None else data
    out = []
    for draft in read_source(SourceFile(path=str(path), data=data)):
        if isinstance(draft, DraftSession):
            info = SourceInfo("acme", path.name, "hash", "run_t", "test+0", "test")
            out.append(normalize_session(draft, info, identity))
    return out


def sources_of(built: NormalizedSession) -> SessionSources:
    return SessionSources(
        built.session,
        built.messages,
        built.observations,
        {a.artifact_id: a.content for a in built.artifacts},
    )


@pytest.fixture(scope="session")
def settings() -> LedgerSettings:
    return load_policy(None).ledger


@pytest.fixture(scope="session")
def planted() -> NormalizedSession:
    (session,) = normalized(PLANTED)
    return session


@pytest.fixture(scope="session")
def planted_sources(planted) -> SessionSources:
    return sources_of(planted)


@pytest.fixture(scope="session")
def load():
    """``load(path, data=None) -> list[NormalizedSession]`` (identity redactor)."""
    return normalized


@pytest.fixture(scope="session")
def as_sources():
    """``as_sources(NormalizedSession) -> SessionSources``."""
    return sources_of
