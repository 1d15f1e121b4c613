"""Pseudonym determinism, tenant separation, normalisation, and key loading."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from ctxledger.pipelines.redact import keys
from ctxledger.pipelines.redact.keys import ENV_VAR, PseudonymKeyError, load_key
from ctxledger.pipelines.redact.pseudonym import Pseudonymizer, normalize_value

KEY = b"k" * 32


def test_deterministic_and_tenant_separated() -> None:
    p = Pseudonymizer(KEY, 8)
    a = p.placeholder("acme", "EMAIL_ADDRESS", "mia@example.com")
    assert a == p.placeholder("acme", "EMAIL_ADDRESS", "mia@example.com")
    assert a.startswith("<EMAIL_ADDRESS:") and len(a) == len("<EMAIL_ADDRESS:>") + 8
    assert a != p.placeholder("globex", "EMAIL_ADDRESS", "mia@example.com")
    assert a != Pseudonymizer(b"z" * 32, 8).placeholder(
        "acme", "EMAIL_ADDRESS", "mia@example.com"
    )
    # entity type is part of the message
    assert p.digest("acme", "PERSON", "x") != p.digest("acme", "LOCATION", "x")


def test_normalisation_makes_variants_equal() -> None:
    p = Pseudonymizer(KEY, 12)
    assert p.digest("t", "EMAIL_ADDRESS", "Mia@Example.COM") == p.digest(
        "t", "EMAIL_ADDRESS", "mia@example.com"
    )
    assert p.digest("t", "PHONE_NUMBER", "(415) 555-0147") == p.digest(
        "t", "PHONE_NUMBER", "415.555.0147"
    )
    assert p.digest("t", "CREDIT_CARD", "4539 5787 6362 1486") == p.digest(
        "t", "CREDIT_CARD", "4539-5787-6362-1486"
    )
    assert p.digest("t", "PERSON", "Mia  Li") == p.digest("t", "PERSON", "mia li")
    assert normalize_value("IBAN_CODE", "de89 3704 0044") == "DE8937040044"
    phone = normalize_value("PHONE_NUMBER", "+1 415 555 0147 ext. 12")
    assert phone == "14155550147x12"
    assert normalize_value("GITHUB_TOKEN", " Ab ") == "Ab"  # secrets: exact


def test_hex_length_and_bad_key() -> None:
    assert len(Pseudonymizer(KEY, 16).digest("t", "PERSON", "x")) == 16
    with pytest.raises(ValueError):
        Pseudonymizer(b"short", 8)
    assert "k" * 4 not in repr(Pseudonymizer(KEY))


def test_env_var_wins(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(ENV_VAR, "00112233445566778899aabbccddeeff")
    assert load_key(tmp_path / "nope.key") == bytes.fromhex(
        "00112233445566778899aabbccddeeff"
    )
    monkeypatch.setenv(ENV_VAR, "a plain passphrase of some length")
    assert load_key() == b"a plain passphrase of some length"
    monkeypatch.setenv(ENV_VAR, "too-short")
    with pytest.raises(PseudonymKeyError):
        load_key()
    assert not (tmp_path / "nope.key").exists()


def test_key_file_created_with_private_permissions(monkeypatch, tmp_path, caplog):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    keys._warned.clear()
    with caplog.at_level(logging.WARNING, logger="ctxledger.pipelines.redact.keys"):
        first = load_key()
    path = tmp_path / ".config" / "ctxledger" / "pseudonym.key"
    assert path.exists() and len(first) == 32
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert "created a new pseudonym key" in caplog.text
    assert first.hex() not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ctxledger.pipelines.redact.keys"):
        assert load_key() == first  # reused, no second warning
    assert caplog.text == ""


def test_key_file_given_explicitly(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    path = tmp_path / "k.key"
    path.write_text("ffeeddccbbaa99887766554433221100\n")
    assert load_key(path) == bytes.fromhex("ffeeddccbbaa99887766554433221100")
    path.write_bytes(b"\x01\x02")
    with pytest.raises(PseudonymKeyError):
        load_key(path)


def test_short_keys_refused_unless_weak_keys_allowed(monkeypatch, caplog) -> None:
    monkeypatch.delenv(keys.ALLOW_WEAK_ENV, raising=False)
    monkeypatch.setenv(ENV_VAR, "00112233445566778899aabbccddeeff")  # 16 bytes
    with pytest.raises(PseudonymKeyError, match="under 32.*--allow-weak-key"):
        load_key()
    monkeypatch.setenv(ENV_VAR, "a passphrase of 24 bytes")
    with pytest.raises(PseudonymKeyError, match="24 bytes"):
        load_key()
    strong = "00112233445566778899aabbccddeeff" * 2
    monkeypatch.setenv(ENV_VAR, strong)
    assert load_key() == bytes.fromhex(strong)
    monkeypatch.setenv(ENV_VAR, "00112233445566778899aabbccddeeff")
    keys._warned.clear()
    with caplog.at_level(logging.WARNING, logger="ctxledger.pipelines.redact.keys"):
        assert len(load_key(allow_weak=True)) == 16
    assert "weak pseudonym key accepted" in caplog.text
    assert "00112233" not in caplog.text  # never the key itself
    monkeypatch.setenv(keys.ALLOW_WEAK_ENV, "1")  # what --allow-weak-key sets
    assert len(load_key()) == 16
    monkeypatch.setenv(ENV_VAR, "too-short")  # under 16 bytes: never
    with pytest.raises(PseudonymKeyError):
        load_key()


def test_readable_key_file_refused_unless_weak_keys_allowed(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(keys.ALLOW_WEAK_ENV, raising=False)
    path = tmp_path / "k.key"
    path.write_bytes(bytes(range(32)))
    for mode in (0o644, 0o640, 0o604, 0o660):
        os.chmod(path, mode)
        with pytest.raises(PseudonymKeyError, match="chmod 600"):
            load_key(path)
        assert load_key(path, allow_weak=True) == bytes(range(32))
    for mode in (0o600, 0o400):
        os.chmod(path, mode)
        assert load_key(path) == bytes(range(32))
    os.chmod(path, 0o600)
    path.write_bytes(bytes(range(20)))
    with pytest.raises(PseudonymKeyError, match="20 bytes"):
        load_key(path)


def test_cli_allow_weak_key_option_reaches_the_key_loader(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from ctxledger.jobs.cli import app

    monkeypatch.delenv(keys.ALLOW_WEAK_ENV, raising=False)
    CliRunner().invoke(app, ["runs", "-w", str(tmp_path / "none")])
    assert not keys.weak_keys_allowed()
    CliRunner().invoke(app, ["--allow-weak-key", "runs", "-w", str(tmp_path / "x")])
    assert keys.weak_keys_allowed()
