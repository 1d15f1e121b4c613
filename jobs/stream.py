"""The stream job: watch a landing source, commit one snapshot per micro-batch.

A micro-batch driver (Spark Structured Streaming's model), not one long-running
Beam streaming pipeline; docs/streaming.md says why. The loop:

1. poll the pluggable source (``pipelines.stream.source``; a folder watcher today)
   for settled files; files whose content hash is already committed are skipped;
2. stamp each with its pick-up time; cut fixed windows (``pipelines.stream.windows``);
3. for the windows whose end has passed, run the *same* batch stage graph as
   ``nightly`` (``pipelines.graph.build_batch_graph``: ingest -> redact ->
   branches -> WriteTables -> CommitSnapshot) as one Beam pipeline on the runner
   the Beam flags choose, so each micro-batch is one DuckLake snapshot whose run
   id is a hash of the job, the policy version and the micro-batch's files;
4. acknowledge the files to the source.

SIGINT/SIGTERM ask for a drain: the micro-batch in flight finishes, files still
settling get one more poll, everything picked up is committed as a last
micro-batch, and the job returns normally (exit 0). A second signal aborts at
once (``StreamAborted``); the atomic commit means that leaves the previous
snapshot, and the next start picks the files up again.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ctxledger.jobs.nightly import load_run, record_failed_run, run_id_for
from ctxledger.jobs.runner import beam_pipeline, runner_name
from ctxledger.jobs.version import code_version
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.landing import KnownFiles, LandingItem
from ctxledger.pipelines.stream.source import FolderWatcher, LandingSource
from ctxledger.pipelines.stream.windows import MicroBatch, Picked, take_due, to_micros
from ctxledger.schemas import RunManifest
from ctxledger.warehouse.catalog import Warehouse
from ctxledger.warehouse.catalog_url import catalog_location
from ctxledger.warehouse.concurrency import attempt_lock, new_attempt

JOB = "stream"
#: Errors that mean "another process holds the catalog or won a commit race":
#: the micro-batch is run again after a pause instead of stopping the stream.
TRANSIENT_MARKERS = (
    "Could not set lock on file",
    "Conflicting lock is held",
    "Transaction conflict",
    "Failed to commit DuckLake transaction",
    "could not serialize access",
)
TRANSIENT_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 8.0)

Progress = Callable[[str], None]


class StreamAborted(KeyboardInterrupt):
    """A second stop signal: leave now without draining."""


class StopFlag:
    """Set by the first SIGINT/SIGTERM; the second raises ``StreamAborted``.

    The handler only flips a boolean (no locks in a signal handler); the job's
    waits sleep in short slices and look at it.
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self._previous: dict[int, object] = {}

    def is_set(self) -> bool:
        return self.reason is not None

    def set(self, reason: str = "stop requested") -> None:
        self.reason = reason

    def wait(self, seconds: float, slice_s: float = 0.05) -> bool:
        """Sleep up to ``seconds``, returning early (True) once a stop is asked."""
        deadline = time.monotonic() + seconds
        while not self.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(slice_s, left))
        return True

    def install(self) -> None:
        """Handle SIGINT and SIGTERM (main thread only, as Python requires)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        if self.is_set():
            self.restore()
            raise StreamAborted(f"second {name}: aborted without draining")
        self.set(name)


@dataclass
class BatchReport:
    """One committed micro-batch."""

    index: int
    run_id: str
    window_start: datetime
    window_end: datetime
    windows: int
    files: int
    messages: int
    snapshot_id: int | None
    seconds: float
    manifest: RunManifest | None = None


@dataclass
class StreamResult:
    """What a stream job did between its start and its stop."""

    batches: list[BatchReport] = field(default_factory=list)
    skipped_known: int = 0
    left_unsettled: int = 0
    stopped_by: str | None = None

    @property
    def files(self) -> int:
        return sum(b.files for b in self.batches)

    @property
    def messages(self) -> int:
        return sum(b.messages for b in self.batches)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a lock or commit race worth a retry."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(marker in str(current) for marker in TRANSIENT_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def retry_transient(
    operation: Callable[[], object],
    progress: Progress,
    what: str,
    delays: Sequence[float] = TRANSIENT_DELAYS,
):
    """Run ``operation``; on a transient error wait and run it again."""
    for delay in (*delays, None):
        try:
            return operation()
        except Exception as exc:
            if delay is None or not is_transient(exc):
                raise
            first = str(exc).splitlines()[0][:120] if str(exc) else ""
            progress(f"{what}: {type(exc).__name__} ({first}); retry in {delay:.1f}s")
            time.sleep(delay)
    raise AssertionError("unreachable")


def _utc(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


class _Commit(threading.Thread):
    """One micro-batch running in a daemon thread (a hard abort leaves it: the
    commit is atomic, so the snapshot is either whole or absent)."""

    def __init__(self, job: StreamJob, index: int, batch: MicroBatch, config):
        super().__init__(name=f"micro-batch-{index}", daemon=True)
        self.job = job
        self.index = index
        self.batch = batch
        self.config: JobConfig = config
        self.started_at = datetime.now(UTC)
        self.manifest: RunManifest | None = None
        self.error: Exception | None = None
        self.seconds = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.manifest = self.job._work(self)
        except Exception as exc:  # noqa: BLE001 - handed to the main thread
            self.error = exc
        finally:
            self.seconds = time.monotonic() - started


class StreamJob:
    """The driver loop; ``run_stream`` builds one and runs it."""

    def __init__(
        self,
        landing: str | Path,
        warehouse: str | Path,
        *,
        policy_file: str | Path | None,
        default_tenant: str,
        source_format: str | None,
        key_file: str | Path | None,
        catalog: str | None,
        data_path: str | None,
        window_seconds: float,
        poll_seconds: float,
        beam_args: Sequence[str],
        source: LandingSource | None,
        stop: StopFlag,
        clock: Callable[[], float],
        progress: Progress,
        on_commit: Callable[[BatchReport], None],
    ):
        from ctxledger.pipelines.redact.keys import load_key
        from ctxledger.pipelines.redact.registry import load_checked_policy

        if window_seconds <= 0 or poll_seconds <= 0:
            raise ValueError("--window-seconds and --poll-seconds must be positive")
        self.landing = Path(landing).resolve()
        self.warehouse = Path(warehouse).resolve()
        self.policy_file = policy_file
        self.policy = load_checked_policy(policy_file)
        self.key = load_key(Path(key_file) if key_file else None)
        self.key_file = key_file
        self.default_tenant = default_tenant
        self.source_format = source_format
        # One spelling of the catalog for every stage that attaches it.
        self.catalog = catalog_location(catalog) if catalog else None
        self.data_path = data_path
        self.size_us = to_micros(window_seconds)
        self.poll_seconds = poll_seconds
        self.beam_args = list(beam_args)
        self.runner = runner_name(self.beam_args)
        self.source = source or FolderWatcher(self.landing, default_tenant)
        self.stop = stop
        self.clock = clock
        self.progress = progress
        self.on_commit = on_commit
        self.pending: list[Picked] = []
        self.known = KnownFiles()
        self.result = StreamResult()

    # -- the loop ------------------------------------------------------------------
    def run(self) -> StreamResult:
        """Poll, cut windows and commit until a stop, then drain (see module doc).

        The main thread only polls, keeps time and handles signals; a micro-batch
        runs in a worker thread, so files keep their true pick-up time while a
        commit is in flight, and the windows that closed meanwhile are committed
        together next (catch-up). One micro-batch is in flight at a time.
        """
        self.known = retry_transient(self._committed_hashes, self.progress, "open")
        self.progress(
            f"watching {self.landing} every {self.poll_seconds:g}s, "
            f"{self.size_us / 1_000_000:g}s windows; {len(self.known)} committed "
            "file(s) known"
        )
        inflight: _Commit | None = None
        final = False  # the drain's last micro-batch was taken
        try:
            while True:
                if inflight is not None and not inflight.is_alive():
                    self._finish(inflight)
                    inflight = None
                draining = self.stop.is_set()
                if inflight is not None:
                    if not draining:
                        self._pick()
                    inflight.join(self.poll_seconds)
                    continue
                if final:
                    break
                self._pick()
                if draining:
                    if self.source.unsettled():
                        # Files complete when the stop came settle on one more poll.
                        time.sleep(self.poll_seconds)
                        self._pick()
                    final = True
                batch, self.pending = take_due(
                    self.pending,
                    to_micros(self.clock()),
                    self.size_us,
                    drain=draining,
                )
                if batch is not None:
                    inflight = self._start(batch)
                elif not draining:
                    self.stop.wait(self.poll_seconds)
        finally:
            self.source.close()
        self.result.left_unsettled = self.source.unsettled()
        self.result.stopped_by = self.stop.reason
        return self.result

    def _open(self) -> Warehouse:
        """The job's warehouse (created if missing)."""
        return Warehouse.open(
            self.warehouse, create=True, catalog=self.catalog, data_path=self.data_path
        )

    def _committed_hashes(self) -> KnownFiles:
        """Landing identities already committed (tenant + subject folder + bytes)."""
        with self._open() as wh:
            return KnownFiles.from_rows(wh.processed_files())

    def _pick(self) -> None:
        now = to_micros(self.clock())
        waiting = {p.item.landing_id for p in self.pending}
        for item in self.source.poll():
            if item in self.known or item.landing_id in waiting:
                self.result.skipped_known += 1
                continue
            waiting.add(item.landing_id)
            self.pending.append(Picked(item, now))

    # -- one micro-batch -----------------------------------------------------------
    def _config(self, items: Sequence[LandingItem]) -> JobConfig:
        return JobConfig(
            job=JOB,
            run_id=run_id_for(
                JOB, self.policy.policy_version, [i.landing_id for i in items]
            ),
            landing=str(self.landing),
            warehouse=str(self.warehouse),
            catalog=self.catalog,
            data_path=self.data_path,
            default_tenant=self.default_tenant,
            source_format=self.source_format,
            policy_file=str(self.policy_file) if self.policy_file else None,
            policy_version=self.policy.policy_version,
            code_version=code_version(),
            max_record_bytes=self.policy.limits.max_record_bytes,
            key_file=str(self.key_file) if self.key_file else None,
            attempt=new_attempt(),  # staging per attempt (jobs.nightly)
            received_at=datetime.now(UTC),  # the micro-batch's logical time
        )

    def _start(self, batch: MicroBatch) -> _Commit:
        config = self._config(batch.items)
        index = len(self.result.batches) + 1
        self.progress(
            f"micro-batch {index}: {len(batch.items)} file(s), run {config.run_id}"
        )
        # Hashes in flight count as known: a copy picked meanwhile is skipped.
        self.known.add(batch.items)
        commit = _Commit(self, index, batch, config)
        commit.start()
        return commit

    def _finish(self, commit: _Commit) -> None:
        """Report a finished micro-batch, or stop the job with its error."""
        commit.join()
        if commit.error is not None:
            exc = commit.error
            record_failed_run(
                commit.config, commit.started_at, self.runner, len(commit.batch.items),
                exc,
            )  # fmt: skip
            raise exc
        self.source.ack(commit.batch.items)
        manifest = commit.manifest
        report = BatchReport(
            index=commit.index,
            run_id=commit.config.run_id,
            window_start=_utc(commit.batch.window_start_us),
            window_end=_utc(commit.batch.window_end_us),
            windows=commit.batch.windows,
            files=len(commit.batch.items),
            messages=_inserted(manifest, "messages"),
            snapshot_id=manifest.snapshot_id if manifest else None,
            seconds=commit.seconds,
            manifest=manifest,
        )
        self.result.batches.append(report)
        self.on_commit(report)

    def _work(self, commit: _Commit) -> RunManifest | None:
        """The worker thread's part: the batch graph, its commit, compaction."""
        manifest = retry_transient(
            lambda: self._run_pipeline(commit.config, commit.batch, commit.started_at),
            self.progress,
            f"micro-batch {commit.index}",
        )
        retry_transient(
            lambda: self._after_commit(manifest), self.progress, "compaction"
        )
        return manifest

    def _run_pipeline(
        self, config: JobConfig, batch: MicroBatch, started_at: datetime
    ) -> RunManifest | None:
        from ctxledger.pipelines.graph import build_batch_graph

        # A retry after a commit that went through (then failed on the way out)
        # must not commit again: the run id is already a snapshot.
        done = self._load(config.run_id)
        if done is not None and done.snapshot_id is not None:
            return done
        # A retry of this attempt starts from an empty staging folder.
        shutil.rmtree(config.staging_dir, ignore_errors=True)
        with attempt_lock(config.staging_dir):
            with beam_pipeline(self.beam_args) as pipeline:
                pending = build_batch_graph(
                    pipeline,
                    list(batch.items),
                    config,
                    self.policy,
                    self.key,
                    started_at=started_at,
                    files_seen=len(batch.items),
                    files_skipped=0,
                    runner=self.runner,
                )
            pending.run()  # the one commit, on the launcher (as the nightly)
        return self._load(config.run_id)

    def _load(self, run_id: str) -> RunManifest | None:
        with self._open() as wh:
            return load_run(wh, run_id)

    def _after_commit(self, manifest: RunManifest | None) -> None:
        """History purge and serving-table compaction, as after a nightly run,
        so many small micro-batches do not leave many small files."""
        from ctxledger.warehouse.retention import RetentionCounts, after_commit

        counts = RetentionCounts.from_json(manifest.retention if manifest else None)
        after_commit(
            self.warehouse,
            self.policy,
            counts,
            catalog=self.catalog,
            data_path=self.data_path,
        )


def _inserted(manifest: RunManifest | None, table: str) -> int:
    if manifest is None or not manifest.table_rows:
        return 0
    return int(json.loads(manifest.table_rows).get(table, 0))


def run_stream(
    landing: str | Path,
    warehouse: str | Path,
    *,
    policy_file: str | Path | None = None,
    default_tenant: str = "default",
    source_format: str | None = None,
    key_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    window_seconds: float = 10.0,
    poll_seconds: float = 1.0,
    beam_args: Sequence[str] = (),
    source: LandingSource | None = None,
    stop: StopFlag | None = None,
    clock: Callable[[], float] = time.time,
    progress: Progress = lambda _msg: None,
    on_commit: Callable[[BatchReport], None] = lambda _report: None,
) -> StreamResult:
    """Run the stream job until ``stop`` is set (the CLI sets it on SIGINT/SIGTERM).

    Without ``source`` the landing folder is watched. Returns what was committed.
    """
    if source is None and not Path(landing).is_dir():
        raise FileNotFoundError(f"landing folder not found: {landing}")
    job = StreamJob(
        landing,
        warehouse,
        policy_file=policy_file,
        default_tenant=default_tenant,
        source_format=source_format,
        key_file=key_file,
        catalog=catalog,
        data_path=data_path,
        window_seconds=window_seconds,
        poll_seconds=poll_seconds,
        beam_args=beam_args,
        source=source,
        stop=stop or StopFlag(),
        clock=clock,
        progress=progress,
        on_commit=on_commit,
    )
    return job.run()
