//! One process of the approval-gate crash test: a ReAct agent whose model asks for a gated
//! `transfer` and an ungated `lookup` in one message, persisted to SQLite.
//!
//! `--phase start` runs the thread until the gate pauses it and prints `PAUSED`.
//! `--phase approve` approves the pending call (or continues the thread when the verdict
//! was already consumed) and prints `DONE` when the run completes. The harness kills this
//! process at random points and runs it again. The tools and their ledger files are in
//! `graphloom_crashtest::gated`.
use anyhow::{bail, Context as _};
use clap::Parser;
use graphloom_core::{Command, Message, RunConfig, RunInput, RunStatus};
use graphloom_crashtest::gated::{self, Args, Phase};
use graphloom_llm::ScriptedModel;
use graphloom_prebuilt::{create_react_agent, AgentOptions, AgentStateUpdate};
use serde_json::json;
use std::process::ExitCode;
use std::sync::Arc;

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
    // The gate holds mutating tools for a verdict.
    let transfer = gated::transfer(&args.ledger).mark_mutating();
    let lookup = gated::lookup(&args.ledger);
    // Each process gets a fresh scripted model: the start phase needs the tool calls, every
    // later model call (after the tools) needs the final answer.
    let replies = gated::replies(args.phase, Vec::new());
    let saver = graphloom_sqlite::SqliteSaver::open(&args.db)
        .await
        .context("open the SQLite saver")?;
    let agent = create_react_agent(
        Arc::new(ScriptedModel::new(replies)),
        [transfer.arc(), lookup.arc()],
        AgentOptions::new().checkpointer(saver),
    )?;
    let cfg = RunConfig::thread(&args.thread);

    let out = match args.phase {
        Phase::Start => {
            let out = agent
                .invoke(
                    AgentStateUpdate::new().messages(vec![Message::human("send 5.00 to ACC-9")]),
                    cfg,
                )
                .await?;
            let asks_transfer = out
                .interrupts
                .iter()
                .any(|i| i.value["tool_call"]["name"] == "transfer");
            if out.status != RunStatus::Interrupted || !asks_transfer {
                bail!(
                    "expected the approval interrupt for `transfer`, got {:?}",
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
                    .resume(Command::resume(json!({"decision": "approve"})), cfg)
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
