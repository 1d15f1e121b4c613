"""The stream job's windows cut the same micro-batches as Beam's FixedWindows.

``pipelines.stream.windows`` assigns windows itself (the job is a micro-batch
driver; docs/streaming.md). This TestStream pipeline feeds the same timestamped
landing items through ``WindowInto(FixedWindows)`` + ``GroupByKey`` and checks
both group them identically, so moving the windowing into a runner-native
streaming graph (Pub/Sub, Kafka on Flink or Dataflow) keeps every micro-batch
and hence every run id.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.test_stream import TestStream as BeamTestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from ctxledger.pipelines.ingest.landing import LandingItem
from ctxledger.pipelines.stream.windows import Picked, assign_windows

SIZE_US = 2_000_000
PICKS = [  # (file, pick-up time in microseconds): gaps, edges, an empty window
    ("a", 0),
    ("b", 1_999_999),
    ("c", 2_000_000),
    ("d", 2_500_000),
    ("e", 7_000_000),
    ("f", 7_000_001),
]


def _item(name: str) -> LandingItem:
    return LandingItem(f"/l/{name}", name, f"h-{name}", 1, "default")


class _WindowStartFn(beam.DoFn):
    def process(self, element, win=beam.DoFn.WindowParam):
        _key, names = element
        yield (win.start.micros, tuple(sorted(names)))


def test_beam_fixed_windows_group_like_assign_windows():
    ours = {
        start: tuple(sorted(i.rel_path for i in items))
        for start, items in assign_windows(
            [Picked(_item(n), t) for n, t in PICKS], SIZE_US
        ).items()
    }
    stream = BeamTestStream()
    for name, t in PICKS:
        stream = stream.add_elements(
            [window.TimestampedValue(name, Timestamp(micros=t))]
        )
    stream = stream.advance_watermark_to_infinity()
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with BeamTestPipeline(options=options) as p:
        grouped = (
            p
            | "Picks" >> stream
            | "Window" >> beam.WindowInto(window.FixedWindows(SIZE_US / 1_000_000))
            | "KeyAll" >> beam.Map(lambda name: (None, name))
            | "Group" >> beam.GroupByKey()
            | "WindowStart" >> beam.ParDo(_WindowStartFn())
        )
        assert_that(grouped, equal_to(sorted(ours.items())))
    assert ours == {0: ("a", "b"), 2_000_000: ("c", "d"), 6_000_000: ("e", "f")}
