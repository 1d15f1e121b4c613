"""``--catalog`` spellings: postgres URLs become DuckLake's libpq keyword form."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.config import JobConfig
from ctxledger.warehouse.catalog_url import (
    catalog_location,
    libpq_dsn,
    mask_password,
)


def parse_libpq(dsn: str) -> dict[str, str]:
    """libpq's keyword/value syntax, read back (the test's independent oracle)."""
    pairs: dict[str, str] = {}
    pos = 0
    token = re.compile(r"\s*([A-Za-z_]+)\s*=\s*")
    while pos < len(dsn):
        match = token.match(dsn, pos)
        assert match, f"bad keyword at {dsn[pos:]!r}"
        key, pos = match.group(1), match.end()
        if dsn[pos : pos + 1] == "'":
            pos += 1
            value = []
            while dsn[pos] != "'":
                if dsn[pos] == "\\":
                    pos += 1
                value.append(dsn[pos])
                pos += 1
            pos += 1
            pairs[key] = "".join(value)
        else:
            end = pos
            while end < len(dsn) and not dsn[end].isspace():
                end += 1
            pairs[key] = dsn[pos:end]
            pos = end
        while pos < len(dsn) and dsn[pos].isspace():
            pos += 1
    return pairs


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        (
            "postgresql://ctxledger@127.0.0.1:55432/lake",
            "postgres:dbname=lake host=127.0.0.1 port=55432 user=ctxledger",
        ),
        ("postgres://db.internal/lake", "postgres:dbname=lake host=db.internal"),
        (
            "postgres://u:p%40ss@[::1]:5433/my%20lake?sslmode=require",
            "postgres:dbname='my lake' host=::1 port=5433 user=u password=p@ss "
            "sslmode=require",
        ),
        # A socket directory keeps its case; the query form works too.
        ("postgresql://%2FRun%2Fpg/lake", "postgres:dbname=lake host=/Run/pg"),
        (
            "postgresql:///lake?host=/var/run/pg",
            "postgres:dbname=lake host=/var/run/pg",
        ),
        # Already DuckLake's form (with or without its `ducklake:` prefix).
        ("postgres:dbname=lake host=db", "postgres:dbname=lake host=db"),
        ("postgresql:dbname=lake", "postgres:dbname=lake"),
        ("ducklake:postgres:dbname=lake", "postgres:dbname=lake"),
        ("ducklake:postgresql://h/lake", "postgres:dbname=lake host=h"),
        # Local catalog files are left alone.
        ("/data/wh/catalog.ducklake", "/data/wh/catalog.ducklake"),
        ("relative/catalog.ducklake", "relative/catalog.ducklake"),
    ],
)
def test_catalog_location(given_, expected):
    assert catalog_location(given_) == expected
    assert catalog_location(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "bad",
    ["postgres://h:notaport/db", "postgresql://", "postgres://a,b/db"],
)
def test_unusable_urls_are_rejected(bad):
    with pytest.raises(ValueError):
        catalog_location(bad)


def test_the_cli_option_converts_and_rejects():
    import typer

    from ctxledger.jobs.cli import _catalog_value

    assert _catalog_value("postgresql://h/db") == "postgres:dbname=db host=h"
    assert _catalog_value(None) is None
    with pytest.raises(typer.BadParameter, match="bad port"):
        _catalog_value("postgres://h:x/db")


def test_passwords_are_masked_in_every_spelling():
    assert mask_password("postgres://u:s3cret@h/db") == "postgres://u:***@h/db"
    keyword = catalog_location("postgres://u:s3cret@h/db")
    assert "s3cret" in keyword  # libpq needs it to connect...
    assert "s3cret" not in mask_password(keyword)  # ...but it is never written down
    assert mask_password("postgres:dbname=x password='a b' host=h") == (
        "postgres:dbname=x password=*** host=h"
    )
    assert mask_password(None) is None


def test_run_manifest_config_never_holds_the_password():
    config = JobConfig(
        job="nightly",
        run_id="r",
        landing="l",
        warehouse="w",
        catalog=catalog_location("postgresql://u:s3cret@h/db"),
        policy_version="p",
        code_version="c",
    )
    assert "s3cret" not in config.model_dump_json()
    assert "s3cret" in config.catalog  # the live object still connects


_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
    min_size=1,
    max_size=12,
)


@given(
    user=_text,
    password=_text,
    dbname=_text,
    host=st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True),
    port=st.integers(1, 65535),
)
def test_url_components_survive_the_conversion(user, password, dbname, host, port):
    url = (
        f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}"
        f"@{host}:{port}/{quote(dbname, safe='')}"
    )
    assert parse_libpq(libpq_dsn(url)) == {
        "dbname": dbname,
        "host": host,
        "port": str(port),
        "user": user,
        "password": password,
    }
