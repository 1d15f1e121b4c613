"""A tool result's status comes from the result, never from a keyword in it.

The outputs below are copied from ../shared/corpora (SWE-agent @ 3ea751c0
``trajectories/demonstrations``; OpenHands @ d6fab190 multi-swe-bench and
resolver outputs), cut where marked ``...``; the pytest line is the one the
issue quotes. The ledger test builds from the corpus trajectory itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxledger.pipelines.ledger.build import LedgerBuilder
from ctxledger.pipelines.ledger.outcome import parse_test_outcome, verdict
from ctxledger.pipelines.ledger.results import output_facts, result_status

CORPORA = Path(__file__).resolve().parents[4] / "shared" / "corpora"
WARMUP = CORPORA / "swe-agent-trajectories" / "ctf__pwn__warmup.traj"

#: ``python exploit.py`` printed the flag (ctf__pwn__warmup.traj, step 5).
EXPLOIT = (
    "Warning: _curses.error: setupterm: could not find terminfo database\n\n"
    "Terminal features will not be available.  Consider setting TERM variable "
    "to your current terminal name (or xterm).\n"
    "[x] Opening connection to pwn.chal.csaw.io on port 8000\n"
    "[+] Opening connection to pwn.chal.csaw.io on port 8000: Done\n"
    "[+] Receiving all data: Done (29B)\n"
    "[*] Closed connection to pwn.chal.csaw.io port 8000\n"
    "FLAG{LET_US_BEGIN_CSAW_2016}\n"
)
#: ``python retrieve_random_numbers.py`` (ctf__crypto__katy.traj, step 6).
KATY = (
    "Warning: _curses.error: setupterm: could not find terminfo database\n\n"
    "[+] Opening connection to crypto.chal.csaw.io on port 4242: Done\n"
    "/__Users__talora__LLM_CTF_Dataset_Dev__2016__CSAW-Finals__crypto__Katy/"
    "retrieve_random_numbers.py:4: BytesWarning: Text is not bytes; assuming "
    "ASCII, no guarantees. See https://docs.pwntools.com/#bytes\n"
    '  r.recvuntil("Press ENTER to continue")\n'
    "[0] Got random number: 4\n\n[16] Got random number: 1364650861\n\n"
    "[*] Closed connection to crypto.chal.csaw.io port 4242"
)
#: ``python decrypt.py`` (ctf__crypto__BabyEncryption.traj, step 3).
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/__Users__talora__LLM_CTF/decrypt.py", line 12, in <module>\n'
    "    pt = decryption(ct)\n"
    "TypeError: integer argument expected, got float"
)
#: An edit the linter refused (replay__marshmallow-code__marshmallow-1867).
LINT = (
    "Your proposed edit has introduced new syntax error(s). Please read this "
    "error message carefully and then retry editing the file.\n\nERRORS:\n"
    "- E999 IndentationError: unexpected indent\n\n"
    "This is how your edit would have looked if applied\n"
    "-------------------------------------------------\n"
    "[File: /marshmallow-code__marshmallow/src/marshmallow/fields.py (1997 lines)]\n"
    "(1468 more lines above)\n"
    "1475:return int(round(value.total_seconds() / base_unit.total_seconds()))\n"
)
#: OpenHands ``str_replace_editor`` (multi_swe_bench_output.jsonl): the reader
#: said ``ok`` (exit code none), the editor refused.
NO_REPLACEMENT = (
    "ERROR:\nNo replacement was performed. Multiple occurrences of old_str "
    "`return pattern_type;` in lines [317, 449]. Please ensure it is unique."
)
#: A file viewer showing code that raises: content, not a failure.
LISTING = (
    "[File: /repo/src/app.py (40 lines total)]\n"
    "35:    if value is None:\n"
    '36:        raise RuntimeError("value missing")\n'
    "37:    return value\n"
)


@pytest.mark.parametrize(
    ("output", "status", "facts"),
    [
        (EXPLOIT, None, ""),
        (KATY, None, ""),
        (
            "capture-integration: 48 passed, 0 failed in 12.3s",
            "ok",
            "tests passed: 48 passed, 0 failed in 12.3s",
        ),
        ("48 passed", "ok", "tests passed: 48 passed"),
        (
            "==== 1 failed, 47 passed in 3.1s ====",
            "error",
            "tests failed: 1 failed, 47 passed in 3.1s",
        ),
        (TRACEBACK, "error", "error: TypeError: integer argument expected, got float"),
        (LINT, "error", "error: - E999 IndentationError: unexpected indent"),
        (LISTING, None, ""),
        ("bash: pytset: command not found", "error", None),
        ("grep output\nError: in a log line\n[exit code 0]", "ok", "exit=0"),
        ("nothing printed\nexit code 2", "error", "exit=2"),
        ("<returncode>0</returncode>\n<output>Error: mentioned</output>", "ok", None),
    ],
)
def test_the_status_is_what_the_result_says(output, status, facts):
    assert verdict(output).status == status
    got = output_facts(output)
    if facts is not None:
        assert got == facts
    if status != "error":
        assert "error" not in got


def test_an_editor_refusal_is_an_error_even_when_the_reader_said_ok():
    assert result_status("ok", NO_REPLACEMENT) == "error"
    assert "No replacement was performed" in output_facts(NO_REPLACEMENT)
    # the reader's own error (a non-zero exit code in the metadata) stands
    assert result_status("error", EXPLOIT) == "error"
    assert result_status("unknown", EXPLOIT) == "unknown"
    assert result_status("unknown", "48 passed") == "ok"


def test_zero_failures_is_a_pass():
    assert parse_test_outcome("===== 48 passed, 0 failed in 2s =====") == (
        "passed",
        "48 passed, 0 failed in 2s",
    )
    assert parse_test_outcome("== 0 failed, 2 errors ==")[0] == "failed"


@pytest.mark.skipif(not WARMUP.exists(), reason="needs ../shared/corpora")
def test_the_exploit_that_printed_the_flag_is_not_an_error(load, as_sources, settings):
    (session,) = load(WARMUP)
    ledger = LedgerBuilder(as_sources(session), settings).build()
    text = ledger.session_entry.summary_text
    assert "_curses.error" not in text
    assert "setupterm" not in text
    for result in ledger.session_entry.sections.tool_results:
        assert "error" not in result.facts, result
    outcomes = {(t.resource, t.outcome) for t in ledger.trail}
    assert all(outcome != "error" for _, outcome in outcomes), outcomes
