"""The README's Python snippets run as written (issue 32, item 8).

Every ```python block of README.md is executed, in order, against a small
real warehouse standing in for its ``"W"``: a name the README imports from
``ctxledger`` that the package does not export (``PackRequest`` was one)
fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from test_serve import seed_memories

import ctxledger

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_every_readme_python_block_runs(tmp_path):
    blocks = BLOCK.findall((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    wh = tmp_path / "wh"
    seed_memories(wh)
    for block in blocks:
        code = block.replace('"W"', repr(str(wh)))
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102


def test_a_context_builders_names_import_from_the_package():
    for name in ctxledger.__all__:
        assert getattr(ctxledger, name).__name__ == name
    from ctxledger import PackRequest

    assert PackRequest(tenant_id="t", query="q", window_tokens=10).budget_tokens == 10
