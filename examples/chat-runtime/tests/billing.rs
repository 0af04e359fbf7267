//! Billing is independent of the client: the relay pumps every run to its end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chat_runtime::AiEvent;
use common::{ask, harness};
use futures::StreamExt;
use graphloom_llm::{Reply, ScriptedModel, Usage};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn billing_gets_every_usage_report_after_the_client_disconnects() {
    // Slow model calls, so that the client is gone long before the run ends.
    let slow = Duration::from_millis(40);
    let model = ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "a"}))
            .with_usage(Usage::new(100, 10))
            .after(slow),
        Reply::tool_call("knowledge_search", json!({"query": "b"}))
            .with_usage(Usage::new(200, 20))
            .after(slow),
        Reply::tool_call("knowledge_search", json!({"query": "c"}))
            .with_usage(Usage::new(300, 30))
            .after(slow),
        Reply::text("done reading")
            .with_usage(Usage::new(400, 40))
            .after(slow),
    ]);
    let h = harness(Arc::new(model.clone()), vec![chat_runtime::knowledge_search()]);
    let mut run = ask(&h, "t-billing", "read everything");
    let run_id = run.graph_run_id.clone();

    let first = run.events.next().await.unwrap();
    assert_eq!(first.event.kind(), "usage_report");
    assert!(h.billing.receipts().len() <= 1, "the run is still going");
    drop(run.events); // the client disconnects

    let fin = run.final_result.await.unwrap();
    assert_eq!(fin.model_calls, 4);
    assert_eq!(model.calls(), 4);

    // The pump forwards the final `done` only after billing saw every usage event; give it
    // a moment to drain past the final result.
    let mut receipts = h.billing.receipts();
    for _ in 0..100 {
        if receipts.len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        receipts = h.billing.receipts();
    }
    assert_eq!(receipts.len(), 4);
    assert_eq!(h.billing.deliveries(), 4, "each usage event delivered once");
    let tokens: Vec<u64> = receipts.iter().map(|r| r.fact.usage.input_tokens).collect();
    assert_eq!(tokens, vec![100, 200, 300, 400], "in call order");
    assert_eq!(
        receipts
            .iter()
            .map(|r| r.fact.usage)
            .fold(Usage::default(), |a, b| a + b),
        fin.usage
    );
    for r in &receipts {
        assert_eq!(r.correlation.graph_run_id, run_id);
        assert_eq!(r.correlation.request_id, "req-42");
        assert_eq!(r.fact.prompt_hash.len(), 64);
    }
    let ids: BTreeSet<_> = receipts.iter().map(|r| r.fact.invocation_id.clone()).collect();
    assert_eq!(ids.len(), 4);
}

#[tokio::test]
async fn a_client_that_reads_everything_sees_what_billing_sees() {
    let model = ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "a"})),
        Reply::text("ok"),
    ]);
    let h = harness(Arc::new(model), vec![chat_runtime::knowledge_search()]);
    let run = ask(&h, "t-both", "q");
    let events: Vec<_> = run.events.collect().await;
    let seen: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::UsageReport { fact } => Some(fact.invocation_id.clone()),
            _ => None,
        })
        .collect();
    let billed: Vec<String> = h
        .billing
        .receipts()
        .into_iter()
        .map(|r| r.fact.invocation_id)
        .collect();
    assert_eq!(seen, billed);
    assert_eq!(seen.len(), 2);
}
