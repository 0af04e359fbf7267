//! ToolNode: parallel execution, timeouts, unknown tools, duplicate ids, result size caps,
//! raising instead of answering, and stream redaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::{
    Message, MessageKind, RunConfig, RunEvent, RunInput, Seq, State, StateGraph, StreamMode, StreamOptions,
    ToolCall, END, START,
};
use graphloom_prebuilt::{
    FnTool, Tool, ToolCommand, ToolError, ToolNode, ToolNodeGraph, ToolOutput, UnansweredToolCall,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(State, Clone, Default, Debug)]
struct Chat {
    #[reducer(add_messages)]
    messages: Seq<Message>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Sleep {
    /// Milliseconds to sleep.
    ms: u64,
}

fn sleeper(name: &str, runs: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    FnTool::new(name, "Sleep a while", move |a: Sleep, _rt| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
            Ok::<_, ToolError>(format!("slept {}", a.ms))
        }
    })
    .arc()
}

fn tc(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

fn graph(node: ToolNode) -> graphloom_core::CompiledGraph<Chat> {
    StateGraph::<Chat>::new()
        .add_node(
            "tools",
            node.into_node::<Chat>(|s| &s.messages, |m| ChatUpdate::new().messages(m)),
        )
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .compile()
        .unwrap()
}

fn input(calls: Vec<ToolCall>) -> ChatUpdate {
    ChatUpdate::new().messages(vec![Message::human("go"), Message::ai_with_tool_calls("", calls)])
}

#[tokio::test]
async fn calls_run_in_parallel_with_a_timeout_and_an_unknown_tool_is_answered() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ToolNode::new([sleeper("sleep", Arc::clone(&runs))]).timeout(Duration::from_millis(400));
    let start = Instant::now();
    let out = graph(node)
        .invoke(
            input(vec![
                tc("a", "sleep", json!({"ms": 200})),
                tc("b", "sleep", json!({"ms": 200})),
                tc("c", "sleep", json!({"ms": 200})),
                tc("slow", "sleep", json!({"ms": 5000})),
                tc("u", "teleport", json!({})),
            ]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_millis(1500),
        "parallel, and the slow one cut off: {elapsed:?}"
    );
    let msgs: Vec<Message> = out.values.messages.iter().skip(2).cloned().collect();
    let ids: Vec<_> = msgs.iter().map(|m| m.tool_call_id.clone().unwrap()).collect();
    assert_eq!(
        ids,
        vec!["a", "b", "c", "slow", "u"],
        "answers keep the call order"
    );
    for m in &msgs[..3] {
        assert_eq!(m.text(), "slept 200");
        assert_eq!(m.extra["status"], "success");
    }
    assert_eq!(msgs[3].extra["status"], "error");
    assert!(
        msgs[3].text().starts_with("Error (timeout)"),
        "{}",
        msgs[3].text()
    );
    assert!(msgs[3].text().contains("400 ms"));
    assert_eq!(msgs[4].extra["status"], "error");
    assert!(
        msgs[4].text().contains("`teleport` is not a valid tool"),
        "{}",
        msgs[4].text()
    );
    assert!(msgs[4].text().contains("sleep"), "lists the valid tools");
    assert_eq!(runs.load(Ordering::SeqCst), 4, "the unknown tool ran nothing");
}

#[tokio::test]
async fn per_tool_timeout_overrides_the_node_default() {
    let tool = FnTool::new("nap", "nap", |a: Sleep, _rt| async move {
        tokio::time::sleep(Duration::from_millis(a.ms)).await;
        Ok::<_, ToolError>("up")
    })
    .with_timeout(Duration::from_millis(50))
    .arc();
    let node = ToolNode::new([tool]);
    let msg = Message::ai_with_tool_calls("", vec![tc("n", "nap", json!({"ms": 2000}))]);
    let out = node.run_message(&msg, json!({}), None).await.unwrap();
    assert!(out[0].text().contains("within 50 ms"), "{}", out[0].text());
}

#[tokio::test]
async fn duplicate_tool_call_ids_run_nothing_and_are_explained() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ToolNode::new([sleeper("sleep", Arc::clone(&runs))]);
    let msg = Message::ai_with_tool_calls(
        "",
        vec![
            tc("dup", "sleep", json!({"ms": 1})),
            tc("dup", "sleep", json!({"ms": 1})),
            tc("ok", "sleep", json!({"ms": 1})),
        ],
    );
    let out = node.run_message(&msg, json!({}), None).await.unwrap();
    assert_eq!(out.len(), 3);
    assert!(out[0].text().contains("more than one call"), "{}", out[0].text());
    assert!(out[1].text().contains("more than one call"));
    assert_eq!(out[2].text(), "slept 1");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn results_over_the_size_cap_are_refused_with_a_clear_error() {
    let big = FnTool::new(
        "dump",
        "Dump a table",
        |_a: serde_json::Map<String, Value>, _rt| async move { Ok::<_, ToolError>("x".repeat(300 * 1024)) },
    )
    .arc();
    let small = FnTool::new(
        "peek",
        "Peek",
        |_a: serde_json::Map<String, Value>, _rt| async move {
            Ok::<_, ToolError>(json!({"rows": ["a", "b"], "more": true}))
        },
    )
    .result_limit(10)
    .arc();
    let node = ToolNode::new([big, small]);
    let msg = Message::ai_with_tool_calls("", vec![tc("d", "dump", json!({})), tc("p", "peek", json!({}))]);
    let out = node.run_message(&msg, json!({}), None).await.unwrap();
    let t = out[0].text();
    assert!(t.starts_with("Error (execution)"), "{t}");
    assert!(
        t.contains("307200 bytes") && t.contains("262144 bytes"),
        "default cap 256 KB: {t}"
    );
    assert!(out[1].text().contains("limit of 10 bytes"), "{}", out[1].text());
    // Configurable on the node too.
    let node = ToolNode::new([FnTool::new(
        "dump",
        "d",
        |_a: serde_json::Map<String, Value>, _rt| async move { Ok::<_, ToolError>("x".repeat(2000)) },
    )
    .arc()])
    .max_result_bytes(4096);
    let out = node
        .run_message(
            &Message::ai_with_tool_calls("", vec![tc("d", "dump", json!({}))]),
            json!({}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out[0].extra["status"], "success");
}

#[tokio::test]
async fn with_error_handling_off_a_failure_fails_the_node() {
    let node = ToolNode::new([sleeper("sleep", Arc::default())]).handle_errors(false);
    let err = graph(node)
        .invoke(input(vec![tc("u", "nope", json!({}))]), RunConfig::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a valid tool"), "{err}");
}

#[tokio::test]
async fn tool_failures_become_error_messages() {
    let tool = FnTool::new(
        "fail",
        "fails",
        |_a: serde_json::Map<String, Value>, _rt| async move {
            Err::<String, _>(ToolError::execution("the upstream service said no"))
        },
    )
    .arc();
    let out = ToolNode::new([tool])
        .run_message(
            &Message::ai_with_tool_calls("", vec![tc("f", "fail", json!({}))]),
            json!({}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out[0].text(), "Error (execution): the upstream service said no");
    assert_eq!(out[0].name.as_deref(), Some("fail"));
}

#[tokio::test]
async fn only_allowlisted_result_fields_reach_the_custom_stream() {
    let account = FnTool::new(
        "account",
        "Read an account",
        |_a: serde_json::Map<String, Value>, _rt| async move {
            Ok::<_, ToolError>(json!({"balance": 10, "iban": "DE00 SECRET", "owner": "Ada"}))
        },
    )
    .stream_fields(["balance", "owner"])
    .arc();
    let plain =
        FnTool::new(
            "plain",
            "No allowlist",
            |_a: serde_json::Map<String, Value>, _rt| async move {
                Ok::<_, ToolError>(json!({"token": "SECRET"}))
            },
        )
        .arc();
    let text = FnTool::new(
        "text",
        "Text under an allowlist",
        |_a: serde_json::Map<String, Value>, _rt| async move { Ok::<_, ToolError>("SECRET text") },
    )
    .stream_fields(["x"])
    .arc();
    let events: Vec<RunEvent<Chat>> = graph(ToolNode::new([account, plain, text]))
        .stream(
            RunInput::Update(input(vec![
                tc("a", "account", json!({})),
                tc("p", "plain", json!({})),
                tc("t", "text", json!({})),
            ])),
            RunConfig::default(),
            StreamOptions::modes([StreamMode::Custom]),
        )
        .collect()
        .await;
    let custom: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Part(p) if p.mode == StreamMode::Custom => p.data_json().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(custom.len(), 3);
    let all = serde_json::to_string(&custom).unwrap();
    assert!(!all.contains("SECRET"), "{all}");
    assert_eq!(
        custom[0]["tool_result"]["content"],
        json!({"balance": 10, "owner": "Ada"})
    );
    assert!(custom[1]["tool_result"].get("content").is_none());
    assert_eq!(custom[2]["tool_result"]["redaction_error"]["code"], "redaction");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Recall {
    /// Key to read.
    key: String,
}

#[tokio::test]
async fn tools_read_the_runs_own_store() {
    use graphloom_core::store::{DynStore, PutOptions};
    use graphloom_core::InMemoryStore;
    let tool = FnTool::new("recall", "Read a note", |a: Recall, rt| async move {
        let store = rt.store().ok_or_else(|| ToolError::unavailable("no store"))?;
        let item = DynStore::get(&**store, &["notes".to_owned()], &a.key)
            .await
            .map_err(|e| ToolError::unavailable(e.to_string()))?;
        Ok::<_, ToolError>(item.map_or_else(|| "none".to_owned(), |i| i.value["text"].to_string()))
    })
    .arc();
    let compiled = InMemoryStore::new();
    let per_run = InMemoryStore::new();
    for (store, text) in [(&compiled, "compiled"), (&per_run, "per run")] {
        DynStore::put(
            store,
            &["notes".to_owned()],
            "k",
            json!({"text": text}),
            PutOptions::default(),
        )
        .await
        .unwrap();
    }
    let g = StateGraph::<Chat>::new()
        .add_node(
            "tools",
            ToolNode::new([tool]).into_node::<Chat>(|s| &s.messages, |m| ChatUpdate::new().messages(m)),
        )
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .store(compiled)
        .compile()
        .unwrap();
    let call = || input(vec![tc("r", "recall", json!({"key": "k"}))]);
    let answer = |out: graphloom_core::RunOutput<Chat>| out.values.messages.iter().last().unwrap().text();
    let out = g.invoke(call(), RunConfig::default()).await.unwrap();
    assert_eq!(answer(out), "\"compiled\"");
    let cfg = RunConfig::default().store(Arc::new(per_run) as Arc<dyn DynStore>);
    let out = g.invoke(call(), cfg).await.unwrap();
    assert_eq!(answer(out), "\"per run\"");
}

// ---- Command from tools ----

#[derive(State, Clone, Default, Debug)]
struct Desk {
    #[reducer(add_messages)]
    messages: Seq<Message>,
    team: String,
    #[reducer(append)]
    log: Seq<String>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Transfer {
    /// The team to hand the conversation to.
    team: String,
}

/// A tool that answers its call, records the team, logs, and goes to the team's node.
fn transfer(name: &str, answer: bool, set_team: bool) -> Arc<dyn Tool> {
    let tool = name.to_owned();
    FnTool::new(
        name,
        "Transfer to a team",
        move |a: Transfer, rt: graphloom_prebuilt::ToolRuntime| {
            let tool = tool.clone();
            async move {
                let mut cmd = graphloom_prebuilt::ToolCommand::new()
                    .update("log", json!([format!("{tool} -> {}", a.team)]))
                    .goto(a.team.clone());
                if answer {
                    let msg = Message::tool(format!("transferred to {}", a.team), &rt.tool_call_id);
                    cmd = cmd.update("messages", json!([msg]));
                }
                if set_team {
                    cmd = cmd.update("team", json!(a.team));
                }
                Ok::<_, ToolError>(cmd)
            }
        },
    )
    .arc()
}

fn desk(node: ToolNode) -> graphloom_core::CompiledGraph<Desk> {
    StateGraph::<Desk>::new()
        .add_node(
            "tools",
            node.into_node::<Desk>(|s| &s.messages, |m| DeskUpdate::new().messages(m)),
        )
        .add_node("billing", |_s, _rt| async {
            Ok(DeskUpdate::new().log(vec!["billing ran".into()]))
        })
        .add_node("support", |_s, _rt| async {
            Ok(DeskUpdate::new().log(vec!["support ran".into()]))
        })
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .destinations("tools", ["billing", "support"])
        .add_edge("billing", END)
        .add_edge("support", END)
        .compile()
        .unwrap()
}

fn desk_input(calls: Vec<ToolCall>) -> DeskUpdate {
    DeskUpdate::new().messages(vec![
        Message::human("help"),
        Message::ai_with_tool_calls("", calls),
    ])
}

#[tokio::test]
async fn a_tool_command_updates_state_and_routes() {
    let node = ToolNode::new([transfer("transfer", true, true)]);
    let out = desk(node)
        .invoke(
            desk_input(vec![tc("c1", "transfer", json!({"team": "billing"}))]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.values.team, "billing");
    assert_eq!(
        out.values.log.to_vec(),
        vec!["transfer -> billing", "billing ran"]
    );
    let answer = out.values.messages.to_vec().pop().unwrap();
    assert_eq!(answer.tool_call_id.as_deref(), Some("c1"));
    assert_eq!(answer.text(), "transferred to billing");
    // Named after the tool that answered, as LangGraph does.
    assert_eq!(answer.name.as_deref(), Some("transfer"));
}

/// [`transfer`] with the graph's own typed update: a misspelt key would not compile.
fn typed_transfer(name: &str) -> Arc<dyn Tool> {
    let tool = name.to_owned();
    FnTool::new(
        name,
        "Transfer to a team",
        move |a: Transfer, rt: graphloom_prebuilt::ToolRuntime| {
            let tool = tool.clone();
            async move {
                let answer = Message::tool(format!("transferred to {}", a.team), &rt.tool_call_id);
                let update = DeskUpdate::new()
                    .messages(vec![answer])
                    .team(a.team.clone())
                    .log(vec![format!("{tool} -> {}", a.team)]);
                Ok::<_, ToolError>(ToolCommand::from_update::<Desk>(update)?.goto(a.team))
            }
        },
    )
    .arc()
}

#[tokio::test]
async fn a_typed_tool_command_does_what_its_json_form_does() {
    let call = || desk_input(vec![tc("c1", "transfer", json!({"team": "billing"}))]);
    let typed = desk(ToolNode::new([typed_transfer("transfer")]))
        .invoke(call(), RunConfig::default())
        .await
        .unwrap();
    let json = desk(ToolNode::new([transfer("transfer", true, true)]))
        .invoke(call(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(typed.values.team, "billing");
    assert_eq!(typed.values.team, json.values.team);
    assert_eq!(typed.values.log.to_vec(), json.values.log.to_vec());
    assert_eq!(seen(&typed.values.messages), seen(&json.values.messages));
    assert_eq!(
        typed.values.messages.to_vec().pop().unwrap().name.as_deref(),
        Some("transfer")
    );
}

#[tokio::test]
async fn parallel_tool_commands_combine_with_plain_answers_in_call_order() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ToolNode::new([
        transfer("to_billing", true, false),
        transfer("to_support", true, true),
        sleeper("sleep", Arc::clone(&runs)),
    ]);
    let out = desk(node)
        .invoke(
            desk_input(vec![
                tc("c1", "to_billing", json!({"team": "billing"})),
                tc("c2", "sleep", json!({"ms": 1})),
                tc("c3", "to_support", json!({"team": "support"})),
            ]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    // Every call answered once, in call order.
    let answers: Vec<Option<String>> = out
        .values
        .messages
        .iter()
        .skip(2)
        .map(|m| m.tool_call_id.clone())
        .collect();
    assert_eq!(
        answers,
        vec![Some("c1".into()), Some("c2".into()), Some("c3".into())]
    );
    assert_eq!(out.values.messages.len(), 5);
    // The append key got both commands' items; both gotos ran (in the next step).
    assert_eq!(
        out.values.log.to_vec(),
        vec![
            "to_billing -> billing",
            "to_support -> support",
            "billing ran",
            "support ran"
        ]
    );
    assert_eq!(out.values.team, "support");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn two_tool_commands_writing_one_last_value_key_is_an_error_naming_both() {
    let node = ToolNode::new([transfer("a", true, true), transfer("b", true, true)]);
    let err = desk(node)
        .invoke(
            desk_input(vec![
                tc("c1", "a", json!({"team": "billing"})),
                tc("c2", "b", json!({"team": "support"})),
            ]),
            RunConfig::default(),
        )
        .await
        .unwrap_err();
    // The same class of error as two nodes writing the key in one step.
    assert!(err.is_invalid_update(), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("tool `a` (call `c1`)"), "{err}");
    assert!(err.contains("tool `b` (call `c2`)"), "{err}");
    assert!(err.contains("`team`"), "{err}");
    assert!(err.contains("keeps one value per step"), "{err}");
}

#[tokio::test]
async fn a_tool_command_without_its_tool_message_is_a_clear_error() {
    let node = ToolNode::new([transfer("silent", false, true)]);
    let err = desk(node)
        .invoke(
            desk_input(vec![tc("c9", "silent", json!({"team": "billing"}))]),
            RunConfig::default(),
        )
        .await
        .unwrap_err();
    // A typed error a caller can match, as the source of the node's error.
    let unanswered = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<UnansweredToolCall>())
        .expect("the node's error is an UnansweredToolCall");
    assert_eq!(
        (
            unanswered.tool.as_str(),
            unanswered.call_id.as_str(),
            unanswered.answers
        ),
        ("silent", "c9", 0)
    );
    assert_eq!(unanswered.key, "messages");
    let err = err.to_string();
    assert!(err.contains("tool `silent` (call `c9`)"), "{err}");
    assert!(err.contains("no tool message answering the call"), "{err}");
    assert!(err.contains("tool_call_id `c9`"), "{err}");
}

#[tokio::test]
async fn run_message_refuses_a_tool_command_it_cannot_apply() {
    let node = ToolNode::new([transfer("transfer", true, true)]);
    let msg = Message::ai_with_tool_calls("", vec![tc("c1", "transfer", json!({"team": "billing"}))]);
    let err = node
        .run_message(&msg, json!({}), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("returned a Command"), "{err}");
    let answers = node.run_calls(&msg, json!({}), None).await.unwrap();
    assert!(
        matches!(&answers[..], [graphloom_prebuilt::ToolAnswer::Command { call, .. }] if call.id == "c1")
    );
}

/// A tool returning a list of commands: a log line, then its answer with another log line
/// and the team (`answers` tool messages in the second command), then a `goto`.
fn steps(answers: usize) -> Arc<dyn Tool> {
    FnTool::new(
        "steps",
        "Transfer in steps",
        move |a: Transfer, rt: graphloom_prebuilt::ToolRuntime| async move {
            let msgs: Vec<Message> = (0..answers)
                .map(|i| Message::tool(format!("step {i} to {}", a.team), &rt.tool_call_id))
                .collect();
            Ok::<_, ToolError>(ToolOutput::commands([
                ToolCommand::new().update("log", json!(["first"])),
                ToolCommand::new()
                    .update("messages", json!(msgs))
                    .update("log", json!(["second"]))
                    .update("team", json!(a.team)),
                ToolCommand::new().goto(a.team.clone()),
            ]))
        },
    )
    .arc()
}

#[tokio::test]
async fn a_tool_may_return_a_list_of_commands_applied_in_order() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ToolNode::new([steps(1), sleeper("plain", Arc::clone(&runs))]);
    let out = desk(node)
        .invoke(
            desk_input(vec![
                tc("c1", "steps", json!({"team": "support"})),
                tc("c2", "plain", json!({"ms": 1})),
            ]),
            RunConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.values.team, "support");
    assert_eq!(
        out.values.log.to_vec(),
        vec!["first", "second", "support ran"],
        "the commands in order, then the goto"
    );
    let answers: Vec<Option<String>> = out
        .values
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Tool)
        .map(|m| m.tool_call_id.clone())
        .collect();
    assert_eq!(answers, [Some("c1".to_owned()), Some("c2".to_owned())]);
}

#[tokio::test]
async fn a_list_of_commands_must_answer_its_call_exactly_once() {
    for (answers, expect) in [
        (0, "no tool message answering the call"),
        (2, "with 2 tool messages answering the call"),
    ] {
        let err = desk(ToolNode::new([steps(answers)]))
            .invoke(
                desk_input(vec![tc("c1", "steps", json!({"team": "support"}))]),
                RunConfig::default(),
            )
            .await
            .unwrap_err();
        let unanswered = err.find_source::<UnansweredToolCall>().expect("typed");
        assert_eq!(unanswered.answers, answers);
        let err = err.to_string();
        assert!(err.contains("tool `steps` (call `c1`)"), "{err}");
        assert!(err.contains(expect), "{err}");
    }
}

/// The `updates` stream of the tool node's task in a run of `desk`.
async fn tools_updates(input: DeskUpdate) -> Vec<Value> {
    let g = desk(ToolNode::new([
        steps(1),
        transfer("to_billing", true, false),
        sleeper("plain", Arc::new(AtomicUsize::new(0))),
    ]));
    let mut stream = g.stream(
        RunInput::Update(input),
        RunConfig::default(),
        StreamOptions::modes([StreamMode::Updates]),
    );
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        if let RunEvent::Part(p) = ev {
            if let Some(v) = p.data_json().unwrap().get("tools") {
                out.push(v.clone());
            }
        }
    }
    out
}

#[tokio::test]
async fn commands_writing_a_key_twice_stream_one_update_per_write_in_order() {
    let updates = tools_updates(desk_input(vec![
        tc("c1", "steps", json!({"team": "support"})),
        tc("c2", "plain", json!({"ms": 1})),
    ]))
    .await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    let writes = updates[0].as_array().expect("a list of writes");
    let shape: Vec<String> = writes
        .iter()
        .map(|w| {
            let (k, v) = w.as_object().unwrap().iter().next().unwrap();
            assert_eq!(w.as_object().unwrap().len(), 1, "one key per write: {w}");
            match k.as_str() {
                "messages" => format!("messages:{}", v[0]["tool_call_id"].as_str().unwrap()),
                _ => format!("{k}:{v}"),
            }
        })
        .collect();
    // The first command, the second in its key order, then the plain call's answer.
    assert_eq!(
        shape,
        [
            "log:[\"first\"]",
            "messages:c1",
            "log:[\"second\"]",
            "team:\"support\"",
            "messages:c2"
        ]
    );
}

#[tokio::test]
async fn commands_writing_each_key_once_stream_one_joined_update() {
    let updates = tools_updates(desk_input(vec![tc(
        "c1",
        "to_billing",
        json!({"team": "billing"}),
    )]))
    .await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    let update = updates[0].as_object().expect("one joined update");
    let mut keys: Vec<&str> = update.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["log", "messages"]);
}

// ---- A tool node over the state's `messages` field, without functions ----

/// What a test compares of a message: its kind, text, call id, name and status.
type Seen = (MessageKind, String, Option<String>, Option<String>, Option<Value>);

/// What a test compares of a conversation (ids are fresh per run).
fn seen(messages: &Seq<Message>) -> Vec<Seen> {
    messages
        .iter()
        .map(|m| {
            (
                m.kind,
                m.text(),
                m.tool_call_id.clone(),
                m.name.clone(),
                m.extra.get("status").cloned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn messages_node_answers_as_into_node_does() {
    let runs = Arc::new(AtomicUsize::new(0));
    let tools = || ToolNode::new([sleeper("sleep", Arc::clone(&runs))]).timeout(Duration::from_millis(300));
    let calls = || {
        input(vec![
            tc("a", "sleep", json!({"ms": 1})),
            tc("slow", "sleep", json!({"ms": 5000})),
            tc("u", "teleport", json!({})),
            tc("v", "sleep", json!({"ms": "not a number"})),
        ])
    };
    let named = StateGraph::<Chat>::new()
        .add_tool_node("tools", tools())
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .compile()
        .unwrap();
    let by_name = named.invoke(calls(), RunConfig::default()).await.unwrap();
    let by_fn = graph(tools())
        .invoke(calls(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(seen(&by_name.values.messages), seen(&by_fn.values.messages));
    assert_eq!(by_name.values.messages.len(), 6);

    // Nothing to answer: no update, as `into_node`.
    let quiet = ChatUpdate::new().messages(vec![Message::human("hi"), Message::ai("hello")]);
    let out = named.invoke(quiet, RunConfig::default()).await.unwrap();
    assert_eq!(out.values.messages.len(), 2);
}

#[tokio::test]
async fn messages_node_applies_tool_commands_as_into_node_does() {
    let desk_named = |node: ToolNode| {
        StateGraph::<Desk>::new()
            .add_node("tools", node.messages_node())
            .add_node("billing", |_s, _rt| async {
                Ok(DeskUpdate::new().log(vec!["billing ran".into()]))
            })
            .add_node("support", |_s, _rt| async {
                Ok(DeskUpdate::new().log(vec!["support ran".into()]))
            })
            .add_edge(START, "tools")
            .add_edge("tools", END)
            .destinations("tools", ["billing", "support"])
            .add_edge("billing", END)
            .add_edge("support", END)
            .compile()
            .unwrap()
    };
    let runs = Arc::new(AtomicUsize::new(0));
    let tools = || {
        ToolNode::new([
            transfer("to_billing", true, false),
            typed_transfer("to_support"),
            sleeper("sleep", Arc::clone(&runs)),
        ])
    };
    let calls = || {
        desk_input(vec![
            tc("c1", "to_billing", json!({"team": "billing"})),
            tc("c2", "sleep", json!({"ms": 1})),
            tc("c3", "to_support", json!({"team": "support"})),
        ])
    };
    let by_name = desk_named(tools())
        .invoke(calls(), RunConfig::default())
        .await
        .unwrap();
    let by_fn = desk(tools()).invoke(calls(), RunConfig::default()).await.unwrap();
    assert_eq!(seen(&by_name.values.messages), seen(&by_fn.values.messages));
    assert_eq!(by_name.values.log.to_vec(), by_fn.values.log.to_vec());
    assert_eq!(by_name.values.team, "support");
    assert_eq!(by_name.values.team, by_fn.values.team);

    // The same typed error for a command that does not answer its call.
    let err = desk_named(ToolNode::new([transfer("silent", false, true)]))
        .invoke(
            desk_input(vec![tc("c9", "silent", json!({"team": "billing"}))]),
            RunConfig::default(),
        )
        .await
        .unwrap_err();
    let unanswered = err.find_source::<UnansweredToolCall>().expect("typed");
    assert_eq!(
        (unanswered.call_id.as_str(), unanswered.key.as_str()),
        ("c9", "messages")
    );
}

#[derive(State, Clone, Default, Debug)]
struct Inbox {
    #[reducer(add_messages)]
    history: Seq<Message>,
}

#[tokio::test]
async fn a_state_without_messages_is_refused_naming_the_field() {
    // At compile time through `add_tool_node`.
    let err = StateGraph::<Inbox>::new()
        .add_tool_node("tools", ToolNode::new([]))
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .compile()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("node `tools` reads state field `messages`"), "{err}");

    // On the first run through `messages_node` alone.
    let g = StateGraph::<Inbox>::new()
        .add_node("tools", ToolNode::new([]).messages_node())
        .add_edge(START, "tools")
        .add_edge("tools", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(InboxUpdate::new(), RunConfig::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("the state has no field `messages`"), "{err}");
}
