"""Shared fixtures: one real Redactor (spaCy + presidio loaded once per session)."""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.engine import Redactor
from ctxledger.schemas.policy import load_policy

TEST_KEY = b"unit-test-key-0123456789abcdef!!"


@pytest.fixture(scope="session")
def policy():
    """The packaged default policy."""
    return load_policy(None)


@pytest.fixture(scope="session")
def redactor(policy):
    """A set-up Redactor with the default policy (loads the slim spaCy model)."""
    r = Redactor(policy, TEST_KEY)
    r.setup()
    return r
