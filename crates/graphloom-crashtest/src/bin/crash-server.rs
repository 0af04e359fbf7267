//! A graphloom server the restart test kills with SIGKILL: graph `steps` runs two nodes
//! that each sleep, append an idempotency key to an external ledger (unless present), and
//! count a step. Prints `LISTENING <addr>` once it serves.
use clap::Parser;
use graphloom_core::*;
use graphloom_server::{factory, GraphDeps, Server, ServerConfig};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// `sqlite:<path>` or a `postgres://` URL.
    #[arg(long)]
    db: String,
    /// Ledger file.
    #[arg(long)]
    ledger: PathBuf,
    /// Worker pool size.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Lease of a claimed run in milliseconds (default: the server's, 30 s). On SQLite a
    /// restarted server takes over its predecessor's runs at once whatever the lease; on
    /// PostgreSQL the lease is how long a dead server's runs wait.
    #[arg(long)]
    lease_ms: Option<u64>,
}

/// State of the `steps` graph.
#[derive(State, Clone, Default, Debug)]
pub struct Steps {
    /// Nodes applied.
    #[reducer(add)]
    pub steps: i64,
    /// How long each node sleeps.
    pub sleep_ms: u64,
}

fn record(ledger: &std::path::Path, key: &str) -> std::io::Result<()> {
    let existing = std::fs::read_to_string(ledger).unwrap_or_default();
    if existing.lines().any(|l| l == key) {
        return Ok(());
    }
    graphloom_crashtest::append_line(ledger, key)
}

fn graph(deps: &GraphDeps, ledger: PathBuf) -> graphloom_core::Result<CompiledGraph<Steps>> {
    let node = move |name: &'static str| {
        let ledger = ledger.clone();
        move |s: Arc<Steps>, rt: Runtime| {
            let ledger = ledger.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(s.sleep_ms)).await;
                let key = format!("{} {name}", rt.run_id());
                record(&ledger, &key).map_err(|e| NodeError::fatal(e.to_string()))?;
                Ok(StepsUpdate::new().steps(1))
            }
        }
    };
    StateGraph::<Steps>::new()
        .add_node("first", node("first"))
        .add_node("second", node("second"))
        .add_edge(START, "first")
        .add_edge("first", "second")
        .add_edge("second", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut cfg = match args.db.strip_prefix("sqlite:") {
        Some(path) => ServerConfig::sqlite(path),
        None => ServerConfig::postgres(args.db.clone()),
    };
    cfg.workers = args.workers;
    if let Some(ms) = args.lease_ms {
        cfg.lease = Duration::from_millis(ms);
    }
    let ledger = args.ledger.clone();
    let server = Server::builder(cfg)
        .graph("steps", factory(move |deps| graph(deps, ledger.clone())))
        .build()
        .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("LISTENING {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    server.serve(listener, std::future::pending()).await?;
    Ok(())
}
