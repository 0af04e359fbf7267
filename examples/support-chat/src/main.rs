//! Runs a short support conversation offline (or against `GRAPHLOOM_MODEL`) on one thread
//! with SQLite checkpoints, printing the event protocol as it streams.

use clap::Parser;
use graphloom_core::store::InMemoryStore;
use graphloom_core::RunConfig;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use support_chat::{default_model, graph, run_turn, SupportEvent};

/// Run the support-chat example.
#[derive(Parser, Debug)]
struct Args {
    /// SQLite checkpoint file (default: a temporary directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// The thread (conversation) id.
    #[arg(long, default_value = "support-demo")]
    thread: String,
    /// Messages to send, one turn each.
    #[arg(default_values_t = ["How do I reset my password?".to_owned(), "Thanks! And if the link never arrives?".to_owned()])]
    messages: Vec<String>,
}

fn print_event(e: &SupportEvent) {
    if e.event == "on_chat_model_stream" {
        print!("{}", e.data["chunk"].as_str().unwrap_or_default());
        let _ = std::io::stdout().flush();
    } else {
        println!("  [{}] {} {}", e.name, e.event, e.data);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tmp = tempfile::tempdir()?;
    let db = args.db.unwrap_or_else(|| tmp.path().join("support-chat.db"));
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await?;
    let g = graph(Arc::new(saver), Arc::new(InMemoryStore::new()), default_model()?)?;
    println!("checkpoints: {}\n", db.display());
    for text in &args.messages {
        println!("user> {text}");
        let out = run_turn(&g, &args.thread, "u-123", text, |e| print_event(&e)).await?;
        let s = &out.values;
        if let Some(reason) = s.rejection() {
            println!("  rejected: {reason}\n");
            continue;
        }
        println!(
            "\n  phase={} retries={} tokens_used={} context={} messages\n",
            s.phase,
            s.retry_count,
            s.tokens_used,
            s.messages.len()
        );
    }
    let state = g.get_state(&RunConfig::thread(args.thread.clone())).await?;
    println!("summary:\n{}", state.values.summary);
    Ok(())
}
