"""Secrets in prose and the residual check downstream stages use."""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.residual import secret_in_text, secret_spans
from ctxledger.pipelines.redact.secrets import find_secrets


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("My username is admin and my password is adminpass.", "adminpass"),
        ("my PIN is 4821", "4821"),
        ("the passcode was 839201", "839201"),
        ("Passphrase: Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("API key is sk3kd93kdkd", "sk3kd93kdkd"),
        ("PASSWORD IS swordfish9", "swordfish9"),
        ("the secret is opensesame", "opensesame"),
        ("my password is 123456", "123456"),
        ("pwd: qx7zzt", "qx7zzt"),
        # well-known passwords that are also everyday words or placeholders
        ("and my password is password.", "password"),
        ("My password is admin", "admin"),
        ("the default password was changeme", "changeme"),
        ("Her passcode is letmein", "letmein"),
    ],
)
def test_prose_secrets_found(text: str, value: str) -> None:
    assert value in [text[d.start : d.end] for d in find_secrets(text)]
    assert secret_in_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "The password is required.",
        "password is incorrect",
        "The password is too short",
        "The token is valid for 30 minutes",
        "the API key is stored in the vault",
        "the pin is set",
        "PIN: 12",
        "password = get_password()",
        "Please provide your username and password.",
        "password: string",
        "the password is hidden",
        "The password was incorrect, try again",
    ],
)
def test_prose_secrets_not_found(text: str) -> None:
    assert not secret_in_text(text)


def test_placeholders_do_not_count() -> None:
    assert not secret_in_text("my password is <PASSWORD:1a2b3c4d> and PIN <SECRET>")
    assert not secret_in_text("")


def test_residual_after_partial_redaction() -> None:
    text = "token <SECRET:abcd1234>, and then my password is adminpass"
    spans = secret_spans(text)
    assert [text[a:b] for a, b, _ in spans] == ["adminpass"]
