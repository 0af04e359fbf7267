#!/usr/bin/env bash
# Record tests/js/reference/frames.json from the reference server: `langgraph dev`
# (langgraph-api 0.16.7, in-memory) serving graph.py, driven by record.mjs.
#   bash crates/graphloom-server/tests/js/reference/record.sh
# Needs python3 and node (with `npm ci` done in tests/js). The venv lives outside the clone.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$HOME/.cache/graphloom/langgraph-dev"
if [ ! -x "$venv/bin/langgraph" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --disable-pip-version-check -q \
    "langgraph-cli[inmem]==0.4.40" "langgraph-api==0.16.7" "langgraph-runtime-inmem==0.36.7" \
    "langgraph==1.2.24" "langchain-core==1.8.3"
fi
port=$((30000 + RANDOM % 20000))
cd "$here"
LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false \
  "$venv/bin/langgraph" dev --port "$port" --no-browser --no-reload >"$here/.dev.log" 2>&1 &
dev=$!
trap 'kill $dev 2>/dev/null || true; rm -f "$here/.dev.log"' EXIT
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/ok" >/dev/null && break
  sleep 1
done
node "$here/record.mjs" "http://127.0.0.1:$port" "$here/frames.json"
