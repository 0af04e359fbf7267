//! Runs one chat turn offline (or against `GRAPHLOOM_MODEL`) with SQLite checkpoints and
//! prints the runtime's events, the data stream lines a client would receive, the final
//! result and what billing recorded.

use chat_runtime::{
    default_model, graph, ChatRequest, ChatRuntime, DataStreamEncoder, InMemoryBilling, InProcGraphExecutor,
    LlmCaller,
};
use clap::Parser;
use futures::StreamExt;
use graphloom_core::store::InMemoryStore;
use graphloom_llm::Message;
use std::path::PathBuf;
use std::sync::Arc;

/// Run the chat-runtime example once.
#[derive(Parser, Debug)]
struct Args {
    /// SQLite checkpoint file (default: a temporary directory).
    #[arg(long)]
    db: Option<PathBuf>,
    /// The question.
    #[arg(long, default_value = "How do I reset my password?")]
    question: String,
    /// Serve `POST /api/v1/ai/chat` on this address (e.g. `127.0.0.1:3000`) instead of
    /// running one turn.
    #[arg(long)]
    serve: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tmp = tempfile::tempdir()?;
    let db = args.db.unwrap_or_else(|| tmp.path().join("chat-runtime.db"));
    let saver = graphloom_sqlite::SqliteSaver::open(&db).await?;
    let g = graph(Arc::new(saver), Arc::new(InMemoryStore::new()), default_model()?)?;
    let billing = InMemoryBilling::new();
    let runtime = ChatRuntime::new(Arc::new(InProcGraphExecutor::new(g)), billing.clone());
    if let Some(addr) = args.serve {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!(
            "serving POST http://{}/api/v1/ai/chat (data stream protocol)",
            listener.local_addr()?
        );
        axum::serve(listener, chat_runtime::router(runtime)).await?;
        return Ok(());
    }
    let mut run = runtime.run_chat_stream(ChatRequest {
        caller: LlmCaller {
            billing_account_id: "acct-demo".into(),
            virtual_key_id: "vk-demo".into(),
            request_id: "req-demo".into(),
            trace_id: "trace-demo".into(),
        },
        thread_id: "demo-thread".into(),
        messages: vec![Message::human(args.question.clone())],
    });
    println!("question: {}", args.question);
    println!(
        "graph run {} (checkpoints in {})\n",
        run.graph_run_id,
        db.display()
    );
    let mut encoder = DataStreamEncoder::new();
    while let Some(env) = run.events.next().await {
        let line = encoder.encode(&env.event);
        println!(
            "{:<17} request={} | {}",
            env.event.kind(),
            env.correlation.request_id,
            line.trim_end()
        );
    }
    let fin = run.final_result.await?;
    println!("\nanswer: {}", fin.answer);
    println!(
        "model calls: {}, tool calls: {}, tokens: {} in / {} out",
        fin.model_calls, fin.tool_calls, fin.usage.input_tokens, fin.usage.output_tokens
    );
    for r in billing.receipts() {
        println!(
            "billed {} tokens to {} (invocation {}, prompt hash {}..)",
            r.fact.usage.total_tokens,
            r.correlation.request_id,
            r.fact.invocation_id,
            &r.fact.prompt_hash[..12.min(r.fact.prompt_hash.len())]
        );
    }
    Ok(())
}
