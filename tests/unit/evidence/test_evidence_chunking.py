"""Section-aware chunking: headings, spans, token bounds, oversized blocks."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.evidence.chunking import (
    chunk_text,
    evidence_windows,
    parse_blocks,
    split_oversized,
)
from ctxledger.pipelines.ingest.tokens import count_tokens

RUNBOOK = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "evidence"
    / "runbooks"
    / "KubeletTooManyPods"
    / "v04_2022-02-18_1616bee0.md"
)

DOC = """# Refunds

Intro paragraph about refunds.

## Eligibility

Customers may ask for a refund within 30 days.

### Exceptions
Digital goods are final.

## Process

Open a ticket.

```
refund --order 1234

refund --confirm
```

Setext title
------------

Body under setext.
"""


def _texts(text, chunks):
    return [text[c.char_start : c.char_end] for c in chunks]


def test_blocks_find_headings_code_and_paragraphs():
    blocks = parse_blocks(DOC)
    kinds = [(b.kind, b.level, b.title) for b in blocks]
    assert ("heading", 1, "Refunds") in kinds
    assert ("heading", 3, "Exceptions") in kinds
    assert ("heading", 2, "Setext title") in kinds
    code = [b for b in blocks if b.kind == "code"]
    assert len(code) == 1  # the blank line inside the fence does not split it
    assert DOC[code[0].start : code[0].end].endswith("```")


def test_headings_start_chunks_and_give_the_section_path():
    chunks = chunk_text(DOC, max_tokens=200, min_tokens=0)
    paths = [c.section_path for c in chunks]
    assert paths == [
        ("Refunds",),
        ("Refunds", "Eligibility"),
        ("Refunds", "Eligibility", "Exceptions"),
        ("Refunds", "Process"),
        ("Refunds", "Setext title"),
    ]
    texts = _texts(DOC, chunks)
    assert texts[1].startswith("## Eligibility")
    assert "refund --confirm" in texts[3]


def test_a_heading_directly_under_a_heading_rides_along():
    text = "# A\n\n## B\n\nbody of b\n"
    (chunk,) = chunk_text(text, max_tokens=50, min_tokens=0)
    assert chunk.section_path == ("A", "B")
    assert text[chunk.char_start : chunk.char_end] == "# A\n\n## B\n\nbody of b"


def test_spans_are_exact_and_bounded_on_a_real_runbook():
    text = RUNBOOK.read_text()
    chunks = chunk_text(text, max_tokens=60, min_tokens=10)
    assert len(chunks) > 3
    for chunk in chunks:
        piece = text[chunk.char_start : chunk.char_end]
        assert piece == piece.strip() and piece
        assert chunk.token_count == count_tokens(piece) <= 60
    starts = [c.char_start for c in chunks]
    assert starts == sorted(starts)
    assert any("Diagnosis" in c.section_path for c in chunks)


def test_small_trailing_piece_joins_the_previous_chunk_of_its_section():
    text = "# S\n\n" + "word " * 30 + "\n\nshort tail\n"
    merged = chunk_text(text, max_tokens=200, min_tokens=10)
    assert len(merged) == 1
    split = chunk_text(text, max_tokens=33, min_tokens=10)
    # no room to join: the two are cut again, and neither piece is a fragment
    assert len(split) == 2
    assert all(10 <= c.token_count <= 33 for c in split)
    assert _texts(text, split)[1].endswith("short tail")


def test_a_trailing_bare_heading_joins_the_chunk_before_it():
    text = "# Runbook\n\n" + "check the pods. " * 20 + "\n\n## Additional Reading\n"
    chunks = chunk_text(text, max_tokens=200, min_tokens=40)
    assert len(chunks) == 1
    assert _texts(text, chunks)[0].endswith("## Additional Reading")
    assert chunks[0].section_path == ("Runbook",)


def test_a_log_tail_never_stands_alone_below_min_tokens():
    # a tool output whose lines fill one chunk, then a 3-token last line that
    # does not fit beside them: the cut moves back instead of leaving a tail
    lines: list[str] = []
    while count_tokens("\n".join(lines)) < 190:
        lines.append(f"2025-03-01T09:00:{len(lines):02d}Z kubelet evicted pod")
    log = "\n".join(lines) + "\nall done now"
    assert count_tokens(log) > 200
    chunks = chunk_text(log, max_tokens=200, min_tokens=40)
    assert len(chunks) == 2 and min(c.token_count for c in chunks) >= 40
    assert _texts(log, chunks)[1].endswith("all done now")
    assert "".join(_texts(log, chunks)).replace("\n", "") == log.replace("\n", "")


def test_a_short_whole_section_stays_its_own_chunk():
    text = "# A\n\n" + "alpha beta. " * 30 + "\n\n## Impact\n\nNew pods stay Pending.\n"
    chunks = chunk_text(text, max_tokens=200, min_tokens=40)
    assert [c.section_path for c in chunks] == [("A",), ("A", "Impact")]


def test_oversized_blocks_split_at_lines_then_spaces_then_characters():
    lines = "\n".join(f"line {i} " + "x" * 20 for i in range(40))
    spans = split_oversized(lines, 0, len(lines), 30, count_tokens)
    assert len(spans) > 1
    assert all(count_tokens(lines[s:e]) <= 30 for s, e in spans)
    assert all(lines[s - 1] == "\n" for s, _ in spans[1:])  # cut at line ends
    blob = "Q" * 3000  # no space, no newline: a key or a base64 run
    spans = split_oversized(blob, 0, len(blob), 50, count_tokens)
    assert "".join(blob[s:e] for s, e in spans) == blob
    assert all(count_tokens(blob[s:e]) <= 50 for s, e in spans)


WORDS = st.sampled_from(
    ["alpha", "beta", "incident", "pager", "rotate", "key", "α", "😀", "x" * 30]
)
LINES = st.one_of(
    st.lists(WORDS, min_size=1, max_size=25).map(" ".join),
    st.integers(1, 6).map(lambda n: "#" * n + " Title"),
    st.just(""),
    st.just("```"),
    st.just("---"),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(LINES, max_size=40), st.integers(8, 80), st.integers(0, 20))
def test_chunks_are_exact_spans_within_bounds_covering_all_words(
    lines, max_tokens, min_tokens
):
    text = "\n".join(lines)
    chunks = chunk_text(text, max_tokens=max_tokens, min_tokens=min(min_tokens, 8))
    covered = ""
    for chunk in chunks:
        piece = text[chunk.char_start : chunk.char_end]
        assert piece and piece == piece.strip()
        assert chunk.token_count == count_tokens(piece) <= max_tokens
        covered += piece
    # every non-space character lands in exactly one chunk, in order
    assert "".join(covered.split()) == "".join(text.split())


# ------------------------------------------------------------ artifact windows
def _build_log(lines: int, failures: dict[int, str]) -> str:
    return "\n".join(
        failures.get(i, f"step {i}: compiling module_{i}.c ok") for i in range(lines)
    )


def test_a_small_tool_output_stays_whole():
    text = "  status ok\nrows: 3\n"
    (window,) = evidence_windows(text, 20, 10, 2, 100)
    assert text[window.start : window.end] == "status ok\nrows: 3"
    assert window.marker == ""


def test_a_long_log_keeps_head_error_and_tail_windows_within_budget():
    """The failure in the middle of 3,000 progress lines is kept with its
    context; what is skipped is announced by an elision marker."""
    log = _build_log(
        3000,
        {1500: "Traceback (most recent call last):", 1502: "ValueError: bad input"},
    )
    windows = evidence_windows(log, 200, 100, 2, 512)
    kept = [log[w.start : w.end] for w in windows]
    assert len(windows) == 3
    assert kept[0].startswith("step 0:") and kept[-1].endswith("module_2999.c ok")
    assert "Traceback" in kept[1] and "ValueError: bad input" in kept[1]
    assert kept[1].startswith("step 1498:") and kept[1].endswith("module_1504.c ok")
    assert windows[0].marker == ""
    first_error_line = 1498
    head_lines = kept[0].count("\n") + 1
    assert windows[1].marker == (
        f"[... {first_error_line - head_lines:,} lines omitted ...]"
    )
    assert windows[2].marker.endswith("lines omitted ...]")
    assert sum(count_tokens(k) for k in kept) <= 512 + len(kept)
    assert [w.start for w in windows] == sorted(w.start for w in windows)
    assert all(a.end < b.start for a, b in zip(windows, windows[1:], strict=False))


def test_error_windows_stop_at_the_budget():
    log = _build_log(2000, {i: f"error: test_{i} failed" for i in range(100, 1900, 7)})
    windows = evidence_windows(log, 200, 100, 2, 512)
    assert sum(count_tokens(log[w.start : w.end]) for w in windows) <= 512 + 5
    assert len(windows) > 3  # several error windows fit, not all of them


def test_one_enormous_line_keeps_its_start_and_its_end():
    blob = '{"items": [' + ", ".join(f'"item {i}"' for i in range(5000)) + "]}"
    head, tail = evidence_windows(blob, 200, 100, 2, 512)
    assert blob[head.start : head.end].startswith('{"items": ["item 0"')
    assert blob[tail.start : tail.end].endswith('"item 4999"]}')
    assert tail.marker.endswith("characters omitted ...]")
    omitted = len(blob[head.end : tail.start].strip())
    assert tail.marker == f"[... {omitted:,} characters omitted ...]"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["step ok", "ERROR boom", "", "x" * 300, "word " * 40, "\r"]),
        max_size=80,
    ),
    st.integers(0, 60),
    st.integers(0, 60),
    st.integers(0, 3),
)
def test_windows_are_disjoint_trimmed_spans_in_order(parts, head, tail, context):
    text = "\n".join(parts)
    windows = evidence_windows(text, head, tail, context, 80)
    prev = 0
    for w in windows:
        piece = text[w.start : w.end]
        assert prev <= w.start < w.end <= len(text)
        assert piece == piece.strip()
        prev = w.end
