"""The nightly job: ingest and redact new landing files, commit one snapshot.

Incremental and idempotent: files are identified by content hash, hashes already
committed are skipped, and the run id is a hash of the job, the policy version and
the new files, so a run that crashed and is started again writes exactly the rows
the uninterrupted run would have.

Every run also purges what the policy no longer keeps (``warehouse.retention``):
history past the window before the commit, expired memories and artifacts inside
the run's own snapshot, or as a ``retention`` run when nothing is new.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

from ctxledger.jobs.version import code_version
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.landing import Discovery, KnownFiles, discover
from ctxledger.pipelines.ingest.landing import new_items as unseen_items
from ctxledger.schemas import RunManifest, content_hash
from ctxledger.schemas.arrow import to_table
from ctxledger.warehouse.catalog import Warehouse
from ctxledger.warehouse.catalog_url import catalog_location
from ctxledger.warehouse.concurrency import (
    WarehouseBusyError,
    attempt_lock,
    busy_error,
    new_attempt,
    retry_on_conflict,
)
from ctxledger.warehouse.erasure import finish_pending as finish_erasures

Progress = Callable[[str], None]
log = logging.getLogger("ctxledger.jobs")


def _silent(_msg: str) -> None:
    """The default progress callback: report nothing."""


@dataclass
class NightlyResult:
    """What a nightly run did (``manifest`` is None when nothing was new)."""

    run_id: str | None
    discovery: Discovery
    files_new: int
    manifest: RunManifest | None = None
    skipped_known: int = 0
    notes: list[str] = field(default_factory=list)
    #: New consent / system-record input files this run read (memory stage).
    memory_inputs_new: int = 0
    #: What the memory lifecycle step did (supersession, purges), if it ran.
    memory_maintenance: object | None = None
    #: What the retention purge did (``warehouse.retention.RetentionCounts``):
    #: in the run's own snapshot, or a ``retention`` run when nothing was new.
    retention: object | None = None
    #: New document files (``--docs``) this run read (evidence stage).
    docs_new: int = 0


def run_id_for(job: str, policy_version: str, hashes: Sequence[str]) -> str:
    return content_hash(job, policy_version, sorted(hashes), prefix="run_", length=20)


def run_nightly(
    landing: str | Path,
    warehouse: str | Path,
    *,
    policy_file: str | Path | None = None,
    default_tenant: str = "default",
    source_format: str | None = None,
    key_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    beam_args: Sequence[str] = (),
    progress: Progress = _silent,
    consent: str | Path | None = None,
    system_records: str | Path | None = None,
    llm_endpoint: str | None = None,
    llm_model: str | None = None,
    docs: str | Path | None = None,
) -> NightlyResult:
    """Process landing files the warehouse has not seen; commit them as one run."""
    from ctxledger.pipelines.redact.registry import load_checked_policy

    started_at = datetime.now(UTC)
    policy = load_checked_policy(policy_file)
    warehouse = Path(warehouse).resolve()
    # One spelling of the catalog for every stage that attaches it (URL -> libpq).
    catalog = catalog_location(catalog) if catalog else None
    # An erasure a crash left half done is finished before anything else.
    finish_erasures(warehouse, catalog=catalog, data_path=data_path)
    progress(f"scanning {landing}")
    found = discover(landing, default_tenant)
    # The launcher's one connection for what the graph needs to know (the
    # stages read stored consent and vectors on it too): every open attaches
    # the catalog again. Closed before the pipeline runs: a held attach of a
    # local catalog file would block the run's own commit.
    lake = Warehouse.open(warehouse, create=True, catalog=catalog, data_path=data_path)
    try:
        result, config, new_items = _plan(
            lake,
            found,
            policy,
            landing,
            warehouse,
            catalog,
            data_path,
            default_tenant=default_tenant,
            source_format=source_format,
            policy_file=policy_file,
            key_file=key_file,
            consent=consent,
            system_records=system_records,
            llm_endpoint=llm_endpoint,
            llm_model=llm_model,
            docs=docs,
            received_at=started_at,
        )
        if config is None:
            lake.close()
            progress("nothing new to process; retention purge")
            purge = _retention_only(warehouse, policy, catalog, data_path)
            result.retention, result.memory_maintenance = purge.counts, purge.memory
            _refresh_serving(warehouse, catalog, data_path, progress)
            return result
        stage_lines = _run_pipeline(
            lake, config, new_items, policy, started_at, found, beam_args, progress
        )
    finally:
        lake.close()
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        result.manifest = load_run(wh, config.run_id)
    if stage_lines is not None and result.manifest is not None:
        stage_lines.settle(result.manifest.stage_timings)
    progress("retention: history purge and compaction after the commit")
    result.retention, result.memory_maintenance = _after_commit(
        warehouse, policy, result.manifest, catalog, data_path
    )
    _refresh_serving(warehouse, catalog, data_path, progress)
    return result


def _plan(lake, found, policy, landing, warehouse, catalog, data_path, **opts):
    """What is new (read on the launcher's ``lake``): the result so far, the
    run's ``JobConfig`` (None when nothing is new) and the new landing items."""
    from ctxledger.pipelines.memory.inputs import new_inputs
    from ctxledger.warehouse.memory_api import known_input_files

    default_tenant, docs = opts["default_tenant"], opts["docs"]
    consent, system_records = opts["consent"], opts["system_records"]
    known = KnownFiles.from_rows(lake.processed_files())
    known_inputs = KnownFiles.from_rows(known_input_files(lake))
    memory_inputs = new_inputs(consent, system_records, default_tenant, known_inputs)
    new_docs = _new_documents(lake, docs, default_tenant, policy)
    # Landing identity = tenant folder + subject folder + bytes: the same bytes
    # under two tenants are two files; under two names of one tenant, one file.
    new_items = unseen_items(found.items, known)
    result = NightlyResult(
        run_id=None,
        discovery=found,
        files_new=len(new_items),
        skipped_known=len(found.items) - len(new_items),
        memory_inputs_new=len(memory_inputs),
        docs_new=len(new_docs),
    )
    if not new_items and not memory_inputs and not new_docs:
        return result, None, new_items
    key_file, policy_file = opts["key_file"], opts["policy_file"]
    config = JobConfig(
        job="nightly",
        run_id=run_id_for(
            "nightly",
            policy.policy_version,
            [i.landing_id for i in new_items]
            + [i.landing_id for i in memory_inputs]
            + [i.landing_id for i in new_docs],
        ),
        landing=str(Path(landing).resolve()),
        warehouse=str(warehouse),
        catalog=catalog,
        data_path=data_path,
        default_tenant=default_tenant,
        source_format=opts["source_format"],
        policy_file=str(policy_file) if policy_file else None,
        policy_version=policy.policy_version,
        code_version=code_version(),
        max_record_bytes=policy.limits.max_record_bytes,
        key_file=str(key_file) if key_file else None,
        consent_input=str(Path(consent).resolve()) if consent else None,
        system_records_input=(
            str(Path(system_records).resolve()) if system_records else None
        ),
        llm_endpoint=opts["llm_endpoint"],
        llm_model=opts["llm_model"],
        docs=str(Path(docs).resolve()) if docs else None,
        attempt=new_attempt(),
        received_at=opts["received_at"],  # the run's logical time
    )
    result.run_id = config.run_id
    return result, config, new_items


def _run_pipeline(
    lake: Warehouse,
    config: JobConfig,
    new_items: list,
    policy,
    started_at: datetime,
    found: Discovery,
    beam_args: Sequence[str],
    progress: Progress,
):
    """Build the run's graph (its stages read what they need from ``lake``,
    which is closed before the pipeline starts) and run it; a failed run is
    recorded as such. Returns the stage-lines watcher (None when silent)."""
    # Beam and the graph (models, presidio: seconds of imports) only load once
    # there is work: a bad --landing fails, and a run with nothing new ends, fast.
    from ctxledger.jobs.runner import beam_pipeline, runner_name
    from ctxledger.pipelines.evidence.ahead import released
    from ctxledger.pipelines.graph import build_batch_graph
    from ctxledger.pipelines.models import (
        local_workers,
        shares_process,
        sized_worker_threads,
    )
    from ctxledger.pipelines.redact.keys import load_key
    from ctxledger.pipelines.runtime import tune_collector

    tune_collector()  # the launcher too: it holds every model in one process

    key = load_key(Path(config.key_file) if config.key_file else None)
    runner = runner_name(beam_args)
    progress(f"run {config.run_id}: {len(new_items)} new file(s) on {runner}")
    try:
        # Staging is per attempt (``staging/<run_id>-<attempt>/``), locked while
        # this process lives: an overlapping nightly over the same files (same
        # run id) stages its own shards, the commit lock serialises the two
        # commits and the loser's de-duplicating inserts add nothing; a killed
        # attempt's folder is recognised as dead at once (docs/retention.md).
        # Each local worker gets cores / workers threads (docs/scale_out.md).
        # One progress line per stage as it goes (jobs.progress).
        with (
            attempt_lock(config.staging_dir),
            released(config.run_id),  # the embed-ahead helper, if any
            sized_worker_threads(local_workers(beam_args)),
            _stage_lines(config.staging_dir, progress, len(new_items)) as stage_lines,
        ):
            with beam_pipeline(beam_args) as pipeline:
                try:
                    pending = build_batch_graph(
                        pipeline,
                        new_items,
                        config,
                        policy,
                        key,
                        started_at=started_at,
                        files_seen=len(found.items),
                        files_skipped=len(found.skipped),
                        runner=runner,
                        workers=local_workers(beam_args),
                        lake=lake,
                        shares_process=shares_process(beam_args),
                    )
                finally:
                    lake.close()  # read at graph build only; the pipeline runs next
            # The stages are done, on whatever runner: verify the staged shards
            # and commit once, here on the launcher (pipelines.sink.pending).
            pending.run()
    except Exception as exc:
        # The graph may have failed before its build released the planning
        # attach (a bad --runner fails in the ``with`` header): close it first,
        # or recording the failure attaches the catalog a second time and
        # DuckDB's "Unique file handle conflict" replaces the real error.
        lake.close()
        # A failed attempt removes its own debris first (its shards can fill
        # the disk that made it fail): nothing committed refers to them.
        shutil.rmtree(config.staging_dir, ignore_errors=True)
        fail_run(config, started_at, runner, len(found.items), exc)
    return stage_lines


def _stage_lines(staging_dir: str, progress: Progress, files: int | None = None):
    """Per-stage progress lines while the pipeline runs (none when silent);
    ``files``: the new landing files, ingest's total."""
    from contextlib import nullcontext

    from ctxledger.jobs.progress import watch_stages

    if progress is _silent:
        return nullcontext()
    totals = {"ingest": files} if files else None
    return watch_stages(staging_dir, progress, totals=totals)


def _new_documents(lake: Warehouse, docs, default_tenant, policy):
    """Document files under ``docs`` no committed run processed (read on the
    launcher's ``lake``; the evidence stage lists them again when the graph is
    built)."""
    if not docs:
        return []
    from ctxledger.pipelines.evidence.landing import discover_documents
    from ctxledger.warehouse.evidence_api import processed_document_files

    found = discover_documents(docs, default_tenant, policy.evidence.documents.suffixes)
    stored = processed_document_files(lake.root, wh=lake)
    known = KnownFiles.from_rows(stored)
    return unseen_items(found.items, known)


def _retention_only(warehouse, policy, catalog, data_path):
    """The retention purge of a nightly with nothing new (a ``retention`` run,
    in its own snapshot, only when it removes something): see
    ``warehouse.retention.run_retention``. Its own transaction retries itself
    on a conflict with a concurrent job's commit."""
    from ctxledger.warehouse.retention import run_retention

    return run_retention(
        warehouse,
        policy,
        catalog=catalog,
        data_path=data_path,
        job_version=code_version(),
    )


def _after_commit(warehouse, policy, manifest, catalog, data_path):
    """After the run's snapshot (which already holds its memory lifecycle and
    row purges, ``pipelines.sink.commit``): history purge if memories were
    purged, and compaction. Returns (retention counts, maintenance result)."""
    from ctxledger.warehouse.retention import RetentionCounts, after_commit

    counts = RetentionCounts.from_json(manifest.retention if manifest else None)
    maintenance = retry_on_conflict(
        lambda: after_commit(
            warehouse, policy, counts, catalog=catalog, data_path=data_path
        )
    )
    return counts, maintenance


def _refresh_serving(warehouse, catalog, data_path, progress):
    """Bring the memory lookup replica up to the run's last snapshot, so the
    first lookup after the nightly does not pay for a rebuild (only the tables
    whose rows changed are rebuilt): see ``warehouse.memory_serving``."""
    from ctxledger.warehouse.memory_serving import refresh_serving

    done = retry_on_conflict(
        lambda: refresh_serving(warehouse, catalog=catalog, data_path=data_path)
    )
    if done is not None and done.rebuilt:
        progress(f"memory serving replica rebuilt: {', '.join(done.rebuilt)}")


def fail_run(
    config: JobConfig,
    started_at: datetime,
    runner: str,
    files_seen: int,
    exc: Exception,
) -> NoReturn:
    """Record the failed run, then raise. A lock another job held past the
    wait (an attach in a stage or the commit, maybe wrapped by the runner) is
    raised as the one line of ``WarehouseBusyError``, unrecorded: recording it
    would wait for the same lock all over again."""
    busy = busy_error(exc)
    if busy is not None:
        log.warning("the failed run was not recorded: %s", busy)
        raise busy from exc
    try:
        record_failed_run(config, started_at, runner, files_seen, exc)
    except WarehouseBusyError as unrecorded:
        log.warning("the failed run was not recorded: %s", unrecorded)
    raise exc


def record_failed_run(
    config: JobConfig,
    started_at: datetime,
    runner: str,
    files_seen: int,
    exc: Exception,
) -> None:
    """Store a ``failed`` run row (its own tiny snapshot) so ``runs`` shows it,
    with ``exc`` (the original error) as its reason.

    The caller re-raises ``exc``; a failure to record it (the catalog itself
    unreachable) is logged and noted on ``exc``, never raised in its place."""
    try:
        _record_failed_run(config, started_at, runner, files_seen, exc)
    except Exception as failed:  # noqa: BLE001 - the original error wins
        note = f"the failed run was not recorded: {type(failed).__name__}: {failed}"
        logging.getLogger(__name__).warning(note.splitlines()[0])
        exc.add_note(note.splitlines()[0])


def _record_failed_run(
    config: JobConfig,
    started_at: datetime,
    runner: str,
    files_seen: int,
    exc: Exception,
) -> None:
    manifest = RunManifest(
        run_id=config.run_id,
        job=config.job,
        status="failed",
        started_at=started_at,
        finished_at=datetime.now(UTC),
        policy_version=config.policy_version,
        code_version=config.code_version,
        runner=runner,
        files_seen=files_seen,
        config=config.model_dump_json(),
        error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[
            :500
        ],
    )
    failed_id = f"{config.run_id}-failed-{int(started_at.timestamp())}"
    manifest = manifest.model_copy(update={"run_id": failed_id})
    with config.open_warehouse() as wh:
        wh.commit_staged(
            failed_id,
            {},
            {"runs": to_table(RunManifest, [manifest.row()])},
            {"failed": True},
        )


def load_run(wh: Warehouse, run_id: str) -> RunManifest | None:
    """Read one run's manifest back, with the id of the snapshot it committed."""
    table = wh.query("SELECT * FROM runs WHERE run_id = ?", [run_id]).arrow()
    if hasattr(table, "read_all"):
        table = table.read_all()
    rows = table.to_pylist()
    if not rows:
        return None
    manifest = RunManifest.model_validate(rows[0])
    return manifest.model_copy(update={"snapshot_id": wh.snapshot_for_run(run_id)})
