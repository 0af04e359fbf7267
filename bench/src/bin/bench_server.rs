//! `bench_server`: a graphloom server for the server benchmark (`bench/server.sh`).
//!
//! Graphs (the same logic as `bench/server/agent.py` for `langgraph dev`):
//!
//! - `agent`: a ReAct loop `agent <-> tools` over `add_messages`. The model is a
//!   deterministic, offline stand-in: when the last message is a tool result it answers
//!   `"The weather in <city>: <result>"`, otherwise it calls the tool `get_weather` once with
//!   `{"city": <last human text>}`. The tool is a `graphloom_prebuilt::FnTool` run by a
//!   `ToolNode`. One run: 3 supersteps, 4 messages.
//! - `interrupter`: one node that calls `rt.interrupt(...)` (for the idle-threads memory case).
//!
//! Persistence: a SQLite file (`--db`, default `<temp dir>/graphloom.db`); the server's
//! default durability and worker count.

use clap::Parser;
use graphloom_core::{CompiledGraph, Message, MessageKind, Runtime, StateGraph, ToolCall, END, START};
use graphloom_prebuilt::{tools_condition, AgentState, AgentStateUpdate, FnTool, ToolError, ToolNode};
use graphloom_server::{factory, GraphDeps, Server, ServerConfig};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The allocator of the `graphloom` command, so this server is the one users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "graphloom server with the `agent` and `interrupter` bench graphs")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8123")]
    addr: String,
    /// SQLite file (default: `graphloom.db` in a fresh temp dir, removed on exit).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Runs executed at once (default: the server's default).
    #[arg(long)]
    workers: Option<usize>,
}

/// The tool's arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    /// City to look up.
    city: String,
}

static CALLS: AtomicU64 = AtomicU64::new(0);

/// The scripted model: one tool call, then a final answer built from the tool result.
fn model(messages: &[Message]) -> Message {
    match messages.last() {
        Some(last) if last.kind == MessageKind::Tool => {
            let city = messages
                .iter()
                .rev()
                .find(|m| m.kind == MessageKind::Human)
                .map(Message::text)
                .unwrap_or_default();
            Message::ai(format!("The weather in {city}: {}", last.text()))
        }
        last => {
            let city = last.map(Message::text).unwrap_or_default();
            let n = CALLS.fetch_add(1, Ordering::Relaxed);
            Message::ai_with_tool_calls(
                "",
                vec![ToolCall {
                    id: format!("call_{n}"),
                    name: "get_weather".to_owned(),
                    args: json!({ "city": city }),
                }],
            )
        }
    }
}

/// `agent`: the ReAct loop.
fn agent(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<AgentState>> {
    let weather = FnTool::new(
        "get_weather",
        "Current weather of a city",
        |a: Weather, _rt| async move { Ok::<_, ToolError>(format!("sunny and 21 degrees in {}", a.city)) },
    );
    let tools = ToolNode::new([weather.arc()]);
    StateGraph::<AgentState>::new()
        .add_node("agent", |s: Arc<AgentState>, _rt: Runtime| async move {
            let history: Vec<Message> = s.messages.iter().cloned().collect();
            Ok(AgentStateUpdate::new().messages(vec![model(&history)]))
        })
        .add_node(
            "tools",
            tools.into_node::<AgentState>(|s| &s.messages, |m| AgentStateUpdate::new().messages(m)),
        )
        .add_edge(START, "agent")
        .add_conditional_edges("agent", |s: &AgentState| tools_condition(&s.messages))
        .add_edge("tools", "agent")
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .compile()
}

/// `interrupter`: asks for input and waits there.
fn interrupter(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<AgentState>> {
    StateGraph::<AgentState>::new()
        .add_node("ask", |_s: Arc<AgentState>, rt: Runtime| async move {
            let v = rt.interrupt(json!({"question": "approve?"}))?;
            let answer = v.as_str().unwrap_or("?").to_owned();
            Ok(AgentStateUpdate::new().messages(vec![Message::ai(answer)]))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .store_dyn(Arc::clone(&deps.store))
        .compile()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tmp = tempfile::tempdir()?;
    let db = args.db.clone().unwrap_or_else(|| tmp.path().join("graphloom.db"));
    let mut cfg = ServerConfig::sqlite(&db);
    if let Some(w) = args.workers {
        cfg.workers = w;
    }
    let server = Server::builder(cfg)
        .graph("agent", factory(agent))
        .graph("interrupter", factory(interrupter))
        .build()
        .await
        .map_err(|e| anyhow::anyhow!("server: {e}"))?;
    let listener = tokio::net::TcpListener::bind(&args.addr).await?;
    eprintln!(
        "bench_server listening on http://{} (db {})",
        listener.local_addr()?,
        db.display()
    );
    server
        .serve(listener, async {
            let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        })
        .await?;
    drop(tmp);
    Ok(())
}
