//! A graphloom server the drain test stops with SIGTERM: graph `slow` runs four nodes in a
//! row that each log `start <run> <node> <pid>`, sleep, log `end <run> <node> <pid>` and
//! count a step. The log is written whatever happens (no idempotency key), so it shows every
//! execution of every node and which process ran it. Serves until SIGTERM, then shuts down
//! gracefully (draining its runs). Prints `LISTENING <addr>` once it serves.
use clap::Parser;
use graphloom_core::*;
use graphloom_server::{factory, GraphDeps, Server, ServerConfig};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The nodes of graph `slow`, in order.
const NODES: [&str; 4] = ["one", "two", "three", "four"];

#[derive(Parser)]
struct Args {
    /// `sqlite:<path>` or a `postgres://` URL.
    #[arg(long)]
    db: String,
    /// Execution log.
    #[arg(long)]
    log: PathBuf,
    /// Worker pool size.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Shutdown grace in milliseconds.
    #[arg(long)]
    grace_ms: u64,
    /// Lease of a claimed run in milliseconds (default: the server's).
    #[arg(long)]
    lease_ms: Option<u64>,
}

/// State of the `slow` graph.
#[derive(State, Clone, Default, Debug)]
pub struct Slow {
    /// Nodes applied.
    #[reducer(add)]
    pub steps: i64,
    /// How long each node sleeps.
    pub sleep_ms: u64,
}

fn graph(deps: &GraphDeps, log: PathBuf) -> graphloom_core::Result<CompiledGraph<Slow>> {
    let node = move |name: &'static str| {
        let log = log.clone();
        move |s: Arc<Slow>, rt: Runtime| {
            let log = log.clone();
            async move {
                let line = |what: &str| format!("{what} {} {name} {}", rt.run_id(), std::process::id());
                let fail = |e: std::io::Error| NodeError::fatal(e.to_string());
                graphloom_crashtest::append_line(&log, &line("start")).map_err(fail)?;
                tokio::time::sleep(Duration::from_millis(s.sleep_ms)).await;
                graphloom_crashtest::append_line(&log, &line("end")).map_err(fail)?;
                Ok(SlowUpdate::new().steps(1))
            }
        }
    };
    let mut g = StateGraph::<Slow>::new();
    for name in NODES {
        g = g.add_node(name, node(name));
    }
    g.add_sequence(NODES)
        .add_edge(START, NODES[0])
        .add_edge(NODES[NODES.len() - 1], END)
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
    cfg.shutdown_grace = Duration::from_millis(args.grace_ms);
    if let Some(ms) = args.lease_ms {
        cfg.lease = Duration::from_millis(ms);
    }
    let log = args.log.clone();
    let server = Server::builder(cfg)
        .graph("slow", factory(move |deps| graph(deps, log.clone())))
        .build()
        .await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("LISTENING {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    server
        .serve(listener, async move {
            term.recv().await;
        })
        .await?;
    Ok(())
}
