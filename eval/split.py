"""Deterministic dev/measure split of every labelled set the evaluation uses.

We develop (look at errors, tune rules) on the ``dev`` part only and report the
``measure`` part beside it: a rule that helps on dev but not on measure is tuned
to the examples, not to the problem. The split is a seeded SHA-256 of a stable
key (the sentence, the file name, the document name), so it does not depend on
file order, is the same on every machine and needs no stored list.
"""

from __future__ import annotations

import hashlib

#: Changing the seed reshuffles every split: never do it to improve a number.
SEED = "ctxledger-eval-split-v1"
PARTS = ("dev", "measure")


def part_of(key: str) -> str:
    """``"dev"`` or ``"measure"`` for ``key`` (about half each)."""
    digest = hashlib.sha256(f"{SEED}\0{key}".encode()).digest()
    return PARTS[digest[0] & 1]
