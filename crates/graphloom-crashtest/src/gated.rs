//! What the two worker processes of the gated-tool crash tests share (`approval-worker`,
//! `hitl-worker`): their command line, the `transfer` tool (its effect written once per
//! idempotency key, between two halves of work the harness kills it in) and the ungated
//! `lookup`, and the model's script.
//!
//! Side effects, all next to `--ledger`:
//! - `<ledger>`: the transfer's effect, its idempotency key, written at most once per key;
//! - `<ledger>.calls`: `run <key>` for every execution of `transfer` (at its start);
//! - `<ledger>.lookups`: `<key>` for every execution of `lookup`.

use crate::append_line;
use clap::{Parser, ValueEnum};
use graphloom_core::ToolCall;
use graphloom_llm::Reply;
use graphloom_prebuilt::{FnTool, ToolError, ToolRuntime};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Time `transfer` works before its effect, and again after it (before it returns).
const HALF_WORK: Duration = Duration::from_millis(150);

/// What a worker process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    /// Run the thread until the gate pauses it; print `PAUSED`.
    Start,
    /// Answer the gate (or continue a thread whose answer was taken); print `DONE` when
    /// the run completes.
    Approve,
}

/// A worker's command line.
#[derive(Debug, Parser)]
pub struct Args {
    /// SQLite database file.
    #[arg(long)]
    pub db: PathBuf,
    /// The transfer ledger (`.calls` and `.lookups` files go next to it).
    #[arg(long)]
    pub ledger: PathBuf,
    /// Thread id.
    #[arg(long)]
    pub thread: String,
    /// `start` or `approve`.
    #[arg(long, value_enum)]
    pub phase: Phase,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Transfer {
    /// Receiving account.
    to: String,
    /// Amount in cents.
    cents: u32,
}

/// The argument of `lookup` (and of the HITL test's `purge`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Account {
    /// The account.
    pub account: String,
}

/// `path` with `suffix` added to its file name.
#[must_use]
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A ledger write that failed, as the tool's error.
#[must_use]
pub fn tool_io(e: &std::io::Error) -> ToolError {
    ToolError::execution(format!("ledger i/o: {e}"))
}

fn key_of(rt: &ToolRuntime) -> Result<String, ToolError> {
    rt.idempotency_key
        .clone()
        .ok_or_else(|| ToolError::unavailable("no idempotency key outside a graph"))
}

/// `transfer`: notes its execution in `<ledger>.calls`, works, writes its key to
/// `ledger` unless there, works again, returns.
#[must_use]
pub fn transfer(ledger: &Path) -> FnTool {
    let (ledger, calls) = (ledger.to_owned(), with_suffix(ledger, ".calls"));
    FnTool::new(
        "transfer",
        "Move money to an account",
        move |a: Transfer, rt: ToolRuntime| {
            let (ledger, calls) = (ledger.clone(), calls.clone());
            async move {
                let key = key_of(&rt)?;
                append_line(&calls, &format!("run {key}")).map_err(|e| tool_io(&e))?;
                tokio::time::sleep(HALF_WORK).await;
                let existing = std::fs::read_to_string(&ledger).unwrap_or_default();
                if !existing.lines().any(|l| l == key) {
                    append_line(&ledger, &key).map_err(|e| tool_io(&e))?;
                }
                tokio::time::sleep(HALF_WORK).await;
                Ok::<_, ToolError>(json!({"transferred": a.cents, "to": a.to}))
            }
        },
    )
}

/// `lookup`: writes its key to `<ledger>.lookups`.
#[must_use]
pub fn lookup(ledger: &Path) -> FnTool {
    let lookups = with_suffix(ledger, ".lookups");
    FnTool::new(
        "lookup",
        "Look up an account",
        move |a: Account, rt: ToolRuntime| {
            let lookups = lookups.clone();
            async move {
                let key = key_of(&rt)?;
                append_line(&lookups, &key).map_err(|e| tool_io(&e))?;
                Ok::<_, ToolError>(format!("account {} exists", a.account))
            }
        },
    )
}

/// The model's replies for `phase` in a fresh process: at the start, one message calling
/// `transfer`, `lookup` and the `extra` calls, then the answer; later, only the answer.
#[must_use]
pub fn replies(phase: Phase, extra: Vec<ToolCall>) -> Vec<Reply> {
    let answer = Reply::text("Transferred 5.00 to ACC-9.");
    match phase {
        Phase::Start => {
            let mut calls = vec![
                ToolCall {
                    id: "call_transfer".into(),
                    name: "transfer".into(),
                    args: json!({"to": "ACC-9", "cents": 500}),
                },
                ToolCall {
                    id: "call_lookup".into(),
                    name: "lookup".into(),
                    args: json!({"account": "ACC-9"}),
                },
            ];
            calls.extend(extra);
            vec![Reply::tool_calls("", calls), answer]
        }
        Phase::Approve => vec![answer],
    }
}
