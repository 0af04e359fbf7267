//! The `events` stream mode over a real socket: LangChain's `astream_events` (v2) events
//! in LangGraph Server's framing (`event: events`, one JSON event per frame), for a graph
//! whose node calls a model and a ToolNode runs a tool, and for a graph with a subgraph.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, parse_sse, Chat, ChatUpdate, TestServer};
use graphloom_core::{CompiledGraph, Message, MessageKind, Runtime, StateGraph, ToolCall, END, START};
use graphloom_llm::{stream_into, ChatOptions, NodeResultExt, Reply, ScriptedModel};
use graphloom_prebuilt::{FnTool, ToolError, ToolNode, ToolRuntime};
use graphloom_server::{factory, GraphDeps};
use serde_json::{json, Value};
use std::sync::Arc;

/// `calc`: `agent` asks the model (which calls `add` once, then answers), `tools` runs it.
fn calc(deps: &GraphDeps) -> graphloom_core::Result<CompiledGraph<Chat>> {
    let model = ScriptedModel::responding(|msgs, _| match msgs.last().map(|m| m.kind) {
        Some(MessageKind::Tool) => Reply::text("The sum is 3"),
        _ => Reply::tool_calls(
            "Adding",
            vec![ToolCall {
                id: "call_1".into(),
                name: "add".into(),
                args: json!({"a": 1, "b": 2}),
            }],
        ),
    });
    let add = FnTool::new(
        "add",
        "Add two numbers",
        |x: Value, _rt: ToolRuntime| async move {
            let n = |k: &str| x[k].as_i64().unwrap_or(0);
            Ok::<_, ToolError>(format!("{}", n("a") + n("b")))
        },
    );
    let tools =
        ToolNode::new([add.arc()]).into_node::<Chat>(|s| &s.messages, |m| ChatUpdate::new().messages(m));
    StateGraph::<Chat>::new()
        .add_node("agent", move |s: Arc<Chat>, rt: Runtime| {
            let model = model.clone();
            async move {
                let history: Vec<Message> = s.messages.iter().cloned().collect();
                let answer = stream_into(&rt, &model, &history, &ChatOptions::new())
                    .await
                    .node()?;
                Ok(ChatUpdate::new().messages(vec![answer]))
            }
        })
        .add_node("tools", tools)
        .add_edge(START, "agent")
        .add_conditional_edges("agent", |s: &Chat| {
            if s.messages.iter().last().is_some_and(|m| !m.tool_calls.is_empty()) {
                "tools"
            } else {
                END
            }
        })
        .add_edge("tools", "agent")
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn stream(s: &TestServer, graph: &str, modes: Value) -> (String, Vec<(String, Value)>) {
    let t = s.thread().await;
    let body = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        s.http
            .post(s.u(&format!("/threads/{t}/runs/stream")))
            .json(&json!({"assistant_id": graph, "input": human("add 1 and 2"), "stream_mode": modes}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
    .await
    .expect("the stream did not end");
    let frames = parse_sse(&body).into_iter().map(|(n, d, _)| (n, d)).collect();
    (body, frames)
}

fn label(d: &Value) -> String {
    format!("{} {}", d["event"].as_str().unwrap(), d["name"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_mode_streams_graph_node_model_and_tool_events_as_langgraph_server_does() {
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("calc", factory(calc))).await;
    let (body, frames) = stream(&s, "calc", json!(["events"])).await;
    assert_eq!(frames[0].0, "metadata", "{body}");
    let run_id = frames[0].1["run_id"].as_str().unwrap().to_owned();
    // The framing: each event its own `event: events` frame, compact JSON on one line.
    assert!(body.contains("\r\n\r\nevent: events\r\ndata: {\""), "{body}");
    let events: Vec<&Value> = frames[1..]
        .iter()
        .map(|(n, d)| {
            assert_eq!(n, "events");
            d
        })
        .collect();
    let labels: Vec<String> = events
        .iter()
        .filter(|d| d["event"] != "on_chat_model_stream")
        .map(|d| label(d))
        .collect();
    assert_eq!(
        labels,
        [
            "on_chain_start calc",
            "on_chain_start agent",
            "on_chat_model_start ScriptedModel",
            "on_chat_model_end ScriptedModel",
            "on_chain_stream agent",
            "on_chain_end agent",
            "on_chain_start tools",
            "on_tool_start add",
            "on_tool_end add",
            "on_chain_stream tools",
            "on_chain_end tools",
            "on_chain_start agent",
            "on_chat_model_start ScriptedModel",
            "on_chat_model_end ScriptedModel",
            "on_chain_stream agent",
            "on_chain_end agent",
            "on_chain_end calc",
        ],
        "{body}"
    );
    // The graph's run is the server's run; everything hangs under it.
    let root = events[0];
    assert_eq!(root["run_id"], json!(run_id));
    assert_eq!(root["parent_ids"], json!([]));
    assert_eq!(root["metadata"]["graph_id"], "calc");
    let node = events
        .iter()
        .find(|d| label(d) == "on_chain_start agent")
        .unwrap();
    assert_eq!(node["parent_ids"], json!([run_id]));
    assert_eq!(node["metadata"]["langgraph_node"], "agent");
    assert_eq!(node["metadata"]["langgraph_step"], 1);
    assert_eq!(node["metadata"]["run_id"], json!(run_id));
    let model_start = events
        .iter()
        .find(|d| d["event"] == "on_chat_model_start")
        .unwrap();
    assert_eq!(model_start["parent_ids"], json!([run_id, node["run_id"]]));
    assert_eq!(
        model_start["data"]["input"]["messages"][0][0]["content"],
        "add 1 and 2"
    );
    let chunks: Vec<&&Value> = events
        .iter()
        .filter(|d| d["event"] == "on_chat_model_stream" && d["run_id"] == model_start["run_id"])
        .collect();
    assert!(!chunks.is_empty());
    let text: String = chunks
        .iter()
        .map(|d| d["data"]["chunk"]["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "Adding");
    let tool_end = events.iter().find(|d| d["event"] == "on_tool_end").unwrap();
    assert_eq!(tool_end["data"]["output"]["content"], "3");
    assert_eq!(tool_end["data"]["input"], json!({"a": 1, "b": 2}));
    assert_eq!(tool_end["metadata"]["langgraph_node"], "tools");
    let end = events.last().unwrap();
    assert_eq!(end["data"]["output"]["messages"][3]["content"], "The sum is 3");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_go_with_other_modes_and_nest_subgraph_events_without_subgraph_names() {
    let s = TestServer::sqlite(|_| {}).await;
    let (body, frames) = stream(&s, "chatty", json!(["events", "updates"])).await;
    let names: std::collections::BTreeSet<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["events", "metadata", "updates"].into_iter().collect(),
        "{body}"
    );
    let events: Vec<&Value> = frames
        .iter()
        .filter(|(n, _)| n == "events")
        .map(|(_, d)| d)
        .collect();
    let inner = events
        .iter()
        .find(|d| label(d) == "on_chain_start inner")
        .unwrap();
    let sub = events
        .iter()
        .find(|d| d["event"] == "on_chain_start" && d["tags"] == json!(["seq:step:1"]))
        .unwrap();
    assert_eq!(sub["parent_ids"][1], inner["run_id"], "{body}");
    let deep = events.iter().find(|d| label(d) == "on_chain_start deep").unwrap();
    assert_eq!(deep["parent_ids"][2], sub["run_id"]);
    assert_eq!(
        deep["metadata"]["checkpoint_ns"],
        inner["metadata"]["langgraph_checkpoint_ns"]
    );
    // A node's own messages and custom writes are no `astream_events` events.
    assert!(events
        .iter()
        .all(|d| d["event"] != "on_chat_model_stream" && d["event"] != "on_custom_event"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_replays_a_resumable_runs_events_from_a_last_event_id() {
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("calc", factory(calc))).await;
    let t = s.thread().await;
    let (_, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": "calc", "input": human("add"), "stream_mode": ["events"], "stream_resumable": true}),
        )
        .await;
    let rid = run["run_id"].as_str().unwrap().to_owned();
    s.wait_run(&t, &rid).await;
    let join = |last: Option<String>| {
        let mut req = s.http.get(s.u(&format!("/threads/{t}/runs/{rid}/stream")));
        if let Some(id) = last {
            req = req.header("last-event-id", id);
        }
        async move { parse_sse(&req.send().await.unwrap().text().await.unwrap()) }
    };
    let all = join(None).await;
    let events: Vec<&Value> = all.iter().filter(|e| e.0 == "events").map(|e| &e.1).collect();
    assert_eq!(
        events.first().map(|d| label(d)).as_deref(),
        Some("on_chain_start calc"),
        "{all:?}"
    );
    assert_eq!(
        events.last().map(|d| label(d)).as_deref(),
        Some("on_chain_end calc")
    );
    assert!(events.iter().any(|d| d["event"] == "on_tool_end"));
    assert!(all.iter().all(|e| e.2.is_some()), "resumable frames carry ids");
    let rest = join(all[2].2.clone()).await;
    assert_eq!(rest, all[3..].to_vec());
    s.stop().await;
}
