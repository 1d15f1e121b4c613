"""``ctxledger embed``: fill the vectors the nightly deferred (``jobs.embed``).

Registered on the main Typer app by ``jobs.cli``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxledger.jobs.cli import CatalogOpt, DataPathOpt, WarehouseOpt, app, console
from ctxledger.jobs.embed import DEFAULT_BATCH, run_embed


@app.command()
def embed(
    warehouse: WarehouseOpt = Path("warehouse"),
    batch: Annotated[
        int, typer.Option(help="Texts per model call.", min=1)
    ] = DEFAULT_BATCH,
    limit: Annotated[
        int | None,
        typer.Option(help="At most this many distinct texts this run.", min=1),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(help="Policy YAML (default: the packaged policy).", exists=True),
    ] = None,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Embed evidence chunks committed without a vector, and memories without
    one of the policy's model (``evidence.embedding.mode: deferred``), in one
    snapshot."""
    result = run_embed(
        warehouse,
        policy_file=policy,
        catalog=catalog,
        data_path=data_path,
        batch=batch,
        limit=limit,
    )
    if not result.changed:
        console.print("nothing to embed: every evidence chunk and memory has a vector")
        return
    console.print(
        f"embedded {result.updated:,} chunk(s) ({result.texts:,} distinct "
        f"text(s): {result.embedded:,} through the model, {result.reused:,} "
        f"reused) and {result.memories_updated:,} memory(ies) "
        f"({result.memory_texts:,} distinct text(s)) in snapshot "
        f"{result.snapshot_id} in {result.seconds:.1f}s"
    )
