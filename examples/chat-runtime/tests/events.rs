//! The executor's event contract: one `done`, last, across tool loops; tokens from the model
//! stream; correlation ids on every event; the prompt hash computed once, by the adapter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chat_runtime::{knowledge_search, AiEvent, RunError, GRAPH_ID, GRAPH_VERSION};
use common::{ask, drain, harness, kinds};
use graphloom_llm::{ChatChunk, Reply, ScriptedModel, Usage};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

fn three_round_model() -> ScriptedModel {
    ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "billing cycle"})),
        Reply::tool_call("knowledge_search", json!({"query": "invoice dates"})),
        Reply::tool_call("knowledge_search", json!({"query": "proration"})),
        Reply::text("Invoices are issued on the first of each month."),
    ])
}

#[tokio::test]
async fn three_round_tool_loop_ends_with_exactly_one_done_and_one_final() {
    let model = three_round_model();
    let h = harness(Arc::new(model.clone()), vec![knowledge_search()]);
    let (events, fin) = drain(ask(&h, "t-loop", "when am I billed?")).await;
    let k = kinds(&events);

    assert_eq!(k.iter().filter(|k| **k == "done").count(), 1, "{k:?}");
    assert_eq!(k.last(), Some(&"done"));
    assert_eq!(k.iter().filter(|k| **k == "usage_report").count(), 4);
    assert_eq!(k.iter().filter(|k| **k == "tool_call_start").count(), 3);
    assert_eq!(k.iter().filter(|k| **k == "tool_call_result").count(), 3);
    assert_eq!(model.calls(), 4);

    // Each start is followed by its result with the same id, and ids differ between rounds.
    let mut ids = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let AiEvent::ToolCallStart { tool_call_id, .. } = &e.event {
            let result = events[i + 1..]
                .iter()
                .find_map(|e| match &e.event {
                    AiEvent::ToolCallResult { tool_call_id: id, .. } => Some(id.clone()),
                    _ => None,
                })
                .unwrap();
            assert_eq!(&result, tool_call_id);
            ids.push(result);
        }
    }
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 3);

    let fin = fin.unwrap();
    assert_eq!(fin.answer, "Invoices are issued on the first of each month.");
    assert_eq!((fin.model_calls, fin.tool_calls), (4, 3));
    let text: String = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, fin.answer);
}

#[tokio::test]
async fn text_deltas_are_the_model_stream_chunks_in_order() {
    let chunks = ["Your ", "plan ", "renews ", "on ", "the 1st."];
    let mut script: Vec<ChatChunk> = chunks.iter().map(|c| ChatChunk::text(*c)).collect();
    script.push(ChatChunk::end(Some(Usage::new(12, 5)), "stop"));
    let model = ScriptedModel::new([Reply::chunks(script)]);
    let h = harness(Arc::new(model.clone()), vec![knowledge_search()]);
    let (events, fin) = drain(ask(&h, "t-chunks", "renewal?")).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, chunks);
    assert!(
        model.requests()[0].streamed,
        "the adapter must stream, not invoke"
    );
    let usage: Vec<Usage> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::UsageReport { fact } => Some(fact.usage),
            _ => None,
        })
        .collect();
    assert_eq!(usage, vec![Usage::new(12, 5)]);
    assert_eq!(
        kinds(&events)[kinds(&events).len() - 2..],
        ["usage_report", "done"]
    );
    assert_eq!(fin.unwrap().usage, Usage::new(12, 5));
}

#[tokio::test]
async fn every_event_carries_the_runs_correlation_ids() {
    let h = harness(Arc::new(three_round_model()), vec![knowledge_search()]);
    let run = ask(&h, "t-corr", "billing?");
    let run_id = run.graph_run_id.clone();
    let (events, fin) = drain(run).await;
    assert!(events.len() > 10);
    for e in &events {
        let c = &e.correlation;
        assert_eq!(c.request_id, "req-42", "{:?}", e.event);
        assert_eq!(c.trace_id, "trace-7");
        assert_eq!(c.graph_run_id, run_id);
        assert_eq!(c.graph_name, GRAPH_ID);
        assert_eq!(c.graph_version, GRAPH_VERSION);
    }
    assert_eq!(fin.unwrap().graph_run_id, run_id);
    let invocations: BTreeSet<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::UsageReport { fact } => Some(fact.invocation_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(invocations.len(), 4, "one invocation id per model call");

    // A second turn gets a new run id, the request's ids stay.
    let run2 = ask(&h, "t-corr2", "again");
    assert_ne!(run2.graph_run_id, run_id);
}

#[tokio::test]
async fn prompt_hash_matches_what_the_model_was_sent() {
    let model = three_round_model().named("gpt-test");
    let h = harness(Arc::new(model.clone()), vec![knowledge_search()]);
    let (events, _) = drain(ask(&h, "t-hash", "billing?")).await;
    let hashes: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::UsageReport { fact } => Some(fact.prompt_hash.clone()),
            _ => None,
        })
        .collect();
    let requests = model.requests();
    assert_eq!(hashes.len(), requests.len());
    for (hash, req) in hashes.iter().zip(&requests) {
        assert_eq!(
            hash,
            &graphloom_llm::prompt_hash("gpt-test", &req.messages, &req.options)
        );
        // Correlation ids travel with the call but are not part of the hash.
        assert_eq!(req.options.metadata["request_id"], "req-42");
    }
    // Every round sees a longer conversation: every hash differs.
    assert_eq!(hashes.iter().collect::<BTreeSet<_>>().len(), 4);
}

#[test]
fn the_prompt_hash_has_a_single_call_site() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sites = Vec::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("prompt_hash(") {
                sites.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    assert_eq!(sites, vec!["adapter.rs".to_owned()]);
}

#[tokio::test]
async fn a_failing_model_still_reports_usage_and_ends_with_one_done() {
    let model = ScriptedModel::new([
        Reply::tool_call("knowledge_search", json!({"query": "x"})),
        Reply::failure("provider down"),
    ]);
    let h = harness(Arc::new(model), vec![knowledge_search()]);
    let (events, fin) = drain(ask(&h, "t-fail", "x?")).await;
    let k = kinds(&events);
    assert_eq!(k.iter().filter(|k| **k == "done").count(), 1);
    assert_eq!(k.last(), Some(&"done"));
    let failed: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            AiEvent::UsageReport { fact } if fact.error.is_some() => Some(fact.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].error.as_deref().unwrap().contains("provider down"));
    assert_eq!(
        h.billing.receipts().len(),
        2,
        "the failed call is billed (at zero) too"
    );
    assert!(matches!(fin, Err(RunError::Graph(m)) if m.contains("provider down")));
}
