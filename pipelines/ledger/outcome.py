"""Whether a tool result succeeded, read from the result itself.

A keyword anywhere in an output says nothing: ``Warning: _curses.error:
setupterm ...`` heads a successful exploit run, ``48 passed, 0 failed`` holds
"failed", a file viewer shows ``raise RuntimeError(...)``. The verdict comes
from what the result says about itself, in this order:

1. a test runner's summary (pytest ``48 passed, 0 failed`` with or without its
   ``===`` rule, unittest ``Ran 12 tests ... OK``, go / jest): failed when
   it counts a failure or an error, else passed;
2. an exit code where the format has one (``exit code 1``, ``[Command
   finished with exit code 0]``, ``<returncode>0</returncode>``): 0 is a
   success whatever else the output shows;
3. error markers in their place: an exception line at a line's start (a
   traceback's last line, ``E   AssertionError: ...``, ``- E999 SyntaxError``,
   pytest's ``FAILED t.py::test_x - AssertionError: ...``),
   ``Error:`` / ``error:`` / ``fatal:`` / ``[ERROR]`` at a line's start (after
   an optional ``file:line:``), a shell's ``x: command not found`` / ``No such
   file or directory`` / ``Permission denied``, and an editor's refusal
   (``No replacement was performed``...).

Without any of them the output shows no failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ctxledger.pipelines.ledger.text import cut

_PYTEST_SUMMARY = re.compile(
    r"=+ (?P<body>(?:[^=\n]*?\b(?:passed|failed|error|errors|skipped|xfailed|"
    r"xpassed|deselected|warnings?|no tests ran)\b[^=\n]*)) =+"
)
#: ``48 passed``, ``capture-integration: 48 passed, 0 failed in 12.3s``.
_PYTEST_BARE = re.compile(
    r"^(?:[\w./ -]{1,60}:\s*)?(?P<body>\d+ (?:passed|failed)\b[^\n]*)$", re.MULTILINE
)
_UNITTEST = re.compile(
    r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\n?(OK|FAILED)[^\n]*", re.M
)
_GO_JEST_FAIL = re.compile(r"^(?:FAIL\b|--- FAIL|Tests:.*\bfailed\b)", re.MULTILINE)
_GO_JEST_OK = re.compile(r"^(?:ok\s+\S+|PASS\b|Tests:.*\bpassed\b)", re.MULTILINE)
#: A failure count that is not zero (``0 failed`` is a success).
_FAILED_COUNT = re.compile(r"\b(?:[1-9]\d*) (?:failed|errors?)\b")

EXIT_CODE = re.compile(
    r"\bexit (?:code|status):? ?(-?\d+)|<returncode>\s*(-?\d+)\s*</returncode>",
    re.IGNORECASE,
)
#: Where a line says it is an error (module docstring, 3).
ERROR_START = re.compile(
    r"^\s*(?:[-*]\s+)?(?:[\w./-]+:\d+(?::\d+)?:\s*)?(?:E\s+)?(?:"
    r"(?:E\d{3,4}\s+)?(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b(?::|\s*$)"
    r"|(?:error|fatal|ERROR|FATAL|Error|Fatal)\s*[:!]"
    r"|\[(?:ERROR|FATAL|error)\]"
    r")"
    # pytest's short summary: ``FAILED t.py::test_x - AssertionError: ...``
    r"|^(?:(?:FAILED|ERROR)\s+)?[\w./:\[\]-]+ - (?:[a-z_]\w*\.)*[A-Z]\w*"
    r"(?:Error|Exception)\b"
    r"|^[\w./ -]+: (?:[^\n]*: )?(?:command not found|No such file or directory|"
    r"[Pp]ermission denied)\s*$"
    r"|^(?:Your proposed edit has introduced new syntax error|No replacement was "
    r"performed|ERROR: )",
    re.MULTILINE,
)
#: An editor's refusal anywhere in its message.
_EDITOR_REFUSAL = re.compile(
    r"Your proposed edit has introduced new syntax error|No replacement was performed"
    r"|did not appear verbatim"
)
#: A numbered line of a file viewer (``36: raise ...``, ``1537\t) from error``).
LISTING_LINE = re.compile(r"^\s*\d+(?::\s|\t|\s*\|)")
#: An error by name says more than a framework's line mentioning one.
NAMED_ERROR = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")


def parse_test_outcome(output: str | None) -> tuple[str, str] | None:
    """``(passed|failed, summary)`` from a test runner's output, when it says."""
    if not output:
        return None
    summaries = list(_PYTEST_SUMMARY.finditer(output)) or list(
        _PYTEST_BARE.finditer(output)
    )
    if summaries:
        body = summaries[-1]["body"].strip()
        failed = _FAILED_COUNT.search(body) is not None
        if re.search(r"\b\d+ passed\b", body) or failed:
            return ("failed" if failed else "passed", cut(body, 120))
    unit = list(_UNITTEST.finditer(output))
    if unit:
        last = unit[-1]
        verdict = "passed" if last[2] == "OK" else "failed"
        return verdict, f"ran {last[1]} tests: {last[2]}"
    if _GO_JEST_FAIL.search(output):
        return "failed", "FAIL"
    if _GO_JEST_OK.search(output):
        return "passed", "ok"
    return None


def exit_code(output: str) -> int | None:
    """The last exit code the output states, when it states one."""
    found = None
    for match in EXIT_CODE.finditer(output):
        found = match[1] if match[1] is not None else match[2]
    return int(found) if found is not None else None


def error_lines(output: str) -> list[str]:
    """The lines that say they are errors (module docstring, 3), stripped;
    a file viewer's numbered lines are content, not errors."""
    return [
        line.strip()
        for line in output.splitlines()
        if len(line.strip()) >= 8
        and not LISTING_LINE.match(line)
        and ERROR_START.search(line)
    ]


@dataclass(frozen=True)
class Verdict:
    """What a result says about itself: ``status`` ``ok`` / ``error`` (None:
    it does not say), the test summary, the exit code and the error line."""

    status: str | None
    tests: tuple[str, str] | None = None
    exit: int | None = None
    error: str | None = None


@lru_cache(maxsize=8_192)
def verdict(output: str | None) -> Verdict:
    """The result's own verdict (module docstring)."""
    if not output:
        return Verdict(None)
    code = exit_code(output)
    tests = parse_test_outcome(output)
    errors = error_lines(output)
    named = [e for e in errors if NAMED_ERROR.search(e)]
    error = (named or errors)[-1] if errors else None
    if tests is not None:
        failed = tests[0] == "failed"
        return Verdict(
            "error" if failed else "ok", tests, code, error if failed else None
        )
    if code is not None:
        if code == 0:
            return Verdict("ok", None, code)
        return Verdict("error", None, code, error)
    refusal = _EDITOR_REFUSAL.search(output)
    if error is None and refusal is not None:
        # the line that holds the refusal ("[Your proposed edit has ...]")
        start = output.rfind("\n", 0, refusal.start()) + 1
        end = output.find("\n", refusal.end())
        error = output[start : end if end >= 0 else len(output)].strip(" []")
    if error is not None:
        return Verdict("error", None, None, error)
    return Verdict(None)


__all__ = [
    "EXIT_CODE",
    "Verdict",
    "error_lines",
    "exit_code",
    "parse_test_outcome",
    "verdict",
]
