"""Extensions load from the offline packages, signature-checked once per process."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from ctxledger.warehouse import catalog


@pytest.fixture
def fts_only(tmp_path, monkeypatch):
    """An extension directory holding a copy of the fts binary; a fresh process
    state (nothing checked yet)."""
    source = next(Path(catalog.extension_directory()).rglob("fts.duckdb_extension"))
    relative = source.relative_to(catalog.extension_directory())
    copy = tmp_path / relative
    copy.parent.mkdir(parents=True)
    shutil.copyfile(source, copy)
    monkeypatch.setattr(catalog, "extension_directory", lambda: str(tmp_path))
    monkeypatch.setattr(catalog, "_VERIFIED", set())
    return copy


def test_a_tampered_extension_fails_its_first_load(fts_only):
    data = bytearray(fts_only.read_bytes())
    data[len(data) // 2] ^= 0xFF
    fts_only.write_bytes(bytes(data))
    # (A connection that skips the check loads this file without complaint.)
    with pytest.raises(duckdb.Error, match="signature"):
        catalog.connect(load=("fts",))
    assert "fts" not in catalog._VERIFIED


def test_the_signature_is_checked_once_then_trusted(fts_only, monkeypatch):
    checks = []
    real_connect = duckdb.connect

    def counting(database=":memory:", **kwargs):
        config = kwargs.get("config", {})
        if "allow_unsigned_extensions" not in config:
            checks.append(database)
        return real_connect(database, **kwargs)

    monkeypatch.setattr(catalog.duckdb, "connect", counting)
    for _ in range(3):
        con = catalog.connect(load=("fts",))
        assert con.execute("SELECT stem('running', 'porter')").fetchone() == ("run",)
        con.close()
    assert checks == [":memory:"]
    assert catalog._VERIFIED == {"fts"}
