//! The permit-filing agent on `create_agent`: the approval gate, budgets and iteration
//! limit as middleware.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{call, create_operator_reply, entities, text_reply, tool_reply};
use graphloom_core::checkpoint::{DynCheckpointer, InMemorySaver};
use graphloom_core::store::DynStore;
use graphloom_core::{Command, InMemoryStore, Message, MessageKind, RunConfig, RunInput, RunStatus};
use graphloom_llm::{Reply, ScriptedModel, Usage};
use graphloom_prebuilt::AgentGraphUpdate;
use permit_filing::agent::{agent_graph, approval_id};
use serde_json::json;
use std::sync::Arc;

fn parts() -> (Arc<dyn DynCheckpointer>, Arc<dyn DynStore>) {
    (Arc::new(InMemorySaver::new()), Arc::new(InMemoryStore::new()))
}

fn ask(text: &str) -> AgentGraphUpdate {
    AgentGraphUpdate::new().messages(vec![Message::human(text)])
}

async fn record(store: &Arc<dyn DynStore>, thread: &str, call_id: &str) -> serde_json::Value {
    store
        .get(&["approvals".to_owned()], &approval_id(thread, call_id))
        .await
        .unwrap()
        .map(|i| i.value)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_mutating_call_waits_for_approval_runs_once_and_is_recorded() {
    let (saver, store) = parts();
    let model = ScriptedModel::new([
        create_operator_reply(),
        text_reply("Registered Permian Basin Energy LLC."),
    ]);
    let g = agent_graph(saver, Arc::clone(&store), Arc::new(model), "rule_37").unwrap();
    let cfg = RunConfig::thread("agent-approve");
    let paused = g
        .invoke(ask("Register the operator."), cfg.clone())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(
        paused.interrupts[0].value["action_requests"][0]["name"],
        "create_entity"
    );
    assert_eq!(
        paused.interrupts[0].value["review_configs"][0]["allowed_decisions"],
        json!(["approve", "reject"])
    );
    assert_eq!(
        record(&store, "agent-approve", "call_create_1").await["status"],
        "pending"
    );
    assert!(
        entities(&store).await.is_empty(),
        "nothing is created before the verdict"
    );

    let done = g
        .resume(Command::resume(json!({"decisions": [{"type": "approve"}]})), cfg)
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(
        record(&store, "agent-approve", "call_create_1").await["status"],
        "approved"
    );
    assert_eq!(entities(&store).await.len(), 1);
    assert_eq!(
        done.values.messages.last().unwrap().text(),
        "Registered Permian Basin Energy LLC."
    );
}

#[tokio::test]
async fn a_rejected_call_never_runs_and_the_model_is_told() {
    let (saver, store) = parts();
    let model = ScriptedModel::new([create_operator_reply(), text_reply("Understood, not registered.")]);
    let g = agent_graph(saver, Arc::clone(&store), Arc::new(model), "rule_37").unwrap();
    let cfg = RunConfig::thread("agent-reject");
    g.invoke(ask("Register the operator."), cfg.clone())
        .await
        .unwrap();
    let done = g
        .resume(
            Command::resume(json!({"decisions": [{"type": "reject", "message": "wrong operator"}]})),
            cfg,
        )
        .await
        .unwrap();
    assert!(entities(&store).await.is_empty());
    assert_eq!(
        record(&store, "agent-reject", "call_create_1").await["status"],
        "rejected"
    );
    let tool = done
        .values
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::Tool)
        .unwrap();
    assert!(tool.text().contains("wrong operator"), "{}", tool.text());
}

#[tokio::test]
async fn the_token_budget_stops_the_run_resumably() {
    let (saver, store) = parts();
    // Rule 37 allows 150k tokens: two calls of 80k use it up.
    let model = ScriptedModel::repeating([Reply::tool_calls(
        "",
        vec![call(
            "c",
            "spacing_assessment",
            json!({
            "well_api": "42-329-12345", "lease_line_distance_ft": 500.0, "nearest_well_distance_ft": 1300.0}),
        )],
    )
    .with_usage(Usage::new(79_000, 1_000))]);
    let g = agent_graph(saver, store, Arc::new(model.clone()), "rule_37").unwrap();
    let cfg = RunConfig::thread("agent-budget");
    let err = g.invoke(ask("Assess spacing."), cfg.clone()).await.unwrap_err();
    assert!(
        matches!(err, graphloom_core::Error::BudgetExceeded { .. }),
        "{err}"
    );
    assert_eq!(model.calls(), 2);
    let snap = g.get_state(&cfg).await.unwrap();
    assert!(!snap.next.is_empty(), "resumable from its checkpoint");
}

#[tokio::test]
async fn the_iteration_limit_ends_a_tool_loop_with_a_message() {
    let (saver, store) = parts();
    let model = ScriptedModel::repeating([tool_reply(
        "c",
        "entity_resolve",
        json!({"query": "Mitchell Ranch"}),
    )]);
    let g = agent_graph(saver, store, Arc::new(model.clone()), "general").unwrap();
    // Each round is six steps (two before_model hooks, the model, two after_model hooks,
    // the tools): 20 rounds need more than the default step limit of 100.
    let out = g
        .invoke_input(
            RunInput::Update(ask("Find Mitchell Ranch.")),
            RunConfig::thread("agent-loop").recursion_limit(200),
        )
        .await
        .unwrap();
    assert_eq!(model.calls(), 20);
    assert_eq!(
        out.values.messages.last().unwrap().text(),
        "Model call limits exceeded: run limit (20/20)"
    );
}
