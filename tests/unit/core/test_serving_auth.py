"""Bearer tokens decide the tenant, groups and subjects (``serving.auth``)."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from ctxledger.serving.auth import AuthError, Tokens, subject_for, tenant_for

SECRET = "a-long-enough-token-1"


@pytest.fixture()
def tokens(tmp_path):
    digest = hashlib.sha256(b"hashed-token-000000001").hexdigest()
    rows = [
        {"token": SECRET, "tenant": "acme", "groups": ["support"], "subjects": ["u1"]},
        {"sha256": digest, "tenant": "globex", "groups": ["operators"]},
    ]
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": rows}))
    return Tokens.load(path)


def test_a_token_or_its_sha256_names_the_principal(tokens):
    assert tokens.from_header(f"Bearer {SECRET}").tenant == "acme"
    assert tokens.principal("hashed-token-000000001").groups == ("operators",)
    for header in (None, "", SECRET, "Basic x", "Bearer nope-nope-nope-nope"):
        with pytest.raises(AuthError) as err:
            tokens.from_header(header)
        assert err.value.status == 401


def test_another_tenant_or_an_unlisted_subject_is_403(tokens):
    acme = tokens.principal(SECRET)
    assert tenant_for(acme, None) == "acme" == tenant_for(acme, "acme")
    assert subject_for(acme, "u1", ["operators"]) == "u1"
    assert subject_for(acme, None, ["operators"]) is None
    for call in (
        lambda: tenant_for(acme, "globex"),
        lambda: subject_for(acme, "u2", ["operators"]),
    ):
        with pytest.raises(AuthError) as err:
            call()
        assert err.value.status == 403
    operator = tokens.principal("hashed-token-000000001")
    assert subject_for(operator, "anyone", ["operators"]) == "anyone"
    with pytest.raises(AuthError):
        subject_for(operator, "anyone", ["admins"])


def test_a_token_file_line_needs_exactly_one_secret(tmp_path):
    path = tmp_path / "t.json"
    for row in (
        {"tenant": "acme"},
        {"tenant": "acme", "token": SECRET, "sha256": "0" * 64},
        {"tenant": "acme", "token": "short"},
        {"tenant": "acme", "token": SECRET, "tenants": ["x"]},
    ):
        path.write_text(json.dumps({"tokens": [row]}))
        with pytest.raises(ValidationError):
            Tokens.load(path)
