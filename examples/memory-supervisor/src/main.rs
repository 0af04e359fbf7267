//! `memory-supervisor`: a scripted conversation across threads and users, printed turn by
//! turn. Offline by default (a scripted model, SQLite in a temp dir).
//!
//! ```sh
//! cargo run -p memory-supervisor
//! cargo run -p memory-supervisor -- --db memory.db
//! cargo run -p memory-supervisor -- --database-url postgres://user@localhost/memory
//! GRAPHLOOM_MODEL=ollama:llama3.2 cargo run -p memory-supervisor -- --router model
//! ```

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use graphloom_core::{Message, MessageKind, RunConfig, ToolCall};
use graphloom_llm::{DynChatModel, Reply, ScriptedModel};
use memory_supervisor::{
    build_graph, open_database, Database, GraphConfig, MemoryContext, MemoryStateUpdate, RouterMode,
    MODEL_ENV,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Router {
    Keywords,
    Model,
}

#[derive(Parser, Debug)]
#[command(about = "A supervisor routing by intent to memory sub-graphs, with long-term memory in the store")]
struct Args {
    /// SQLite file for checkpoints and memories (default: a file in a temp dir).
    #[arg(long)]
    db: Option<PathBuf>,
    /// PostgreSQL URL (instead of --db).
    #[arg(long)]
    database_url: Option<String>,
    /// How the supervisor routes.
    #[arg(long, value_enum, default_value = "keywords")]
    router: Router,
}

/// (user, session/thread, message)
const TURNS: [(&str, &str, &str); 5] = [
    (
        "alice",
        "alice-monday",
        "Remember that my favourite colour is teal.",
    ),
    (
        "alice",
        "alice-monday",
        "Maybe I'll get pizza tonight, note that.",
    ),
    (
        "alice",
        "alice-friday",
        "What do you remember about my favourite colour?",
    ),
    (
        "bob",
        "bob-friday",
        "What do you remember about my favourite colour?",
    ),
    ("alice", "alice-friday", "Suggest a present for me."),
];

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

/// Replies for the ReAct agents in the order the demo asks for them (keyword routing).
fn demo_script() -> ScriptedModel {
    let q = json!({"query": "favourite colour"});
    ScriptedModel::new([
        // alice, Friday: two lookups in parallel, then the answer.
        Reply::tool_calls(
            "",
            vec![
                call("a1", "l2_search_facts", q.clone()),
                call("a2", "l3_search_knowledge", q.clone()),
            ],
        ),
        Reply::text("You told me your favourite colour is teal."),
        // bob: the same lookups find nothing of alice's.
        Reply::tool_calls(
            "",
            vec![
                call("b1", "l2_search_facts", q.clone()),
                call("b2", "l3_search_knowledge", q),
            ],
        ),
        Reply::text("I don't have anything saved about your favourite colour yet."),
        // alice, Friday: the assistant pulls her context block.
        Reply::tool_calls("", vec![call("c1", "get_context_block", json!({}))]),
        Reply::text("How about a teal scarf?"),
    ])
}

fn show(m: &Message) -> Option<String> {
    let who = match m.kind {
        MessageKind::Human => "user",
        MessageKind::Ai if !m.tool_calls.is_empty() => {
            let calls: Vec<String> = m
                .tool_calls
                .iter()
                .map(|c| format!("{}({})", c.name, c.args))
                .collect();
            return Some(format!("  assistant calls {}", calls.join(", ")));
        }
        MessageKind::Ai => "assistant",
        MessageKind::Tool => {
            return Some(format!(
                "  tool {}: {}",
                m.name.as_deref().unwrap_or("?"),
                m.text().replace('\n', " | ")
            ))
        }
        _ => return None,
    };
    Some(format!("  {who}: {}", m.text()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let choice = graphloom_llm::ModelChoice::from_env();
    let real = matches!(choice, graphloom_llm::ModelChoice::Spec(_)).then_some(());
    let model: Arc<dyn DynChatModel> = choice.build(|| Arc::new(demo_script()))?;
    let router = match (args.router, &real) {
        (Router::Model, Some(_)) => RouterMode::Model,
        (Router::Model, None) => {
            println!("(--router model needs {MODEL_ENV}; the offline script routes by keywords)");
            RouterMode::Keywords
        }
        (Router::Keywords, _) => RouterMode::Keywords,
    };
    let tmp = tempfile::tempdir()?;
    let db = match (&args.database_url, &args.db) {
        (Some(url), _) => Database::Postgres(url.clone()),
        (None, Some(p)) => Database::Sqlite(p.clone()),
        (None, None) => Database::Sqlite(tmp.path().join("memory.db")),
    };
    println!("persisting to {db:?}");
    let (saver, store) = open_database(&db)
        .await
        .with_context(|| format!("opening {db:?}"))?;
    let graph = build_graph(GraphConfig {
        model,
        router,
        checkpointer: Some(saver),
        store: Some(store),
    })?;
    for (user, session, text) in TURNS {
        println!("\n[{user} / thread {session}]");
        let prior = graph.get_state(&RunConfig::thread(session)).await?.values;
        let (before, routed_before) = (prior.messages.len(), prior.handoffs.len());
        let cfg = RunConfig::thread(session).context(MemoryContext::new(user, session));
        let out = graph
            .invoke(MemoryStateUpdate::new().messages(vec![Message::human(text)]), cfg)
            .await?;
        for m in out.values.messages.iter().skip(before) {
            if let Some(line) = show(m) {
                println!("{line}");
            }
        }
        let route: Vec<String> = out.values.handoffs.iter().skip(routed_before).cloned().collect();
        println!(
            "  (intent {}, handoffs {:?})",
            out.values.intent.as_deref().unwrap_or("-"),
            route
        );
    }
    Ok(())
}
