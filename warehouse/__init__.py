"""The warehouse: a DuckLake catalog over Parquet, and the query API over it."""

from ctxledger.warehouse.catalog import Warehouse, WarehouseError

__all__ = ["Warehouse", "WarehouseError"]
