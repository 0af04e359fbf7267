//! `bench_listing`: how long the server's storage takes to list a thread's newest runs, by
//! how many runs the thread has. A thread's stream lists its newest runs whenever a run is
//! queued on it, and `GET /threads/{id}/runs` lists them too; a chat's thread gathers a
//! run per message.
//!
//! For each size of `--sizes`, one thread is given that many runs (through `create_run`,
//! as the API queues them), then its newest `--limit` runs are listed `--reads` times in
//! turn. Prints one JSON line per size: the median and p99 of a listing, in microseconds.
//! SQLite by default (a fresh file), PostgreSQL with `--pg-url`.

use clap::Parser;
use graphloom_server::db::{Db, NewRun, PgDb, SqliteDb};
use graphloom_server::models::{MultitaskStrategy, Run, RunStatus, Thread, ThreadStatus};
use serde_json::{json, Map};
use std::time::Instant;

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "time the listing of a thread's newest runs, by the thread's run count")]
struct Args {
    /// Run counts of the threads listed.
    #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1000, 3000])]
    sizes: Vec<usize>,
    /// Runs per listing (a thread's stream reads 4 first).
    #[arg(long, default_value_t = 4)]
    limit: i64,
    /// Listings timed per size.
    #[arg(long, default_value_t = 2000)]
    reads: usize,
    /// PostgreSQL instead of SQLite.
    #[arg(long)]
    pg_url: Option<String>,
}

fn thread(id: &str) -> Thread {
    Thread {
        thread_id: id.into(),
        created_at: String::new(),
        updated_at: String::new(),
        state_updated_at: String::new(),
        metadata: Map::new(),
        config: json!({}),
        status: ThreadStatus::Idle,
        values: serde_json::Value::Null,
        interrupts: json!({}),
        error: None,
        ttl: None,
    }
}

/// A queued run of `thread_id` with a request like the bench graph's.
fn run_on(thread_id: &str) -> NewRun {
    let mut metadata = Map::new();
    metadata.insert("graph_id".into(), json!("agent"));
    NewRun {
        run: Run {
            run_id: uuid::Uuid::now_v7().to_string(),
            thread_id: thread_id.into(),
            assistant_id: "agent".into(),
            created_at: String::new(),
            updated_at: String::new(),
            status: RunStatus::Pending,
            metadata,
            kwargs: json!({
                "input": {"messages": [{"role": "user", "content": "Paris"}]},
                "stream_mode": ["values", "updates", "messages-tuple", "custom", "checkpoints"],
                "stream_subgraphs": true,
                "stream_resumable": true,
                "graph_id": "agent",
                "config": {"configurable": {}},
            }),
            multitask_strategy: MultitaskStrategy::Enqueue,
            cancel_reason: None,
            ordinal: 0,
        },
        owner: String::new(),
        delay: None,
        reject_if_busy: false,
        cancel_active: None,
        thread_metadata: None,
        claim: None,
        create_thread: None,
    }
}

/// The `q`-quantile of sorted `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    let i = ((v.len().saturating_sub(1)) as f64 * q).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

async fn bench(db: &dyn Db, args: &Args, backend: &str) -> anyhow::Result<()> {
    for (n, &size) in args.sizes.iter().enumerate() {
        let id = format!("long-{n}-{}", uuid::Uuid::now_v7());
        db.create_thread("", &thread(&id)).await?;
        for _ in 0..size {
            db.create_run(&run_on(&id)).await?;
        }
        let mut us = Vec::with_capacity(args.reads);
        for _ in 0..args.reads {
            let t = Instant::now();
            let runs = db.list_runs("", &id, None, args.limit, 0).await?;
            us.push(t.elapsed().as_secs_f64() * 1e6);
            anyhow::ensure!(
                runs.len() == size.min(args.limit as usize),
                "listed {}",
                runs.len()
            );
        }
        us.sort_by(f64::total_cmp);
        println!(
            "{}",
            json!({
                "backend": backend,
                "thread_runs": size,
                "limit": args.limit,
                "reads": args.reads,
                "median_us": (quantile(&us, 0.5) * 10.0).round() / 10.0,
                "p99_us": (quantile(&us, 0.99) * 10.0).round() / 10.0,
            })
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match &args.pg_url {
        Some(url) => bench(&PgDb::connect(url).await?, &args, "postgres").await,
        None => {
            let dir = tempfile::tempdir()?;
            let db = SqliteDb::open(&dir.path().join("listing.db")).await?;
            bench(&db, &args, "sqlite").await
        }
    }
}
