"""Token counts: the per-text memo and the byte-length shortcut never change a
count or a fits/does-not-fit answer (issue 14: the chunker, the ledger and the
observations count the same texts several times)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.ingest import tokens
from ctxledger.pipelines.ingest.tokens import (
    _encode_count,
    _Memo,
    count_tokens,
    fits_tokens,
)

TEXTS = st.text(
    alphabet=st.sampled_from(list("ab c\n\t.,:{}\"'é日本🙂<|>_-0123456789")),
    max_size=400,
)


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_count_is_the_encoders_count_twice_in_a_row(text):
    expected = _encode_count(text) if text else 0
    assert count_tokens(text) == expected
    assert count_tokens(text) == expected  # second time from the memo


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.integers(0, 120))
def test_fits_agrees_with_the_count(text, max_tokens):
    assert fits_tokens(text, max_tokens) == (count_tokens(text) <= max_tokens)


def test_special_token_text_is_counted_as_text():
    text = "<|endoftext|> and <|fim_prefix|> are plain text here " * 3
    assert count_tokens(text) == _encode_count(text) > 10


def test_the_memo_stays_within_its_character_budget():
    memo = _Memo(max_chars=1_000)
    texts = [f"line {i} " * 10 for i in range(200)]
    for text in texts:
        assert memo.count(text) == _encode_count(text)
        assert memo.chars <= 1_000
        assert memo.chars == sum(len(t) for t in memo.counts)
    # a text larger than an eighth of the budget is counted, never kept
    big = "x y " * 100
    assert memo.count(big) == _encode_count(big)
    assert big not in memo.counts


def test_the_memo_answers_a_remembered_text_without_encoding(monkeypatch):
    memo = _Memo()
    text = "a remembered tool output line\n" * 10
    first = memo.count(text)

    def fail(_text):
        raise AssertionError("encoded again")

    monkeypatch.setattr(tokens, "_encode_count", fail)
    assert memo.count(text) == first
