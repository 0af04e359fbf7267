//! Usage and cost: every call (streamed, failed, or dropped early) yields a usage event with
//! its correlation ids and prompt hash; a tracker shared through `Arc` sums several models;
//! concurrent callers never start more calls than the budget allows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_llm::{
    prompt_hash, Budget, BudgetedModel, ChatModel, ChatOptions, Message, PriceTable, Reply, ScriptedModel,
    Usage, UsageEvent, UsageTracker,
};
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn one_tracker_sums_several_models_and_prices_them() {
    let prices = PriceTable::builtin().with_price("local-", 0.0, 0.0);
    let tracker = Arc::new(UsageTracker::with_prices(prices));
    let cheap = BudgetedModel::new(
        ScriptedModel::repeating([Reply::text("a").with_usage(Usage::new(1_000_000, 0))])
            .named("gpt-4o-mini"),
        Arc::clone(&tracker),
        Budget::unlimited(),
    );
    let big = BudgetedModel::new(
        ScriptedModel::repeating([Reply::text("b").with_usage(Usage::new(0, 1_000_000))])
            .named("claude-opus-4-1"),
        Arc::clone(&tracker),
        Budget::unlimited(),
    );
    let local = BudgetedModel::new(
        ScriptedModel::repeating([Reply::text("c").with_usage(Usage::new(5, 5))]).named("local-llama"),
        Arc::clone(&tracker),
        Budget::unlimited(),
    );
    let q = [Message::human("q")];
    cheap.invoke(&q, &ChatOptions::new()).await.unwrap();
    big.invoke(&q, &ChatOptions::new()).await.unwrap();
    local.invoke(&q, &ChatOptions::new()).await.unwrap();
    let t = tracker.totals();
    assert_eq!(t.calls, 3);
    assert_eq!((t.input_tokens, t.output_tokens), (1_000_005, 1_000_005));
    assert!((t.cost_usd - (0.15 + 75.0)).abs() < 1e-9, "{}", t.cost_usd);
    let costs: Vec<Option<f64>> = tracker.events().iter().map(|e| e.cost_usd).collect();
    assert_eq!(costs, [Some(0.15), Some(75.0), Some(0.0)]);
}

#[tokio::test]
async fn every_call_reports_a_usage_event_with_correlation_ids() {
    let tracker = UsageTracker::shared();
    let seen: Arc<Mutex<Vec<UsageEvent>>> = Arc::default();
    let s = Arc::clone(&seen);
    tracker.on_usage(move |e| s.lock().unwrap().push(e.clone()));
    let script = ScriptedModel::new([
        Reply::text("streamed answer").with_usage(Usage::new(4, 3)),
        Reply::failure("boom"),
        Reply::text("never finished"),
        Reply::text("invoked"),
    ]);
    let model = BudgetedModel::new(script, Arc::clone(&tracker), Budget::unlimited());
    let msgs = [Message::human("hello")];
    let opts = ChatOptions::new()
        .max_tokens(50)
        .metadata("request_id", "req-1")
        .metadata("graph_run_id", "run-7");

    let streamed: Vec<_> = model.stream(&msgs, &opts).collect().await;
    assert!(streamed.iter().all(Result::is_ok));
    assert!(model.invoke(&msgs, &opts).await.is_err());
    let mut s = model.stream(&msgs, &opts);
    s.next().await.unwrap().unwrap();
    drop(s);
    model.invoke(&msgs, &opts).await.unwrap();

    let events = seen.lock().unwrap().clone();
    assert_eq!(
        events.len(),
        4,
        "a listener sees every call, failed ones included"
    );
    assert_eq!(events[0].usage, Usage::new(4, 3));
    assert!(events[0].response_id.as_deref().unwrap().starts_with("run-"));
    assert_eq!(events[1].error.as_deref(), Some("scripted model: boom"));
    assert_eq!(events[2].error.as_deref(), Some("stream dropped before its end"));
    assert!(events[3].error.is_none());
    let hash = prompt_hash("scripted", &msgs, &opts);
    for e in &events {
        assert_eq!(e.prompt_hash, hash);
        assert_eq!(e.provider, "scripted");
        assert_eq!(e.metadata["request_id"], "req-1");
        assert_eq!(e.metadata["graph_run_id"], "run-7");
    }
    let ids: std::collections::HashSet<_> = events.iter().map(|e| e.invocation_id.clone()).collect();
    assert_eq!(ids.len(), 4, "one invocation id per call");
    let t = tracker.totals();
    assert_eq!((t.calls, t.failed_calls), (4, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_never_exceed_the_call_budget() {
    let script = ScriptedModel::repeating([Reply::text("ok")]);
    let model = Arc::new(BudgetedModel::new(
        script.clone(),
        UsageTracker::shared(),
        Budget::unlimited().calls(7),
    ));
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let m = Arc::clone(&model);
            tokio::spawn(async move {
                m.invoke(&[Message::human(format!("q{i}"))], &ChatOptions::new())
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        ok += usize::from(t.await.unwrap());
    }
    assert_eq!(ok, 7);
    assert_eq!(script.calls(), 7);
    assert_eq!(model.tracker().totals().calls, 7);
}

#[tokio::test]
async fn a_budget_error_becomes_a_typed_node_error() {
    let model = BudgetedModel::new(
        ScriptedModel::new(["x"]),
        UsageTracker::shared(),
        Budget::unlimited().calls(0),
    );
    let err = model.invoke(&[], &ChatOptions::new()).await.unwrap_err();
    match err.into_node_error() {
        graphloom_core::NodeError::BudgetExceeded { budget, message } => {
            assert_eq!(budget, "model_calls");
            assert!(message.contains("limit 0"));
        }
        other => panic!("{other:?}"),
    }
    let first = model.stream(&[], &ChatOptions::new()).next().await.unwrap();
    assert_eq!(first.unwrap_err().kind(), graphloom_llm::ErrorKind::Budget);
}
