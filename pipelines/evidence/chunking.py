"""Section-aware chunking of (redacted) markdown and plain text.

The text is cut into blocks first (ATX and one-line setext headings, fenced code,
paragraphs separated by blank lines), then blocks are packed into chunks:

* a heading always starts a new chunk and sets the chunk's ``section_path`` (the
  titles of the enclosing headings); a heading directly followed by a deeper
  heading rides along with it, so no chunk is a bare title;
* paragraphs of one section are packed while the chunk stays within
  ``max_tokens`` (cl100k, counted on the exact chunk text);
* a block larger than ``max_tokens`` is split at line ends, then at spaces, then
  (for one enormous token run) at a character position;
* a fragment under ``min_tokens`` never stands alone when a neighbour can take
  it: a continuation piece joins the previous chunk of its section when the
  result fits ``max_tokens``; when it does not fit, the two are cut again into
  two balanced pieces of at least ``min_tokens`` each; a bare heading with no
  body (a trailing ``## See also``) joins the chunk before it. A whole short
  section (heading and body) is not a fragment and stays its own chunk.

Every chunk is a span ``[char_start, char_end)`` of the input, so
``text[char_start:char_end]`` is the chunk text exactly and a quote can be cited.
Chunks never start or end with whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ctxledger.pipelines.ingest.tokens import count_tokens, fits_tokens

#: Bump when the chunking rules change (stored with every document version).
CHUNKER_VERSION = "sections-2"

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Block:
    """A span of the text: a heading (with level and title), code or paragraph."""

    kind: str  # "heading" | "code" | "paragraph"
    start: int
    end: int
    level: int = 0
    title: str = ""


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk: its span, the heading path above it, and its token count."""

    char_start: int
    char_end: int
    section_path: tuple[str, ...]
    token_count: int
    starts_section: bool = False
    #: Only heading lines, no body (a section with nothing under it).
    headings_only: bool = False


@dataclass
class _Open:
    start: int
    end: int
    path: tuple[str, ...]
    starts_section: bool
    headings_only: bool = True


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, ``end`` excluding the newline."""
    out = []
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        out.append((pos, pos + len(stripped)))
        pos += len(line)
    return out


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def parse_blocks(text: str) -> list[Block]:
    """Headings, fenced code and paragraphs of ``text``, in order."""
    blocks: list[Block] = []
    lines = _lines(text)
    i = 0
    para: list[tuple[int, int]] = []

    def flush_para() -> None:
        if para:
            start, end = _trim(text, para[0][0], para[-1][1])
            if end > start:
                blocks.append(Block("paragraph", start, end))
            para.clear()

    while i < len(lines):
        start, end = lines[i]
        line = text[start:end]
        if not line.strip():
            flush_para()
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            flush_para()
            marker = fence.group(1)
            j = i + 1
            while j < len(lines):
                closing = text[lines[j][0] : lines[j][1]].strip()
                if closing.startswith(marker[0] * len(marker)) and not closing.strip(
                    marker[0]
                ):
                    break
                j += 1
            last = min(j, len(lines) - 1)
            b_start, b_end = _trim(text, start, lines[last][1])
            blocks.append(Block("code", b_start, b_end))
            i = last + 1
            continue
        atx = _ATX.match(line)
        if atx:
            flush_para()
            b_start, b_end = _trim(text, start, end)
            title = (atx.group(2) or "").strip()
            blocks.append(Block("heading", b_start, b_end, len(atx.group(1)), title))
            i += 1
            continue
        if (
            len(para) == 1
            and _SETEXT.match(line)
            and text[para[0][0] : para[0][1]].strip()
        ):
            level = 1 if line.strip().startswith("=") else 2
            title = text[para[0][0] : para[0][1]].strip()
            b_start, b_end = _trim(text, para[0][0], end)
            para.clear()
            blocks.append(Block("heading", b_start, b_end, level, title))
            i += 1
            continue
        para.append((start, end))
        i += 1
    flush_para()
    return blocks


def _fits(count: TokenCounter, piece: str, max_tokens: int) -> bool:
    """``count(piece) <= max_tokens``; with the cl100k counter a piece short
    enough in bytes is known to fit without encoding it (``fits_tokens``)."""
    if count is count_tokens:
        return fits_tokens(piece, max_tokens)
    return count(piece) <= max_tokens


def split_oversized(
    text: str, start: int, end: int, max_tokens: int, count: TokenCounter
) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` into trimmed spans of at most ``max_tokens`` each:
    at line ends first, then at spaces, then at a character position."""
    start, end = _trim(text, start, end)
    if end <= start:
        return []
    if _fits(count, text[start:end], max_tokens):
        return [(start, end)]
    for pattern in (r"\n", r"[ \t]+"):
        cuts = sorted(
            {start + m.end() for m in re.finditer(pattern, text[start:end])} - {end}
        )
        if not cuts:
            continue
        bounds = [start, *cuts, end]
        pieces: list[tuple[int, int]] = []
        piece_start, piece_end = bounds[0], bounds[1]
        for unit_start, unit_end in zip(bounds[1:-1], bounds[2:], strict=True):
            if _fits(count, text[piece_start:unit_end], max_tokens):
                piece_end = unit_end
            else:
                pieces.append((piece_start, piece_end))
                piece_start, piece_end = unit_start, unit_end
        pieces.append((piece_start, piece_end))
        out: list[tuple[int, int]] = []
        for s, e in pieces:  # a single unit may still be too big: go deeper
            out.extend(split_oversized(text, s, e, max_tokens, count))
        return out
    out = []  # one run without spaces (a key, a blob): cut by characters
    pos = start
    while pos < end:
        lo, hi = pos + 1, end
        while lo < hi:  # the longest piece that fits
            mid = (lo + hi + 1) // 2
            if _fits(count, text[pos:mid], max_tokens):
                lo = mid
            else:
                hi = mid - 1
        out.append((pos, lo))
        pos = lo
    return out


def chunk_text(
    text: str,
    max_tokens: int = 200,
    min_tokens: int = 40,
    count: TokenCounter = count_tokens,
) -> list[ChunkSpan]:
    """Section-aware chunks of ``text`` (see the module docstring)."""
    chunks: list[ChunkSpan] = []
    stack: list[tuple[int, str]] = []
    current: _Open | None = None

    def emit(start: int, end: int, starts_section: bool, bare: bool = False) -> None:
        path = tuple(title for _, title in stack)
        chunks.append(
            ChunkSpan(start, end, path, count(text[start:end]), starts_section, bare)
        )

    def close() -> None:
        nonlocal current
        if current is not None:
            emit(
                current.start,
                current.end,
                current.starts_section,
                current.starts_section and current.headings_only,
            )
        current = None

    for block in parse_blocks(text):
        if block.kind == "heading":
            if current is not None and not current.headings_only:
                close()
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, block.title))
            if current is None:
                current = _Open(block.start, block.end, (), True)
            else:  # a heading right under a heading: keep them together
                current.end = block.end
            if not _fits(count, text[current.start : current.end], max_tokens):
                for s, e in split_oversized(
                    text, current.start, current.end, max_tokens, count
                ):
                    emit(s, e, True)
                current = None
            continue
        if current is not None and _fits(
            count, text[current.start : block.end], max_tokens
        ):
            current.end = block.end
            current.headings_only = False
            continue
        pieces = split_oversized(text, block.start, block.end, max_tokens, count)
        if (
            current is not None
            and current.headings_only
            and _fits(count, text[current.start : pieces[0][1]], max_tokens)
        ):
            current.end = pieces.pop(0)[1]  # the heading takes what fits
        close()
        for s, e in pieces:
            close()
            current = _Open(s, e, (), False, headings_only=False)
        # the last piece stays open so that the next paragraphs can join it
    close()
    return _merge_small(text, chunks, max_tokens, min_tokens, count)


def _merge_small(
    text: str,
    chunks: list[ChunkSpan],
    max_tokens: int,
    min_tokens: int,
    count: TokenCounter,
) -> list[ChunkSpan]:
    """Give every fragment under ``min_tokens`` to a neighbour (module doc).

    Why: a 3-token tail ("See also", the last line of a log) carries no meaning
    on its own, yet as a chunk it is embedded, ranked and packed like any other.
    """
    out: list[ChunkSpan] = []
    for chunk in _heading_to_body(text, chunks, max_tokens, min_tokens, count):
        prev = out[-1] if out else None
        if prev is None or chunk.token_count >= min_tokens:
            out.append(chunk)
            continue
        same_section = not chunk.starts_section and (
            prev.section_path == chunk.section_path
        )
        if not (same_section or chunk.headings_only):
            out.append(chunk)  # a short but whole section stays itself
            continue
        merged = count(text[prev.char_start : chunk.char_end])
        if merged <= max_tokens:
            out[-1] = ChunkSpan(
                prev.char_start,
                chunk.char_end,
                prev.section_path,
                merged,
                prev.starts_section,
                prev.headings_only and chunk.headings_only,
            )
            continue
        if same_section:
            pair = _rebalance(text, prev, chunk, max_tokens, min_tokens, count)
            if pair is not None:
                out[-1:] = pair
                continue
        out.append(chunk)
    return out


def _rebalance(
    text: str,
    prev: ChunkSpan,
    small: ChunkSpan,
    max_tokens: int,
    min_tokens: int,
    count: TokenCounter,
) -> list[ChunkSpan] | None:
    """``prev`` and the fragment after it, cut again so that both pieces hold
    at least ``min_tokens`` (None when no such cut exists).

    The cut moves back from the old boundary as little as it must, at a
    paragraph break if one works, else a line end, else a space."""
    for pattern in (r"\n[ \t]*\n", r"\n", r"[ \t]+"):
        found = re.finditer(pattern, text[prev.char_start : small.char_start])
        cuts = sorted((prev.char_start + m.start() for m in found), reverse=True)
        for cut in cuts:
            s1, e1 = _trim(text, prev.char_start, cut)
            s2, e2 = _trim(text, cut, small.char_end)
            left, right = count(text[s1:e1]), count(text[s2:e2])
            if right > max_tokens or left < min_tokens:
                break  # moving further back only makes it worse
            if right >= min_tokens:
                return [
                    ChunkSpan(s1, e1, prev.section_path, left, prev.starts_section),
                    ChunkSpan(s2, e2, prev.section_path, right, False),
                ]
    return None


def _heading_to_body(
    text: str,
    chunks: list[ChunkSpan],
    max_tokens: int,
    min_tokens: int,
    count: TokenCounter,
) -> list[ChunkSpan]:
    """A short bare heading followed by its own body (a continuation chunk of
    the same section) joins that body when the result fits."""
    out: list[ChunkSpan] = []
    i = 0
    while i < len(chunks):
        chunk = chunks[i]
        nxt = chunks[i + 1] if i + 1 < len(chunks) else None
        if (
            nxt is not None
            and chunk.headings_only
            and chunk.token_count < min_tokens
            and not nxt.starts_section
            and nxt.section_path == chunk.section_path
        ):
            merged = count(text[chunk.char_start : nxt.char_end])
            if merged <= max_tokens:
                out.append(
                    ChunkSpan(
                        chunk.char_start,
                        nxt.char_end,
                        chunk.section_path,
                        merged,
                        chunk.starts_section,
                    )
                )
                i += 2
                continue
        out.append(chunk)
        i += 1
    return out


# ------------------------------------------------------------ artifact windows
#: Bump when the artifact window rules change (stored with artifact versions).
ARTIFACT_CHUNKER_VERSION = f"{CHUNKER_VERSION}+windows-1"

#: A line that reports a failure: its neighbourhood is kept as an error window.
ERROR_LINE = re.compile(
    r"error|exception|traceback|\bfail(?:ed|ure|s|ing)?\b|\bfatal\b|\bpanic",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Window:
    """A kept span ``[start, end)`` of a tool output and what was skipped
    before it: whole lines, or (within one long line) characters."""

    start: int
    end: int
    omitted_lines: int = 0
    omitted_chars: int = 0

    @property
    def marker(self) -> str:
        """The visible elision marker of the gap before this window ("" if none)."""
        if self.omitted_lines:
            noun = "line" if self.omitted_lines == 1 else "lines"
            return f"[... {self.omitted_lines:,} {noun} omitted ...]"
        if self.omitted_chars:
            return f"[... {self.omitted_chars:,} characters omitted ...]"
        return ""


def _fit(
    text: str, start: int, end: int, budget: int, count: TokenCounter, last: bool
) -> tuple[int, int] | None:
    """The first (or ``last``) piece of one line that fits ``budget`` tokens."""
    if budget <= 0:
        return None
    pieces = split_oversized(text, start, end, budget, count)
    if not pieces:
        return None
    return pieces[-1] if last else pieces[0]


def evidence_windows(
    text: str,
    head_tokens: int,
    tail_tokens: int,
    error_context_lines: int,
    max_tokens: int,
    count: TokenCounter = count_tokens,
    total_tokens: int | None = None,
) -> list[Window]:
    """The spans of a tool output worth embedding: all of it when it fits
    ``max_tokens``; else the first lines (``head_tokens``), the last lines
    (``tail_tokens``) and, with what the budget leaves, every line that reports
    a failure with ``error_context_lines`` of context either side (merged).

    Why: a 5,000-line build log is retrieved for its error and its outcome, not
    for its 4,900 progress lines, yet embedding all of it dominated the nightly.
    Budgets are summed per line, one token added for each line break (a
    window's exact count can differ by a token or two at the joins); a single
    line over a budget is cut at spaces.
    Windows are disjoint, in text order, trimmed, and never empty.
    """
    total = count(text) if total_tokens is None else total_tokens
    whole = _trim(text, 0, len(text))
    if whole[1] <= whole[0]:
        return []
    if total <= max_tokens:
        return [Window(*whole)]
    lines = _lines(text)
    # a line costs its own tokens plus about one for its line break
    tokens = [count(text[s:e]) + 1 for s, e in lines]
    n = len(lines)
    spans: list[tuple[int, int, int, int]] = []  # (start, end, first, last line)

    used = 0  # head: whole lines while they fit, a cut first line if none does
    head_last = -1
    for i in range(n):
        if used + tokens[i] > head_tokens:
            if i == 0:
                cut = _fit(text, *lines[0], head_tokens, count, last=False)
                if cut:
                    spans.append((cut[0], cut[1], 0, 0))
                    used += count(text[cut[0] : cut[1]])
                    head_last = 0
            break
        used += tokens[i]
        head_last = i
    if head_last >= 0 and not spans:
        spans.append((lines[0][0], lines[head_last][1], 0, head_last))
    head_used = used

    used = 0  # tail: the same from the end, never reaching into the head
    tail: tuple[int, int, int, int] | None = None
    tail_first = n
    for i in range(n - 1, head_last, -1):
        if used + tokens[i] > tail_tokens:
            if i == n - 1:
                cut = _fit(text, *lines[i], tail_tokens, count, last=True)
                if cut:
                    tail = (cut[0], cut[1], i, i)
                    used = count(text[cut[0] : cut[1]])
                    tail_first = i
            break
        used += tokens[i]
        tail_first = i
    if tail is None and tail_first < n:
        tail = (lines[tail_first][0], lines[n - 1][1], tail_first, n - 1)
    if tail is None and spans and spans[0][1] < lines[head_last][1]:
        # one line longer than the head (a minified JSON): its end is the tail
        cut = _fit(text, spans[0][1], lines[head_last][1], tail_tokens, count, True)
        if cut:
            tail = (cut[0], cut[1], head_last, head_last)
            used = count(text[cut[0] : cut[1]])
    budget = max_tokens - head_used - used

    c = max(0, error_context_lines)  # error windows between head and tail
    ranges: list[list[int]] = []
    for i in range(head_last + 1, tail_first):
        if ERROR_LINE.search(text[lines[i][0] : lines[i][1]]):
            lo, hi = max(head_last + 1, i - c), min(tail_first - 1, i + c)
            if ranges and lo <= ranges[-1][1] + 1:
                ranges[-1][1] = max(ranges[-1][1], hi)
            else:
                ranges.append([lo, hi])
    for lo, hi in ranges:
        if budget <= 0:
            break
        cost = sum(tokens[lo : hi + 1])
        if cost <= budget:
            spans.append((lines[lo][0], lines[hi][1], lo, hi))
            budget -= cost
            continue
        first = next(
            i
            for i in range(lo, hi + 1)
            if ERROR_LINE.search(text[lines[i][0] : lines[i][1]])
        )
        cut = _fit(text, lines[first][0], lines[hi][1], budget, count, last=False)
        if cut:
            spans.append((cut[0], cut[1], first, first))
        break
    if tail is not None:
        spans.append(tail)

    out: list[Window] = []
    prev_end = 0
    for start, end, _first, _last in sorted(spans):
        start, end = _trim(text, start, end)
        if end <= start:
            continue
        gap = text[prev_end:start]
        if not gap.strip():
            out.append(Window(start, end))
        elif gap.count("\n") >= 2:
            out.append(Window(start, end, omitted_lines=gap.count("\n") - 1))
        else:
            out.append(Window(start, end, omitted_chars=len(gap.strip())))
        prev_end = end
    return out
