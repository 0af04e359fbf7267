//! One process of the human-in-the-loop crash test: a `create_agent` agent with the
//! `HumanInTheLoop` middleware reviewing `transfer` and `purge`, whose model asks for both
//! and an unreviewed `lookup` in one message, persisted to SQLite.
//!
//! `--phase start` runs the thread until the review pauses it and prints `PAUSED`.
//! `--phase approve` answers the review (approve `transfer`, reject `purge`), or continues
//! the thread when the answer was already taken, and prints `DONE` when the run completes.
//! The harness kills this process at random points and runs it again.
//!
//! Side effects, all next to `--ledger`:
//! - `<ledger>`: the transfer's effect, its idempotency key, written at most once per key;
//! - `<ledger>.calls`: `run <key>` for every execution of `transfer` (at its start);
//! - `<ledger>.lookups`: `<key>` for every execution of `lookup`;
//! - `<ledger>.purges`: a line for every execution of `purge` (there must be none).
use anyhow::{bail, Context as _};
use clap::{Parser, ValueEnum};
use graphloom_core::{Command, Message, RunConfig, RunInput, RunStatus, ToolCall};
use graphloom_crashtest::append_line;
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::middleware::hitl::{HumanInTheLoop, InterruptOn};
use graphloom_prebuilt::{create_agent, AgentGraphUpdate, FnTool, ToolError, ToolRuntime};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Time `transfer` works before its effect, and again after it (before it returns).
const HALF_WORK: Duration = Duration::from_millis(150);

/// Tool call ids of the scripted message.
const TRANSFER_ID: &str = "call_transfer";
const LOOKUP_ID: &str = "call_lookup";
const PURGE_ID: &str = "call_purge";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    Start,
    Approve,
}

#[derive(Parser)]
struct Args {
    /// SQLite database file.
    #[arg(long)]
    db: PathBuf,
    /// The transfer ledger (`.calls` and `.lookups` files go next to it).
    #[arg(long)]
    ledger: PathBuf,
    /// Thread id.
    #[arg(long)]
    thread: String,
    /// `start` or `approve`.
    #[arg(long, value_enum)]
    phase: Phase,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Transfer {
    /// Receiving account.
    to: String,
    /// Amount in cents.
    cents: u32,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Lookup {
    /// Account to look up.
    account: String,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn tool_io(e: &std::io::Error) -> ToolError {
    ToolError::execution(format!("ledger i/o: {e}"))
}

fn key_of(rt: &ToolRuntime) -> Result<String, ToolError> {
    rt.idempotency_key
        .clone()
        .ok_or_else(|| ToolError::unavailable("no idempotency key outside a graph"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let ledger = args.ledger.clone();
    let calls = with_suffix(&args.ledger, ".calls");
    let transfer = FnTool::new(
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
    );
    let purges = with_suffix(&args.ledger, ".purges");
    let purge = FnTool::new(
        "purge",
        "Delete an account",
        move |_a: Lookup, _rt: ToolRuntime| {
            let purges = purges.clone();
            async move {
                append_line(&purges, "purged").map_err(|e| tool_io(&e))?;
                Ok::<_, ToolError>("purged".to_owned())
            }
        },
    );
    let lookups = with_suffix(&args.ledger, ".lookups");
    let lookup = FnTool::new(
        "lookup",
        "Look up an account",
        move |a: Lookup, rt: ToolRuntime| {
            let lookups = lookups.clone();
            async move {
                let key = key_of(&rt)?;
                append_line(&lookups, &key).map_err(|e| tool_io(&e))?;
                Ok::<_, ToolError>(format!("account {} exists", a.account))
            }
        },
    );

    // Each process gets a fresh scripted model: the start phase needs the tool calls, every
    // later model call (after the tools) needs the final answer.
    let replies = match args.phase {
        Phase::Start => vec![
            Reply::tool_calls(
                "",
                vec![
                    ToolCall {
                        id: TRANSFER_ID.into(),
                        name: "transfer".into(),
                        args: json!({"to": "ACC-9", "cents": 500}),
                    },
                    ToolCall {
                        id: LOOKUP_ID.into(),
                        name: "lookup".into(),
                        args: json!({"account": "ACC-9"}),
                    },
                    ToolCall {
                        id: PURGE_ID.into(),
                        name: "purge".into(),
                        args: json!({"account": "ACC-1"}),
                    },
                ],
            ),
            Reply::text("Transferred 5.00 to ACC-9."),
        ],
        Phase::Approve => vec![Reply::text("Transferred 5.00 to ACC-9.")],
    };
    let saver = graphloom_sqlite::SqliteSaver::open(&args.db)
        .await
        .context("open the SQLite saver")?;
    let agent = create_agent(
        Arc::new(ScriptedModel::new(replies)),
        [transfer.arc(), lookup.arc(), purge.arc()],
    )
    .middleware(
        HumanInTheLoop::new()
            .interrupt_on("transfer", InterruptOn::all())
            .interrupt_on("purge", InterruptOn::all()),
    )
    .checkpointer(saver)
    .build()?;
    let cfg = RunConfig::thread(&args.thread);

    let out = match args.phase {
        Phase::Start => {
            let out = agent
                .invoke(
                    AgentGraphUpdate::new().messages(vec![Message::human("send 5.00 to ACC-9")]),
                    cfg,
                )
                .await?;
            let asked: Vec<&serde_json::Value> = out
                .interrupts
                .iter()
                .flat_map(|i| i.value["action_requests"].as_array().into_iter().flatten())
                .map(|a| &a["name"])
                .collect();
            if out.status != RunStatus::Interrupted || asked != [&json!("transfer"), &json!("purge")] {
                bail!(
                    "expected one review of `transfer` and `purge`, got {:?}: {asked:?}",
                    out.status
                );
            }
            println!("PAUSED");
            return Ok(());
        }
        Phase::Approve => {
            let st = agent.get_state(&cfg).await?;
            if st.metadata.is_none() {
                bail!("thread {} has no checkpoint", args.thread);
            }
            if !st.interrupts.is_empty() {
                agent
                    .resume(
                        Command::resume(json!({"decisions": [
                            {"type": "approve"},
                            {"type": "reject", "message": "keep ACC-1"}
                        ]})),
                        cfg,
                    )
                    .await?
            } else if !st.next.is_empty() {
                agent.invoke_input(RunInput::Continue, cfg).await?
            } else {
                println!("DONE");
                return Ok(());
            }
        }
    };
    if out.status != RunStatus::Done {
        bail!("the run stopped with {:?}: {:?}", out.status, out.interrupts);
    }
    println!("DONE");
    Ok(())
}
