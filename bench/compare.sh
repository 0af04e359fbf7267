#!/usr/bin/env bash
# Side-by-side run of the benchmark suite: Python LangGraph (bench/langgraph/run.py) and
# graphloom (the graphloom-bench binary), then one table with both medians and the ratio.
#
#   bash bench/compare.sh [--min-iters N] [--min-time SECS] [--warmup N] [--filter a,b] [--exact]
#
# The options are passed to both runners (`--exact`: filter entries are whole case names).
# LangGraph's results are merged into bench/out/langgraph.json (a filtered run refreshes its
# own cases and keeps the others). Environment:
#   LANGGRAPH_VERSION  langgraph version installed in bench/.venv (default 1.2.22)
#   LANGCHAIN_VERSION  langchain version (its `create_agent`, for `create_agent_react_*`;
#                      default 1.5.2)
#   LG_MODE            sync | async | best (default best: the faster of LangGraph's sync and
#                      async runs counts)
#   SKIP_LANGGRAPH=1   reuse bench/out/langgraph.json instead of running Python again
#   SKIP_GRAPHLOOM=1   reuse bench/out/graphloom.json instead of running Rust again
#   GRAPHLOOM_PG_URL   PostgreSQL server (maintenance-database URL; a user that may create
#                      databases) for the `_postgres` cases of both runners; unset: a private
#                      cluster is started for this run (as scripts/test.sh does), removed on exit
#   PG_FSYNC           fsync of that private cluster (default on; scripts/test.sh uses off)
#
# The durable-saver cases (`*_sqlite`, `*_postgres`: `sync` durability, every superstep
# saved) are slow; run them on their own with fewer iterations:
#   bash bench/compare.sh --filter _sqlite,_postgres --min-iters 3 --min-time 1
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=bench/.venv
OUT=bench/out
LANGGRAPH_VERSION=${LANGGRAPH_VERSION:-1.2.22}
LANGCHAIN_VERSION=${LANGCHAIN_VERSION:-1.5.2}
LG_MODE=${LG_MODE:-best}
LG_CHECKPOINT_SQLITE_VERSION=3.1.2
LG_CHECKPOINT_POSTGRES_VERSION=3.2.0
PSYCOPG_VERSION=3.3.9
mkdir -p "$OUT"

# --- PostgreSQL for the `_postgres` cases (one server for both runners) ---------------------
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
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
start_postgres() {
    if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
        echo "GRAPHLOOM_PG_URL is unset and PostgreSQL is not installed (apt-get install -y postgresql)" >&2
        exit 1
    fi
    pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    pg_dir="$(mktemp -d /tmp/graphloom-bench-pg.XXXXXX)"
    trap stop_postgres EXIT
    mkdir -p "$pg_dir/sock"
    if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$pg_dir"; fi
    pg_as "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
        >"$pg_dir/initdb.log" 2>&1 || { cat "$pg_dir/initdb.log" >&2; exit 1; }
    local port tries=0
    while :; do
        tries=$((tries + 1))
        port=$((20000 + RANDOM % 40000))
        # fsync on by default (unlike the test cluster of scripts/test.sh): these cases
        # measure durable commits. PG_FSYNC=off for the test cluster's setting.
        if port_free "$port" && pg_as "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
            -o "-p $port -h 127.0.0.1 -k $pg_dir/sock -c max_connections=300 -c fsync=${PG_FSYNC:-on}" \
            start >/dev/null; then
            break
        fi
        if [ "$tries" -ge 5 ]; then
            echo "could not start PostgreSQL; server log:" >&2
            cat "$pg_dir/server.log" >&2 || true
            exit 1
        fi
    done
    export GRAPHLOOM_PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
    echo "== PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') at $GRAPHLOOM_PG_URL (private, removed on exit)"
}
if [ -z "${GRAPHLOOM_PG_URL:-}" ]; then
    start_postgres
fi

if [ "${SKIP_LANGGRAPH:-0}" != 1 ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
    fi
    if ! "$VENV/bin/python" - "$LANGGRAPH_VERSION" "$LG_CHECKPOINT_SQLITE_VERSION" \
        "$LG_CHECKPOINT_POSTGRES_VERSION" "$PSYCOPG_VERSION" "$LANGCHAIN_VERSION" <<'EOF' 2>/dev/null; then
import importlib.metadata as m, sys
names = ["langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "psycopg", "langchain"]
sys.exit(0 if all(m.version(k) == v for k, v in zip(names, sys.argv[1:])) else 1)
EOF
        "$VENV/bin/pip" install -q --disable-pip-version-check "langgraph==$LANGGRAPH_VERSION" uvloop \
            "langgraph-checkpoint-sqlite==$LG_CHECKPOINT_SQLITE_VERSION" \
            "langgraph-checkpoint-postgres==$LG_CHECKPOINT_POSTGRES_VERSION" \
            "psycopg[binary]==$PSYCOPG_VERSION" "langchain==$LANGCHAIN_VERSION"
    fi
    echo "== LangGraph $LANGGRAPH_VERSION, LangChain $LANGCHAIN_VERSION ($LG_MODE)"
    "$VENV/bin/python" bench/langgraph/run.py --mode "$LG_MODE" \
        --json "$OUT/langgraph.json" --detail-json "$OUT/langgraph_detail.json" "$@"
fi

if [ "${SKIP_GRAPHLOOM:-0}" != 1 ]; then
    echo "== graphloom"
    cargo run --release -q -p graphloom-bench -- --json "$OUT/graphloom.json" "$@"
fi

PY=python3
[ -x "$VENV/bin/python" ] && PY="$VENV/bin/python"
"$PY" - "$OUT/langgraph.json" "$OUT/graphloom.json" <<'EOF' | tee "$OUT/compare.txt"
import json, statistics, sys

lg = json.load(open(sys.argv[1]))
gl = json.load(open(sys.argv[2]))

def human(s):
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"

rows = []
for case in sorted(set(lg) | set(gl)):
    a, b = lg.get(case), gl.get(case)
    ratio = a / b if a is not None and b else None
    rows.append((case, a, b, ratio))

print()
print(f"{'case':<40} {'LangGraph':>12} {'graphloom':>12} {'ratio':>9}")
print("-" * 76)
for case, a, b, r in rows:
    fa = human(a) if a is not None else "-"
    fb = human(b) if b is not None else "-"
    fr = f"{r:.1f}x" if r is not None else "-"
    print(f"{case:<40} {fa:>12} {fb:>12} {fr:>9}")
ratios = [(r, c) for c, _, _, r in rows if r is not None]
if ratios:
    print("-" * 76)
    print(f"median of ratios (LangGraph / graphloom): {statistics.median(r for r, _ in ratios):.1f}x over {len(ratios)} cases")
    low = min(ratios)
    print(f"minimum ratio: {low[0]:.2f}x ({low[1]})")
EOF
