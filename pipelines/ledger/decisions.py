"""A rejected option keeps what was rejected and why.

"I rejected it; proposing to revert 9f3c2ab to 256." says neither what "it"
was (doubling the pool to 128) nor why (the DB cap 300, a peak of ~200). A
rejection that names its option by a pronoun carries the proposal it answers
(the latest user sentence proposing an option, else the sentence before it),
and one that gives no reason carries the reasons its message gave just before
it (at most two sentences), after `` » ``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxledger.pipelines.ledger.cues import REASON, REJECT_BY_PRONOUN
from ctxledger.pipelines.ledger.items import LIST_SEP
from ctxledger.pipelines.ledger.text import clip

#: Reason sentences kept with a rejection.
REASONS_KEPT = 2


def rejected_text(
    sentence: str, before: Sequence[str], proposal: str | None, limit: int
) -> str:
    """``sentence`` with what it rejects and why, when it does not say them
    (module docstring); ``before``: the sentences of its message before it,
    ``proposal``: the latest option proposed to the speaker."""
    parts = [sentence]
    if REJECT_BY_PRONOUN.search(sentence):
        option = proposal or (before[-1] if before else None)
        if option and option not in parts:
            parts.append(f"rejected: {option}")
    if not REASON.search(sentence):
        why = [s for s in before if REASON.search(s) and s not in parts]
        if why:
            parts.append("why: " + " ".join(why[-REASONS_KEPT:]))
    if len(parts) == 1:
        return sentence
    return clip(LIST_SEP.join(parts), 2 * limit)
