"""Hand-made staged shards and landing rows for the commit-race tests (the
local-catalog ones in tests/unit/core and the Postgres ones in tests/e2e).

Importable as ``staged_rows``: pytest puts this folder on ``sys.path`` for
``tests/conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from ctxledger.schemas import LandingFile, Session
from ctxledger.schemas.arrow import to_table


def staged_sessions(tmp_path: Path, name: str, ids: range) -> str:
    """A ``sessions`` shard of run ``name`` with ids ``ses_<i>`` for ``ids``."""
    path = tmp_path / "staging" / name / "sessions" / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [session(i, name).row() for i in ids]
    pq.write_table(to_table(Session, rows), path)
    return str(path)


def session(i: int, name: str) -> Session:
    """Session ``ses_<i>`` of the file (and run) ``name``."""
    return Session(
        session_id=f"ses_{i}",
        tenant_id="t",
        source_format="canonical",
        source_file=f"{name}.jsonl",
        source_hash=name,
        run_id=name,
    )


def landing_row(name: str) -> dict:
    """A processed ``landing_files`` row for the file (and run) ``name``."""
    return LandingFile(
        file_hash=name,
        path=f"{name}.jsonl",
        tenant_id="t",
        size_bytes=1,
        status="processed",
        run_id=name,
    ).row()
