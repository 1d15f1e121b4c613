"""Which tenants, purposes and subjects a warehouse knows: a typo is an error.

``memories --tenant acmee`` used to print an empty list with rc 0, and
``forget`` of an unknown tenant issued a receipt (and expired snapshots).
These lookups tell "nothing stored for this scope" from "no such scope";
callers run them only when an answer came back empty, so a hit pays nothing.
Every query reads the lake's base tables (not the analysts' views) that have
the columns asked about, so a table added later is covered without a list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ctxledger.warehouse.catalog import LAKE_ALIAS, Warehouse


@dataclass(frozen=True)
class UnknownScope:
    """A tenant or purpose the warehouse (and policy) does not know.
    ``known``: the values it does know, for a caller allowed to see them."""

    field: str
    value: str
    known: tuple[str, ...]

    def message(self, name_known: bool = True) -> str:
        """One line; ``name_known=False`` leaves the known values out (an HTTP
        caller scoped to one tenant must not learn other tenants' names)."""
        text = f"unknown {self.field} {self.value!r}"
        if name_known:
            listed = ", ".join(self.known) if self.known else "none"
            text += f"; known {self.field}s: {listed}"
        return text


def tables_with(wh: Warehouse, columns: Iterable[str]) -> list[str]:
    """Base tables of the lake that have every one of ``columns``."""
    wanted = sorted(set(columns))
    rows = wh.query(
        "SELECT c.table_name FROM information_schema.columns c "
        "JOIN information_schema.tables t ON t.table_catalog = c.table_catalog "
        "AND t.table_schema = c.table_schema AND t.table_name = c.table_name "
        "WHERE c.table_catalog = ? AND c.table_schema = 'main' "
        "AND t.table_type = 'BASE TABLE' AND c.column_name IN "
        f"({', '.join('?' for _ in wanted)}) "
        "GROUP BY c.table_name HAVING count(DISTINCT c.column_name) = ? "
        "ORDER BY c.table_name",
        [LAKE_ALIAS, *wanted, len(wanted)],
    ).fetchall()
    return [name for (name,) in rows]


def _any_row(wh: Warehouse, tables: list[str], where: str, params: list) -> bool:
    return any(
        wh.query(f'SELECT 1 FROM "{t}" WHERE {where} LIMIT 1', params).fetchone()
        for t in tables
    )


def known_tenants(wh: Warehouse) -> tuple[str, ...]:
    """Every tenant with a row in any table (sorted)."""
    tables = tables_with(wh, ["tenant_id"])
    if not tables:
        return ()
    union = " UNION ".join(f'SELECT DISTINCT tenant_id FROM "{t}"' for t in tables)
    rows = wh.query(f"SELECT tenant_id FROM ({union}) WHERE tenant_id IS NOT NULL "
                    "ORDER BY 1").fetchall()  # fmt: skip
    return tuple(tenant for (tenant,) in rows)


def tenant_known(wh: Warehouse, tenant_id: str) -> bool:
    return _any_row(wh, tables_with(wh, ["tenant_id"]), "tenant_id = ?", [tenant_id])


def known_purposes(
    wh: Warehouse, tenant_id: str, policy_purposes: Iterable[str] = ()
) -> tuple[str, ...]:
    """The policy's purposes and every purpose stored for ``tenant_id``."""
    found = set(policy_purposes)
    for table in tables_with(wh, ["tenant_id", "purpose"]):
        rows = wh.query(
            f'SELECT DISTINCT purpose FROM "{table}" WHERE tenant_id = ?', [tenant_id]
        ).fetchall()
        found.update(p for (p,) in rows if p)
    return tuple(sorted(found))


def memory_scope_problem(
    wh: Warehouse, tenant_id: str, purpose: str, policy_purposes: Iterable[str]
) -> UnknownScope | None:
    """Why a memories lookup for ``tenant_id`` and ``purpose`` cannot match:
    an unknown tenant, else an unknown purpose; None when both are known."""
    policy_purposes = tuple(policy_purposes)
    if not tenant_known(wh, tenant_id):
        return UnknownScope("tenant", tenant_id, known_tenants(wh))
    if purpose in policy_purposes:  # the common case: no scan of the rows
        return None
    purposes = known_purposes(wh, tenant_id, policy_purposes)
    if purpose not in purposes:
        return UnknownScope("purpose", purpose, purposes)
    return None


def subject_known(wh: Warehouse, tenant_id: str, subject_id: str) -> bool:
    """Whether any row names ``subject_id`` of ``tenant_id`` in a
    ``subject_id`` column. Sessions that carry their subject only in their
    path or metadata are the caller's to check (``memory_api.subject_sessions``)."""
    tables = tables_with(wh, ["tenant_id", "subject_id"])
    return _any_row(
        wh, tables, "tenant_id = ? AND subject_id = ?", [tenant_id, subject_id]
    )
