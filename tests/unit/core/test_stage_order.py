"""Every stage a pipeline step times has its place in ``STAGE_ORDER``, so run
reports list stages in pipeline order instead of appending unknown ones."""

from __future__ import annotations

import re
from pathlib import Path

from ctxledger.pipelines.timing import STAGE_ORDER

ROOT = Path(__file__).resolve().parents[3]


def test_every_timed_stage_is_ordered():
    timed = {
        match
        for path in (ROOT / "pipelines").rglob("*.py")
        for match in re.findall(r'@timed\("([a-z_]+)"\)', path.read_text())
    }
    assert {"redact", "memory_gate", "memory_embed"} <= timed
    assert sorted(timed - set(STAGE_ORDER)) == []
    # the memory vectors are computed after the gate, before evidence
    assert STAGE_ORDER.index("memory_gate") + 1 == STAGE_ORDER.index("memory_embed")
