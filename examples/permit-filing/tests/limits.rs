//! Token and cost budgets (checked before every model call; exceeding one ends the run with
//! a typed error and a resumable checkpoint) and the iteration limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use graphloom_core::{Error, RunConfig, RunInput, RunStatus};
use graphloom_llm::{Reply, ScriptedModel, Usage};
use permit_filing::*;
use serde_json::json;

#[tokio::test]
async fn token_budget_stops_the_run_and_a_raised_budget_resumes_it() {
    let s = setup(ScriptedModel::new([
        tool_reply("c1", "entity_resolve", json!({"query": "Mitchell Ranch 1H"}))
            .with_usage(Usage::new(900, 200)),
        text_reply("Resolved: Mitchell Ranch 1H."),
    ]));
    let mut input = sample_input();
    input["max_tokens"] = json!(1_000);
    let cfg = RunConfig::thread("tokens");
    let err = s
        .graph
        .invoke_input(RunInput::Json(input), cfg.clone())
        .await
        .unwrap_err();
    match &err {
        Error::BudgetExceeded {
            node,
            budget,
            message,
        } => {
            assert_eq!(node, INITIAL_LLM_CALL);
            assert_eq!(budget, "total_tokens");
            assert!(message.contains("limit 1000, used 1100"), "{message}");
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    assert_eq!(s.model.calls(), 1, "nothing is called past the cap");
    let snap = s.graph.get_state(&cfg).await.unwrap();
    assert_eq!(
        snap.next,
        vec![INITIAL_LLM_CALL.to_owned()],
        "a resumable checkpoint"
    );
    assert_eq!(snap.values.tokens_used, 1_100);
    assert_eq!(
        tool_messages_for(&snap.values, "c1").len(),
        1,
        "the finished tool round is kept"
    );

    // Continuing without more budget fails again without calling the model.
    let again = s
        .graph
        .invoke_input(RunInput::Continue, cfg.clone())
        .await
        .unwrap_err();
    assert!(matches!(again, Error::BudgetExceeded { .. }));
    assert_eq!(s.model.calls(), 1);

    let done = raise_budget(&s.graph, cfg, 10_000, 5.0).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.status, status::COMPLETED);
    assert_eq!(done.values.max_tokens, 10_000);
    assert_eq!(done.values.tokens_used, 1_210);
    assert_eq!(s.model.calls(), 2);
    assert_eq!(
        tool_messages_for(&done.values, "c1").len(),
        1,
        "the tool did not run again"
    );
    let t = trail(&done.values);
    assert_eq!(t.iter().filter(|n| *n == "tool_node").count(), 1);
}

#[tokio::test]
async fn cost_budget_uses_the_model_price() {
    // gpt-4o: $2.50 / $10.00 per million tokens; 100k in + 10k out = $0.35 a call.
    let model = ScriptedModel::new([
        Reply::text("SKILL_SELECT:rule37_spacing").with_usage(Usage::new(100_000, 10_000)),
        Reply::text("Spacing Summary: done.").with_usage(Usage::new(1_000, 100)),
    ])
    .named("gpt-4o");
    let s = setup(model);
    let mut input = sample_input();
    input["max_cost_usd"] = json!(0.30);
    input["max_tokens"] = json!(1_000_000);
    let cfg = RunConfig::thread("cost");
    let err = s
        .graph
        .invoke_input(RunInput::Json(input), cfg.clone())
        .await
        .unwrap_err();
    match &err {
        Error::BudgetExceeded { node, budget, .. } => {
            assert_eq!(node, SYNTHESIS_LLM_CALL, "the second phase is refused");
            assert_eq!(budget, "cost_usd");
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    let snap = s.graph.get_state(&cfg).await.unwrap();
    assert!(
        (snap.values.cost_usd - 0.35).abs() < 1e-9,
        "{}",
        snap.values.cost_usd
    );
    assert_eq!(snap.values.injected_skill_ids, ["rule37_spacing"]);
    let done = raise_budget(&s.graph, cfg, 1_000_000, 1.0).await.unwrap();
    assert_eq!(done.values.status, status::COMPLETED);
    assert_eq!(s.model.calls(), 2);
    assert_eq!(done.values.model, "gpt-4o");
}

#[tokio::test]
async fn the_iteration_limit_ends_an_endless_tool_loop() {
    let s = setup(ScriptedModel::repeating([tool_reply(
        "loop",
        "entity_resolve",
        json!({"query": "Mitchell Ranch 1H"}),
    )]));
    let mut input = sample_input();
    input["max_iterations"] = json!(3);
    let out = s
        .graph
        .invoke_input(RunInput::Json(input), RunConfig::thread("loop"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    let v = &out.values;
    assert_eq!(v.status, status::FAILED);
    assert_eq!(v.error.as_deref(), Some("iteration limit of 3 reached"));
    assert_eq!(s.model.calls(), 3);
    let t = trail(v);
    assert_eq!(t.iter().filter(|n| *n == "tool_node").count(), 3);
    assert_eq!(t.last().map(String::as_str), Some(OUTPUT_FORMAT));
}

#[tokio::test]
async fn the_default_iteration_limit_is_twenty() {
    // A lookup that never resolves would stop at the force-clarify checkpoint after three
    // rounds (see below); an endless context lookup runs into the limit.
    let s = setup(ScriptedModel::repeating([tool_reply(
        "loop",
        "context_assemble",
        json!({"entity_id": "nowhere"}),
    )]));
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("loop-default"))
        .await
        .unwrap();
    assert_eq!(out.values.status, status::FAILED);
    assert_eq!(s.model.calls(), DEFAULT_MAX_ITERATIONS as usize);
    assert_eq!(out.values.max_iterations, 20);
}

#[tokio::test]
async fn three_unresolved_lookups_in_a_row_pause_for_a_clarification() {
    let s = setup(ScriptedModel::repeating([tool_reply(
        "loop",
        "entity_resolve",
        json!({"query": "nowhere"}),
    )]));
    let cfg = RunConfig::thread("clarify");
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), cfg.clone())
        .await
        .unwrap();
    // Paused after the third lookup, not run on to the iteration limit.
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(s.model.calls(), FORCE_CLARIFY_AFTER as usize);
    let v = &out.values;
    assert_eq!(v.status, status::AWAITING_HITL);
    assert_eq!(v.consecutive_failed_resolves, 3);
    assert_eq!(v.hitl_checkpoint_type.as_deref(), Some("force_clarify"));
    assert_eq!(v.error, None);
    let request = &out.interrupts[0].value;
    assert_eq!(request["checkpoint_type"], "force_clarify");
    assert!(
        request["question"].as_str().unwrap().contains("3 entity lookups"),
        "{request}"
    );
    let id = v.hitl_approval_id.clone().unwrap();
    let record = approval(&s.store, &id).await;
    assert_eq!(record["checkpoint_type"], "force_clarify");
    assert_eq!(record["snapshot"]["last_unresolved_query"], "nowhere");

    // The clarification is recorded and handed to the model; the run ends.
    let done = s
        .graph
        .resume(
            graphloom_core::Command::resume(
                json!({"decision": "approved", "comment": "I meant Mitchell Ranch 1H"}),
            ),
            cfg,
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.status, status::COMPLETED);
    assert!(done.values.messages.iter().any(|m| m
        .text()
        .contains("force_clarify was approved by the reviewer, who wrote: I meant Mitchell Ranch 1H")));
    assert_eq!(s.model.calls(), 3);
}

#[tokio::test]
async fn a_tenant_override_aborts_instead_of_asking() {
    let s = setup(ScriptedModel::repeating([tool_reply(
        "loop",
        "entity_resolve",
        json!({"query": "nowhere"}),
    )]));
    let mut input = sample_input();
    input["metadata"]["force_clarify_action"] = json!("abort");
    let out = s
        .graph
        .invoke_input(RunInput::Json(input), RunConfig::thread("clarify-abort"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.values.status, status::FAILED);
    assert!(out
        .values
        .error
        .as_deref()
        .unwrap()
        .starts_with("force_clarify: 3 entity lookups"));
    assert_eq!(s.model.calls(), 3);
}

#[tokio::test]
async fn a_decisive_resolve_resets_the_force_clarify_counter() {
    let s = setup(ScriptedModel::new([
        tool_reply("a", "entity_resolve", json!({"query": "nowhere"})),
        tool_reply("b", "entity_resolve", json!({"query": "nowhere"})),
        tool_reply("c", "entity_resolve", json!({"query": "Mitchell Ranch 1H"})),
        tool_reply("d", "entity_resolve", json!({"query": "nowhere"})),
        tool_reply("e", "entity_resolve", json!({"query": "nowhere"})),
        text_reply("Done."),
    ]));
    let out = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("clarify-reset"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.values.status, status::COMPLETED);
    assert_eq!(out.values.consecutive_failed_resolves, 2);
}

#[tokio::test]
async fn an_operator_call_cap_from_budgeted_model_is_typed_and_resumable_too() {
    use graphloom_core::checkpoint::{DynCheckpointer, InMemorySaver};
    use graphloom_core::store::DynStore;
    use graphloom_core::InMemoryStore;
    use graphloom_llm::{Budget, BudgetedModel, UsageTracker};
    use std::sync::Arc;

    let script = ScriptedModel::new([
        tool_reply("c1", "entity_resolve", json!({"query": "Mitchell Ranch 1H"})),
        text_reply("Resolved."),
    ]);
    let tracker = UsageTracker::shared();
    let capped = BudgetedModel::new(script.clone(), Arc::clone(&tracker), Budget::unlimited().calls(1));
    let saver: Arc<dyn DynCheckpointer> = Arc::new(InMemorySaver::new());
    let store: Arc<dyn DynStore> = Arc::new(InMemoryStore::new());
    let g = graph(saver, store, Arc::new(capped.clone())).unwrap();
    let cfg = RunConfig::thread("calls");
    let err = g
        .invoke_input(RunInput::Json(sample_input()), cfg.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::BudgetExceeded { budget, node, .. } if budget == "model_calls" && node == INITIAL_LLM_CALL),
        "{err:?}"
    );
    assert_eq!(script.calls(), 1);
    capped.set_budget(Budget::unlimited().calls(5));
    let done = g.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(done.values.status, status::COMPLETED);
    assert_eq!(tracker.totals().calls, 2);
}

#[tokio::test]
async fn a_cost_budget_on_an_unpriced_model_is_refused_before_any_call() {
    let model = ScriptedModel::new([Reply::text("never sent")]).named("llama3.2");
    let s = setup(model);
    let err = s
        .graph
        .invoke_input(RunInput::Json(sample_input()), RunConfig::thread("unpriced"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("llama3.2") && text.contains("GRAPHLOOM_MODEL_PRICES") && text.contains("cost budget"),
        "{text}"
    );
    assert_eq!(s.model.calls(), 0, "the model was not called");
}
