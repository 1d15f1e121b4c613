"""The jobs' Beam pipeline (``jobs.runner``): the local DirectRunner runs on its
FnApiRunner and never fetches Beam's Prism binary; other runners are Beam's."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.testing.util import assert_that, equal_to

from ctxledger.jobs.runner import (
    beam_pipeline,
    runner_flag,
    runner_name,
    uses_local_direct_runner,
)


@pytest.mark.parametrize(
    ("args", "local"),
    [
        ([], True),
        (["--runner=DirectRunner"], True),
        (["--runner", "DirectRunner"], True),
        (["--runner=apache_beam.runners.direct.direct_runner.DirectRunner"], True),
        (["--runner=FlinkRunner"], False),
        (["--runner=PrismRunner"], False),  # asked for by name: Beam's to run
        (["--runner=FlinkRunner", "--runner=DirectRunner"], True),  # last wins
        (["--direct_num_workers=2", "--direct_running_mode=multi_processing"], True),
    ],
)
def test_local_direct_runner_from_the_flags(args, local):
    assert uses_local_direct_runner(args) is local


def test_runner_name_reports_the_named_runner_or_direct():
    assert runner_name([]) == "DirectRunner"
    assert runner_name(["--runner", "SparkRunner"]) == "SparkRunner"
    assert runner_flag(["--job_name=x"]) is None


def _spy_on_prism_download(monkeypatch) -> list[str]:
    """Record (and refuse) every attempt to download the Prism binary."""
    from apache_beam.runners.portability import prism_runner

    asked: list[str] = []

    def refuse(url, *args, **kwargs):
        asked.append(str(url))
        raise prism_runner.URLError("no network in this test")

    monkeypatch.setattr(prism_runner, "urlopen", refuse)
    return asked


def _plus_one(pipeline) -> None:
    with pipeline as p:
        out = p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x + 1)
        assert_that(out, equal_to([2, 3, 4]))


def test_jobs_pipeline_never_downloads_prism(monkeypatch):
    asked = _spy_on_prism_download(monkeypatch)
    # Beam's own DirectRunner tries to fetch Prism first (why jobs.runner exists)
    _plus_one(beam.Pipeline())
    assert asked and "prism" in asked[0]
    asked.clear()
    pipeline = beam_pipeline([])
    assert isinstance(pipeline.runner, fn_runner.FnApiRunner)
    _plus_one(pipeline)
    assert asked == []


def test_worker_processes_get_the_quiet_log_level():
    args = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    pipeline = beam_pipeline(args)
    options = pipeline.options.get_all_options(drop_default=True)
    assert options["default_sdk_harness_log_level"] == "ERROR"
    assert options["direct_num_workers"] == 2
    assert isinstance(pipeline.runner, fn_runner.FnApiRunner)


def test_other_runners_are_left_to_beam():
    pipeline = beam_pipeline(["--runner=PortableRunner"])
    assert not isinstance(pipeline.runner, fn_runner.FnApiRunner)
    assert type(pipeline.runner).__name__ == "PortableRunner"
