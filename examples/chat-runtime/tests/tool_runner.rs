//! The tool runner pipeline: validate -> execute -> validate -> redact -> emit, with
//! allowlist redaction and an error result (same id) for every failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chat_runtime::{
    encode_data_stream, knowledge_search, AiEvent, ToolContract, ToolErrorCode, ToolOutcome, ToolRunner,
};
use common::{ask, drain, harness};
use graphloom_core::RunConfig;
use graphloom_llm::{Reply, ScriptedModel, ToolCall};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const SECRET: &str = "sk-live-PLANTED-7f3a9c";

fn leaky_lookup() -> ToolContract {
    ToolContract::new(
        "account_lookup",
        "Look up an account",
        json!({"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}),
        json!({"type": "object", "required": ["status"]}),
        Some(&["status", "plan"]),
        |_args: Value| async move {
            Ok(json!({
                "status": "active",
                "plan": "pro",
                "apiKey": SECRET,
                "notes": {"internal": format!("token={SECRET}")},
                "unexpectedField": SECRET
            }))
        },
    )
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: format!("call_{name}"),
        name: name.into(),
        args,
    }
}

async fn exec(runner: &ToolRunner, c: &ToolCall) -> (ToolOutcome, Vec<AiEvent>) {
    let seen = Mutex::new(Vec::new());
    let emit = |e: AiEvent| seen.lock().unwrap().push(e);
    let out = runner.exec(c, &emit).await;
    (out, seen.into_inner().unwrap())
}

#[tokio::test]
async fn a_planted_secret_never_reaches_the_stream_the_wire_or_the_state() {
    let model = ScriptedModel::new([
        Reply::tool_call("account_lookup", json!({"email": "a@example.com"})),
        Reply::text("Your account is active on the pro plan."),
    ]);
    let h = harness(Arc::new(model.clone()), vec![leaky_lookup()]);
    let (events, fin) = drain(ask(&h, "t-secret", "what plan am I on?")).await;
    fin.unwrap();

    let result = events
        .iter()
        .find_map(|e| match &e.event {
            AiEvent::ToolCallResult { result, is_error, .. } => Some((result.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert_eq!(result, (json!({"status": "active", "plan": "pro"}), false));

    let stream_json = serde_json::to_string(&events).unwrap();
    assert!(!stream_json.contains(SECRET));
    let wire = encode_data_stream(&events);
    assert!(
        wire.contains(r#""result":{"status":"active","plan":"pro"}}"#),
        "{wire}"
    );
    assert!(!wire.contains(SECRET));

    // Nor the model's next prompt, nor the checkpointed conversation.
    let second = &model.requests()[1];
    assert!(!serde_json::to_string(&second.messages).unwrap().contains(SECRET));
    let state = h.graph.get_state(&RunConfig::thread("t-secret")).await.unwrap();
    assert!(!format!("{:?}", state.values.messages.to_vec()).contains(SECRET));
}

#[tokio::test]
async fn every_stage_failure_emits_an_error_result_with_the_same_id() {
    let no_allowlist = ToolContract::new(
        "raw_dump",
        "Dumps everything",
        json!({"type": "object"}),
        json!({"type": "object"}),
        None,
        |_a: Value| async move { Ok(json!({"secret": SECRET})) },
    );
    let broken = ToolContract::new(
        "flaky",
        "Always fails",
        json!({"type": "object"}),
        json!({"type": "object"}),
        Some(&["ok"]),
        |_a: Value| async move { Err(format!("db password {SECRET} rejected")) },
    );
    let bad_output = ToolContract::new(
        "bad_output",
        "Returns the wrong shape",
        json!({"type": "object"}),
        json!({"type": "object", "required": ["count"], "properties": {"count": {"type": "integer"}}}),
        Some(&["count"]),
        |_a: Value| async move { Ok(json!({"count": "many"})) },
    );
    let runner = ToolRunner::new([knowledge_search(), no_allowlist, broken, bad_output]);

    let cases = [
        (
            call("knowledge_search", json!({"query": ""})),
            ToolErrorCode::Validation,
        ),
        (
            call("knowledge_search", json!({"q": "x"})),
            ToolErrorCode::Validation,
        ),
        (call("flaky", json!({})), ToolErrorCode::Execution),
        (call("bad_output", json!({})), ToolErrorCode::Validation),
        (call("raw_dump", json!({})), ToolErrorCode::RedactionFailed),
        (call("nope", json!({})), ToolErrorCode::Unavailable),
    ];
    for (c, code) in cases {
        let (out, events) = exec(&runner, &c).await;
        match &out {
            ToolOutcome::Err {
                tool_call_id,
                error_code,
                ..
            } => {
                assert_eq!(*error_code, code, "{}", c.name);
                assert_eq!(tool_call_id, &c.id);
            }
            other => panic!("{}: expected an error, got {other:?}", c.name),
        }
        assert_eq!(events.len(), 2, "{}", c.name);
        assert!(matches!(&events[0], AiEvent::ToolCallStart { tool_call_id, .. } if *tool_call_id == c.id));
        match &events[1] {
            AiEvent::ToolCallResult {
                tool_call_id,
                result,
                is_error,
                ..
            } => {
                assert_eq!(tool_call_id, &c.id);
                assert!(*is_error);
                assert_eq!(result["errorCode"], json!(code));
                assert!(!result.to_string().contains(SECRET), "{}", c.name);
            }
            other => panic!("expected a result, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_good_call_passes_only_allowlisted_fields_and_the_runner_owns_missing_ids() {
    let runner = ToolRunner::new([knowledge_search()]);
    let mut c = call("knowledge_search", json!({"query": "Reset Password"}));
    c.id = String::new();
    let (out, events) = exec(&runner, &c).await;
    let ToolOutcome::Ok { tool_call_id, value } = out else {
        panic!("expected success");
    };
    assert!(tool_call_id.starts_with("call_") && tool_call_id.len() > 10);
    assert_eq!(
        value,
        json!({"query": "Reset Password", "resultCount": 2, "topUrl": "https://kb.example/reset-password"})
    );
    assert!(value.get("documents").is_none(), "full documents are redacted");
    let ids: Vec<&str> = events
        .iter()
        .map(|e| match e {
            AiEvent::ToolCallStart { tool_call_id, .. } | AiEvent::ToolCallResult { tool_call_id, .. } => {
                tool_call_id.as_str()
            }
            _ => "",
        })
        .collect();
    assert_eq!(ids, vec![tool_call_id.as_str(), tool_call_id.as_str()]);
}

#[tokio::test]
async fn knowledge_search_ranks_the_bundled_articles_by_text_match() {
    let runner = ToolRunner::new([knowledge_search()]);
    let search = |q: &str| call("knowledge_search", json!({"query": q}));
    let safe = |out: ToolOutcome| match out {
        ToolOutcome::Ok { value, .. } => value,
        other => panic!("expected a result, got {other:?}"),
    };
    let v = safe(exec(&runner, &search("billing cycle date")).await.0);
    assert_eq!(v["topUrl"], "https://kb.example/billing-cycle");
    let v = safe(exec(&runner, &search("how do refunds work")).await.0);
    assert_eq!(v["topUrl"], "https://kb.example/refunds");
    assert_eq!(v["resultCount"], 1);
    // Nothing in the knowledge base mentions it: no result, no invented URL.
    let v = safe(exec(&runner, &search("quantum entanglement")).await.0);
    assert_eq!(
        v,
        json!({"query": "quantum entanglement", "resultCount": 0, "topUrl": null})
    );
    // The full documents, with their internal fields, rank the matches and stay behind.
    let ranked = chat_runtime::search_knowledge("prorated invoice", 5);
    let urls: Vec<&str> = ranked.iter().map(|(d, _)| d["url"].as_str().unwrap()).collect();
    assert_eq!(urls[0], "https://kb.example/proration", "{urls:?}");
    assert!(urls.contains(&"https://kb.example/invoices"), "{urls:?}");
    assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1));
    assert_eq!(ranked[0].0["owner"], "payments-team");
}
