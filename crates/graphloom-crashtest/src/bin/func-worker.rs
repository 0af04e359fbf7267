//! Runs (or resumes) one thread of the functional-API crash test on SQLite; the harness
//! kills it at random.
use clap::Parser;
use graphloom_crashtest::func::{entrypoint, work_func};
use graphloom_crashtest::{Files, WorkerEnd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
struct Args {
    /// SQLite database file.
    #[arg(long)]
    db: PathBuf,
    /// Directory for the ledger and markers.
    #[arg(long)]
    dir: PathBuf,
    /// Thread id.
    #[arg(long)]
    thread: String,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(WorkerEnd::Done) => ExitCode::SUCCESS,
        Ok(WorkerEnd::Failed(e)) => {
            println!("FAILED {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<WorkerEnd> {
    let saver: Arc<dyn graphloom_core::checkpoint::DynCheckpointer> =
        Arc::new(graphloom_sqlite::SqliteSaver::open(&args.db).await?);
    let ep = entrypoint(saver, Files { dir: args.dir })?;
    Ok(work_func(&ep, &args.thread).await?)
}
