"""The warehouse: a DuckLake catalog over Parquet, its tables, commits, lifecycle
and erasure. Context builders read it through ``ctxledger.serving``
(``ctxledger.Context``), which this package never imports."""

from ctxledger.warehouse.catalog import Warehouse, WarehouseError

__all__ = ["Warehouse", "WarehouseError"]
