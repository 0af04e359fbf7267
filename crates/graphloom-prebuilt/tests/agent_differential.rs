//! The differential check against LangChain's `create_agent`: the same scenarios
//! (`tests/differential/langchain_agent.py`, run in a virtualenv with pinned `langchain`
//! and `langgraph`, a scripted fake chat model on the Python side) — a two-tool agent with
//! human-in-the-loop review and a model call limit — must give the same interrupts and
//! the same message sequence (type, content, tool calls, tool_call_id, name, status).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{Command, Message, RunConfig, ToolCall};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::middleware::hitl::{DecisionType, HumanInTheLoop, InterruptOn};
use graphloom_prebuilt::middleware::limits::ModelCallLimit;
use graphloom_prebuilt::middleware::Middleware;
use graphloom_prebuilt::{create_agent, AgentGraphUpdate, FnTool, ToolCommand, ToolError, ToolOutput};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The releases compared against.
const PINS: &[&str] = &["langchain==1.5.2", "langchain-core==1.8.3", "langgraph==1.2.22"];

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Email {
    body: String,
    to: String,
}

fn tools() -> Vec<Arc<dyn graphloom_prebuilt::Tool>> {
    vec![
        FnTool::new(
            "get_weather",
            "The weather in a city.",
            |a: City, _rt| async move { Ok::<_, ToolError>(format!("sunny in {}", a.city)) },
        )
        .arc(),
        FnTool::new("send_email", "Send an email.", |a: Email, _rt| async move {
            Ok::<_, ToolError>(format!("sent to {}: {}", a.to, a.body))
        })
        .arc(),
        // A list of commands: the answer, then a note for the conversation.
        FnTool::new("note", "Note something.", |a: Note, rt| async move {
            Ok::<_, ToolError>(ToolOutput::commands([
                ToolCommand::new().update(
                    "messages",
                    json!([Message::tool(
                        format!("noted {}", a.what),
                        rt.tool_call_id.clone()
                    )]),
                ),
                ToolCommand::new().update(
                    "messages",
                    json!([Message::human(format!("remember: {}", a.what))]),
                ),
            ]))
        })
        .arc(),
    ]
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Note {
    what: String,
}

fn call(name: &str, args: Value, id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

fn norm(m: &Message) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), serde_json::to_value(m.kind).unwrap());
    out.insert("content".into(), m.content.clone());
    if !m.tool_calls.is_empty() {
        out.insert(
            "tool_calls".into(),
            Value::Array(
                m.tool_calls
                    .iter()
                    .map(|c| json!({"name": c.name, "args": c.args, "id": c.id}))
                    .collect(),
            ),
        );
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    if let Some(n) = &m.name {
        out.insert("name".into(), json!(n));
    }
    if m.kind == graphloom_core::MessageKind::Tool {
        out.insert(
            "status".into(),
            m.extra.get("status").cloned().unwrap_or(json!("success")),
        );
    }
    Value::Object(out)
}

async fn run(replies: Vec<Reply>, middleware: Vec<Arc<dyn Middleware>>, decisions: Vec<Value>) -> Value {
    let mut b = create_agent(Arc::new(ScriptedModel::new(replies)), tools())
        .system_prompt("You help with weather and email.")
        .checkpointer(InMemorySaver::new());
    for m in middleware {
        b = b.middleware_arc(m);
    }
    let agent = b.build().unwrap();
    let cfg = RunConfig::thread("t");
    let mut interrupts = Vec::new();
    let mut out = agent
        .invoke(
            AgentGraphUpdate::new().messages(vec![Message::human("Weather in Paris, and tell bob.")]),
            cfg.clone(),
        )
        .await
        .unwrap();
    for d in decisions {
        interrupts.push(Value::Array(
            out.interrupts.iter().map(|i| i.value.clone()).collect(),
        ));
        out = agent.resume(Command::resume(d), cfg.clone()).await.unwrap();
    }
    interrupts.push(Value::Array(
        out.interrupts.iter().map(|i| i.value.clone()).collect(),
    ));
    json!({"interrupts": interrupts, "messages": out.values.messages.iter().map(norm).collect::<Vec<_>>()})
}

async fn ours() -> BTreeMap<&'static str, Value> {
    let mut out = BTreeMap::new();
    out.insert(
        "reject_then_limit",
        run(
            vec![
                Reply::tool_calls(
                    "",
                    vec![
                        call("get_weather", json!({"city": "Paris"}), "w1"),
                        call("send_email", json!({"body": "sunny", "to": "bob"}), "e1"),
                    ],
                ),
                Reply::tool_calls("", vec![call("get_weather", json!({"city": "Rome"}), "w2")]),
                Reply::tool_calls("", vec![call("get_weather", json!({"city": "Oslo"}), "w3")]),
                Reply::text("never reached"),
            ],
            vec![
                Arc::new(HumanInTheLoop::new().interrupt_on("send_email", InterruptOn::all())),
                Arc::new(ModelCallLimit::new().run_limit(2)),
            ],
            vec![json!({"decisions": [{"type": "reject", "message": "not now"}]})],
        )
        .await,
    );
    out.insert(
        "edit_and_approve",
        run(
            vec![
                Reply::tool_calls(
                    "Checking.",
                    vec![
                        call("get_weather", json!({"city": "Paris"}), "w1"),
                        call("send_email", json!({"body": "rain", "to": "bob"}), "e1"),
                    ],
                ),
                Reply::text("Done: bob knows."),
            ],
            vec![
                Arc::new(ModelCallLimit::new().thread_limit(5)),
                Arc::new(
                    HumanInTheLoop::new()
                        .interrupt_on(
                            "send_email",
                            InterruptOn::allow([DecisionType::Approve, DecisionType::Edit, DecisionType::Reject]),
                        )
                        .interrupt_on(
                            "get_weather",
                            InterruptOn::allow([DecisionType::Approve]).description("Weather lookup"),
                        ),
                ),
            ],
            vec![json!({"decisions": [
                {"type": "approve"},
                {"type": "edit", "edited_action": {"name": "send_email", "args": {"body": "sunny", "to": "bob"}}}
            ]})],
        )
        .await,
    );
    out.insert(
        "respond_and_limit_on_thread",
        run(
            vec![
                Reply::tool_calls(
                    "",
                    vec![call("send_email", json!({"body": "hi", "to": "ann"}), "e1")],
                ),
                Reply::text("Ann says hi back."),
            ],
            vec![
                Arc::new(HumanInTheLoop::new().interrupt_on(
                    "send_email",
                    InterruptOn::allow([DecisionType::Respond, DecisionType::Reject]),
                )),
                Arc::new(ModelCallLimit::new().thread_limit(1)),
            ],
            vec![json!({"decisions": [{"type": "respond", "message": "ann replied: hi"}]})],
        )
        .await,
    );
    // Each tool call of a message is its own task: one `tools` update per call.
    out.insert(
        "tool_calls_are_tasks",
        updates_trace(vec![
            Reply::tool_calls(
                "",
                vec![
                    call("get_weather", json!({"city": "Paris"}), "w1"),
                    call("get_weather", json!({"city": "Rome"}), "w2"),
                    call("send_email", json!({"body": "sunny", "to": "bob"}), "e1"),
                ],
            ),
            Reply::text("Done."),
        ])
        .await,
    );
    // A tool returning a list of commands whose updates write `messages` twice: the
    // `updates` stream shows that task as one update per write, in order.
    out.insert(
        "tool_commands_stream_per_write",
        updates_trace(vec![
            Reply::tool_calls(
                "",
                vec![
                    call("note", json!({"what": "umbrella"}), "n1"),
                    call("get_weather", json!({"city": "Paris"}), "w1"),
                ],
            ),
            Reply::text("Noted."),
        ])
        .await,
    );
    // A tool returning a list of commands: applied in order.
    out.insert(
        "tool_returns_commands",
        run(
            vec![
                Reply::tool_calls(
                    "",
                    vec![
                        call("note", json!({"what": "umbrella"}), "n1"),
                        call("get_weather", json!({"city": "Paris"}), "w1"),
                    ],
                ),
                Reply::text("Noted."),
            ],
            vec![],
            vec![],
        )
        .await,
    );
    // The approval text renders the arguments in the order the model wrote them.
    out.insert(
        "approve_keeps_argument_order",
        run(
            vec![
                Reply::tool_calls(
                    "",
                    vec![call("send_email", json!({"to": "bob", "body": "hi"}), "e1")],
                ),
                Reply::text("Sent."),
            ],
            vec![Arc::new(
                HumanInTheLoop::new().interrupt_on("send_email", InterruptOn::all()),
            )],
            vec![json!({"decisions": [{"type": "approve"}]})],
        )
        .await,
    );
    out
}

/// A tools update: per key, its messages' kinds and tool call ids; a list (one update per
/// write, when the task wrote a key more than once) as its updates in order.
fn describe(update: &Value) -> String {
    match update {
        Value::Array(writes) => format!(
            "[{}]",
            writes.iter().map(describe).collect::<Vec<_>>().join(" | ")
        ),
        Value::Object(keys) => keys
            .iter()
            .map(|(k, v)| {
                if k != "messages" {
                    return k.clone();
                }
                let msgs: Vec<Message> = serde_json::from_value(v.clone()).unwrap();
                let parts: Vec<String> = msgs
                    .iter()
                    .map(|m| {
                        let kind = serde_json::to_value(m.kind).unwrap();
                        format!(
                            "{}:{}",
                            kind.as_str().unwrap(),
                            m.tool_call_id.as_deref().unwrap_or("")
                        )
                    })
                    .collect();
                format!("messages={}", parts.join("+"))
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// The `updates` stream of one run, as a sorted list: `model`, or `tools:<call ids>` for
/// each tools update (LangChain runs each call as its own task, so one update per call).
async fn updates_trace(replies: Vec<Reply>) -> Value {
    use futures::StreamExt;
    let agent = create_agent(Arc::new(ScriptedModel::new(replies)), tools())
        .system_prompt("You help with weather and email.")
        .checkpointer(InMemorySaver::new())
        .build()
        .unwrap();
    let mut stream = agent.stream(
        graphloom_core::RunInput::Update(
            AgentGraphUpdate::new().messages(vec![Message::human("Weather in Paris, and tell bob.")]),
        ),
        RunConfig::thread("t"),
        graphloom_core::StreamOptions::modes([graphloom_core::StreamMode::Updates]),
    );
    let mut updates = Vec::new();
    while let Some(ev) = stream.next().await {
        if let graphloom_core::RunEvent::Part(p) = ev {
            for (node, update) in p.data_json().unwrap().as_object().unwrap() {
                updates.push(if node == "tools" {
                    format!("tools:{}", describe(update))
                } else {
                    node.clone()
                });
            }
        }
    }
    updates.sort();
    let state = agent.get_state(&RunConfig::thread("t")).await.unwrap();
    json!({"updates": updates, "messages": state.values.messages.iter().map(norm).collect::<Vec<_>>()})
}

fn theirs() -> BTreeMap<String, Value> {
    let python = graphloom_test_kit::python::venv("langchain-venv", PINS);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/langchain_agent.py");
    let out = std::process::Command::new(python)
        .arg(&script)
        .output()
        .expect("run the LangChain scenarios");
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the LangChain scenarios print one JSON object")
}

#[tokio::test]
async fn graphloom_and_langchain_agents_agree() {
    let mut theirs = theirs();
    let ours = ours().await;
    let mut diffs = Vec::new();
    for (name, trace) in &ours {
        let lc = theirs
            .remove(*name)
            .unwrap_or_else(|| panic!("LangChain has no scenario `{name}`"));
        if &lc != trace {
            diffs.push(format!(
                "scenario `{name}`:\n  langchain: {}\n  graphloom: {}",
                serde_json::to_string(&lc).unwrap(),
                serde_json::to_string(trace).unwrap()
            ));
        }
    }
    assert!(
        theirs.is_empty(),
        "scenarios only LangChain runs: {:?}",
        theirs.keys()
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
