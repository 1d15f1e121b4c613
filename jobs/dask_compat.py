"""Beam's DaskRunner with two Beam 2.77 defects fixed (``--runner=DaskRunner``).

Why: Beam 2.77's DaskRunner (``apache_beam.runners.dask``) translates each
Beam transform into a ``dask.bag`` operation, but

1. it keys the bags by the *producing transform*, so every output of a
   multi-output ``ParDo`` (``with_outputs``) reaches every consumer, tags
   stripped: dead letters land in the sessions table and vice versa;
2. its per-partition DoFn call collects the outputs *before*
   ``finish_bundle`` runs, so whatever a DoFn emits there is dropped (our
   shard writer reported its last shard there).

``CompatDaskRunner`` is the same runner with its own bag visitor: bags are
keyed by *PCollection*; a ``ParDo`` partition yields ``(tag, value)`` pairs,
collected after ``finish_bundle``, and each output PCollection is the filter
of its tag. It is only used when a job names the DaskRunner
(``jobs.runner.beam_pipeline``); every other runner is Beam's. The pure-Beam
test ``tests/e2e/test_dask_runner.py`` runs the same tiny pipeline on Beam's
stock runner as a strict ``xfail``: the day Beam fixes both defects, that test
passes, fails the suite, and this module can go.

Two more things the stock runner lacks that a job needs:

* DoFn instances are cached per worker thread (keyed by the DoFn's pickled
  bytes), so ``setup`` (models: presidio, MiniLM) runs once per worker and
  thread, not once per partition; a worker keeps only the latest pipeline's
  (the previous run's are torn down when a new run's first bundle arrives).
* ``CompatDaskResult.wait_until_finish`` fails the run when the cluster has
  had no worker for ``--dask_no_worker_timeout`` seconds (default 60): the
  stock runner waits forever on a cluster whose workers all died.

What Beam's DaskRunner does not support at all (state and timers, splittable
DoFns, unbounded sources/streaming, metrics): docs/scale_out.md says how each
job copes.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from apache_beam import pvalue
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dask import dask_runner as beam_dask
from apache_beam.runners.dask import transform_evaluator as te
from apache_beam.runners.dask.overrides import dask_overrides
from apache_beam.runners.runner import PipelineState

#: Beam 2.77 knows the runner only by this dotted name.
BEAM_DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
#: Seconds without any worker before a run fails (``--dask_no_worker_timeout``).
NO_WORKER_TIMEOUT = 60.0
#: How often the launcher checks the cluster while waiting.
POLL_SECONDS = 1.0


class CtxledgerDaskOptions(PipelineOptions):
    """Our one Dask flag (a real ``PipelineOptions`` class, so the CLI's strict
    check and Beam both accept it)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--dask_no_worker_timeout",
            type=float,
            default=NO_WORKER_TIMEOUT,
            help="Fail the run when the dask cluster has had no worker for "
            "this many seconds (ctxledger's DaskRunner).",
        )


# One DoFn instance per (pickled DoFn, thread) in a worker process: setup once.
# Only the latest pipeline's are kept: a long-lived worker serving one nightly
# after another tears the previous run's DoFns (and their models) down.
_FNS: dict[tuple[str, int], Any] = {}
_FNS_RUN: list[str] = [""]
_FNS_LOCK = threading.Lock()


def _worker_fn(fn_bytes: bytes, run: str) -> Any:
    from apache_beam.internal import pickler

    key = (hashlib.sha256(fn_bytes).hexdigest(), threading.get_ident())
    stale: list[Any] = []
    with _FNS_LOCK:
        if _FNS_RUN[0] != run:
            stale, _FNS_RUN[0] = list(_FNS.values()), run
            _FNS.clear()
        cached = _FNS.get(key)
    for old in stale:
        if getattr(old, "_ctxledger_set_up", False):
            with contextlib.suppress(Exception):
                old.teardown()
    if cached is not None:
        return cached
    fn = pickler.loads(fn_bytes)
    with _FNS_LOCK:
        _FNS[key] = fn
    return fn


def _run_bundle(
    items: Iterable[Any], spec: dict[str, Any], side_values: list | None = None
) -> list[tuple]:
    """One dask partition = one bundle of a ParDo: ``(tag, WindowedValue)``
    for every output, ``finish_bundle``'s included (tag None = main)."""
    from apache_beam import DoFn
    from apache_beam.runners.common import (
        DoFnContext,
        DoFnInvoker,
        DoFnSignature,
        _OutputHandler,
    )
    from apache_beam.transforms.sideinputs import SideInputMap

    fn = _worker_fn(spec["fn"], spec["run"])
    views = spec["side_views"]
    side_inputs = [
        SideInputMap(view, options, [te.get_windowed_value(v, None) for v in values])
        for (view, options), values in zip(views, side_values or (), strict=True)
    ]
    receivers = te.OneReceiver()
    handler = _OutputHandler(
        window_fn=spec["window_fn"],
        main_receivers=receivers[None],
        tagged_receivers=receivers,
        per_element_output_counter=None,
        output_batch_converter=None,
        process_yields_batches=False,
        process_batch_yields_elements=False,
    )
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(fn),
        handler,
        context=DoFnContext(spec["label"], state=None),
        side_inputs=side_inputs,
        input_args=spec["args"],
        input_kwargs=spec["kwargs"],
        user_state_context=None,
        bundle_finalizer_param=DoFn.BundleFinalizerParam(),
    )
    if not getattr(fn, "_ctxledger_set_up", False):
        invoker.invoke_setup()
        fn._ctxledger_set_up = True
    invoker.invoke_start_bundle()
    for item in items:
        invoker.invoke_process(item)
    invoker.invoke_finish_bundle()  # before the outputs are collected
    out = []
    for value in receivers.values:
        if isinstance(value, pvalue.TaggedOutput):
            out.append((value.tag, value.value))
        else:
            out.append((None, value))
    return out


class TaggedParDo(te.DaskBagOp):
    """A ``ParDo`` as a bag of ``(tag, WindowedValue)`` pairs."""

    def apply(self, input_bag, side_inputs=None):
        import dask
        from apache_beam.internal import pickler

        transform = self.transform
        args, kwargs = transform.raw_side_inputs
        main = next(iter(self.applied.main_inputs.values()))
        window_fn = main.windowing.windowfn if hasattr(main, "windowing") else None
        spec = {
            "fn": pickler.dumps(transform.fn),
            "run": self.bag_kwargs.get("_run", ""),
            "window_fn": window_fn,
            "label": transform.label,
            "args": list(args),
            "kwargs": kwargs,
            "side_views": [(view, options) for view, options, _ in side_inputs or ()],
        }
        # each side input's whole bag, computed once, handed to every bundle
        side_values = dask.delayed(list)([bag for _, _, bag in side_inputs or ()])
        return input_bag.map(te.get_windowed_value, window_fn).map_partitions(
            _run_bundle, spec, side_values=side_values
        )


def _tag_filter(tag):
    def keep(pair):
        return pair[0] == tag

    return keep


def _value(pair):
    # bags hold plain values, as in Beam's runner (its GroupByKey expects them;
    # batch jobs live in the global window)
    return te.defenestrate(pair[1])


class _Visitor(beam_dask.PipelineVisitor):
    """Every leaf transform -> dask bags, one per output PCollection."""

    def __init__(self, bag_kwargs: dict):
        self.bag_kwargs = bag_kwargs
        self.bags: dict[Any, Any] = {}
        self.consumed: set[int] = set()

    def visit_transform(self, node) -> None:
        kind = type(node.transform)
        op_class = TaggedParDo if kind is te.apache_beam.ParDo else None
        op_class = op_class or te.TRANSLATIONS.get(kind, te.NoOp)
        op = op_class(node, bag_kwargs=self.bag_kwargs)
        kwargs: dict[str, Any] = {"input_bag": None}
        sides = []
        for side in node.side_inputs:
            self.consumed.add(id(side.pvalue))
            sides.append(
                (type(side), side._view_options(), self.bags[side.pvalue])  # noqa: SLF001
            )
        if sides:
            kwargs["side_inputs"] = sides
        inputs = [i for i in node.inputs if not isinstance(i, pvalue.PBegin)]
        if inputs:
            bags = [self.bags[i] for i in inputs]
            self.consumed.update(id(i) for i in inputs)
            single = len(bags) == 1 and not isinstance(op, te.Flatten)
            kwargs["input_bag"] = bags[0] if single else bags
        bag = op.apply(**kwargs)
        for tag, out in node.outputs.items():
            if isinstance(op, TaggedParDo):
                self.bags[out] = bag.filter(_tag_filter(tag)).map(_value)
            else:
                self.bags[out] = bag

    def sinks(self) -> list:
        """Bags no transform consumes: computing them runs the whole graph."""
        return [bag for pc, bag in self.bags.items() if id(pc) not in self.consumed]


class CompatDaskResult(beam_dask.DaskRunnerResult):
    """Waits like Beam's result, and fails when the cluster has no worker."""

    no_worker_timeout: float = NO_WORKER_TIMEOUT

    def wait_until_finish(self, duration=None) -> str:
        from dask import distributed

        deadline = None if duration is None else time.monotonic() + duration / 1000
        pending = list(self.futures)
        workerless_since: float | None = None
        try:
            while pending:
                with contextlib.suppress(TimeoutError):  # wait raises on timeout
                    distributed.wait(
                        pending, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED"
                    )
                for future in pending:
                    if future.done():
                        future.result()  # raises the worker's error here
                pending = [f for f in pending if not f.done()]
                if not pending:
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return self._state
                if self.client.scheduler_info().get("workers"):
                    workerless_since = None
                    continue
                workerless_since = workerless_since or now
                if now - workerless_since >= self.no_worker_timeout:
                    self.client.cancel(pending)
                    raise RuntimeError(
                        "the dask cluster has had no worker for "
                        f"{self.no_worker_timeout:g} s (--dask_no_worker_timeout); "
                        "run cancelled"
                    )
            self._state = PipelineState.DONE
        except BaseException:
            self._state = PipelineState.FAILED
            raise
        finally:
            if self._state != PipelineState.RUNNING:
                self.client.close()
        return self._state


class CompatDaskRunner(beam_dask.DaskRunner):
    """Beam's DaskRunner with tag routing and ``finish_bundle`` output fixed
    (module docstring)."""

    def run_pipeline(self, pipeline, options):
        import dask
        from dask import distributed

        dask_options = options.view_as(beam_dask.DaskOptions).get_all_options(
            drop_default=True, current_only=True
        )
        bag_kwargs = beam_dask.DaskOptions._extract_bag_kwargs(dask_options)  # noqa: SLF001
        if not bag_kwargs:
            # Beam packs 128 elements per partition: a run's few landing
            # groups would all land in one partition, on one worker.
            bag_kwargs = {"partition_size": 1}
        # this pipeline's token: workers keep only its DoFn instances
        bag_kwargs["_run"] = uuid.uuid4().hex
        client = distributed.Client(**dask_options)
        pipeline.replace_all(dask_overrides())
        visitor = _Visitor(bag_kwargs)
        pipeline.visit(visitor)
        sinks = dask.optimize(*visitor.sinks())
        futures = client.compute(list(sinks))
        result = CompatDaskResult(client, futures)
        result.no_worker_timeout = options.view_as(
            CtxledgerDaskOptions
        ).dask_no_worker_timeout
        return result
