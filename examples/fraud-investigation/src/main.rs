//! `fraud-investigation`: investigate a transaction of the bundled data set.
//!
//! Offline by default: the planner is a scripted model and checkpoints go to a SQLite file
//! in a temp dir.
//!
//! ```sh
//! cargo run -p fraud-investigation -- --list
//! cargo run -p fraud-investigation -- --transaction-id TX-1009 --metrics
//! GRAPHLOOM_MODEL=ollama:llama3.2 cargo run -p fraud-investigation -- --transaction-id TX-3004
//! cargo run -p fraud-investigation -- --db fraud.db --transaction-id TX-4003
//! cargo run -p fraud-investigation -- --db fraud.db --resume <investigation id>
//! cargo run -p fraud-investigation -- --database-url postgres://user@localhost/fraud
//! ```

use anyhow::Context as _;
use clap::Parser;
use fraud_investigation::{
    open_database, Database, Dataset, InvestigationService, InvestigationState, Settings,
};
use graphloom_core::State as _;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(about = "Investigate a card transaction with an LLM-planned, durable agent graph")]
struct Args {
    /// Transaction to investigate (see --list).
    #[arg(long, default_value = "TX-1009")]
    transaction_id: String,
    /// SQLite file for checkpoints and the audit store (default: a file in a temp dir).
    #[arg(long)]
    db: Option<PathBuf>,
    /// PostgreSQL URL (instead of --db).
    #[arg(long)]
    database_url: Option<String>,
    /// Planner model, e.g. `ollama:llama3.2`, `openai:gpt-4o-mini` (default: $GRAPHLOOM_MODEL,
    /// else an offline scripted model).
    #[arg(long)]
    model: Option<String>,
    /// No planner model: the deterministic sequence only.
    #[arg(long, conflicts_with = "model")]
    deterministic: bool,
    /// Resume this investigation instead of starting one.
    #[arg(long)]
    resume: Option<String>,
    /// List the open transactions of the data set and exit.
    #[arg(long)]
    list: bool,
    /// Most tool steps (overrides LANGGRAPH_MAX_STEPS).
    #[arg(long)]
    max_steps: Option<u32>,
    /// Run time limit in seconds (overrides LANGGRAPH_INVESTIGATION_TIMEOUT_SECONDS).
    #[arg(long)]
    timeout_secs: Option<u64>,
    /// Per-tool time limit in seconds (overrides LANGGRAPH_TOOL_TIMEOUT_SECONDS).
    #[arg(long)]
    tool_timeout_secs: Option<u64>,
    /// Print the Prometheus metrics at the end.
    #[arg(long)]
    metrics: bool,
    /// Print the whole final state as JSON.
    #[arg(long)]
    json: bool,
}

fn print_summary(s: &InvestigationState) {
    println!("investigation {} of {}", s.investigation_id, s.transaction_id);
    println!(
        "status {} | severity {} | confidence {:.2} | steps {}/{}",
        s.status.as_str(),
        s.severity.as_str(),
        s.confidence_score,
        s.step_count,
        s.max_steps
    );
    if let Some(e) = &s.error {
        println!("error: {e}");
    }
    println!("decisions:");
    for d in s.planner_decisions.iter() {
        println!(
            "  {:>2}. {:<20} ({:.2}) {}",
            d.step, d.selected_tool, d.confidence, d.reason
        );
    }
    println!("tools:");
    for t in s.tool_executions.iter() {
        println!(
            "  {:<20} {:<9} {:>5} ms {}",
            t.tool_name,
            t.status.as_str(),
            t.execution_time_ms,
            t.error_message.as_deref().unwrap_or("")
        );
    }
    if let Some(summary) = s.reasoning.get("summary").and_then(|v| v.as_str()) {
        println!("reasoning: {summary}");
    }
    for r in &s.recommendations {
        println!("recommend [{}] {}: {}", r.priority, r.action, r.rationale);
    }
    if let Some(rule) = &s.rule_draft {
        println!("rule draft: {}", serde_json::Value::Object(rule.clone()));
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.list {
        let data = Dataset::bundled()?;
        for t in data.open_transactions() {
            let m = data.merchant(&t.merchant_id).map_or("?", |m| m.category.as_str());
            println!(
                "{}  {:>9.2} {}  {:<12} {:<12} {}",
                t.transaction_id, t.amount, t.currency, m, t.channel, t.timestamp
            );
        }
        return Ok(());
    }
    let mut settings = Settings::from_env();
    if let Some(n) = args.max_steps {
        settings.langgraph.max_steps = n;
    }
    if let Some(s) = args.timeout_secs {
        settings.langgraph.investigation_timeout = Duration::from_secs(s);
    }
    if let Some(s) = args.tool_timeout_secs {
        settings.langgraph.tool_timeout = Duration::from_secs(s);
    }
    let llm = if args.deterministic {
        None
    } else if let Some(spec) = &args.model {
        Some(graphloom_llm::init_chat_model(spec).with_context(|| format!("model {spec}"))?)
    } else {
        Some(fraud_investigation::default_model()?)
    };
    settings.planner.llm_enabled = llm.is_some();
    let tmp = tempfile::tempdir()?;
    let db = match (&args.database_url, &args.db) {
        (Some(url), _) => Database::Postgres(url.clone()),
        (None, Some(path)) => Database::Sqlite(path.clone()),
        (None, None) => Database::Sqlite(tmp.path().join("fraud-investigations.db")),
    };
    println!("persisting to {db:?}");
    let (saver, store) = open_database(&db)
        .await
        .with_context(|| format!("opening {db:?}"))?;
    let service = InvestigationService::standard(settings, llm, saver, Some(store))?;
    let state = match &args.resume {
        Some(id) => service.resume_investigation(id).await?,
        None => service.run_investigation(&args.transaction_id).await?,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&state.to_json()?)?);
    } else {
        print_summary(&state);
    }
    if args.metrics {
        println!("{}", service.metrics().render());
    }
    Ok(())
}
