//! End to end: the prebuilt ReAct agent with a scripted model calls tools of a real MCP
//! server process and reads their results; every bad call becomes an error tool message,
//! the run goes on, and a mutating MCP tool waits for approval.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{bounded, stdio_server};
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{Command, Message, MessageKind, RunConfig, RunStatus, ToolCall};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_mcp::McpClient;
use graphloom_prebuilt::{create_react_agent, AgentOptions, AgentStateUpdate};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn tc(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

fn status(m: &Message) -> &str {
    m.extra.get("status").and_then(Value::as_str).unwrap_or("")
}

#[tokio::test]
async fn a_react_agent_calls_mcp_tools_and_reads_their_results() {
    let tools = bounded(
        McpClient::new()
            .server(
                "calc",
                stdio_server()
                    .allow(["add", "echo", "fail", "hang"])
                    .tool_timeout("hang", Duration::from_millis(300)),
            )
            .prefix_tool_names(true)
            .load_tools(),
    )
    .await
    .unwrap();
    let model = ScriptedModel::new([
        // One message with every kind of call: good, failing at the server, invalid
        // arguments, unknown tool, hanging.
        Reply::tool_calls(
            "",
            vec![
                tc("c1", "calc_add", json!({"a": 2, "b": 3})),
                tc("c2", "calc_fail", json!({"message": "the ledger is locked"})),
                tc("c3", "calc_add", json!({"a": "two"})),
                tc("c4", "calc_divide", json!({"a": 1})),
                tc("c5", "calc_hang", json!({})),
            ],
        ),
        Reply::tool_calls("", vec![tc("c6", "calc_echo", json!({"text": "done"}))]),
        Reply::text("2 + 3 = 5"),
    ]);
    let agent = create_react_agent(Arc::new(model.clone()), tools, AgentOptions::new()).unwrap();
    let out = bounded(agent.invoke(
        AgentStateUpdate::new().messages(vec![Message::human("add 2 and 3")]),
        RunConfig::default(),
    ))
    .await
    .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    let msgs = &out.values.messages;
    let answers: Vec<&Message> = msgs.iter().filter(|m| m.kind == MessageKind::Tool).collect();
    let by_id = |id: &str| {
        *answers
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no answer to {id}"))
    };
    assert_eq!(by_id("c1").text(), r#"{"sum":5}"#);
    assert_eq!(status(by_id("c1")), "success");
    assert_eq!(by_id("c2").text(), "Error (execution): the ledger is locked");
    assert!(by_id("c3")
        .text()
        .starts_with("Error (validation): invalid arguments for `calc_add`"));
    assert!(by_id("c4").text().contains("`calc_divide` is not a valid tool"));
    assert!(
        by_id("c5").text().starts_with("Error (timeout):"),
        "{}",
        by_id("c5").text()
    );
    for id in ["c2", "c3", "c4", "c5"] {
        assert_eq!(status(by_id(id)), "error", "{id}");
    }
    assert_eq!(by_id("c6").text(), "done");
    assert_eq!(msgs.last().unwrap().text(), "2 + 3 = 5");

    // The model was offered the server's tools with their schemas.
    let reqs = model.requests();
    let offered: Vec<&str> = reqs[0].options.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["calc_add", "calc_echo", "calc_fail", "calc_hang"]);
    let add = reqs[0]
        .options
        .tools
        .iter()
        .find(|t| t.name == "calc_add")
        .unwrap();
    assert_eq!(add.parameters["required"], json!(["a", "b"]));
}

#[tokio::test]
async fn a_mutating_mcp_tool_waits_for_approval_and_runs_once() {
    let tools = bounded(
        McpClient::new()
            .server("srv", stdio_server().allow(["echo"]).mutating(["echo"]))
            .load_tools(),
    )
    .await
    .unwrap();
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![tc("c1", "echo", json!({"text": "sent"}))]),
        Reply::text("Sent."),
    ]);
    let agent = create_react_agent(
        Arc::new(model),
        tools,
        AgentOptions::new().checkpointer(InMemorySaver::new()),
    )
    .unwrap();
    let cfg = RunConfig::thread("mcp-approval");
    let paused = bounded(agent.invoke(
        AgentStateUpdate::new().messages(vec![Message::human("send it")]),
        cfg.clone(),
    ))
    .await
    .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts[0].value["tool_call"]["name"], json!("echo"));
    let done = bounded(agent.resume(Command::resume(json!({"decision": "approve"})), cfg))
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let texts: Vec<String> = done.values.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["send it", "", "sent", "Sent."]);
}
