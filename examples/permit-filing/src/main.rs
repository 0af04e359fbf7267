//! Run the permit-filing example once, offline by default (SQLite checkpoints in a temp
//! directory or `--db`), approving the gated call automatically or asking on stdin; or
//! serve `POST /execute` with `--serve 127.0.0.1:8080`.

use anyhow::Context;
use clap::Parser;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::{DynStore, SearchQuery};
use graphloom_core::{Command, Message, RunConfig, RunInput, RunStatus};
use permit_filing::{default_model, graph, sample_input, server, PermitState};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(about = "graphloom example: permit filing (seed 004)")]
struct Args {
    /// SQLite file for checkpoints and the store (default: a temporary directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Serve POST /execute and POST /conversations/{id}/stream on this address instead.
    #[arg(long)]
    serve: Option<String>,
    /// Ask on stdin for each approval instead of approving automatically.
    #[arg(long)]
    prompt: bool,
    /// Reject every approval (shows the rejection path).
    #[arg(long, conflicts_with = "prompt")]
    reject: bool,
    /// Thread id.
    #[arg(long, default_value = "permit-demo")]
    thread: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tmp = tempfile::tempdir()?;
    let db = args.db.clone().unwrap_or_else(|| tmp.path().join("permit.db"));
    let saver: Arc<dyn DynCheckpointer> = Arc::new(graphloom_sqlite::SqliteSaver::open(&db).await?);
    let store: Arc<dyn DynStore> = Arc::new(graphloom_sqlite::SqliteStore::open(&db).await?);
    let g = graph(saver, Arc::clone(&store), default_model()?)?;

    if let Some(addr) = args.serve {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!(
            "serving on http://{}  (POST /execute, POST /conversations/{{id}}/stream)",
            listener.local_addr()?
        );
        axum::serve(listener, server::router(g)).await?;
        return Ok(());
    }

    println!("checkpoints: {}", db.display());
    let cfg = RunConfig::thread(args.thread.clone());
    let mut out = g
        .invoke_input(RunInput::Json(sample_input()), cfg.clone())
        .await
        .context("run failed")?;
    while out.status == RunStatus::Interrupted {
        let ask = &out.interrupts[0].value;
        println!(
            "\n-- paused for approval ({})",
            ask["checkpoint_type"].as_str().unwrap_or("?")
        );
        if !ask["tool_call"].is_null() {
            println!(
                "   tool call: {} {}",
                ask["tool_call"]["name"], ask["tool_call"]["args"]
            );
        }
        let verdict = if args.prompt {
            print!("   approve? [y/N] ");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            if line.trim().eq_ignore_ascii_case("y") {
                "approved"
            } else {
                "rejected"
            }
        } else if args.reject {
            "rejected"
        } else {
            "approved"
        };
        println!("   verdict: {verdict}");
        out = g
            .resume(Command::resume(verdict), cfg.clone())
            .await
            .context("resume failed")?;
    }
    report(&out.values);
    let created = store
        .search(
            &permit_filing::skills::entities_ns(),
            SearchQuery::new().limit(100),
        )
        .await?;
    println!(
        "-- knowledge-graph entities created (mutations): {}",
        created.len()
    );
    for e in created {
        println!(
            "   {} {} ({})",
            e.item.value["kind"], e.item.value["name"], e.item.key
        );
    }
    Ok(())
}

fn report(s: &PermitState) {
    println!("\n-- nodes: {}", s.node_trail.to_vec().join(" -> "));
    println!("\n-- conversation");
    for m in s.messages.iter() {
        print_message(m);
    }
    println!(
        "\n-- status {} | iterations {} | tokens {} | cost ${:.4} | skills {:?}",
        s.status, s.iteration, s.tokens_used, s.cost_usd, s.injected_skill_ids
    );
    if let Some(e) = &s.error {
        println!("-- error: {e}");
    }
}

fn print_message(m: &Message) {
    let text = m.text();
    let head: String = text
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(120)
        .collect();
    let kind = format!("{:?}", m.kind).to_lowercase();
    let calls: Vec<String> = m
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.name, c.args))
        .collect();
    if calls.is_empty() {
        println!("[{kind}] {head}");
    } else {
        println!("[{kind}] {head} calls {}", calls.join(", "));
    }
}
