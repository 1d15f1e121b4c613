"""Every table of a warehouse as comparable digests: row counts and a hash of
each table's sorted rows, wall-clock columns left out (they differ between any
two runs), floats rounded (embedding bits differ with batch composition).

Importable as ``table_digest`` (pytest puts this folder on ``sys.path``): the
distributed-runner tests compare a DaskRunner or EXTERNAL-worker run with a
DirectRunner run of the same landing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ctxledger.warehouse import Warehouse
from ctxledger.warehouse.tables import TABLES

#: Columns that hold when a run happened, not what it computed (stamped from
#: the run's start or the commit's clock), per table.
WALL_CLOCK = {
    "compression_ledger": {"created_at"},
    "memories": {"created_at", "valid_from", "recorded_at", "expires_at"},
    "memory_rejections": {"recorded_at"},
    "documents": {"effective_from"},
    "evidence_chunks": {"effective_from"},
    "sources": {"loaded_at"},
}
#: Float vectors: their last bits differ with batch composition, so they are
#: compared apart (``vectors``) with a tolerance, not hashed.
VECTORS = frozenset({"embedding"})
#: Tables about the run itself (its runner name, its timings), not its data.
RUN_TABLES = frozenset({"runs"})


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items())}
    return value


def _rows(wh, table: str) -> list[tuple[str, dict[str, Any]]]:
    """``(canonical JSON of the row less wall clock and vectors, vectors)``."""
    cursor = wh.query(f"SELECT * FROM {table}")  # noqa: S608 - our table names
    names = [d[0] for d in cursor.description]
    skip = WALL_CLOCK.get(table, set()) | VECTORS
    out = []
    for row in cursor.fetchall():
        values = dict(zip(names, row, strict=True))
        body = {n: _canonical(v) for n, v in values.items() if n not in skip}
        vectors = {n: values[n] for n in VECTORS if n in values}
        out.append((json.dumps(body, sort_keys=True, default=str), vectors))
    return sorted(out, key=lambda r: r[0])


def table_digests(warehouse: Path, **where: Any) -> dict[str, tuple[int, str]]:
    """``{table: (rows, sha256 of its sorted canonical rows)}``; ``where``:
    ``Warehouse.open``'s ``catalog``/``data_path`` (a shared catalog)."""
    out: dict[str, tuple[int, str]] = {}
    with Warehouse.open(warehouse, **where) as wh:
        for table in TABLES:
            if table in RUN_TABLES:
                continue
            rows = [body for body, _ in _rows(wh, table)]
            digest = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
            out[table] = (len(rows), digest)
    return out


def max_vector_gap(left: Path, right: Path, **where: Any) -> float:
    """The largest absolute difference between matching vectors of two
    warehouses (rows matched by everything else they hold); ``where``: the
    right one's ``catalog``/``data_path``."""
    gap = 0.0
    with Warehouse.open(left) as a, Warehouse.open(right, **where) as b:
        for table in TABLES:
            if table in RUN_TABLES:
                continue
            mine, theirs = _rows(a, table), _rows(b, table)
            for (_, va), (_, vb) in zip(mine, theirs, strict=True):
                for name, vector in va.items():
                    other = vb[name]
                    if vector is None or other is None:
                        assert vector is other, (table, name)
                        continue
                    gap = max(
                        gap, max(abs(x - y) for x, y in zip(vector, other, strict=True))
                    )
    return gap
