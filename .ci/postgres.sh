#!/usr/bin/env bash
# A throwaway PostgreSQL server for the shared-catalog tests (docs/scale_out.md).
#
# Idempotent: installs Debian's `postgresql` package if no server binaries are found
# (root only), creates a cluster under $CTXLEDGER_PG_DIR on first use, starts it if it
# is not running, creates a login role and database that may create more databases
# (each test uses a fresh one), and prints the URL on stdout, e.g.
#
#   export CTXLEDGER_TEST_POSTGRES="$(.ci/postgres.sh)"
#
# The server listens on 127.0.0.1 only, with trust authentication: it is for tests,
# never for data. Stop it with `.ci/postgres.sh stop`.
set -euo pipefail

PG_DIR="${CTXLEDGER_PG_DIR:-/tmp/ctxledger-pg}"
PG_PORT="${CTXLEDGER_PG_PORT:-55432}"
PG_USER="${CTXLEDGER_PG_USER:-ctxledger}"
PG_DB="${CTXLEDGER_PG_DB:-ctxledger}"
DATA="$PG_DIR/data"

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
      echo "$dir"
      return 0
    fi
  done
  if command -v pg_config >/dev/null 2>&1 && [[ -x "$(pg_config --bindir)/initdb" ]]; then
    pg_config --bindir
    return 0
  fi
  return 1
}

BIN="$(find_bindir || true)"
if [[ -z "$BIN" ]]; then
  SUDO=""
  if [[ "$(id -u)" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      SUDO="sudo -n"
    else
      log "no PostgreSQL server binaries and no root: install the postgresql package"
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    log "no PostgreSQL server binaries and no apt-get: install PostgreSQL 13+"
    exit 1
  fi
  log "installing postgresql from Debian's packages"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  BIN="$(find_bindir)"
fi

# initdb and the server refuse to run as root: use the `postgres` system user then.
OWNER="$(id -un)"
if [[ "$(id -u)" -eq 0 ]]; then
  OWNER=postgres
  id postgres >/dev/null 2>&1 || useradd --system --home-dir "$PG_DIR" postgres
fi
as_owner() {
  if [[ "$(id -un)" == "$OWNER" ]]; then
    "$@"
  else
    runuser -u "$OWNER" -- "$@"
  fi
}

if [[ "${1:-}" == "stop" ]]; then
  if [[ -f "$DATA/postmaster.pid" ]]; then
    as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2
  fi
  exit 0
fi

mkdir -p "$PG_DIR"
chown "$OWNER" "$PG_DIR"
chmod 700 "$PG_DIR"
if [[ ! -f "$DATA/PG_VERSION" ]]; then
  log "creating a cluster in $DATA"
  as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; exit 1; }
fi

if ! as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  log "starting on 127.0.0.1:$PG_PORT"
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c max_connections=200" \
    start >&2 || { tail -20 "$PG_DIR/server.log" >&2; exit 1; }
fi

psql_admin() {
  as_owner "$BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -qtA "$@"
}
if [[ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER'")" != 1 ]]; then
  psql_admin -c "CREATE ROLE \"$PG_USER\" LOGIN CREATEDB" >&2
fi
if [[ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]]; then
  psql_admin -c "CREATE DATABASE \"$PG_DB\" OWNER \"$PG_USER\"" >&2
fi

echo "postgresql://$PG_USER@127.0.0.1:$PG_PORT/$PG_DB"
