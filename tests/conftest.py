"""Shared test setup: offline model settings and a fixed pseudonym key."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests never touch the user's real key file.
os.environ.setdefault("CTXLEDGER_PSEUDONYM_KEY", "00112233445566778899aabbccddeeff")
