#!/usr/bin/env bash
# Regenerate the console's screenshots in docs/console/ (linked from the README): the
# browser test of examples/demo/tests/console.rs saves one per page where this points it.
set -euo pipefail
cd "$(dirname "$0")/.."
export GRAPHLOOM_CHROMIUM="${GRAPHLOOM_CHROMIUM:-/usr/bin/chromium}"
export npm_config_cache="${npm_config_cache:-$HOME/.cache/graphloom/npm}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
export GRAPHLOOM_CONSOLE_SHOTS="$PWD/docs/console"
mkdir -p "$GRAPHLOOM_CONSOLE_SHOTS"
cargo nextest run -p graphloom-demo --test console --no-capture
rm -f "$GRAPHLOOM_CONSOLE_SHOTS/failure.png"
ls -l "$GRAPHLOOM_CONSOLE_SHOTS"
