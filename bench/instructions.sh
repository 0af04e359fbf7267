#!/usr/bin/env bash
# Instructions the server executes per run, counted by callgrind: a before/after measure
# that the machine's noise does not move (a shared VM's timings can swing 30% between
# rounds; these counts move by about 1%). It counts user-space instructions only: system
# calls, cache misses and waiting are not in it, so it complements the timed rounds of
# server.sh and does not replace them.
#
#   bash bench/instructions.sh [--clients N] [--duration SECS] DIR SCENARIO...
#
# DIR holds a release `bench_server` and `bench_load` (for example a copy of
# target/release after `cargo build --release -p graphloom-bench`); SCENARIO is one of
# bench_load's (stream, stream-all, thread, thread-chat, wait, ...). For each scenario:
# start bench_server under callgrind (a fresh SQLite file), warm it up with one short
# load, zero the counters, run the load for --duration seconds (default 10) with
# --clients clients (default 4), dump the counters, and print the instructions per
# completed run. Needs valgrind (Debian package `valgrind`).
set -euo pipefail

CLIENTS=4
DURATION=10
while [ $# -gt 0 ]; do
    case $1 in
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    sed -n 2,16p "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
DIR=$(cd "$1" && pwd)
shift
PORT=${PORT:-18556}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for scenario in "$@"; do
    rm -rf "$WORK"/*
    (cd "$WORK" && exec valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.%p" \
        "$DIR/bench_server" --addr "127.0.0.1:$PORT" >"$WORK/server.log" 2>&1) &
    vg=$!
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$PORT/ok" >/dev/null && break
        sleep 0.2
    done
    "$DIR/bench_load" --url "http://127.0.0.1:$PORT" --scenarios "$scenario" \
        --duration 3 --warmup 1 --clients "$CLIENTS" >/dev/null 2>&1
    callgrind_control -z "$vg" >/dev/null 2>&1
    "$DIR/bench_load" --url "http://127.0.0.1:$PORT" --scenarios "$scenario" \
        --duration "$DURATION" --warmup 0 --clients "$CLIENTS" --json "$WORK/load.json" >/dev/null 2>&1
    callgrind_control -d "$vg" >/dev/null 2>&1
    kill -9 "$vg" 2>/dev/null || true
    wait "$vg" 2>/dev/null || true
    runs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['runs'])" "$WORK/load.json")
    # The dump taken after the load (cg.<pid>.1) holds only what ran since the counters
    # were zeroed.
    total=$(callgrind_annotate "$WORK"/cg.*.1 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
    echo "$scenario $(basename "$DIR") runs=$runs instructions/run=$((total / runs))"
done
