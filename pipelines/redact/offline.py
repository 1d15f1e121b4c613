"""Keep presidio's e-mail validation off the network.

presidio's ``EmailRecognizer`` calls ``tldextract.extract``, whose module-level
extractor fetches the public suffix list over HTTP the first time (and hangs until a
timeout without a network). We (1) set ``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS`` to the
empty string before tldextract is imported, so the module-level extractor uses the
bundled snapshot, (2) also clear the URLs of an extractor that was created before us,
and (3) keep our own extractor built with ``suffix_list_urls=()`` and no disk cache.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from typing import Any

_ENV = "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"


def ensure_offline_tldextract() -> None:
    """Make every tldextract extractor in this process use the bundled snapshot."""
    os.environ.setdefault(_ENV, "")
    module = sys.modules.get("tldextract.tldextract")
    if module is None:
        import tldextract.tldextract as module  # noqa: PLC0415
    extractor = getattr(module, "TLD_EXTRACTOR", None)
    if extractor is not None and getattr(extractor, "suffix_list_urls", ()):
        extractor.suffix_list_urls = ()


@lru_cache(maxsize=1)
def tld_extractor() -> Any:
    """A ``TLDExtract`` that never fetches anything (snapshot only)."""
    ensure_offline_tldextract()
    import tldextract  # noqa: PLC0415

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def has_public_suffix(domain: str) -> bool:
    """True when ``domain`` ends in a known public suffix (``example.com``: yes)."""
    result = tld_extractor()(domain)
    return bool(result.suffix) and bool(result.domain)
