"""The nightly and the backfill on real distributed workers give the
DirectRunner's tables: Beam's DaskRunner (``jobs.dask_compat``) on a dask
cluster of two single-threaded workers, and the PortableRunner with an
EXTERNAL worker pool (how Flink and Spark run Python workers), all on
127.0.0.1. Tables are compared by row counts and content hashes, less the
wall-clock columns (``table_digest``). Also: a failed run is recorded with
its original reason, and a cluster without workers fails the run in bounded
time.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest
from dask_cluster import hard_timeout, start_cluster, start_worker_pool
from table_digest import max_vector_gap, table_digests

from ctxledger.jobs.backfill import run_backfill
from ctxledger.jobs.nightly import run_nightly
from ctxledger.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample" / "landing"
#: Hard limit of one distributed run (a hung cluster fails the test, not CI).
RUN_TIMEOUT = 240

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    """A small landing: the acme canonical files and globex's OpenHands one."""
    root = tmp_path_factory.mktemp("landing")
    acme = SAMPLE / "tenant=acme"
    shutil.copytree(acme / "canonical", root / "tenant=acme")
    shutil.copytree(
        acme / "subject=cust-0001" / "canonical", root / "tenant=acme",
        dirs_exist_ok=True,
    )  # fmt: skip
    shutil.copytree(SAMPLE / "tenant=globex" / "openhands", root / "tenant=globex")
    return root


@pytest.fixture(scope="module")
def direct(landing, tmp_path_factory) -> Path:
    """The DirectRunner's warehouse of ``landing``: what every runner must equal."""
    warehouse = tmp_path_factory.mktemp("direct")
    run_nightly(landing, warehouse)
    return warehouse


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("dask"), workers=2)
    yield running
    running.stop()


def _same_tables(direct: Path, other: Path) -> None:
    mine, theirs = table_digests(direct), table_digests(other)
    assert mine == theirs
    assert mine["sessions"][0] > 0 and mine["messages"][0] > 0
    assert max_vector_gap(direct, other) < 1e-4


def _runs(warehouse: Path) -> list[tuple]:
    with Warehouse.open(warehouse) as wh:
        return wh.query(
            "SELECT job, status, runner, error FROM runs ORDER BY started_at"
        ).fetchall()


def test_dask_nightly_equals_the_direct_runner(landing, direct, cluster, tmp_path):
    started = time.monotonic()
    with hard_timeout(RUN_TIMEOUT):
        done = run_nightly(landing, tmp_path / "wh", beam_args=cluster.beam_args())
    assert done.manifest.status == "committed"
    assert done.manifest.runner == "DaskRunner"
    _same_tables(direct, tmp_path / "wh")
    print(f"dask nightly: {time.monotonic() - started:.1f} s")


def test_dask_backfill_equals_the_direct_runner(landing, direct, cluster, tmp_path):
    """The backfill over the nightly's history, under a new policy version,
    on the cluster and on the DirectRunner: the same tables."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(_bumped_policy())
    results = {}
    for name, args in (("direct", []), ("dask", cluster.beam_args())):
        warehouse = tmp_path / name
        shutil.copytree(direct, warehouse)
        with hard_timeout(RUN_TIMEOUT):
            results[name] = run_backfill(
                warehouse, policy_file=policy, landing=landing, beam_args=args
            )
    assert results["direct"].snapshot_id is not None
    assert results["dask"].snapshot_id is not None
    _same_tables(tmp_path / "direct", tmp_path / "dask")


def test_dask_nightly_on_a_shared_postgres_catalog_equals_the_direct_runner(
    landing, direct, cluster, tmp_path
):
    """Scale-out as documented: the workers of a dask cluster, a PostgreSQL
    DuckLake catalog and a data path every machine shares. The committed
    tables equal the DirectRunner's on a local catalog."""
    from test_postgres_catalog import _admin, _server_url

    server = _server_url()
    name = f"ctxledger_dask_{uuid.uuid4().hex[:12]}"
    _admin(server, f'CREATE DATABASE "{name}"')
    catalog = f"{server.rpartition('/')[0]}/{name}"
    shared = {"catalog": catalog, "data_path": str(tmp_path / "shared-data")}
    try:
        with hard_timeout(RUN_TIMEOUT):
            done = run_nightly(
                landing, tmp_path / "wh", beam_args=cluster.beam_args(), **shared
            )
        assert done.manifest.status == "committed"
        assert done.manifest.runner == "DaskRunner"
        mine = table_digests(direct)
        assert table_digests(tmp_path / "wh", **shared) == mine
        assert mine["sessions"][0] > 0 and mine["messages"][0] > 0
        assert max_vector_gap(direct, tmp_path / "wh", **shared) < 1e-4
    finally:
        try:
            _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception:  # noqa: BLE001 - cleanup must not hide the result
            pass


def test_external_worker_pool_equals_the_direct_runner(
    landing, direct, tmp_path
):  # fmt: skip
    pool = start_worker_pool(tmp_path / "pool")
    try:
        with hard_timeout(RUN_TIMEOUT):
            done = run_nightly(landing, tmp_path / "wh", beam_args=pool.beam_args())
    finally:
        pool.stop()
    assert done.manifest.status == "committed"
    _same_tables(direct, tmp_path / "wh")


def test_a_failed_run_is_recorded_with_its_original_reason(landing, tmp_path):
    with pytest.raises(Exception) as raised:
        run_nightly(landing, tmp_path / "wh", beam_args=["--runner=NoSuchRunner"])
    assert "Unique file handle" not in str(raised.value)
    (job, status, runner, error), = _runs(tmp_path / "wh")  # fmt: skip
    assert (job, status, runner) == ("nightly", "failed", "NoSuchRunner")
    assert error.startswith(type(raised.value).__name__)
    assert str(raised.value).splitlines()[0][:80] in error


def test_a_cluster_without_workers_fails_the_run_in_bounded_time(
    landing, tmp_path
):  # fmt: skip
    empty = start_cluster(tmp_path / "dask", workers=0)
    try:
        with hard_timeout(RUN_TIMEOUT), pytest.raises(RuntimeError, match="no worker"):
            run_nightly(
                landing,
                tmp_path / "wh",
                beam_args=[*empty.beam_args(), "--dask_no_worker_timeout=3"],
            )
    finally:
        empty.stop()
    (job, status, runner, error), = _runs(tmp_path / "wh")  # fmt: skip
    assert (status, runner) == ("failed", "DaskRunner")
    assert "no worker" in error


def _bumped_policy() -> str:
    """The default policy under a new version whose pseudonyms are longer, so
    the backfill re-derives every redacted row (a new version alone changes no
    row: an identical backfill commits nothing)."""
    text = (ROOT / "pipelines" / "redact" / "default_policy.yaml").read_text()
    assert '\nversion: "1"\n' in text and "\npseudonym_hex_length: 8\n" in text
    text = text.replace('\nversion: "1"\n', '\nversion: "2"\n')
    return text.replace("\npseudonym_hex_length: 8\n", "\npseudonym_hex_length: 12\n")


def test_lost_shard_paths_fail_the_run(landing, tmp_path, monkeypatch):
    """The DaskRunner defect, reproduced on the DirectRunner: the shard writer's
    ``finish_bundle`` output never arrives. Its shards were written, their
    manifests say so: the run fails instead of committing empty tables."""
    from ctxledger.pipelines.sink import transforms

    def dropped(self):
        self.buffer.flush()  # the rows are written; the path goes nowhere
        return None

    monkeypatch.setattr(transforms.WriteShardsFn, "finish_bundle", dropped)
    with pytest.raises(Exception, match="never reported"):
        run_nightly(landing, tmp_path / "wh")
    (job, status, runner, error), = _runs(tmp_path / "wh")  # fmt: skip
    assert status == "failed"
    assert "staged but never reported" in error
    with Warehouse.open(tmp_path / "wh") as wh:
        assert wh.query("SELECT count(*) FROM sessions").fetchone() == (0,)


def test_dask_stream_micro_batch_equals_the_direct_runner(landing, cluster, tmp_path):
    """One micro-batch of the stream job (a stop asked before it starts drains
    what the folder holds) on the cluster and on the DirectRunner."""
    from ctxledger.jobs.stream import StopFlag, run_stream

    for name, args in (("direct", []), ("dask", cluster.beam_args())):
        stop = StopFlag()
        stop.set("test")
        with hard_timeout(RUN_TIMEOUT):
            result = run_stream(
                landing, tmp_path / name, poll_seconds=0.2, beam_args=args, stop=stop
            )
        assert sum(b.files for b in result.batches) == len(list(landing.rglob("*.*")))
    _same_tables(tmp_path / "direct", tmp_path / "dask")


def test_no_dofn_attaches_the_catalog(landing, tmp_path, monkeypatch):
    """While the pipeline runs, attaching the catalog raises: planning and the
    commit happen on the launcher, before and after it. The second run has
    stored vectors to reuse, so the evidence stage's lookups are exercised."""
    import threading

    import apache_beam as beam

    from ctxledger.warehouse import catalog

    run_nightly(landing, tmp_path / "wh")  # stores globex vectors
    second = tmp_path / "second"
    shutil.copytree(landing, second)
    shutil.copytree(
        SAMPLE / "tenant=globex" / "pydantic-ai", second / "tenant=globex",
        dirs_exist_ok=True,
    )  # fmt: skip
    running = threading.Event()
    run, attach = beam.Pipeline.run, catalog.attach_lake

    def guarded_run(self, *args, **kwargs):
        running.set()
        try:
            return run(self, *args, **kwargs)
        finally:
            running.clear()

    def guarded_attach(*args, **kwargs):
        if running.is_set():
            raise AssertionError("a pipeline step attached the catalog")
        return attach(*args, **kwargs)

    from ctxledger.pipelines.evidence.stored import VectorFile

    looked_up = []
    lookup = VectorFile.__call__

    def counted(self, keys):
        looked_up.append(len(keys))
        return lookup(self, keys)

    monkeypatch.setattr(beam.Pipeline, "run", guarded_run)
    monkeypatch.setattr(catalog, "attach_lake", guarded_attach)
    monkeypatch.setattr(VectorFile, "__call__", counted)
    done = run_nightly(second, tmp_path / "wh")
    assert done.manifest.status == "committed" and done.files_new > 0
    assert sum(looked_up) > 0  # the stored-vector lookups ran (on the export)
