"""``ctxledger serve`` (HTTP JSON API) and ``ctxledger mcp`` (MCP over stdio).

Registered on the main Typer app by ``jobs.cli``. Both open a
``serving.Context``: it reads committed snapshots from a private copy of the
catalog, so a running server never locks out the nightly (docs/serving.md).
The servers' own packages (fastapi, uvicorn, mcp) are imported only here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ctxledger.jobs.cli import CatalogOpt, DataPathOpt, WarehouseOpt, app
from ctxledger.serving.limits import MAX_BODY_BYTES

TOKEN_ENV = "CTXLEDGER_TOKEN"

TokensOpt = Annotated[
    Path,
    typer.Option(
        "--tokens",
        envvar="CTXLEDGER_TOKENS",
        exists=True,
        dir_okay=False,
        help="Token file: bearer token (or its sha256) -> tenant, groups, subjects.",
    ),
]
PolicyOpt = Annotated[
    Path | None,
    typer.Option(help="Policy YAML (default: the packaged policy).", exists=True),
]
PollOpt = Annotated[
    float,
    typer.Option(help="Seconds between checks for a newly committed snapshot."),
]


@app.command()
def serve(
    tokens: TokensOpt,
    warehouse: WarehouseOpt = Path("warehouse"),
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8080,
    policy: PolicyOpt = None,
    poll: PollOpt = 0.5,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes, each with its own snapshot copy and index "
            "(default: the CPU cores this process may use).",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int,
        typer.Option(min=1, help="Largest request body accepted (else 413)."),
    ] = MAX_BODY_BYTES,
    rate_limit: Annotated[
        float,
        typer.Option(
            min=0,
            help="Requests per second per token in each worker (else 429 with "
            "Retry-After); 0: no limit.",
        ),
    ] = 0.0,
    rate_burst: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Requests a token may send at once (default: one second's worth).",
        ),
    ] = None,  # fmt: skip
) -> None:
    """Serve /memories, /search, /pack and /health as an HTTP JSON API
    (OpenAPI at /openapi.json, docs at /docs); never blocks the nightly."""
    from ctxledger.serving import Context
    from ctxledger.serving.auth import Tokens
    from ctxledger.serving.http import serve as run_http
    from ctxledger.serving.http import serve_workers
    from ctxledger.serving.limits import Limits

    limits = Limits(max_body_bytes, rate_limit, rate_burst)
    table = Tokens.load(tokens)
    if workers is None:  # the cores this process may use (all where unknown)
        affinity = getattr(os, "sched_getaffinity", None)
        workers = len(affinity(0)) if affinity else os.cpu_count() or 1
    if workers > 1:
        serve_workers(
            str(warehouse), str(tokens), workers=workers, host=host, port=port,
            limits=limits, catalog=catalog, data_path=data_path,
            policy_file=policy, poll_s=poll,
        )  # fmt: skip
        return
    with Context.open(
        warehouse, catalog=catalog, data_path=data_path, policy_file=policy,
        poll_s=poll,
    ) as context:  # fmt: skip
        run_http(context, table, host=host, port=port, limits=limits)


@app.command()
def mcp(
    tokens: TokensOpt,
    warehouse: WarehouseOpt = Path("warehouse"),
    policy: PolicyOpt = None,
    poll: PollOpt = 0.5,
    catalog: CatalogOpt = None,
    data_path: DataPathOpt = None,
) -> None:
    """Serve the memories, search and pack tools over MCP on stdin/stdout; the
    caller's bearer token comes from $CTXLEDGER_TOKEN."""
    from ctxledger.serving import Context
    from ctxledger.serving.auth import Tokens
    from ctxledger.serving.mcp import run_stdio

    principal = Tokens.load(tokens).principal(os.environ.get(TOKEN_ENV))
    with Context.open(
        warehouse, catalog=catalog, data_path=data_path, policy_file=policy,
        poll_s=poll,
    ) as context:  # fmt: skip
        run_stdio(context, principal)
