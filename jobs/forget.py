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

    Erasures a crash interrupted are finished first; when one of them was this
    subject's, its receipt is the answer (the rows it found are gone now, so
    planning again would find nothing to erase)."""
    from ctxledger.schemas.memory import subject_hash
    from ctxledger.schemas.policy import load_policy
    from ctxledger.warehouse.erasure import erase_subject, finish_pending

    if not tenant_id or not subject_id:
        raise ValueError("--tenant and --subject must not be empty")
    hashed = subject_hash(tenant_id, subject_id)
    finished = [
        r
        for r in finish_pending(warehouse, catalog=catalog, data_path=data_path)
        if r.tenant_id == tenant_id and r.subject_hash == hashed
    ]
    if finished:
        return finished[-1]
    return erase_subject(
        warehouse,
        tenant_id,
        subject_id,
        catalog=catalog,
        data_path=data_path,
        settings=load_policy(policy_file).memory,
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
