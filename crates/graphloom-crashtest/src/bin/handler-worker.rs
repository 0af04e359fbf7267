//! One process of the error-handler crash test: `pay` fails, its error handler `refund`
//! compensates, persisted to SQLite.
//!
//! `--phase first` starts the thread; the handler writes `handler` to `<ledger>.handler`,
//! prints `HANDLING` and then never returns, so the harness kills the process while the
//! handler runs. `--phase resume` continues the thread (the handler now returns) and prints
//! the final log (`LOG <entries joined by |>`) and `DONE`. Every run of `pay` appends `pay` to `<ledger>.pay`: the harness checks the node
//! never runs again once its failure was saved.
use anyhow::{bail, Context as _};
use clap::{Parser, ValueEnum};
use graphloom_core::{NodeError, RunConfig, RunInput, RunStatus, State, StateGraph, END, START};
use graphloom_crashtest::append_line;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(State, Clone, Default, Debug)]
struct Payment {
    #[reducer(append)]
    log: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Phase {
    First,
    Resume,
}

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    ledger: PathBuf,
    #[arg(long)]
    thread: String,
    #[arg(long, value_enum)]
    phase: Phase,
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

fn suffixed(path: &std::path::Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let saver = graphloom_sqlite::SqliteSaver::open(&args.db)
        .await
        .context("open the SQLite saver")?;
    let (pay_log, handler_log) = (suffixed(&args.ledger, ".pay"), suffixed(&args.ledger, ".handler"));
    let block = args.phase == Phase::First;
    let graph = StateGraph::<Payment>::new()
        .add_node("pay", move |_s, _rt| {
            let pay_log = pay_log.clone();
            async move {
                append_line(&pay_log, "pay").map_err(NodeError::terminal)?;
                Err::<PaymentUpdate, _>(NodeError::fatal("card declined"))
            }
        })
        .error_handler("pay", move |_s, failure, _rt| {
            let handler_log = handler_log.clone();
            async move {
                append_line(&handler_log, "handler").map_err(NodeError::terminal)?;
                if block {
                    let mut out = std::io::stdout();
                    let _ = writeln!(out, "HANDLING");
                    let _ = out.flush();
                    std::future::pending::<()>().await;
                }
                Ok(PaymentUpdate::new().log(vec![format!("refunded: {}", failure.message)]))
            }
        })
        .add_edge(START, "pay")
        .add_edge("pay", END)
        .checkpointer(saver)
        .compile()?;
    let cfg = RunConfig::thread(&args.thread);
    let out = match args.phase {
        Phase::First => graph.invoke(PaymentUpdate::new(), cfg).await?,
        Phase::Resume => graph.invoke_input(RunInput::Continue, cfg).await?,
    };
    if out.status != RunStatus::Done {
        bail!("the run stopped with {:?}", out.status);
    }
    println!("LOG {}", out.values.log.join("|"));
    println!("DONE");
    Ok(())
}
