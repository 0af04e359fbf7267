//! `create_agent` runs each tool call of a model message as its own task (a `Send` per
//! call): one `tools` update per call, and a call that interrupts or fails leaves the
//! calls that finished alone (their writes are kept, they do not run again).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{
    Command, Message, MessageKind, RunConfig, RunEvent, RunInput, RunStatus, StreamMode, StreamOptions,
    ToolCall,
};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::{create_agent, AgentGraphUpdate, FnTool, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Q {
    q: String,
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

fn input(text: &str) -> AgentGraphUpdate {
    AgentGraphUpdate::new().messages(vec![Message::human(text)])
}

/// A tool that counts its runs.
fn counted(name: &'static str, runs: &Arc<AtomicUsize>) -> FnTool {
    let runs = Arc::clone(runs);
    FnTool::new(name, "Counts its runs", move |a: Q, _rt| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(format!("{name}: {}", a.q))
        }
    })
}

#[tokio::test]
async fn the_updates_stream_shows_one_tools_update_per_call() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("c1", "look", json!({"q": "a"})),
                call("c2", "look", json!({"q": "b"})),
                call("c3", "look", json!({"q": "c"})),
            ],
        ),
        Reply::text("done"),
    ]);
    let agent = create_agent(Arc::new(model), [counted("look", &runs).arc()])
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let mut stream = agent.stream(
        RunInput::Update(input("go")),
        RunConfig::thread("per-call"),
        StreamOptions::modes([StreamMode::Updates]),
    );
    let mut tools_updates: Vec<Vec<String>> = Vec::new();
    let mut nodes = Vec::new();
    let mut end = None;
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(10), stream.next())
        .await
        .expect("the run streams")
    {
        match ev {
            RunEvent::Part(p) => {
                let v = p.data_json().unwrap();
                for (node, update) in v.as_object().unwrap() {
                    nodes.push(node.clone());
                    if node == "tools" {
                        let ids = update["messages"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|m| m["tool_call_id"].as_str().unwrap().to_owned())
                            .collect();
                        tools_updates.push(ids);
                    }
                }
            }
            RunEvent::End(out) => end = Some(out.unwrap()),
        }
    }
    assert_eq!(end.unwrap().status, RunStatus::Done);
    tools_updates.sort();
    assert_eq!(tools_updates, [["c1"], ["c2"], ["c3"]], "{nodes:?}");
    assert_eq!(nodes, ["model", "tools", "tools", "tools", "model"]);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    // The answers land in the state in the order of the calls.
    let snap = agent.get_state(&RunConfig::thread("per-call")).await.unwrap();
    let ids: Vec<&str> = snap
        .values
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Tool)
        .map(|m| m.tool_call_id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
}

#[tokio::test]
async fn a_call_that_interrupts_does_not_run_the_finished_calls_again_on_resume() {
    let runs = Arc::new(AtomicUsize::new(0));
    // A mutating tool: its call waits for a verdict (an interrupt of its own task).
    let pay = FnTool::new("pay", "Pay", |a: Q, _rt| async move {
        Ok::<_, ToolError>(format!("paid {}", a.q))
    })
    .mark_mutating();
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("c1", "look", json!({"q": "a"})),
                call("c2", "pay", json!({"q": "bob"})),
            ],
        ),
        Reply::text("done"),
    ]);
    let agent = create_agent(Arc::new(model), [counted("look", &runs).arc(), pay.arc()])
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("per-call-interrupt");
    let paused = agent.invoke(input("go"), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].value["tool_call"]["id"], "c2");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let done = agent
        .resume(Command::resume(json!({"decision": "approve"})), cfg)
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the finished call ran again");
    let tools: Vec<String> = done
        .values
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Tool)
        .map(Message::text)
        .collect();
    assert_eq!(tools, ["look: a", "paid bob"]);
}

#[tokio::test]
async fn a_call_that_fails_does_not_run_the_finished_calls_again_when_the_run_continues() {
    let runs = Arc::new(AtomicUsize::new(0));
    let attempts = Arc::new(AtomicUsize::new(0));
    let a2 = Arc::clone(&attempts);
    let flaky = FnTool::new("flaky", "Fails once", move |a: Q, _rt| {
        let attempts = Arc::clone(&a2);
        async move {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(ToolError::execution("down"));
            }
            Ok(format!("flaky: {}", a.q))
        }
    });
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("c1", "look", json!({"q": "a"})),
                call("c2", "flaky", json!({"q": "b"})),
            ],
        ),
        Reply::text("done"),
    ]);
    let agent = create_agent(Arc::new(model), [counted("look", &runs).arc(), flaky.arc()])
        .tool_node(|n| n.handle_errors(false))
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let cfg = RunConfig::thread("per-call-fail");
    assert!(agent.invoke(input("go"), cfg.clone()).await.is_err());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let done = agent.invoke(None, cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the finished call ran again");
}
