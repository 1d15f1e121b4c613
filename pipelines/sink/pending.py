"""The run's commit, on the launcher, after the pipeline: ``PendingCommit``.

Why not a pipeline step: a commit inside a DoFn attaches the catalog on
whichever worker runs it, which on a cluster is another machine (a local
catalog file it cannot reach), and on some runners its failure and retries
are the runner's. ``build_batch_graph`` returns a ``PendingCommit``; the job
runs the pipeline on any runner, then calls ``run()`` in its own process:

1. stop the embed-ahead helper (its read-only attach would block the commit);
2. read the shard paths the pipeline reported (``pipelines.sink.staged``);
3. check them against the writers' shard manifests and the planned landing
   files (``verify_staged``): lost rows fail the run;
4. run the commit step (``commit_run``, or a job's own, such as the
   backfill's replacing commit): conservation counts, one snapshot.

No Beam import here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.sink.staged import read_reported, verify_staged


@dataclass
class PendingCommit:
    """Everything the run's single commit needs, known when the graph is built."""

    config: JobConfig
    started_at: datetime
    files_seen: int
    files_skipped: int
    runner: str
    commit: Callable[..., Any] | None = None
    expected_files: int | None = None

    def run(self) -> Any:
        """Verify the staged shards and commit them (module docstring); the
        ``RunManifest`` the commit step returns."""
        from ctxledger.pipelines.sink.commit import commit_run

        config = self.config
        if getattr(config, "embed_ahead", False):
            from ctxledger.pipelines.evidence.ahead import release_ahead

            release_ahead(config.run_id)
        paths = read_reported(config.staging_dir)
        verify_staged(config.staging_dir, paths, self.expected_files)
        commit = self.commit or commit_run
        return commit(
            config,
            paths,
            started_at=self.started_at,
            files_seen=self.files_seen,
            files_skipped=self.files_skipped,
            runner=self.runner,
        )
