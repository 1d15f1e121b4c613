"""Airflow DAGs for ctxledger: the nightly job and a policy-change backfill.

Copy this file into the DAGs folder of an Airflow 2.4+ (or 3.x) deployment whose
workers have ctxledger installed (``CTXLEDGER`` below: the venv's entry point).
Airflow is not a ctxledger dependency; see docs/scheduling.md.

* ``ctxledger_nightly`` runs every night: ``nightly`` (idempotent, so Airflow's
  retries are safe), then ``verify`` (fails the DAG run when a stored ledger lost a
  protected field) and ``runs`` (the run's counts in the task log).
* ``ctxledger_backfill`` has no schedule: trigger it with the new policy, e.g.
  ``airflow dags trigger ctxledger_backfill --conf '{"policy":
  "/etc/ctxledger/policies/v2.yaml", "since": "2026-10-01", "tenant": "acme"}'``.

Both write through the pool ``ctxledger_warehouse`` (create it with one slot:
``airflow pools set ctxledger_warehouse 1 "ctxledger writers"``), so a backfill
never runs beside a nightly: a backfill refuses to commit when the warehouse
moved under it. The commands are plain Bash; the Beam runner is chosen by
``beam_args``, passed after ``--`` (e.g. ``--runner=FlinkRunner
--flink_master=...``, docs/scale_out.md): ctxledger rejects an unknown option.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow import DAG

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator

CTXLEDGER = "/opt/ctxledger/.venv/bin/ctxledger"
POOL = "ctxledger_warehouse"
#: Models come from installed packages; nothing may reach for a hub at run time.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS": "",
    "TOKENIZERS_PARALLELISM": "false",
}
#: Where the warehouse lives. Leave ``catalog`` empty for the local catalog file;
#: set it (and ``data_path``) for a shared Postgres catalog. The password comes
#: from the worker's ~/.pgpass or PGPASSWORD, never from here.
WAREHOUSE_PARAMS = {
    "warehouse": "/srv/ctxledger/warehouse",
    "catalog": "",
    "data_path": "",
    "key_file": "/etc/ctxledger/pseudonym.key",
}
#: Jinja: the options every command shares.
WAREHOUSE_OPTIONS = (
    " --warehouse {{ params.warehouse }}"
    " {% if params.catalog %} --catalog {{ params.catalog }}"
    " --data-path {{ params.data_path }} {% endif %}"
)

DEFAULT_ARGS = {
    "owner": "data-platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=15),
    "retry_exponential_backoff": True,
    "execution_timeout": timedelta(hours=6),
}

with DAG(
    dag_id="ctxledger_nightly",
    description="Ingest, redact and commit new agent transcripts as one snapshot",
    schedule="15 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,  # nightly is incremental: one run catches up on every file
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params={
        **WAREHOUSE_PARAMS,
        "landing": "/srv/ctxledger/landing",
        "beam_args": "--direct_num_workers=2 --direct_running_mode=multi_processing",
    },
    tags=["ctxledger"],
) as nightly_dag:
    nightly = BashOperator(
        task_id="nightly",
        bash_command=(
            f"{CTXLEDGER} nightly --landing {{{{ params.landing }}}}"
            f"{WAREHOUSE_OPTIONS} --key-file {{{{ params.key_file }}}}"
            " -- {{ params.beam_args }}"
        ),
        env=OFFLINE_ENV,
        append_env=True,
        pool=POOL,
    )
    verify = BashOperator(
        task_id="verify",
        bash_command=f"{CTXLEDGER} verify{WAREHOUSE_OPTIONS}",
        env=OFFLINE_ENV,
        append_env=True,
        retries=0,  # a failed audit is a finding, not a transient error
    )
    recent_runs = BashOperator(
        task_id="runs",
        bash_command=f"{CTXLEDGER} runs{WAREHOUSE_OPTIONS} --limit 3",
        env=OFFLINE_ENV,
        append_env=True,
    )
    nightly >> [verify, recent_runs]

with DAG(
    dag_id="ctxledger_backfill",
    description="Reprocess history under a new policy version and print the diff",
    schedule=None,  # triggered by hand (or by a policy-release pipeline)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={**DEFAULT_ARGS, "retries": 1},
    params={**WAREHOUSE_PARAMS, "policy": "", "since": "", "tenant": ""},
    tags=["ctxledger"],
) as backfill_dag:
    backfill = BashOperator(
        task_id="backfill",
        bash_command=(
            f"{CTXLEDGER} backfill --policy {{{{ params.policy }}}}"
            " {% if params.since %} --since {{ params.since }} {% endif %}"
            " {% if params.tenant %} --tenant {{ params.tenant }} {% endif %}"
            f"{WAREHOUSE_OPTIONS} --key-file {{{{ params.key_file }}}}"
        ),
        env=OFFLINE_ENV,
        append_env=True,
        pool=POOL,
        execution_timeout=timedelta(hours=24),
    )
    verify_after_backfill = BashOperator(
        task_id="verify",
        bash_command=f"{CTXLEDGER} verify{WAREHOUSE_OPTIONS}",
        env=OFFLINE_ENV,
        append_env=True,
        retries=0,
    )
    backfill >> verify_after_backfill
