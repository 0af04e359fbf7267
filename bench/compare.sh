#!/usr/bin/env bash
# Side-by-side run of the benchmark suite: Python LangGraph (bench/langgraph/run.py) and
# graphloom (the graphloom-bench binary), then one table with both medians and the ratio.
#
#   bash bench/compare.sh [--min-iters N] [--min-time SECS] [--warmup N] [--filter a,b]
#
# The options are passed to both runners. Environment:
#   LANGGRAPH_VERSION  langgraph version installed in bench/.venv (default 1.2.22)
#   LG_MODE            sync | async | best (default best: the faster of LangGraph's sync and
#                      async runs counts)
#   SKIP_LANGGRAPH=1   reuse bench/out/langgraph.json instead of running Python again
#   SKIP_GRAPHLOOM=1   reuse bench/out/graphloom.json instead of running Rust again
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=bench/.venv
OUT=bench/out
LANGGRAPH_VERSION=${LANGGRAPH_VERSION:-1.2.22}
LG_MODE=${LG_MODE:-best}
mkdir -p "$OUT"

if [ "${SKIP_LANGGRAPH:-0}" != 1 ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
    fi
    if ! "$VENV/bin/python" - "$LANGGRAPH_VERSION" <<'EOF' 2>/dev/null; then
import importlib.metadata as m, sys
sys.exit(0 if m.version("langgraph") == sys.argv[1] else 1)
EOF
        "$VENV/bin/pip" install -q --disable-pip-version-check "langgraph==$LANGGRAPH_VERSION" uvloop
    fi
    echo "== LangGraph $LANGGRAPH_VERSION ($LG_MODE)"
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
