//! One process of the human-in-the-loop crash test: a `create_agent` agent with the
//! `HumanInTheLoop` middleware reviewing `transfer` and `purge`, whose model asks for both
//! and an unreviewed `lookup` in one message, persisted to SQLite.
//!
//! `--phase start` runs the thread until the review pauses it and prints `PAUSED`.
//! `--phase approve` answers the review (approve `transfer`, reject `purge`), or continues
//! the thread when the answer was already taken, and prints `DONE` when the run completes.
//! The harness kills this process at random points and runs it again. The shared tools and
//! their ledger files are in `graphloom_crashtest::gated`; `purge` writes a line to
//! `<ledger>.purges` for every execution (there must be none).
use anyhow::{bail, Context as _};
use clap::Parser;
use graphloom_core::{Command, Message, RunConfig, RunInput, RunStatus, ToolCall};
use graphloom_crashtest::append_line;
use graphloom_crashtest::gated::{self, Account, Args, Phase};
use graphloom_llm::ScriptedModel;
use graphloom_prebuilt::middleware::hitl::{HumanInTheLoop, InterruptOn};
use graphloom_prebuilt::{create_agent, AgentGraphUpdate, FnTool, ToolError, ToolRuntime};
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
    let transfer = gated::transfer(&args.ledger);
    let lookup = gated::lookup(&args.ledger);
    let purges = gated::with_suffix(&args.ledger, ".purges");
    let purge = FnTool::new(
        "purge",
        "Delete an account",
        move |_a: Account, _rt: ToolRuntime| {
            let purges = purges.clone();
            async move {
                append_line(&purges, "purged").map_err(|e| gated::tool_io(&e))?;
                Ok::<_, ToolError>("purged".to_owned())
            }
        },
    );
    // Each process gets a fresh scripted model: the start phase needs the tool calls, every
    // later model call (after the tools) needs the final answer.
    let purge_call = ToolCall {
        id: "call_purge".into(),
        name: "purge".into(),
        args: json!({"account": "ACC-1"}),
    };
    let replies = gated::replies(args.phase, vec![purge_call]);
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
