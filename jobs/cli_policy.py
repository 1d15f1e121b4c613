"""``ctxledger policy check FILE``: the effective policy and its version.

Registered on the main Typer app by ``jobs.cli``. The check is the one every
job runs when it loads a policy (``pipelines.redact.registry.
load_checked_policy``): a bad file exits 1 with one ``file:line: ...`` line per
problem on stderr, so an operator can check a policy before a nightly or a
backfill uses it. ``stale_lines`` is what ``ctxledger runs`` prints about
history derived under another detector or policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from ctxledger.jobs.cli import app, console, err_console

policy_app = typer.Typer(
    help="Check a policy file before a job uses it.", no_args_is_help=True
)
app.add_typer(policy_app, name="policy")


@policy_app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="The policy YAML to check.")],
) -> None:
    """Print the effective policy (every default filled in) and its version;
    exit 1 with one line per problem when the file must not be used."""
    from ctxledger.pipelines.redact.registry import (  # noqa: PLC0415
        load_checked_policy,
    )
    from ctxledger.schemas.policy import PolicyError  # noqa: PLC0415

    try:
        policy = load_checked_policy(file)
    except PolicyError as exc:
        for line in exc.problems:
            err_console.print(
                f"[bold red]error:[/] {line}", highlight=False, soft_wrap=True
            )
        raise typer.Exit(code=1) from None
    header = (
        f"# policy {policy.name} from {file}\n"
        f"# policy_version: {policy.policy_version}\n"
        f"# policy hash: {policy.content_hash}\n"
        f"# detector: {policy.detector}\n"
        f"# entities: {', '.join(sorted(policy.entity_types))}\n"
    )
    body = yaml.safe_dump(
        policy.model_dump(mode="json"), sort_keys=False, allow_unicode=True
    )
    console.print(header + body, markup=False, highlight=False, soft_wrap=True)


def stale_lines(history) -> list[str]:
    """``jobs.backfill.StaleHistory`` as lines for ``ctxledger runs`` (none
    when every landing file was last derived under the current version)."""
    lines = []
    for runs, why in (
        (history.other_detector, "with another detector"),
        (history.other_policy, "under another policy"),
    ):
        if not runs:
            continue
        files = sum(n for _, n in runs.values())
        shown = ", ".join(
            f"{run} ({version or 'unversioned'})"
            for run, (version, _) in sorted(runs.items())[:5]
        )
        more = f", +{len(runs) - 5} more" if len(runs) > 5 else ""
        lines.append(
            f"stale history: rows of {files} landing file(s) from {len(runs)} "
            f"run(s) were redacted {why} than {history.current}: {shown}{more}"
        )
    if lines:
        lines.append(
            "  `ctxledger backfill --stale --policy FILE` re-derives exactly those"
        )
    return lines
