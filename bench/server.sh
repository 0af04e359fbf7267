#!/usr/bin/env bash
# Server benchmark: graphloom's server (bench_server, SQLite file) vs `langgraph dev`
# (langgraph-api, in-memory runtime) on this machine, with one load generator (bench_load).
#
#   bash bench/server.sh [--clients N] [--duration SECS] [--warmup SECS] [--idle-threads N]
#                        [--rounds N]
#
# Per server: start it, run `wait`, `stream`, `stream-all` (runs/stream of the run the
# thread protocol starts: five modes, subgraphs, events kept for replay) and `thread` (the
# thread-centric protocol's run.start + stream/events, what useStream does) (warm-up,
# then timed; the agent graph on a
# fresh thread per run), stop it; start a fresh one, create --idle-threads threads each
# interrupted (the `interrupter` graph), read its peak RSS (VmHWM), stop it. Then a table.
# With --rounds N (default 1) the wait/stream part runs N times, the servers taking turns
# in each round, and the table shows each scenario's median round and the range: on a
# shared VM one server's run can land in a slow spell the other's missed.
# Environment:
#   SKIP_LANGGRAPH=1 / SKIP_GRAPHLOOM=1 / SKIP_PYTHON=1  reuse bench/out/server_{langgraph,graphloom,graphloom_py}*.json
#              (graphloom_py: the same Python graphs as langgraph dev's, served by the Python
#              package's `graphloom serve`, installed into bench/.venv from this checkout)
#   GRAPHLOOM_WHEEL  a built graphloom wheel to install for graphloom_py (default: build
#              ./crates/graphloom-python, release profile)
#   LG_JOBS    `langgraph dev --n-jobs-per-worker` (default 8, as graphloom's default of 8
#              workers; without the flag `langgraph dev` executes 1 run at a time)
#   SKIP_IDLE=1   skip the idle-threads memory case (the longest part with `langgraph dev`)
#   SKIP_TMPFS=1  skip the extra graphloom run with its SQLite file on /dev/shm
#   GL_PORT, LG_PORT, PY_PORT  ports (default 8123, 8124, 8125)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=bench/.venv
OUT=bench/out
LANGGRAPH_VERSION=1.2.22
LANGGRAPH_CLI_VERSION=0.4.40
LANGGRAPH_API_VERSION=0.16.7
LANGGRAPH_RUNTIME_INMEM_VERSION=0.36.7
LG_JOBS=${LG_JOBS:-8}
GL_PORT=${GL_PORT:-8123}
LG_PORT=${LG_PORT:-8124}
PY_PORT=${PY_PORT:-8125}
LOAD_ARGS=()
IDLE_ARGS=()
ROUNDS=1
while [ $# -gt 0 ]; do
    case "$1" in
        --clients) LOAD_ARGS+=(--clients "$2"); IDLE_ARGS+=(--clients "$2"); shift 2 ;;
        --duration|--warmup) LOAD_ARGS+=("$1" "$2"); shift 2 ;;
        --idle-threads) IDLE_ARGS+=(--idle-threads "$2"); shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/graphloom/target}
cargo build -q --release -p graphloom-bench --bin bench_server --bin bench_load
BIN=$CARGO_TARGET_DIR/release

server_pid=""
stop_server() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        # The process and its children (langgraph dev may fork).
        local kids
        kids=$(pgrep -P "$server_pid" || true)
        kill -TERM "$server_pid" $kids 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" $kids 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    server_pid=""
}
trap stop_server EXIT

wait_ready() { # url
    for _ in $(seq 1 300); do
        if curl -sf "$1/ok" >/dev/null 2>&1; then return 0; fi
        kill -0 "$server_pid" 2>/dev/null || { echo "server exited; log:" >&2; tail -n 30 "$LOG" >&2; exit 1; }
        sleep 0.2
    done
    echo "server did not come up; log:" >&2; tail -n 30 "$LOG" >&2; exit 1
}

start_graphloom() {
    LOG=$OUT/server_graphloom.log
    "$BIN/bench_server" --addr "127.0.0.1:$GL_PORT" >"$LOG" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:$GL_PORT"
}

start_graphloom_tmpfs() {
    # The same server with its SQLite file on tmpfs: commits cost no disk flush, which
    # separates the fsync cost of the default (durable) setup from CPU.
    LOG=$OUT/server_graphloom_tmpfs.log
    rm -f /dev/shm/graphloom-bench.db*
    "$BIN/bench_server" --addr "127.0.0.1:$GL_PORT" --db /dev/shm/graphloom-bench.db >"$LOG" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:$GL_PORT"
}

LG_DIR=$OUT/langgraph-dev
start_langgraph() {
    LOG=$OUT/server_langgraph.log
    # A fresh working copy: `langgraph dev` resolves graph paths against, and keeps its
    # in-memory state's snapshots (.langgraph_api/) in, the current directory.
    rm -rf "$LG_DIR"
    mkdir -p "$LG_DIR"
    cp bench/server/agent.py bench/server/langgraph.json "$LG_DIR/"
    (cd "$LG_DIR" && exec env LANGSMITH_TRACING=false LANGGRAPH_CLI_NO_ANALYTICS=1 \
        "$ROOT/$VENV/bin/langgraph" dev --no-browser --no-reload --port "$LG_PORT" \
        --n-jobs-per-worker "$LG_JOBS" --server-log-level WARNING) >"$LOG" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:$LG_PORT"
}

PY_DIR=$OUT/graphloom-py
start_graphloom_py() {
    # The Python graphs of `langgraph dev`'s run, unchanged, on graphloom's server: LangGraph
    # runs them on the server's event loop, graphloom's savers keep them in a SQLite file.
    LOG=$OUT/server_graphloom_py.log
    rm -rf "$PY_DIR"
    mkdir -p "$PY_DIR"
    cp bench/server/agent.py bench/server/langgraph.json "$PY_DIR/"
    (cd "$PY_DIR" && exec env RUST_LOG=warn "$ROOT/$VENV/bin/graphloom" serve \
        --addr "127.0.0.1:$PY_PORT" --db "$ROOT/$PY_DIR/bench.db") >"$LOG" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:$PY_PORT"
}

run_server() { # label start-fn port round [no-idle]
    local label=$1 start=$2 port=$3 round=$4 url="http://127.0.0.1:$3"
    echo "== $label: wait, stream (round $round of $ROUNDS)"
    [ "$round" != 1 ] || rm -f "$OUT/server_${label}".r*.json
    $start
    "$BIN/bench_load" --url "$url" --label "$label" --pid "$server_pid" --scenarios wait,stream,stream-all,thread \
        "${LOAD_ARGS[@]}" --json "$OUT/server_${label}.r${round}.json" >/dev/null
    stop_server
    [ "$round" = "$ROUNDS" ] && [ -z "${5:-}" ] && [ "${SKIP_IDLE:-0}" != 1 ] || return 0
    echo "== $label: idle interrupted threads"
    $start
    "$BIN/bench_load" --url "$url" --label "$label" --pid "$server_pid" --scenarios idle \
        "${IDLE_ARGS[@]}" --json "$OUT/server_${label}_idle.json" >/dev/null
    stop_server
}

if [ "${SKIP_LANGGRAPH:-0}" != 1 ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
    fi
    if ! "$VENV/bin/python" - "$LANGGRAPH_VERSION" "$LANGGRAPH_CLI_VERSION" "$LANGGRAPH_API_VERSION" \
        "$LANGGRAPH_RUNTIME_INMEM_VERSION" <<'PYEOF' 2>/dev/null; then
import importlib.metadata as m, sys
names = ["langgraph", "langgraph-cli", "langgraph-api", "langgraph-runtime-inmem"]
sys.exit(0 if all(m.version(k) == v for k, v in zip(names, sys.argv[1:])) else 1)
PYEOF
        "$VENV/bin/pip" install -q --disable-pip-version-check "langgraph==$LANGGRAPH_VERSION" \
            "langgraph-cli[inmem]==$LANGGRAPH_CLI_VERSION" "langgraph-api==$LANGGRAPH_API_VERSION" \
            "langgraph-runtime-inmem==$LANGGRAPH_RUNTIME_INMEM_VERSION"
    fi
fi

if [ "${SKIP_PYTHON:-0}" != 1 ]; then
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    # A release build of the package from this checkout (a few minutes the first time), or
    # the wheel GRAPHLOOM_WHEEL names.
    "$VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps \
        "${GRAPHLOOM_WHEEL:-./crates/graphloom-python}"
fi

for round in $(seq 1 "$ROUNDS"); do
    if [ "${SKIP_GRAPHLOOM:-0}" != 1 ]; then
        run_server graphloom start_graphloom "$GL_PORT" "$round"
        if [ "${SKIP_TMPFS:-0}" != 1 ] && [ -d /dev/shm ]; then
            run_server graphloom_tmpfs start_graphloom_tmpfs "$GL_PORT" "$round" no-idle
            rm -f /dev/shm/graphloom-bench.db*
        fi
    fi
    if [ "${SKIP_PYTHON:-0}" != 1 ]; then
        run_server graphloom_py start_graphloom_py "$PY_PORT" "$round"
    fi
    if [ "${SKIP_LANGGRAPH:-0}" != 1 ]; then
        run_server langgraph start_langgraph "$LG_PORT" "$round"
    fi
done

PY=python3
[ -x "$VENV/bin/python" ] && PY="$VENV/bin/python"
"$PY" - "$OUT" <<'PYEOF' | tee "$OUT/server.txt"
import json, os, sys

out = sys.argv[1]

# Rounds of this invocation (server_<label>.r<N>.json): each scenario's median round by
# throughput, with every round's rps, becomes server_<label>.json (what SKIP_* reuses).
import glob
for label in ("graphloom", "graphloom_tmpfs", "graphloom_py", "langgraph"):
    paths = sorted(glob.glob(os.path.join(out, f"server_{label}.r*.json")))
    if not paths:
        continue
    runs = [json.load(open(p)) for p in paths]
    merged = dict(runs[0])
    results = []
    for scenario in [r["scenario"] for r in runs[0]["results"]]:
        rounds = [r for doc in runs for r in doc["results"] if r["scenario"] == scenario]
        rounds.sort(key=lambda r: r["rps"])
        median = dict(rounds[(len(rounds) - 1) // 2])
        median["rounds_rps"] = [r["rps"] for r in rounds]
        results.append(median)
    merged["results"] = results
    with open(os.path.join(out, f"server_{label}.json"), "w") as f:
        json.dump(merged, f, indent=1)
    for p in paths:
        os.remove(p)

def load(name):
    path = os.path.join(out, name)
    try:
        with open(path) as f:
            return {r["scenario"]: r for r in json.load(f)["results"]}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"no results in {path} ({e}); run that server's scenarios again (without SKIP_*)")
def load_idle(name):
    return load(name) if os.path.exists(os.path.join(out, name)) and os.environ.get("SKIP_IDLE") != "1" else {}
gl = ({**load("server_graphloom.json"), **load_idle("server_graphloom_idle.json")}
      if os.path.exists(os.path.join(out, "server_graphloom.json")) else {})
lg = {**load("server_langgraph.json"), **load_idle("server_langgraph_idle.json")}

def f(x, d=1):
    return "-" if x is None else f"{x:,.{d}f}"

def spread(r):
    rs = r.get("rounds_rps") or []
    return f" ({min(rs):,.0f}-{max(rs):,.0f})" if len(rs) > 1 else ""
label = lambda s: {"thread": "thread stream (run.start + stream/events)",
                   "stream-all": "runs/stream, the protocol's run (5 modes, resumable)"}.get(s, f"runs/{s}")
# graphloom with Rust graphs (left out with SKIP_GRAPHLOOM=1 and no earlier results).
if gl:
    w = gl["wait"]
    print(f"\n{w['clients']} clients, {w['seconds']:.0f} s per scenario; load average at the end: "
          f"graphloom {gl['stream']['loadavg']}, langgraph {lg['stream']['loadavg']}\n")
    print("| scenario | graphloom rps | p50 ms | p99 ms | langgraph dev rps | p50 ms | p99 ms | rps ratio | p99 ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    tp = os.path.join(out, "server_graphloom_tmpfs.json")
    tm = load("server_graphloom_tmpfs.json") if os.path.exists(tp) else {}
    rows = [(s, "", gl[s]) for s in ("wait", "stream", "stream-all", "thread") if s in gl and s in lg] + \
        [(s, " (SQLite on tmpfs)", tm[s]) for s in tm if s in lg]
    for s, note, a in rows:
        b = lg[s]
        print(f"| {label(s)}{note} | {f(a['rps'])}{spread(a)} | {f(a['p50_ms'],2)} | {f(a['p99_ms'],2)} | {f(b['rps'])}{spread(b)} | "
              f"{f(b['p50_ms'],2)} | {f(b['p99_ms'],2)} | {a['rps']/b['rps']:.1f}x | {b['p99_ms']/a['p99_ms']:.1f}x lower |")
    print()
    print("| scenario | graphloom server CPU ms/run | client CPU ms/run | errors | langgraph dev server CPU ms/run | client CPU ms/run | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s, note, a in rows:
        b = lg[s]
        print(f"| {label(s)}{note} | {f(a['server_cpu_ms_per_run'],2)} | {f(a['client_cpu_ms_per_run'],2)} | {a['errors']} | "
              f"{f(b['server_cpu_ms_per_run'],2)} | {f(b['client_cpu_ms_per_run'],2)} | {b['errors']} |")
py_path = os.path.join(out, "server_graphloom_py.json")
if os.path.exists(py_path):
    py = {**load("server_graphloom_py.json"), **load_idle("server_graphloom_py_idle.json")}
    print()
    print("The same Python graphs (bench/server/agent.py) on the Python package's `graphloom serve`:")
    print()
    print("| scenario | graphloom serve (Python graphs) rps | p50 ms | p99 ms | langgraph dev rps | p50 ms | p99 ms | rps ratio | p99 ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in ("wait", "stream", "stream-all", "thread"):
        if s in py and s in lg:
            a, b = py[s], lg[s]
            print(f"| {label(s)} | {f(a['rps'])}{spread(a)} | {f(a['p50_ms'],2)} | {f(a['p99_ms'],2)} | {f(b['rps'])}{spread(b)} | "
                  f"{f(b['p50_ms'],2)} | {f(b['p99_ms'],2)} | {a['rps']/b['rps']:.1f}x | {b['p99_ms']/a['p99_ms']:.1f}x lower |")
    if "idle" in py and "idle" in lg:
        a, b = py["idle"], lg["idle"]
        print(f"\n{a['threads']:,} idle interrupted threads: peak RSS {f(a['peak_rss_mib'])} MiB "
              f"(graphloom serve, Python graphs) vs {f(b['peak_rss_mib'])} MiB (langgraph dev), "
              f"{b['peak_rss_mib']/a['peak_rss_mib']:.1f}x less")
if "idle" not in gl or "idle" not in lg:
    sys.exit(0)
a, b = gl["idle"], lg["idle"]
print()
print(f"| {a['threads']:,} idle interrupted threads | graphloom | langgraph dev | ratio |")
print("|---|---:|---:|---:|")
print(f"| peak RSS (VmHWM), MiB | {f(a['peak_rss_mib'])} | {f(b['peak_rss_mib'])} | {b['peak_rss_mib']/a['peak_rss_mib']:.1f}x less |")
print(f"| RSS before / after, MiB | {f(a['rss_before_mib'])} / {f(a['rss_after_mib'])} | {f(b['rss_before_mib'])} / {f(b['rss_after_mib'])} | |")
print(f"| time to create them, s | {f(a['seconds'])} | {f(b['seconds'])} | |")
if a.get("rps_per_fifth") and b.get("rps_per_fifth"):
    fifths = lambda r: " / ".join(f"{x:,.0f}" for x in r["rps_per_fifth"])
    print(f"| threads/s per fifth | {fifths(a)} | {fifths(b)} | |")
PYEOF
