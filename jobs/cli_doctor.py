"""``ctxledger doctor``: finish what a crash left half done in a warehouse.

Today: erasures interrupted mid-way (``kill -9``, a power cut), whose durable
journal (``warehouse.erasure``) says what is still to delete; each is finished
and its receipt stored, exactly as the next ``forget`` or ``nightly`` would.
Registered on the main Typer app by ``jobs.cli``.
"""

from __future__ import annotations

from pathlib import Path

from ctxledger.jobs.cli import CatalogOpt, DataPathOpt, WarehouseOpt, app, console


@app.command()
def doctor(
    warehouse: WarehouseOpt = Path("warehouse"),
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Finish interrupted erasures (their journals) and store their receipts."""
    from ctxledger.warehouse.erasure import finish_pending, pending_journals

    pending = pending_journals(warehouse)
    if not pending:
        console.print("nothing to repair: no unfinished erasure")
        return
    receipts = finish_pending(warehouse, catalog=catalog, data_path=data_path)
    for receipt in receipts:
        console.print(
            f"[green]finished[/] erasure {receipt.erasure_id} of tenant "
            f"{receipt.tenant_id}: {receipt.rows_total} row(s), "
            f"{receipt.quarantine_files_deleted} quarantine file(s) deleted"
        )
    left = len(pending_journals(warehouse))
    if left:
        console.print(f"{left} erasure(s) are being finished by another process")
