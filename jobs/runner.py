"""The Beam pipeline a job runs its graph in, and the runner behind it.

Why not Beam's ``DirectRunner`` as it comes: since Beam 2.6x its
``SwitchingDirectRunner`` first tries the Prism runner for any pipeline Prism
supports, and Prism is a Go binary that Beam *downloads from GitHub at run
time* (``prism_runner.PrismJobServer``) and then executes. Measured on the
nightly graph (Beam 2.77): offline, every run logged "Downloading prism from
https://github.com/...", failed on name resolution and fell back to the
FnApiRunner; on a machine with network access the nightly would fetch and run
that binary instead, where the ``--direct_num_workers`` and
``--direct_running_mode`` flags do not apply, and where a firewall that drops
packets makes the attempt hang until the connection times out. A data
pipeline that handles PII must not fetch and execute code from the internet,
and its runner must not depend on whether the network answers.

So for the local DirectRunner (no ``--runner``, or ``--runner=DirectRunner``)
``beam_pipeline`` runs the graph on the FnApiRunner directly, as the
DirectRunner's own fallback does (the same provision info, so worker
processes get the pipeline options); every other runner (Flink, Spark,
Dataflow, Portable, Prism named on purpose) is Beam's to resolve.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxledger.pipelines.models import beam_flag, quiet_worker_args

#: ``--runner`` values that mean Beam's local DirectRunner.
DIRECT_RUNNERS = ("DirectRunner", "SwitchingDirectRunner")


def runner_flag(beam_args: Sequence[str]) -> str | None:
    """The last ``--runner`` value of ``beam_args`` (None when absent)."""
    return beam_flag(beam_args, "runner")


def runner_name(beam_args: Sequence[str]) -> str:
    """The runner a job reports (runs table, progress): the named one, else
    ``DirectRunner``."""
    return runner_flag(beam_args) or "DirectRunner"


def uses_local_direct_runner(beam_args: Sequence[str]) -> bool:
    """True when the job runs on the local DirectRunner (no runner named, or
    the DirectRunner by name, also as a dotted path)."""
    name = runner_flag(beam_args)
    return name is None or name.rsplit(".", 1)[-1] in DIRECT_RUNNERS


def fn_api_runner(options: Any) -> Any:
    """The FnApiRunner as the DirectRunner builds it for its fallback: the
    encoded pipeline options in the provision info its workers read."""
    from apache_beam.portability.api import beam_provision_api_pb2  # noqa: PLC0415
    from apache_beam.runners.portability.fn_api_runner import (  # noqa: PLC0415
        fn_runner,
    )
    from apache_beam.runners.portability.portable_runner import (  # noqa: PLC0415
        JobServiceHandle,
    )

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(info))


def beam_pipeline(beam_args: Sequence[str]) -> Any:
    """A ``beam.Pipeline`` for the job's Beam flags: local worker processes
    quiet (``pipelines.models.quiet_worker_args``), and the local DirectRunner
    pinned to its FnApiRunner (the module docstring says why)."""
    import apache_beam as beam  # noqa: PLC0415
    from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415

    if is_dask_runner(runner_flag(beam_args)):
        return dask_pipeline(beam_args)
    options = PipelineOptions(quiet_worker_args(beam_args))
    if uses_local_direct_runner(beam_args):
        return beam.Pipeline(runner=fn_api_runner(options), options=options)
    return beam.Pipeline(options=options)


def is_dask_runner(name: str | None) -> bool:
    """Whether a ``--runner`` value names the DaskRunner (short or dotted)."""
    return bool(name) and name.rsplit(".", 1)[-1] == "DaskRunner"


def dask_pipeline(beam_args: Sequence[str]) -> Any:
    """A pipeline on ctxledger's DaskRunner (``jobs.dask_compat``: Beam's, with
    its tag routing and ``finish_bundle`` defects fixed). ``DaskRunner`` is
    accepted by its short name; Beam 2.77 knows only the dotted one."""
    import apache_beam as beam  # noqa: PLC0415
    from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415

    try:
        from ctxledger.jobs.dask_compat import (  # noqa: PLC0415
            BEAM_DASK_RUNNER,
            CompatDaskRunner,
        )
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            "the DaskRunner needs dask[distributed] (pip install "
            f"'apache-beam[dask]'): {exc}"
        ) from exc
    args, skip = [], False
    for arg in beam_args:
        if skip or arg.startswith("--runner="):
            skip = False
            continue
        if arg == "--runner":
            skip = True
            continue
        args.append(arg)
    args.append(f"--runner={BEAM_DASK_RUNNER}")
    return beam.Pipeline(runner=CompatDaskRunner(), options=PipelineOptions(args))
