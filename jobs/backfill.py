"""The backfill job: re-derive history under a new policy, commit what changed.

The warehouse keeps only redacted data, so a backfill reads the raw landing
files again (found by content hash under the landing folders their runs
recorded, or ``--landing``) and runs the same stage graph as the nightly job
under the new policy. Its commit step (``pipelines.sink.replace``) swaps the
in-scope rows for the re-derived ones where they differ, in one snapshot, and
stores a diff against the snapshot it started from in ``backfill_diffs``.

Scope: landing files first processed on or after ``since`` (all when unset), of
``tenant`` (all when unset), closed over sessions: a session spread over several
files (Claude Code) is re-derived from all of them, or it would lose the
messages of the files left out. Files that can no longer be found stop the job
unless ``skip_missing``; then every session they fed keeps its current rows.

``stale``: only landing files whose latest derivation (the newest committed run
that read them, nightly or backfill) ran under another ``policy_version`` than
the given policy's: another policy file or another detector (the version names
both, ``schemas.policy``). Such a backfill records its run and the files it
read even when nothing differs, so a second ``--stale`` finds nothing to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path

from ctxledger.jobs.nightly import (
    _refresh_serving,
    _silent,
    _stage_lines,
    fail_run,
    load_run,
    run_id_for,
)
from ctxledger.jobs.version import code_version
from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest.landing import (
    LandingItem,
    check_entry,
    discover,
    landing_identity,
    sha256_file,
)
from ctxledger.schemas.backfill import BackfillChange
from ctxledger.warehouse.catalog import Warehouse, WarehouseError
from ctxledger.warehouse.concurrency import attempt_lock, new_attempt

Progress = Callable[[str], None]


class MissingLandingFilesError(WarehouseError):
    """Raw files the backfill needs are gone (see ``skip_missing``)."""


@dataclass
class StoredFile:
    """A landing file a committed run processed, as the warehouse recorded it."""

    file_hash: str
    path: str
    tenant_id: str
    first_seen: datetime
    landings: tuple[str, ...]
    #: The newest committed run that derived this file, and its policy version.
    latest_run: str = ""
    latest_version: str = ""


@dataclass
class BackfillPlan:
    """What a backfill will re-derive (see the module docstring)."""

    base_snapshot: int
    items: list[LandingItem] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    skipped_sessions: int = 0
    #: The backfill's logical time: when the newest of its files was first
    #: received (its first run's start), stable over reruns, unlike the wall
    #: clock; rows of undated input take it (``JobConfig.received_at``).
    received_at: datetime | None = None


@dataclass
class BackfillResult:
    """What a backfill did; ``changes`` is empty when nothing differed."""

    plan: BackfillPlan
    run_id: str | None = None
    snapshot_id: int | None = None
    policy_version: str = ""
    changes: list[BackfillChange] = field(default_factory=list)


def stored_files(wh: Warehouse) -> list[StoredFile]:
    """Every processed landing file with the landing roots its runs recorded."""
    # Entries with no bytes (refused FIFOs, broken or escaping symlinks: see
    # docs/landing.md; empty files) fed no session: nothing to re-derive.
    rows = wh.query(
        "SELECT lf.file_hash, lf.path, lf.tenant_id, r.started_at, r.config, "
        "r.run_id, r.policy_version "
        "FROM landing_files lf JOIN runs r USING (run_id) "
        "WHERE lf.status = 'processed' AND r.status = 'committed' "
        "AND NOT (lf.size_bytes = 0 AND lf.records_out = 0) "
        "ORDER BY r.started_at, r.run_id"
    ).fetchall()
    # One file per landing identity: the same bytes under two tenants are two.
    files: dict[tuple[str, str], StoredFile] = {}
    for file_hash, path, tenant, started, config, run_id, version in rows:
        landing = json.loads(config or "{}").get("landing")
        found = files.get((file_hash, path))
        if found is None:
            found = StoredFile(file_hash, path, tenant, started, ())
            files[(file_hash, path)] = found
        found.latest_run, found.latest_version = run_id, version or ""
        if landing and landing not in found.landings:
            found.landings = (*found.landings, landing)
    return list(files.values())


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def session_graph(wh: Warehouse) -> list[tuple[str, str, str]]:
    """``(session_id, tenant_id, source path)`` for every message's source file."""
    return wh.query(
        "SELECT DISTINCT session_id, tenant_id, "
        "regexp_replace(source_ref, '#[^#]*$', '') FROM messages"
    ).fetchall()


def close_over_sessions(
    seeds: set[tuple[str, str]], edges: Sequence[tuple[str, str, str]]
) -> tuple[set[tuple[str, str]], set[str]]:
    """Files ``(tenant, path)`` and sessions connected to ``seeds`` (pure).

    A session and every file it has messages from belong together: re-deriving
    one without the others would drop or duplicate messages.
    """
    by_file: dict[tuple[str, str], set[str]] = {}
    by_session: dict[str, set[tuple[str, str]]] = {}
    for session, tenant, path in edges:
        by_file.setdefault((tenant, path), set()).add(session)
        by_session.setdefault(session, set()).add((tenant, path))
    files, sessions = set(), set()
    todo = list(seeds)
    while todo:
        node = todo.pop()
        if node in files:
            continue
        files.add(node)
        for session in by_file.get(node, ()):
            if session not in sessions:
                sessions.add(session)
                todo.extend(by_session[session] - files)
    return files, sessions


def locate(stored: StoredFile, landings: Sequence[str]) -> LandingItem | None:
    """The file with ``stored``'s content under one of ``landings`` (by its
    recorded relative path first, then by scanning for the hash)."""
    for root in landings:
        candidate = Path(root) / stored.path
        # Never hash what lies outside the root or is not a regular file.
        if (
            check_entry(candidate, Path(root).resolve()) is None
            and sha256_file(candidate) == stored.file_hash
        ):
            return _item(candidate, stored)
    identity = landing_identity(stored.path, stored.file_hash)
    for root in landings:
        if not Path(root).is_dir():
            continue
        for item in discover(root, stored.tenant_id).items:
            if not item.refusal and item.landing_id == identity:
                return item
    return None


def _item(path: Path, stored: StoredFile) -> LandingItem:
    return LandingItem(
        path=str(path.resolve()),
        rel_path=stored.path,
        file_hash=stored.file_hash,
        size_bytes=path.stat().st_size,
        tenant_id=stored.tenant_id,
    )


def plan_backfill(
    wh: Warehouse,
    *,
    since: date | datetime | None = None,
    tenant: str | None = None,
    landing: str | Path | None = None,
    skip_missing: bool = False,
    stale_version: str | None = None,
) -> BackfillPlan:
    """Choose the files and sessions a backfill re-derives (module docstring);
    ``stale_version``: only files last derived under another version."""
    plan = BackfillPlan(base_snapshot=wh.current_snapshot())
    files = [f for f in stored_files(wh) if tenant is None or f.tenant_id == tenant]
    chosen_seeds = files
    if since is not None:
        if not isinstance(since, datetime):
            since = datetime.combine(since, time.min, tzinfo=UTC)
        start = _as_utc(since)
        chosen_seeds = [f for f in files if _as_utc(f.first_seen) >= start]
    if stale_version is not None:
        chosen_seeds = [f for f in chosen_seeds if f.latest_version != stale_version]
    seeds = {(f.tenant_id, f.path) for f in chosen_seeds}
    edges = session_graph(wh)
    in_scope, sessions = close_over_sessions(seeds, edges)
    chosen = [f for f in files if (f.tenant_id, f.path) in in_scope]
    located: dict[tuple[str, str], LandingItem] = {}
    missing: list[StoredFile] = []
    for stored in chosen:
        roots = [str(landing)] if landing else list(stored.landings)
        item = locate(stored, roots)
        if item is None:
            missing.append(stored)
        else:
            located[(stored.file_hash, stored.path)] = item
    if missing and not skip_missing:
        names = ", ".join(sorted(m.path for m in missing)[:5])
        raise MissingLandingFilesError(
            f"{len(missing)} landing file(s) to re-derive are gone or changed "
            f"({names}{', ...' if len(missing) > 5 else ''}); pass --landing DIR "
            "where they are, or --skip-missing to keep their sessions as they are"
        )
    if missing:
        lost, lost_sessions = close_over_sessions(
            {(m.tenant_id, m.path) for m in missing}, edges
        )
        plan.skipped_sessions = len(lost_sessions & sessions)
        sessions -= lost_sessions
        chosen = [f for f in chosen if (f.tenant_id, f.path) not in lost]
        plan.missing = sorted(m.path for m in missing)
    plan.items = [
        located[(f.file_hash, f.path)]
        for f in chosen
        if (f.file_hash, f.path) in located
    ]
    plan.sessions = sorted(sessions)
    received = [_as_utc(f.first_seen) for f in chosen if f.first_seen is not None]
    plan.received_at = max(received, default=None)
    return plan


def run_backfill(
    warehouse: str | Path,
    *,
    policy_file: str | Path,
    since: date | datetime | None = None,
    tenant: str | None = None,
    landing: str | Path | None = None,
    skip_missing: bool = False,
    stale: bool = False,
    key_file: str | Path | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    beam_args: Sequence[str] = (),
    progress: Progress = _silent,
    now: datetime | None = None,
) -> BackfillResult:
    """Re-derive the chosen history under ``policy_file``; one snapshot if
    anything differs (module docstring)."""

    from ctxledger.jobs.runner import beam_pipeline, runner_name
    from ctxledger.pipelines.evidence.ahead import released
    from ctxledger.pipelines.graph import build_batch_graph
    from ctxledger.pipelines.models import (
        local_workers,
        shares_process,
        sized_worker_threads,
    )
    from ctxledger.pipelines.redact.keys import load_key
    from ctxledger.pipelines.redact.registry import load_checked_policy
    from ctxledger.pipelines.sink.replace import BackfillScope, ReplacingCommit

    started_at = datetime.now(UTC)
    policy = load_checked_policy(policy_file)
    warehouse = Path(warehouse).resolve()
    progress("planning the backfill")
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        wh.ensure_tables()
        plan = plan_backfill(
            wh,
            since=since,
            tenant=tenant,
            landing=landing,
            skip_missing=skip_missing,
            stale_version=policy.policy_version if stale else None,
        )
    result = BackfillResult(plan=plan, policy_version=policy.policy_version)
    if not plan.items:
        progress("nothing to backfill")
        return result
    hashes = sorted(i.file_hash for i in plan.items)
    config = JobConfig(
        job="backfill",
        run_id=run_id_for(
            "backfill", policy.policy_version, [*hashes, f"base:{plan.base_snapshot}"]
        ),
        landing=str(Path(landing).resolve()) if landing else "",
        warehouse=str(warehouse),
        catalog=catalog,
        data_path=data_path,
        policy_file=str(policy_file),
        policy_version=policy.policy_version,
        code_version=code_version(),
        max_record_bytes=policy.limits.max_record_bytes,
        key_file=str(key_file) if key_file else None,
        attempt=new_attempt(),  # staging per attempt (jobs.nightly)
        received_at=plan.received_at,  # the run's logical time
    )
    result.run_id = config.run_id
    key = load_key(Path(key_file) if key_file else None)
    runner = runner_name(beam_args)
    progress(
        f"run {config.run_id}: re-deriving {len(plan.items)} file(s), "
        f"{len(plan.sessions)} session(s) on {runner}"
    )
    scope = BackfillScope(
        sessions=tuple(plan.sessions),
        base_snapshot=plan.base_snapshot,
        memory_settings=policy.memory,
        now=now or datetime.now(UTC),
        record_unchanged=stale,
    )
    try:
        # Threads per local worker and per-stage progress lines as the nightly.
        with (
            attempt_lock(config.staging_dir),
            released(config.run_id),  # the embed-ahead helper, if any
            sized_worker_threads(local_workers(beam_args)),
            _stage_lines(config.staging_dir, progress) as stage_lines,
        ):
            with beam_pipeline(beam_args) as pipeline:
                pending = build_batch_graph(
                    pipeline,
                    plan.items,
                    config,
                    policy,
                    key,
                    started_at=started_at,
                    files_seen=len(plan.items),
                    files_skipped=0,
                    runner=runner,
                    commit=ReplacingCommit(scope),
                    workers=local_workers(beam_args),
                    shares_process=shares_process(beam_args),
                )
            pending.run()  # the one commit, on the launcher (as the nightly)
    except Exception as exc:
        fail_run(config, started_at, runner, len(plan.items), exc)
    with Warehouse.open(warehouse, catalog=catalog, data_path=data_path) as wh:
        manifest = load_run(wh, config.run_id)
        if manifest is not None:
            if stage_lines is not None:
                stage_lines.settle(manifest.stage_timings)
            result.snapshot_id = manifest.snapshot_id
            result.changes = load_changes(wh, config.run_id)
    if result.snapshot_id is not None:
        _refresh_serving(warehouse, catalog, data_path, progress)
    return result


def load_changes(wh: Warehouse, run_id: str) -> list[BackfillChange]:
    """A backfill run's stored diff rows."""
    table = wh.query(
        "SELECT * FROM backfill_diffs WHERE run_id = ? ORDER BY section, item",
        [run_id],
    ).arrow()
    if hasattr(table, "read_all"):
        table = table.read_all()
    return [BackfillChange.model_validate(r) for r in table.to_pylist()]


def detector_of(policy_version: str) -> str:
    """The detector part of a ``policy_version`` (``""`` when it names none:
    a run from before versions named the detector)."""
    _, _, rest = policy_version.partition("+")
    return rest.partition(".")[2]


@dataclass
class StaleHistory:
    """Landing files last derived under another policy version than the
    current one, split by why (``ctxledger runs`` prints it)."""

    current: str
    #: run id -> (its policy_version, files it is the latest derivation of)
    other_detector: dict[str, tuple[str, int]] = field(default_factory=dict)
    other_policy: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def files(self) -> int:
        """Files a ``backfill --stale`` would start from."""
        runs = (*self.other_detector.values(), *self.other_policy.values())
        return sum(n for _, n in runs)


def stale_history(wh: Warehouse, policy_version: str) -> StaleHistory:
    """Which committed runs still own the latest derivation of some landing
    file under another version than ``policy_version``."""
    out = StaleHistory(current=policy_version)
    if not {"landing_files", "runs"} <= set(wh.existing_tables()):
        return out
    detector = detector_of(policy_version)
    for f in stored_files(wh):
        if f.latest_version == policy_version:
            continue
        bucket = (
            out.other_detector
            if detector_of(f.latest_version) != detector
            else out.other_policy
        )
        _, n = bucket.get(f.latest_run, (f.latest_version, 0))
        bucket[f.latest_run] = (f.latest_version, n + 1)
    return out
