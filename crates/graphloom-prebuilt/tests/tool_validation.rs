//! Tool argument checks: malformed JSON, schema violations and injected keys, all caught
//! before the tool runs, and reported to the model in terms of its own arguments.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::{Message, RunConfig, Seq, State, StateGraph, ToolCall, END, START};
use graphloom_prebuilt::{FnTool, Tool, ToolError, ToolNode, ToolRuntime};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    session_id: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Lookup {
    /// Customer number.
    customer: u32,
}

fn lookup_tool(runs: Arc<AtomicUsize>, seen: Arc<Mutex<Vec<Value>>>) -> Arc<dyn Tool> {
    FnTool::new(
        "lookup",
        "Look a customer up",
        move |a: Lookup, rt: ToolRuntime| {
            let runs = Arc::clone(&runs);
            let seen = Arc::clone(&seen);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                seen.lock()
                    .unwrap()
                    .push(rt.injected("session_id").cloned().unwrap_or(Value::Null));
                Ok::<_, ToolError>(format!("customer {}", a.customer))
            }
        },
    )
    .inject(["session_id"])
    .arc()
}

async fn run_calls(tool: Arc<dyn Tool>, calls: Vec<ToolCall>) -> Vec<Message> {
    let graph = StateGraph::<Chat>::new()
        .add_node(
            "tools",
            ToolNode::new([tool]).into_node::<Chat>(|s| &s.messages, |m| ChatUpdate::new().messages(m)),
        )
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .compile()
        .unwrap();
    let out = graph
        .invoke(
            ChatUpdate::new()
                .session_id("sess-real".into())
                .messages(vec![Message::human("hi"), Message::ai_with_tool_calls("", calls)]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    out.values.messages.iter().skip(2).cloned().collect()
}

fn call(id: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "lookup".into(),
        args,
    }
}

#[tokio::test]
async fn malformed_json_arguments_are_refused_and_the_tool_does_not_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let out = run_calls(
        lookup_tool(Arc::clone(&runs), Arc::default()),
        vec![call("c1", json!("{\"customer\": 4"))],
    )
    .await;
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(out[0].extra["status"], "error");
    assert!(out[0].text().contains("not valid JSON"), "{}", out[0].text());
    assert!(out[0].text().starts_with("Error (validation)"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn schema_violations_name_the_model_argument_and_the_tool_does_not_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let out = run_calls(
        lookup_tool(Arc::clone(&runs), Arc::default()),
        vec![
            call("c1", json!({"customer": "forty-two"})),
            call("c2", json!({})),
        ],
    )
    .await;
    assert_eq!(out.len(), 2);
    let first = out[0].text();
    assert!(first.contains("invalid arguments for `lookup`"), "{first}");
    assert!(first.contains("/customer"), "{first}");
    assert!(first.contains("forty-two"), "{first}");
    assert!(out[1].text().contains("customer"), "{}", out[1].text());
    assert!(out.iter().all(|m| m.extra["status"] == "error"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // The LangChain wire shape of an error tool message.
    let wire = serde_json::to_value(&out[0]).unwrap();
    assert_eq!(wire["type"], "tool");
    assert_eq!(wire["tool_call_id"], "c1");
    assert_eq!(wire["status"], "error");
}

#[tokio::test]
async fn injected_keys_from_the_model_are_dropped_and_never_reach_the_tool() {
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tool = lookup_tool(Arc::clone(&runs), Arc::clone(&seen));
    // The schema the model sees has no `session_id`, and rejects unknown keys.
    assert!(tool.schema()["properties"].get("session_id").is_none());
    assert_eq!(tool.schema()["additionalProperties"], json!(false));
    let out = run_calls(
        tool,
        vec![call("c1", json!({"customer": 7, "session_id": "sess-forged"}))],
    )
    .await;
    assert_eq!(out[0].text(), "customer 7");
    assert_eq!(out[0].extra["status"], "success");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().unwrap(), vec![json!("sess-real")]);
}

#[tokio::test]
async fn validation_messages_never_mention_injected_names() {
    let tool = lookup_tool(Arc::default(), Arc::default());
    let node = ToolNode::new([tool]);
    let msg = Message::ai_with_tool_calls("", vec![call("c1", json!({"customer": -1, "session_id": 5}))]);
    let out = node.run_message(&msg, json!({}), None).await.unwrap();
    let text = out[0].text();
    assert!(text.contains("customer"), "{text}");
    assert!(!text.contains("session_id"), "{text}");
}

#[tokio::test]
async fn the_tool_runtime_carries_the_call_id_and_an_idempotency_key_in_a_graph() {
    let keys = Arc::new(Mutex::new(Vec::new()));
    let k = Arc::clone(&keys);
    let tool = FnTool::new(
        "probe",
        "probe",
        move |_a: serde_json::Map<String, Value>, rt: ToolRuntime| {
            let k = Arc::clone(&k);
            async move {
                k.lock().unwrap().push((
                    rt.tool_call_id.clone(),
                    rt.idempotency_key.clone(),
                    rt.state["session_id"].clone(),
                ));
                Ok::<_, ToolError>("ok")
            }
        },
    )
    .arc();
    let out = run_calls(
        tool,
        vec![ToolCall {
            id: "p1".into(),
            name: "probe".into(),
            args: json!({}),
        }],
    )
    .await;
    assert_eq!(out[0].text(), "ok");
    let keys = keys.lock().unwrap();
    assert_eq!(keys[0].0, "p1");
    assert_eq!(keys[0].1.as_ref().map(String::len), Some(32));
    assert_eq!(keys[0].2, json!("sess-real"));
}
