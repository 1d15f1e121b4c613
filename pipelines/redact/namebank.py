"""Multinational first and last names, compact and cached (from ``names-dataset``).

``names-dataset`` ships about 730,000 first and 980,000 last names of 105 countries,
with each name's rank per country. Its own object takes ~6 s per file and ~1 GB
of memory to load, far too much for every Beam worker. So the first use derives,
in a child process (the parent never holds the big dictionaries), two sorted word
lists: names that rank in the top ``RANK_MAX`` of at least one country, one word
each (letters, inner ``-``/``'``), lower-cased and accent-folded. They go to a
gzip file under the user's cache dir (``$XDG_CACHE_HOME/ctxledger``), keyed by
the package version and the build parameters, and every later load reads that
file into two ``frozenset`` objects (~0.5 s, ~60 MB).

Without ``names-dataset`` installed (or with ``CTXLEDGER_NAMEBANK=off``) the bank
is empty and the name rules fall back to ``lexicon.FIRST_NAMES``. A bank word
says only "some country uses this as a name"; ``names`` adds the context
(capitalisation, a neighbouring name, everyday-word frequency) that makes it a
person.
"""

from __future__ import annotations

import gzip
import re
import sys
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ctxledger.pipelines.redact.derived import (
    cache_file,
    load_derived,
    package_version,
    write_lines,
)

#: Keep names within this rank in at least one country (the top ~290k first and
#: ~340k last names; rarer entries are mostly noise or one-off spellings).
RANK_MAX = 5000
_FORMAT = "v1"
_WORD = re.compile(r"[^\W\d_]+(?:['\-][^\W\d_]+)*")


@lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """Lower-case ``word`` and strip accents (``Baró`` -> ``baro``), so one list
    covers both spellings; dotless and dotted i fold to ``i``."""
    low = word.lower().replace("ı", "i").replace("ł", "l").replace("ø", "o")
    decomposed = unicodedata.normalize("NFKD", low)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@dataclass(frozen=True)
class NameBank:
    """Folded first and last names (``in_first``/``in_last`` fold the query)."""

    first: frozenset[str] = frozenset()
    last: frozenset[str] = frozenset()

    def in_first(self, word: str) -> bool:
        """Whether ``word`` is a given name in some country."""
        return fold(word) in self.first

    def in_last(self, word: str) -> bool:
        """Whether ``word`` is a family name in some country."""
        return fold(word) in self.last

    def __bool__(self) -> bool:
        return bool(self.first or self.last)


def _dataset_dir() -> Path | None:
    try:
        import names_dataset  # noqa: PLC0415
    except ImportError:
        return None
    folder = Path(names_dataset.__file__).parent / "v3"
    return folder if (folder / "first_names.pkl.gz").exists() else None


def cache_path() -> Path:
    """Where the derived lists live (keyed by package version and parameters)."""
    return cache_file("namebank", _FORMAT, package_version("names-dataset"), RANK_MAX)


def _keep(word: str) -> bool:
    return 2 <= len(word) <= 30 and _WORD.fullmatch(word) is not None


def build(dest: Path, rank_max: int = RANK_MAX) -> None:
    """Derive the compact lists from the installed ``names-dataset`` pickles.

    Memory-hungry (~1 GB for a few seconds): ``load_bank`` runs it in a child
    process. Writes atomically (temp file, then rename), so concurrent workers
    never read half a file.
    """
    import pickle  # noqa: PLC0415

    folder = _dataset_dir()
    if folder is None:
        raise RuntimeError("names-dataset is not installed")
    sections: dict[str, list[str]] = {}
    for kind in ("first", "last"):
        with gzip.open(folder / f"{kind}_names.pkl.gz", "rb") as handle:
            data = pickle.load(handle)  # noqa: S301 - the installed package's file
        words = set()
        for name, info in data.items():
            ranks = [r for r in (info.get("rank") or {}).values() if r is not None]
            if ranks and min(ranks) <= rank_max and _keep(name):
                words.add(fold(name))
        del data
        sections[kind] = sorted(words)
    write_lines(
        dest,
        (line for kind, words in sections.items() for line in (f"#{kind}", *words)),
    )


def _parse(lines: list[str]) -> NameBank:
    sections: dict[str, list[str]] = {"first": [], "last": []}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("#"):
            current = sections.setdefault(line[1:], [])
        elif current is not None:
            current.append(line)
    return NameBank(frozenset(sections["first"]), frozenset(sections["last"]))


_BANK: NameBank | None = None
_LOCK = threading.Lock()


def load_bank() -> NameBank:
    """The process-wide bank: read from the cache, building it once if needed.

    Never raises: a missing package, a failed build or an unwritable cache dir
    give an empty bank (with a warning; names then come from NER and the small
    lexicon only).
    """
    global _BANK  # noqa: PLW0603 - one bank per process, loaded once
    if _BANK is not None:
        return _BANK
    with _LOCK:
        if _BANK is not None:
            return _BANK
        _BANK = _load_uncached()
        return _BANK


def _load_uncached() -> NameBank:
    return load_derived(
        what="name bank (names-dataset)",
        module=__name__,
        path=cache_path(),
        available=_dataset_dir() is not None,
        off_env="CTXLEDGER_NAMEBANK",
        parse=_parse,
        empty=NameBank(),
        timeout=600,
    )


if __name__ == "__main__":  # pragma: no cover - the child process of load_bank
    build(Path(sys.argv[1]))
