"""Turn what users type as ``--catalog`` into what DuckLake's ATTACH expects.

DuckLake attaches a PostgreSQL catalog as ``ducklake:postgres:<libpq keywords>``
(``dbname=lake host=db port=5432``). People and schedulers usually hold a URL
(``postgresql://user@db:5432/lake``), and DuckLake hands everything after
``postgres:`` to the postgres extension, where a URL after the prefix does not
parse. ``catalog_location`` accepts both spellings (and a local catalog file) and
returns one canonical form, so every place that builds an ATTACH string, and every
run manifest, sees the same catalog.

Passwords: libpq reads ``PGPASSWORD``, ``~/.pgpass`` (``PGPASSFILE``) and
``PGSERVICE``, so a URL never needs one. If one is given anyway it still works, and
``mask_password`` hides it where a catalog is written down (``runs.config``).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

_URL_SCHEMES = ("postgres://", "postgresql://")
_KEYWORD_PREFIXES = ("postgres:", "postgresql:")
_BARE_VALUE = re.compile(r"[^\s'\\]+")
_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _libpq_value(value: str) -> str:
    """Quote a libpq keyword value: bare when safe, else single quotes with
    backslash escapes (libpq's own rule for connection strings)."""
    if value and _BARE_VALUE.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def libpq_dsn(url: str) -> str:
    """A ``postgres://`` / ``postgresql://`` URL as libpq ``key=value`` pairs.

    ``postgresql://user:pw@host:5432/db?sslmode=require`` becomes
    ``dbname=db host=host port=5432 user=user password=pw sslmode=require``.
    Percent-escapes are decoded; a host in brackets is an IPv6 address; missing
    parts are left out so libpq applies its defaults (``PGHOST``, ``PGUSER``...).
    Query parameters pass through as keywords (the last one of a name wins).
    """
    if not url.startswith(_URL_SCHEMES):
        shown = mask_password(url)
        raise ValueError(f"not a postgres:// or postgresql:// URL: {shown}")
    parts = urlsplit(url)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    if "," in hostport:
        raise ValueError("multi-host postgres URLs are not supported as a catalog")
    pairs: dict[str, str] = {}
    dbname = unquote(parts.path.lstrip("/"))
    if dbname:
        pairs["dbname"] = dbname
    # Parsed by hand: urlsplit lowercases hosts, and a percent-encoded socket
    # directory (%2Frun%2Fpostgresql) must keep its case.
    match = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(.*))?", hostport)
    host, port = (match.group(1), match.group(2)) if match else (hostport, None)
    if host:
        pairs["host"] = unquote(host.strip("[]"))
    if port:
        if not port.isdigit():
            raise ValueError(f"bad port in postgres URL: {port!r}")
        pairs["port"] = port
    user, colon, password = userinfo.partition(":")
    if user:
        pairs["user"] = unquote(user)
    if colon and password:
        pairs["password"] = unquote(password)
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        pairs[key] = value
    if not pairs:
        raise ValueError("empty postgres URL: name at least a database")
    return " ".join(f"{key}={_libpq_value(value)}" for key, value in pairs.items())


def catalog_location(catalog: str) -> str:
    """The canonical catalog string that follows ``ducklake:`` in an ATTACH.

    - ``postgres://...`` / ``postgresql://...`` URL -> ``postgres:<libpq keywords>``
    - ``postgres:<keywords>`` / ``postgresql:<keywords>`` -> ``postgres:<keywords>``
    - a leading ``ducklake:`` is dropped (people copy it from DuckLake's docs)
    - anything else (a local catalog file, ``sqlite:...``) is returned unchanged
    """
    text = catalog.strip()
    if text.startswith("ducklake:"):
        text = text[len("ducklake:") :]
    if text.startswith(_URL_SCHEMES):
        return "postgres:" + libpq_dsn(text)
    for prefix in _KEYWORD_PREFIXES:
        if text.startswith(prefix):
            return "postgres:" + text[len(prefix) :].strip()
    return catalog


def mask_password(catalog: str | None) -> str | None:
    """``catalog`` with any password replaced by ``***`` (for manifests and logs)."""
    if catalog is None:
        return None
    masked = _PASSWORD.sub(r"\1***", catalog)
    return re.sub(r"(postgres(?:ql)?://[^:/@\s]*):[^@\s]*@", r"\1:***@", masked)
