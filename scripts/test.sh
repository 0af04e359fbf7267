#!/usr/bin/env bash
# The project's test command (the README's second command; .ci/run calls it too).
# Runs every test of the workspace with the conformance kits turned on, then the doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/graphloom/target}"
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
cargo nextest run --workspace --all-features --no-fail-fast
cargo test --workspace --all-features --doc
