//! `astream_events` (v2) events of an agent: the model's `on_chat_model_start/stream/end`
//! (from the scripted model, through the one place every model call in a node passes)
//! and the ToolNode's `on_tool_start/end/error`, nested in their node's run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::{EventFilter, EventKind, Message, RunConfig, RunInput, RunType, StreamEvent, ToolCall};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::{
    create_react_agent, AgentOptions, AgentStateUpdate, FnTool, ToolError, ToolRuntime,
};
use serde_json::json;
use std::sync::Arc;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// First.
    a: i64,
    /// Second.
    b: i64,
}

async fn run_agent(filter: EventFilter) -> Vec<StreamEvent> {
    let add = FnTool::new("add", "Add two numbers", |x: Add, _rt: ToolRuntime| async move {
        Ok::<_, ToolError>(format!("{}", x.a + x.b))
    });
    let boom = FnTool::new("boom", "Fails", |_x: Add, _rt: ToolRuntime| async move {
        Err::<String, _>(ToolError::execution("boom failed"))
    });
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "Let me add",
            vec![
                ToolCall {
                    id: "call_1".into(),
                    name: "add".into(),
                    args: json!({"a": 1, "b": 2}),
                },
                ToolCall {
                    id: "call_2".into(),
                    name: "boom".into(),
                    args: json!({"a": 1, "b": 1}),
                },
            ],
        ),
        Reply::text("The sum is 3"),
    ]);
    let agent = create_react_agent(Arc::new(model), [add.arc(), boom.arc()], AgentOptions::new()).unwrap();
    let input = AgentStateUpdate::new().messages(vec![Message::human("add 1 and 2")]);
    let mut s = agent.stream_events(RunInput::Update(input), RunConfig::default().run_id("r"), filter);
    let mut out = Vec::new();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(10), s.next())
        .await
        .expect("the event stream stalled")
    {
        out.push(ev.unwrap());
    }
    out
}

fn find<'a>(events: &'a [StreamEvent], kind: EventKind, name: &str) -> Vec<&'a StreamEvent> {
    events
        .iter()
        .filter(|e| e.event == kind && e.name == name)
        .collect()
}

#[tokio::test]
async fn model_calls_report_start_chunks_and_end_nested_in_their_node() {
    let events = run_agent(EventFilter::all()).await;
    let starts = find(&events, EventKind::ChatModelStart, "ScriptedModel");
    let ends = find(&events, EventKind::ChatModelEnd, "ScriptedModel");
    assert_eq!(starts.len(), 2, "two model calls");
    assert_eq!(ends.len(), 2);
    let first = starts[0];
    let node = events
        .iter()
        .find(|e| e.event == EventKind::ChainStart && e.run_id == first.parent_ids[1])
        .unwrap();
    assert_eq!(node.tags, ["graph:step:1"]);
    assert_eq!(first.parent_ids, vec!["r".to_owned(), node.run_id.clone()]);
    assert_eq!(first.tags, ["seq:step:1"]);
    assert_eq!(first.metadata["ls_provider"], "scripted");
    assert_eq!(first.metadata["ls_model_type"], "chat");
    assert_eq!(first.metadata["langgraph_node"], node.metadata["langgraph_node"]);
    assert_eq!(
        first.metadata["checkpoint_ns"],
        node.metadata["langgraph_checkpoint_ns"]
    );
    // The prompt, as LangChain reports a batch: one list of messages per prompt.
    let prompt = first.data.input.as_ref().unwrap();
    assert_eq!(prompt["messages"][0][0]["type"], "human");
    assert_eq!(prompt["messages"][0][0]["content"], "add 1 and 2");

    // Chunks carry the call's id and add up to the answer the end reports.
    let chunks: Vec<&StreamEvent> = events
        .iter()
        .filter(|e| e.event == EventKind::ChatModelStream && e.run_id == first.run_id)
        .collect();
    assert!(!chunks.is_empty());
    let text: String = chunks
        .iter()
        .map(|c| {
            c.data.chunk.as_ref().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Let me add");
    assert!(chunks
        .iter()
        .all(|c| c.data.chunk.as_ref().unwrap()["type"] == "AIMessageChunk"));
    let end = ends.iter().find(|e| e.run_id == first.run_id).unwrap();
    let output = end.data.output.as_ref().unwrap();
    assert_eq!(output["type"], "ai");
    assert_eq!(output["content"], "Let me add");
    assert_eq!(output["tool_calls"][0]["name"], "add");
    assert_eq!(end.data.input, first.data.input);
    let last_end = ends.iter().find(|e| e.run_id == starts[1].run_id).unwrap();
    assert_eq!(last_end.data.output.as_ref().unwrap()["content"], "The sum is 3");
}

#[tokio::test]
async fn tool_calls_report_start_and_end_or_error_nested_in_the_tool_node() {
    let events = run_agent(EventFilter::all()).await;
    let add_start = find(&events, EventKind::ToolStart, "add");
    let add_end = find(&events, EventKind::ToolEnd, "add");
    let boom_start = find(&events, EventKind::ToolStart, "boom");
    let boom_err = find(&events, EventKind::ToolError, "boom");
    assert_eq!(
        (add_start.len(), add_end.len(), boom_start.len(), boom_err.len()),
        (1, 1, 1, 1)
    );
    assert!(find(&events, EventKind::ToolEnd, "boom").is_empty());
    let tools_node = events
        .iter()
        .find(|e| e.event == EventKind::ChainStart && e.run_id == add_start[0].parent_ids[1])
        .unwrap();
    assert_eq!(tools_node.name, "tools");
    assert_eq!(tools_node.tags, ["graph:step:2"]);
    assert_eq!(boom_start[0].parent_ids, add_start[0].parent_ids);
    assert_ne!(boom_start[0].run_id, add_start[0].run_id);
    assert_eq!(add_start[0].tags, ["seq:step:1"]);
    assert_eq!(add_start[0].metadata["langgraph_node"], "tools");
    assert_eq!(add_start[0].data.input, Some(json!({"a": 1, "b": 2})));

    let end = add_end[0];
    assert_eq!(end.run_id, add_start[0].run_id);
    let msg = end.data.output.as_ref().unwrap();
    assert_eq!(msg["type"], "tool");
    assert_eq!(msg["content"], "3");
    assert_eq!(msg["tool_call_id"], "call_1");
    assert_eq!(msg["status"], "success");
    assert_eq!(end.data.input, Some(json!({"a": 1, "b": 2})));

    let err = boom_err[0];
    assert_eq!(err.run_id, boom_start[0].run_id);
    let error = err.data.error.as_ref().unwrap();
    assert_eq!(error["error"], "ToolError");
    assert!(
        error["message"].as_str().unwrap().contains("boom failed"),
        "{error}"
    );
    assert_eq!(err.data.tool_call_id.as_deref(), Some("call_2"));
    assert_eq!(err.data.input, Some(json!({"a": 1, "b": 1})));
    let text = serde_json::to_string(err).unwrap();
    assert!(
        text.starts_with(r#"{"event":"on_tool_error","data":{"error":"#),
        "{text}"
    );
    assert!(text.contains(r#""tool_call_id":"call_2"}"#), "{text}");

    // Every tool event comes between its node's start and end.
    let pos = |e: &StreamEvent| events.iter().position(|x| x == e).unwrap();
    let node_end = events
        .iter()
        .find(|e| e.event == EventKind::ChainEnd && e.run_id == tools_node.run_id)
        .unwrap();
    for e in [add_start[0], add_end[0], boom_start[0], boom_err[0]] {
        assert!(pos(tools_node) < pos(e) && pos(e) < pos(node_end));
    }
}

#[tokio::test]
async fn type_filters_pick_model_or_tool_events() {
    let models = run_agent(EventFilter::all().include_type(RunType::ChatModel)).await;
    assert!(!models.is_empty());
    assert!(models.iter().all(|e| e.event.run_type() == RunType::ChatModel));
    let tools = run_agent(
        EventFilter::all()
            .include_type(RunType::Tool)
            .exclude_name("boom"),
    )
    .await;
    assert_eq!(
        tools.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["on_tool_start", "on_tool_end"]
    );
}
