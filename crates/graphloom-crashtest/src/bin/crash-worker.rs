//! Runs (or resumes) one thread of the crash-test graph; the harness kills it at random.
use clap::Parser;
use graphloom_crashtest::{graph, work, Files, WorkerEnd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
struct Args {
    /// `sqlite:<path>` or a `postgres://` URL.
    #[arg(long)]
    db: String,
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
    let saver: Arc<dyn graphloom_core::checkpoint::DynCheckpointer> = match args.db.strip_prefix("sqlite:") {
        Some(path) => Arc::new(graphloom_sqlite::SqliteSaver::open(path).await?),
        None => Arc::new(graphloom_postgres::PostgresSaver::connect(&args.db).await?),
    };
    let g = graph(saver, Files { dir: args.dir })?;
    Ok(work(&g, &args.thread).await?)
}
