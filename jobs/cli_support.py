"""What makes the ``ctxledger`` CLI hard to misdirect, kept apart from the commands.

* ``OneLineErrorsGroup``: a usage error (a typo'd option, a missing value) exits 2
  with ONE line on stderr, the same under a scheduler as in a terminal.
* ``BeamCommand``: the jobs that run Beam (nightly, backfill, stream) take their own
  options before ``--`` and Beam's after it. An unknown option before ``--`` is an
  error, unless it is a real Beam ``PipelineOptions`` flag (the old syntax): then it
  still works, with a deprecation warning. After ``--`` only Beam flags are
  accepted: Beam itself would silently discard a misspelt one and run on the
  DirectRunner.
* ``warehouse_default``: ``-w`` > ``CTXLEDGER_WAREHOUSE`` > ``ctxledger.toml`` >
  ``./warehouse``.
* ``write_records``: ``-o json`` (one JSON array) and ``-o jsonl`` (one object per
  line) for every read command, written as plain text, never through rich.
* ``job_progress``: a spinner on a terminal, one timestamped line per step otherwise.
"""

from __future__ import annotations

import json
import math
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

import typer

# typer (0.26+) vendors its own click: its exceptions and context are these,
# not the ``click`` package's.
from typer._click.core import Context, ParameterSource
from typer._click.exceptions import ClickException, UsageError
from typer.core import TyperCommand, TyperGroup

#: The environment variable naming the default warehouse folder.
WAREHOUSE_ENV = "CTXLEDGER_WAREHOUSE"
#: A project file (searched from the working directory upwards) with
#: ``warehouse = "path"`` (relative to the file) at the top or under ``[ctxledger]``.
CONFIG_FILE = "ctxledger.toml"


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


class OneLineErrorsGroup(TyperGroup):
    """The app's group: usage errors become one ``error:`` line and exit 2.

    typer's default is a rich panel with the usage and a hint over several lines,
    which a cron mail or a CI log shows badly; the reason is all that matters.
    """

    def main(self, *args: Any, standalone_mode: bool = True, **extra: Any) -> Any:
        """Run the CLI; in standalone mode, print usage errors on one line."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **extra)
        try:
            code = super().main(*args, standalone_mode=False, **extra)
        except ClickException as exc:
            where = exc.ctx.command_path + ": " if getattr(exc, "ctx", None) else ""
            typer.echo(f"error: {where}{_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        # Non-standalone click returns the code of an explicit ``Exit``, else the
        # command's return value (None for every command here).
        sys.exit(code if isinstance(code, int) else 0)


@lru_cache(maxsize=1)
def beam_flags() -> dict[str, bool]:
    """Every flag Beam's ``PipelineOptions`` classes define -> whether it takes a
    value. Built the way ``PipelineOptions.get_all_options`` builds its parser;
    imported lazily (about a second) and only when a command has Beam flags."""
    import logging

    # Beam's import logs an apitools warning on the root logger: keep the
    # CLI's error to its one line.
    logging.disable(logging.WARNING)
    try:
        from apache_beam.options.pipeline_options import (
            PipelineOptions,
            _BeamArgumentParser,
        )

        register_runner_options()
    finally:
        logging.disable(logging.NOTSET)

    parser = _BeamArgumentParser(allow_abbrev=False)
    classes: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)  # noqa: SLF001 - as Beam itself does
    return {
        flag: action.nargs != 0
        for flag, action in parser._option_string_actions.items()  # noqa: SLF001
        if flag.startswith("--") and flag != "--help"
    }


#: Modules that define the option classes of every runner Beam ships, imported
#: before the strict check so their flags are known. Flink, Spark, Portable,
#: job server and Dataflow (``GoogleCloudOptions``) live in Beam's
#: ``pipeline_options``; the Dask runner keeps its ``DaskOptions`` in its own
#: module, which nothing imports unless a pipeline runs on it.
RUNNER_OPTION_MODULES = (
    "apache_beam.options.pipeline_options",
    "apache_beam.runners.dask.dask_runner",
    "ctxledger.jobs.dask_compat",  # --dask_no_worker_timeout
)


def register_runner_options() -> list[str]:
    """Import ``RUNNER_OPTION_MODULES`` so their ``PipelineOptions`` subclasses
    exist; returns the modules that could not be imported (the Dask runner
    needs ``dask[distributed]``, an optional extra: without it its flags stay
    unknown, and a run on it says what to install)."""
    import importlib

    missing = []
    for name in RUNNER_OPTION_MODULES:
        try:
            importlib.import_module(name)
        except (ImportError, AttributeError):  # dask_runner without distributed
            missing.append(name)
    return missing


def split_beam_args(
    args: list[str], own: set[str], warn: Callable[[str], None]
) -> tuple[list[str], list[str]]:
    """``(own args, Beam args)`` of a command line.

    ``own`` are the command's option names. Beam flags are what follows ``--``;
    a Beam flag before ``--`` is moved there with a deprecation ``warn``ing (with
    its value when written as two words). Anything else stays with the command,
    so click rejects an unknown option. Beam flags after ``--`` must exist.
    """
    if "--" in args:
        cut = args.index("--")
        head, beam = list(args[:cut]), list(args[cut + 1 :])
    else:
        head, beam = list(args), []
    kept: list[str] = []
    moved: list[str] = []
    i = 0
    while i < len(head):
        arg = head[i]
        name = arg.split("=", 1)[0]
        if arg.startswith("--") and name not in own and name in beam_flags():
            moved.append(arg)
            takes_value = beam_flags()[name]
            if "=" not in arg and takes_value and i + 1 < len(head):
                if not head[i + 1].startswith("-"):
                    moved.append(head[i + 1])
                    i += 1
            i += 1
            continue
        kept.append(arg)
        i += 1
    if moved:
        warn(
            "Beam flags before '--' are deprecated; write them after it: "
            f"... -- {' '.join(moved)}"
        )
    for arg in beam:
        name = arg.split("=", 1)[0]
        if arg.startswith("-") and name not in beam_flags():
            raise UsageError(
                f"unknown Beam option {name!r} after '--' (not a flag of Beam's "
                "PipelineOptions; Beam would drop it silently)"
            )
    return kept, moved + beam


class BeamCommand(TyperCommand):
    """A job command: its own options, then ``--`` and Beam's (``ctx.args``)."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """Split off Beam's flags so click sees only the command's own options."""
        own = {o for p in self.params for o in (*p.opts, *p.secondary_opts)}
        if not args or any(a in ctx.help_option_names for a in args):
            return super().parse_args(ctx, args)
        try:
            kept, beam = split_beam_args(
                list(args), own, lambda msg: typer.echo(f"warning: {msg}", err=True)
            )
        except UsageError as exc:
            exc.ctx = ctx  # the error line names the command
            raise
        rest = super().parse_args(ctx, kept)
        stray = list(ctx.args)
        if stray:
            raise UsageError(
                f"unexpected argument(s) {' '.join(map(repr, stray))}; "
                "Beam flags go after '--'",
                ctx,
            )
        ctx.args = beam
        return rest


BEAM_COMMAND = {"cls": BeamCommand, "context_settings": {"allow_extra_args": True}}


def find_config(start: Path) -> Path | None:
    """The nearest ``ctxledger.toml`` in ``start`` or a folder above it."""
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


def configured_warehouse(start: Path | None = None) -> Path | None:
    """The warehouse a ``ctxledger.toml`` names, relative to that file."""
    found = find_config(Path.cwd() if start is None else start)
    if found is None:
        return None
    try:
        data = tomllib.loads(found.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise typer.BadParameter(f"{found}: {exc}") from exc
    value = data.get("ctxledger", {}).get("warehouse", data.get("warehouse"))
    if value is None:
        return None
    if not isinstance(value, str):
        raise typer.BadParameter(f"{found}: warehouse must be a string path")
    return (found.parent / value).resolve()


def warehouse_default(
    ctx: typer.Context, param: typer.CallbackParam, value: Path
) -> Path:
    """``--warehouse``: the flag, else ``CTXLEDGER_WAREHOUSE`` (click reads it),
    else ``ctxledger.toml``, else ``./warehouse``."""
    if ctx.get_parameter_source(param.name or "warehouse") is ParameterSource.DEFAULT:
        configured = configured_warehouse()
        if configured is not None:
            return configured
    return value


class ReadOutput(StrEnum):
    """Output of the read commands (``runs``, ``dead-letters``, ``memories``)."""

    table = "table"
    json = "json"
    jsonl = "jsonl"


def _jsonable(value: Any) -> Any:
    """Strict JSON values: NaN/inf become null, the rest as ``json`` or ``str``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def write_records(records: Iterable[Mapping[str, Any]], output: str) -> None:
    """Write ``records`` to stdout: ``json`` one array, ``jsonl`` one per line."""
    out = sys.stdout
    if output == "jsonl":
        for record in records:
            out.write(json.dumps(_jsonable(record), allow_nan=False) + "\n")
    else:
        out.write(json.dumps(_jsonable(list(records)), allow_nan=False, indent=1))
        out.write("\n")
    out.flush()


@contextmanager
def job_progress(console, err_console, label: str) -> Iterator[Callable[[str], None]]:
    """A progress callback: a spinner on a terminal; in a pipe or a log file, one
    timestamped line per step on stderr as it happens (not at the end)."""
    if console.is_terminal:
        with console.status(label, spinner="dots") as status:
            yield status.update
        return

    def log(message: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        err_console.print(f"{stamp} {message}", markup=False, highlight=False)

    log(label)
    yield log


class _BeamImportNoise:
    """Drops Beam's import-time ``apitools not found`` warning: Beam logs it on
    the root logger whenever the optional GCP client is absent (always, here),
    and it would otherwise open every run's log with a false alarm."""

    def filter(self, record: object) -> bool:
        return not str(getattr(record, "msg", "")).startswith("apitools not found")


def quiet_beam_import_noise() -> None:
    """Install the filter on the root logger once (idempotent)."""
    import logging

    root = logging.getLogger()
    if not any(isinstance(f, _BeamImportNoise) for f in root.filters):
        root.addFilter(_BeamImportNoise())
