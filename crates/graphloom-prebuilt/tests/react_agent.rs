//! The prebuilt ReAct agent end to end with a scripted model: an ungated and a gated tool
//! across an approval and a resume, the reject and edit paths, and refused verdicts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{
    Command, CompiledGraph, Message, MessageKind, RunConfig, RunStatus, Seq, ToolCall, END,
};
use graphloom_llm::{Reply, ScriptedModel};
use graphloom_prebuilt::{
    create_react_agent, tools_condition, AgentOptions, AgentState, AgentStateUpdate, FnTool, ToolError,
    ToolRuntime,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Search {
    /// What to look for.
    query: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Refund {
    /// Order id.
    order: String,
    /// Amount in cents.
    #[schemars(range(min = 1))]
    cents: u32,
}

/// Every execution of a tool: (tool, args summary, idempotency key).
type Log = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

struct Setup {
    agent: CompiledGraph<AgentState>,
    model: ScriptedModel,
    log: Log,
}

fn setup(replies: Vec<Reply>) -> Setup {
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let search = FnTool::new("search", "Search orders", move |a: Search, rt: ToolRuntime| {
        let l = Arc::clone(&l);
        async move {
            l.lock()
                .unwrap()
                .push(("search".into(), a.query.clone(), rt.idempotency_key.clone()));
            Ok::<_, ToolError>(format!("found order for {}", a.query))
        }
    });
    let l = Arc::clone(&log);
    let refund = FnTool::new("refund", "Refund an order", move |a: Refund, rt: ToolRuntime| {
        let l = Arc::clone(&l);
        async move {
            l.lock().unwrap().push((
                "refund".into(),
                format!("{}:{}", a.order, a.cents),
                rt.idempotency_key.clone(),
            ));
            Ok::<_, ToolError>(json!({"refunded": a.order, "cents": a.cents}))
        }
    })
    .mark_mutating();
    let model = ScriptedModel::new(replies);
    let agent = create_react_agent(
        Arc::new(model.clone()),
        [search.arc(), refund.arc()],
        AgentOptions::new()
            .system_prompt("You handle refunds.")
            .checkpointer(InMemorySaver::new()),
    )
    .unwrap();
    Setup { agent, model, log }
}

fn tc(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

fn start() -> AgentStateUpdate {
    AgentStateUpdate::new().messages(vec![Message::human("refund order A7")])
}

fn both_calls() -> Reply {
    Reply::tool_calls(
        "",
        vec![
            tc("s1", "search", json!({"query": "A7"})),
            tc("r1", "refund", json!({"order": "A7", "cents": 500})),
        ],
    )
}

#[test]
fn tools_condition_routes_on_the_last_ai_message() {
    let mut msgs: Seq<Message> = Seq::new();
    assert_eq!(tools_condition(&msgs), END);
    msgs.push(Message::human("hi"));
    assert_eq!(tools_condition(&msgs), END);
    msgs.push(Message::ai_with_tool_calls("", vec![tc("1", "x", json!({}))]));
    assert_eq!(tools_condition(&msgs), "tools");
    msgs.push(Message::ai("done"));
    assert_eq!(tools_condition(&msgs), END);
}

#[tokio::test]
async fn approval_pauses_before_anything_runs_and_resume_runs_each_call_once() {
    let s = setup(vec![both_calls(), Reply::text("Refunded 5.00 for A7.")]);
    let cfg = RunConfig::thread("approve");

    let paused = s.agent.invoke(start(), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.interrupts.len(), 1);
    let ask = &paused.interrupts[0].value;
    assert_eq!(
        ask["tool_call"],
        json!({"id": "r1", "name": "refund", "args": {"order": "A7", "cents": 500}})
    );
    assert!(
        s.log.lock().unwrap().is_empty(),
        "no sibling ran before the verdict"
    );
    assert_eq!(
        s.agent.get_state(&cfg).await.unwrap().next,
        vec!["tools".to_owned()]
    );

    let done = s
        .agent
        .resume(Command::resume(json!({"decision": "approve"})), cfg.clone())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let log = s.log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "each call ran exactly once: {log:?}");
    assert_eq!((log[0].0.as_str(), log[0].1.as_str()), ("search", "A7"));
    assert_eq!((log[1].0.as_str(), log[1].1.as_str()), ("refund", "A7:500"));
    let key = log[1].2.clone().unwrap();
    assert_eq!(key.len(), 32);
    assert_ne!(Some(key), log[0].2, "keys differ per tool call");

    let msgs = done.values.messages.to_vec();
    let kinds: Vec<MessageKind> = msgs.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        vec![
            MessageKind::Human,
            MessageKind::Ai,
            MessageKind::Tool,
            MessageKind::Tool,
            MessageKind::Ai
        ]
    );
    assert_eq!(msgs[2].text(), "found order for A7");
    assert_eq!(msgs[3].tool_call_id.as_deref(), Some("r1"));
    assert_eq!(
        serde_json::from_str::<Value>(&msgs[3].text()).unwrap(),
        json!({"refunded": "A7", "cents": 500})
    );
    assert_eq!(msgs[4].text(), "Refunded 5.00 for A7.");

    // The model saw the system prompt, and the tool results on its second call.
    let reqs = s.model.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].messages[0].kind, MessageKind::System);
    let tools: Vec<&str> = reqs[0].options.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, vec!["refund", "search"]);
    assert_eq!(reqs[1].messages.len(), 5);
    // Nothing in the stored state is a system message.
    assert!(msgs.iter().all(|m| m.kind != MessageKind::System));
}

#[tokio::test]
async fn reject_tells_the_model_and_the_tool_never_runs() {
    let s = setup(vec![
        Reply::tool_calls("", vec![tc("r1", "refund", json!({"order": "A7", "cents": 500}))]),
        Reply::text("Understood, no refund."),
    ]);
    let cfg = RunConfig::thread("reject");
    let paused = s.agent.invoke(start(), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    let done = s
        .agent
        .resume(
            Command::resume(json!({"decision": "reject", "reason": "over the refund limit"})),
            cfg.clone(),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert!(s.log.lock().unwrap().is_empty());
    let msgs = done.values.messages.to_vec();
    let answer = &msgs[2];
    assert_eq!(answer.kind, MessageKind::Tool);
    assert_eq!(answer.extra["status"], "error");
    assert!(
        answer
            .text()
            .contains("rejected by a reviewer: over the refund limit"),
        "{}",
        answer.text()
    );
    let reqs = s.model.requests();
    assert_eq!(
        reqs[1].messages.last().unwrap().text(),
        answer.text(),
        "the model was told"
    );
    assert_eq!(msgs.last().unwrap().text(), "Understood, no refund.");
}

#[tokio::test]
async fn malformed_or_unknown_decisions_are_refused_and_the_run_stays_paused() {
    let s = setup(vec![both_calls(), Reply::text("ok")]);
    let cfg = RunConfig::thread("malformed");
    let first = s.agent.invoke(start(), cfg.clone()).await.unwrap();
    let mut last_id = first.interrupts[0].id.clone();

    for (bad, why) in [
        (json!("yes"), "must be an object"),
        (json!({"decision": "maybe"}), "unknown decision `maybe`"),
        (json!({"verdict": "approve"}), "missing `decision`"),
        (json!({"decision": "edit"}), "needs `args`"),
        (
            json!({"decision": "edit", "args": {"order": "A7", "cents": 0}}),
            "edited arguments were refused",
        ),
        (json!({"decision": "reject", "reason": 7}), "must be a string"),
    ] {
        let again = s
            .agent
            .resume(Command::resume(bad.clone()), cfg.clone())
            .await
            .unwrap();
        assert_eq!(again.status, RunStatus::Interrupted, "{bad}");
        assert_eq!(again.interrupts.len(), 1);
        let ask = &again.interrupts[0];
        assert_ne!(ask.id, last_id, "a fresh interrupt each time");
        last_id = ask.id.clone();
        assert_eq!(ask.value["tool_call"]["id"], "r1");
        let err = ask.value["error"].as_str().unwrap();
        assert!(err.contains(why), "{bad}: {err}");
        assert!(s.log.lock().unwrap().is_empty(), "nothing ran on {bad}");
    }

    // An edit with valid arguments runs the tool once, with the edited arguments.
    let done = s
        .agent
        .resume(
            Command::resume(json!({"decision": "edit", "args": {"order": "A7", "cents": 250}})),
            cfg.clone(),
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let log = s.log.lock().unwrap().clone();
    let summary: Vec<(&str, &str)> = log.iter().map(|(t, a, _)| (t.as_str(), a.as_str())).collect();
    assert_eq!(summary, vec![("search", "A7"), ("refund", "A7:250")]);
    assert_eq!(s.model.calls(), 2);
}

#[tokio::test]
async fn a_gated_call_with_invalid_arguments_is_answered_without_asking() {
    let s = setup(vec![
        Reply::tool_calls("", vec![tc("r1", "refund", json!({"order": "A7"}))]),
        Reply::text("let me fix that"),
    ]);
    let done = s
        .agent
        .invoke(start(), RunConfig::thread("invalid-gated"))
        .await
        .unwrap();
    assert_eq!(
        done.status,
        RunStatus::Done,
        "no approval is asked for a call that cannot run"
    );
    let msgs = done.values.messages.to_vec();
    assert!(msgs[2].text().contains("cents"), "{}", msgs[2].text());
    assert!(s.log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn several_gated_calls_are_asked_one_after_the_other_and_each_runs_once() {
    let s = setup(vec![
        Reply::tool_calls(
            "",
            vec![
                tc("r1", "refund", json!({"order": "A7", "cents": 100})),
                tc("s1", "search", json!({"query": "A7"})),
                tc("r2", "refund", json!({"order": "B2", "cents": 200})),
            ],
        ),
        Reply::text("done"),
    ]);
    let cfg = RunConfig::thread("two-gates");
    let first = s.agent.invoke(start(), cfg.clone()).await.unwrap();
    assert_eq!(first.interrupts[0].value["tool_call"]["id"], "r1");
    let second = s
        .agent
        .resume(Command::resume(json!({"decision": "approve"})), cfg.clone())
        .await
        .unwrap();
    assert_eq!(second.status, RunStatus::Interrupted);
    assert_eq!(second.interrupts[0].value["tool_call"]["id"], "r2");
    assert!(
        s.log.lock().unwrap().is_empty(),
        "nothing runs until every verdict is in"
    );
    let done = s
        .agent
        .resume(Command::resume(json!({"decision": "reject"})), cfg.clone())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let log = s.log.lock().unwrap().clone();
    let summary: Vec<(&str, &str)> = log.iter().map(|(t, a, _)| (t.as_str(), a.as_str())).collect();
    assert_eq!(summary, vec![("refund", "A7:100"), ("search", "A7")]);
    let msgs = done.values.messages.to_vec();
    assert_eq!(msgs[4].tool_call_id.as_deref(), Some("r2"));
    assert!(msgs[4].text().contains("rejected by a reviewer"));
}

#[tokio::test]
async fn a_rejection_is_an_answer_even_when_tool_errors_fail_the_node() {
    let model = ScriptedModel::new([
        Reply::tool_calls("", vec![tc("r1", "refund", json!({"order": "A7", "cents": 5}))]),
        Reply::text("ok"),
    ]);
    let refund = FnTool::new("refund", "Refund", |a: Refund, _rt| async move {
        Ok::<_, ToolError>(a.order)
    })
    .mark_mutating();
    let agent = create_react_agent(
        Arc::new(model),
        [refund.arc()],
        AgentOptions::new()
            .checkpointer(InMemorySaver::new())
            .tool_node(|n| n.handle_errors(false)),
    )
    .unwrap();
    let cfg = RunConfig::thread("strict");
    agent.invoke(start(), cfg.clone()).await.unwrap();
    let done = agent
        .resume(
            Command::resume(json!({"decision": "reject", "reason": "no"})),
            cfg,
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert!(done.values.messages.to_vec()[2]
        .text()
        .contains("rejected by a reviewer: no"));
}
