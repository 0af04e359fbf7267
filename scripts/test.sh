#!/usr/bin/env bash
# The project's test command (the README's second command; .ci/run calls it too).
# Runs every test of the workspace with the conformance kits turned on, then the doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/graphloom/target}"
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi

# --- PostgreSQL -----------------------------------------------------------------------------
# graphloom-postgres tests need a real server. Start ONE private cluster for the whole run
# (a temp data dir owned by `postgres`, trust auth, a free port on 127.0.0.1, its unix socket
# inside the temp dir) and hand it to the tests as GRAPHLOOM_PG_URL; each test creates its own
# database on it. A caller that already exports GRAPHLOOM_PG_URL keeps its own server.
pg_dir=""
pg_bin=""
pg_as() {
  # postgres refuses to run as root: run the server tools as the `postgres` user then.
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
stop_postgres() {
  if [ -n "$pg_dir" ] && [ -d "$pg_dir" ]; then
    pg_as "$pg_bin/pg_ctl" -D "$pg_dir/data" stop -m fast -w >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
}
port_free() {
  # Free if nothing accepts a connection on it.
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
start_postgres() {
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
      echo "PostgreSQL is not installed and we are not root: run 'apt-get install -y postgresql'" >&2
      exit 1
    fi
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
  fi
  pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  pg_dir="$(mktemp -d /tmp/graphloom-pg.XXXXXX)"
  trap stop_postgres EXIT
  mkdir -p "$pg_dir/sock"
  if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$pg_dir"; fi
  pg_as "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
    >"$pg_dir/initdb.log" 2>&1 || { cat "$pg_dir/initdb.log" >&2; exit 1; }
  local port tries=0
  while :; do
    tries=$((tries + 1))
    port=$((20000 + RANDOM % 40000))
    if port_free "$port" && pg_as "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
      -o "-p $port -h 127.0.0.1 -k $pg_dir/sock -c max_connections=300 -c fsync=off" start >/dev/null; then
      break
    fi
    if [ "$tries" -ge 5 ]; then
      echo "could not start PostgreSQL; server log:" >&2
      cat "$pg_dir/server.log" >&2 || true
      exit 1
    fi
  done
  export GRAPHLOOM_PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
  echo "PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') for the tests at $GRAPHLOOM_PG_URL"
}
if [ -z "${GRAPHLOOM_PG_URL:-}" ]; then
  start_postgres
fi

# --- Browser and Node packages ---------------------------------------------------------------
# Browser tests drive Debian's Chromium with Playwright (Playwright's own browser download
# cannot work offline); Node packages come from committed lock files, cached outside the clone.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "Chromium is not installed and we are not root: run 'apt-get install -y chromium'" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
export GRAPHLOOM_CHROMIUM="${GRAPHLOOM_CHROMIUM:-/usr/bin/chromium}"
# The console's browser test (examples/demo/tests/console.rs) runs `npm ci` and `node`.
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "Node.js is not installed and we are not root: run 'apt-get install -y nodejs npm'" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm
fi
export npm_config_cache="${npm_config_cache:-$HOME/.cache/graphloom/npm}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# ---------------------------------------------------------------------------------------------

# --- Python venvs ----------------------------------------------------------------------------
# The official Python clients (langgraph-sdk, mcp, a2a-sdk) run from venvs the tests create
# with `python3 -m venv` and fill from PyPI.
if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "python3 with venv is not installed and we are not root: run 'apt-get install -y python3-venv'" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-venv
fi
# ---------------------------------------------------------------------------------------------

cargo nextest run --workspace --all-features --no-fail-fast
cargo test --workspace --all-features --doc
# The Python package (LangGraph's savers on graphloom's storage): its pytest suite and LangGraph's
# checkpoint conformance suite, in a venv of pinned packages outside the clone.
bash scripts/python-test.sh
