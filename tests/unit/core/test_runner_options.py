"""Every runner Beam ships is usable by its documented flags after ``--``
(``jobs.cli_support.beam_flags``), and a typo'd one still fails on one line."""

from __future__ import annotations

import pytest
from typer._click.exceptions import UsageError

from ctxledger.jobs.cli_support import beam_flags, split_beam_args


@pytest.mark.parametrize(
    "flags",
    [
        ["--runner=DaskRunner", "--dask_client_address=127.0.0.1:8786"],
        ["--dask_scheduler_file=/tmp/s.json", "--dask_no_worker_timeout=30"],
        ["--runner=FlinkRunner", "--flink_master=localhost:8081"],
        ["--runner=SparkRunner", "--spark_master_url=spark://h:7077"],
        ["--runner=PortableRunner", "--job_endpoint=localhost:8099"],
        ["--environment_type=EXTERNAL", "--environment_config=127.0.0.1:50000"],
        ["--runner=DataflowRunner", "--project=p", "--region=europe-west1"],
    ],
)
def test_runner_flags_pass_the_strict_check(flags):
    kept, beam = split_beam_args(["--", *flags], set(), lambda _msg: None)
    assert kept == [] and beam == flags


def test_dask_flags_are_registered():
    assert {"--dask_client_address", "--dask_npartitions"} <= set(beam_flags())


def test_a_typo_still_fails_on_one_line():
    with pytest.raises(UsageError) as err:
        split_beam_args(
            ["--", "--dask_client_adress=127.0.0.1:8786"], set(), lambda _m: None
        )
    message = err.value.format_message()
    assert "--dask_client_adress" in message and "\n" not in message
