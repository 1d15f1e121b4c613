"""``ctxledger forget --tenant T --subject S``: erase one subject, history included.

The cascade lives in ``warehouse.erasure.erase_subject`` (memories, rejections,
consent events, the subject's sessions and everything derived from them, the
dead letters attributable to the subject with every quarantined copy of their
raw bytes, ``staging/``, then snapshot expiry, file cleanup and catalog
compaction; docs/security.md); this job runs it and renders the receipt. Run it
with no nightly job writing to the same warehouse.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ctxledger.jobs.version import code_version
from ctxledger.schemas.memory import ErasureReceipt


class NothingToEraseError(LookupError):
    """``forget`` of a tenant or subject the warehouse holds nothing of: a
    typo must not issue a receipt or expire history (``jobs.cli`` exits 2)."""


def _nothing_to_erase(wh, tenant_id: str, subject_id: str, metadata_key: str):
    """Why there is nothing to erase, or None. A subject counts as present
    when any row names it, a session is its (path or metadata), or a dead
    letter is attributable to it (its quarantined bytes included)."""
    from ctxledger.warehouse.memory_api import (
        _attributed_dead_letters,
        subject_sessions,
    )
    from ctxledger.warehouse.scopes import (
        UnknownScope,
        known_tenants,
        subject_known,
        tables_with,
        tenant_known,
    )

    if not tenant_known(wh, tenant_id):
        unknown = UnknownScope("tenant", tenant_id, known_tenants(wh))
        return f"{unknown.message()}: nothing erased, no receipt"
    if subject_known(wh, tenant_id, subject_id):
        return None
    tables = set(tables_with(wh, ["tenant_id"]))
    sessions: list[str] = []
    if "sessions" in tables:
        sessions, _ = subject_sessions(wh, tenant_id, subject_id, metadata_key)
        if sessions:
            return None
    if "dead_letters" in tables and _attributed_dead_letters(
        wh, tenant_id, subject_id, sessions, metadata_key
    ):
        return None
    return (
        f"tenant {tenant_id!r} holds nothing of subject {subject_id!r} (check "
        "the id; an erased subject leaves only its receipt): nothing erased, "
        "no receipt"
    )


def run_forget(
    warehouse: str | Path,
    tenant_id: str,
    subject_id: str,
    *,
    policy_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
) -> ErasureReceipt:
    """Erase ``subject_id`` of ``tenant_id``; return the stored receipt.
    ``NothingToEraseError`` (and no change at all) when the warehouse holds
    nothing of the tenant or the subject.

    Erasures a crash interrupted are finished first; when one of them was this
    subject's, its receipt is the answer (the rows it found are gone now, so
    planning again would find nothing to erase)."""
    from ctxledger.pipelines.redact.registry import load_checked_policy
    from ctxledger.schemas.memory import subject_hash
    from ctxledger.warehouse.catalog import Warehouse
    from ctxledger.warehouse.erasure import erase_subject, finish_pending

    if not tenant_id or not subject_id:
        raise ValueError("--tenant and --subject must not be empty")
    settings = load_checked_policy(policy_file).memory
    hashed = subject_hash(tenant_id, subject_id)
    finished = [
        r
        for r in finish_pending(warehouse, catalog=catalog, data_path=data_path)
        if r.tenant_id == tenant_id and r.subject_hash == hashed
    ]
    if finished:
        return finished[-1]
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        why = _nothing_to_erase(
            wh, tenant_id, subject_id, settings.subject_metadata_key
        )
    if why is not None:
        raise NothingToEraseError(why)
    return erase_subject(
        warehouse,
        tenant_id,
        subject_id,
        catalog=catalog,
        data_path=data_path,
        settings=settings,
        job_version=code_version(),
    )


def print_receipt(receipt: ErasureReceipt, console: Console) -> None:
    """The receipt as a table (no subject id, no text: only counts and ids)."""
    console.print(
        f"[green]erased[/] subject {receipt.subject_hash} of tenant "
        f"{receipt.tenant_id}: {receipt.rows_total} row(s) from "
        f"{receipt.sessions} session(s); receipt {receipt.erasure_id}"
    )
    table = Table(title="rows removed")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for item in receipt.rows:
        table.add_row(item.table, str(item.rows))
    console.print(table)
    expired = receipt.snapshots_expired
    console.print(
        f"history: {len(expired)} snapshot(s) expired"
        + (f" ({expired[0]}..{expired[-1]})" if expired else "")
        + f", {receipt.files_deleted} file(s) deleted, "
        f"{receipt.quarantine_files_deleted} quarantine file(s) deleted, "
        f"catalog compacted: {'yes' if receipt.catalog_compacted else 'no'}"
    )
    if receipt.note:
        console.print(f"note: {receipt.note}")
