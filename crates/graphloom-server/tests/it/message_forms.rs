//! Messages in every form clients send (OpenAI's `role` form with content parts and
//! tool calls, a plain string, a `[role, content]` pair) are accepted wherever the server
//! takes messages (run input, `Command.update`, `update_state`) and stored in the `type`
//! form; what the run could not decode is refused at the edge with a 422 naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::TestServer;
use graphloom_core::{JsonState, JsonUpdate, NodeOutput, StateGraph, END, START};
use graphloom_server::factory;
use serde_json::{json, Value};
use std::sync::Arc;

/// A graph on a JSON state: its schema says only that `messages` is a list.
fn json_chat(
    deps: &graphloom_server::GraphDeps,
) -> graphloom_core::Result<graphloom_core::CompiledGraph<JsonState>> {
    let shape = JsonState::from_reducer_names([("messages", "add_messages")]).unwrap();
    StateGraph::with_shape(shape)
        .add_node("reply", |_s: Arc<JsonState>, _rt| async move {
            Ok::<_, graphloom_core::NodeError>(NodeOutput::Update(
                JsonUpdate::new().set("messages", json!([{"role": "assistant", "content": "ok"}])),
            ))
        })
        .add_edge(START, "reply")
        .add_edge("reply", END)
        .checkpointer_dyn(Arc::clone(&deps.checkpointer))
        .compile()
}

async fn server() -> TestServer {
    TestServer::sqlite_with(|_| {}, |b| b.graph("json_chat", factory(json_chat))).await
}

fn types(values: &Value) -> Vec<String> {
    values["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn client_forms_are_accepted_and_stored_in_the_type_form() {
    let s = server().await;
    let t = s.thread().await;
    let (code, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": {"messages": [
                {"role": "system", "content": "be brief"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}
                ]},
                {"role": "tool", "content": "found", "tool_call_id": "c1"},
                ["user", "a pair"],
                {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "parts"}]}
            ]}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(types(&v), ["system", "ai", "tool", "human", "human", "ai"]);
    assert_eq!(v["messages"][1]["tool_calls"][0]["args"], json!({"q": 1}));
    assert_eq!(
        v["messages"][5]["content"], "echo: and parts",
        "text of the content parts"
    );
    assert!(v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m.get("role").is_none()));

    // A Command's update, and update_state, take the same forms.
    let (code, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "command": {"update": {"messages": ["plain string"]}, "goto": "reply"}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        v["messages"].as_array().unwrap().last().unwrap()["content"],
        "echo: plain string"
    );
    let (code, upd) = s
        .post(
            &format!("/threads/{t}/state"),
            json!({"values": {"messages": [{"role": "assistant", "content": "edited"}]}, "as_node": "reply"}),
        )
        .await;
    assert_eq!(code, 200, "{upd}");
    let (_, st) = s.get(&format!("/threads/{t}/state")).await;
    let last = st["values"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["type"].as_str(), last["content"].as_str()),
        (Some("ai"), Some("edited"))
    );
    s.stop().await;
}

#[tokio::test]
async fn what_the_run_could_not_decode_is_a_422_naming_it() {
    let s = server().await;
    let t = s.thread().await;
    let cases = [
        // A key the state does not have (the schema refuses it; LangGraph would drop it).
        (
            "echo",
            json!({"messages": ["hi"], "session_id": "s-1"}),
            "session_id",
        ),
        // A role nobody knows.
        (
            "echo",
            json!({"messages": [{"role": "wizard", "content": "hi"}]}),
            "wizard",
        ),
        ("echo", json!({"messages": [["wizard", "hi"]]}), "wizard"),
        // A JSON state's schema does not describe its messages: the edge decodes them.
        (
            "json_chat",
            json!({"messages": [{"role": "wizard", "content": "hi"}]}),
            "wizard",
        ),
        ("json_chat", json!({"messages": ["hi"], "extra": 1}), "extra"),
    ];
    for (graph, input, named) in cases {
        let (code, body) = s
            .post(
                &format!("/threads/{t}/runs/wait"),
                json!({"assistant_id": graph, "input": input}),
            )
            .await;
        assert_eq!(code, 422, "{graph} {input}: {body}");
        assert!(
            body.to_string().contains(named),
            "{graph}: the error names `{named}`: {body}"
        );
    }
    // Nothing was run: the thread has no checkpoint.
    let (_, st) = s.get(&format!("/threads/{t}/state")).await;
    assert!(st["values"].as_object().is_none_or(|v| v.is_empty()), "{st}");
    // And a JSON-state graph takes a client's form.
    let (code, v) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "json_chat", "input": {"messages": [["user", "hi"]]}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(types(&v), ["human", "ai"]);
    s.stop().await;
}
