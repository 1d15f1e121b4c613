"""Leak scan: which planted values survive anywhere in a warehouse.

Scans every string (nested ones too) of every table through DuckDB, every Parquet
file under the data path decoded with pyarrow, and the quarantine-free dead letters.
Used by the labelled leak test and ``python -m eval.leaks WAREHOUSE GOLD.json``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded row (dicts and lists walked)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def warehouse_strings(root: str | Path) -> Iterator[str]:
    """Every string value in every table and every Parquet data file."""
    from ctxledger.warehouse import Warehouse

    root = Path(root)
    with Warehouse.open(root) as wh:
        for table in wh.row_counts():
            rows = wh.query(f"SELECT * FROM {table}").arrow().read_all().to_pylist()
            for row in rows:
                yield from strings(row)
        data_path = Path(wh.data_path)
    for path in sorted(data_path.rglob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            yield from strings(row)


def find_leaks(texts: Iterable[str], gold: list[dict]) -> list[dict]:
    """Gold items whose value occurs in any of ``texts``."""
    blob = "\n".join(texts)
    return [item for item in gold if item["value"] in blob]


def main() -> None:
    root, gold_path = sys.argv[1], sys.argv[2]
    gold = json.loads(Path(gold_path).read_text())
    leaks = find_leaks(warehouse_strings(root), gold)
    total = Counter(g["family"] for g in gold)
    leaked = Counter(g["family"] for g in leaks)
    for family in sorted(total):
        print(f"{family:16s} leaked {leaked[family]:4d} / {total[family]:4d}")
    print(f"{'all':16s} leaked {len(leaks):4d} / {len(gold):4d}")


if __name__ == "__main__":
    main()
