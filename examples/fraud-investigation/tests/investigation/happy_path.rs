//! The happy path: the model plans, every tool succeeds, the state is persisted, the
//! completion node writes its audit record, and the verdicts fit the cases of the data set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{choose, decided, executed, settings, setup};
use fraud_investigation::tools::{
    CONTEXT_TOOL, PATTERN_TOOL, REASONING_TOOL, RECOMMENDATION_TOOL, RULE_DRAFT_TOOL, SIMILARITY_TOOL,
};
use fraud_investigation::{InvestigationStatus, Severity, ToolStatus, COMPLETE};
use graphloom_core::{RunConfig, RunInput, State as _};
use graphloom_llm::ScriptedModel;
use serde_json::Value;
use std::sync::Arc;

#[tokio::test]
async fn the_model_plans_the_investigation_and_the_state_is_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([
        choose(CONTEXT_TOOL, "context first", 0.9),
        choose(SIMILARITY_TOOL, "closed cases", 0.8),
        choose(PATTERN_TOOL, "patterns", 0.8),
        choose(REASONING_TOOL, "weigh", 0.85),
        choose(RECOMMENDATION_TOOL, "act", 0.9),
        choose(COMPLETE, "enough evidence, no rule needed", 0.7),
    ]);
    let s = setup(
        &dir.path().join("f.db"),
        settings(),
        Some(Arc::new(model.clone())),
        vec![],
        Default::default(),
    )
    .await;
    let out = s.service.start("inv-happy", "TX-1009").await.unwrap();

    assert_eq!(out.status, InvestigationStatus::Completed);
    assert_eq!(out.severity, Severity::Critical);
    assert!(out.confidence_score > 0.9, "{}", out.confidence_score);
    assert!(out.completed_at.is_some() && out.error.is_none());
    assert_eq!(
        decided(&out),
        [
            CONTEXT_TOOL,
            SIMILARITY_TOOL,
            PATTERN_TOOL,
            REASONING_TOOL,
            RECOMMENDATION_TOOL,
            COMPLETE
        ]
    );
    assert!(out.planner_decisions.iter().all(|d| !d.used_fallback()));
    assert_eq!(
        out.planner_decisions.to_vec()[5].reason,
        "enough evidence, no rule needed"
    );
    assert_eq!(
        out.planner_decisions.iter().map(|d| d.step).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(out.step_count, 5, "five tools ran");
    assert!(out
        .tool_executions
        .iter()
        .all(|e| e.status == ToolStatus::Success));
    assert!(
        out.rule_draft.is_none(),
        "the model completed before rule_draft_tool"
    );
    assert!(out.feature_flags["planner_llm_enabled"]);
    assert_eq!(out.safeguards["max_steps"], 20);
    // Evidence and findings a fraud analyst would expect for a card-testing burst.
    let kinds: Vec<&str> = out.evidence.iter().map(|e| e.kind.as_str()).collect();
    for k in ["card_testing", "new_device", "geo_mismatch", "similar_cases"] {
        assert!(kinds.contains(&k), "{kinds:?}");
    }
    assert!(
        out.hypotheses.to_vec()[0].contains("card testing"),
        "{:?}",
        out.hypotheses
    );
    assert_eq!(out.recommendations[0].action, "BLOCK_CARD");
    assert_eq!(out.context["transaction"]["transaction_id"], "TX-1009");
    assert_eq!(out.reasoning["conclusion"], "LIKELY_FRAUD");

    // The model asked for structured output and saw the seed's prompt.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 6);
    let fmt = reqs[0]
        .options
        .response_format
        .as_ref()
        .expect("structured output");
    assert!(fmt.schema["properties"].get("tool").is_some());
    let prompt = reqs[3].messages[1].text();
    assert!(
        prompt.contains("Completed Steps: [\"context_tool\", \"similarity_tool\", \"pattern_tool\"]"),
        "{prompt}"
    );
    assert!(prompt.contains("NEVER repeat a tool"), "{prompt}");

    // Persisted after every step: the checkpoint holds the final state, and the history
    // has one checkpoint per step (input, 6 decisions, 5 tools, completion).
    let stored = s.service.load_state("inv-happy").await.unwrap().unwrap();
    assert_eq!(stored, out);
    let history = s
        .service
        .graph()
        .get_state_history(&RunConfig::thread("inv-happy"), None)
        .await
        .unwrap();
    assert!(history.len() >= 13, "{} checkpoints", history.len());

    // The completion node's audit record.
    let ns: Vec<String> = vec!["fraud".into(), "investigations".into()];
    let doc = s.store.get(&ns, "inv-happy").await.unwrap().unwrap();
    assert_eq!(doc.value["status"], "COMPLETED");
    assert_eq!(doc.value["severity"], "CRITICAL");
    assert_eq!(doc.value["tool_executions"].as_array().unwrap().len(), 5);

    // Metrics.
    assert_eq!(s.metrics.planner_decision_count(CONTEXT_TOOL, false), 1);
    assert_eq!(s.metrics.completed_count("COMPLETED", "CRITICAL"), 1);
    let text = s.metrics.render();
    assert!(text.contains("ops_agent_investigation_steps_sum 5.0"), "{text}");
}

#[tokio::test]
async fn each_open_case_of_the_data_set_gets_a_fitting_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = settings();
    st.planner.llm_enabled = false;
    let s = setup(&dir.path().join("f.db"), st, None, vec![], Default::default()).await;
    let cases = [
        ("TX-1009", Severity::Critical, "BLOCK_CARD"),
        ("TX-3004", Severity::Critical, "BLOCK_CARD"),
        ("TX-4003", Severity::Medium, "MANUAL_REVIEW"),
        ("TX-2004", Severity::Low, "CLOSE_AS_LEGITIMATE"),
    ];
    for (tx, severity, first_action) in cases {
        let out = s.service.run_investigation(tx).await.unwrap();
        assert_eq!(out.status, InvestigationStatus::Completed, "{tx}");
        assert_eq!(out.severity, severity, "{tx}: {:?}", out.reasoning);
        assert_eq!(out.recommendations[0].action, first_action, "{tx}");
        assert_eq!(
            decided(&out),
            [
                CONTEXT_TOOL,
                PATTERN_TOOL,
                SIMILARITY_TOOL,
                REASONING_TOOL,
                RECOMMENDATION_TOOL,
                RULE_DRAFT_TOOL,
                COMPLETE
            ],
            "{tx}: the deterministic sequence"
        );
        assert!(out.planner_decisions.to_vec()[..6]
            .iter()
            .all(|d| d.used_fallback()));
        assert!(out.planner_decisions.to_vec()[6].reason.starts_with("rule:"));
        assert!(!out.feature_flags["planner_llm_enabled"]);
        // Low severity: no rule worth drafting; otherwise a rule with a backtest.
        match severity {
            Severity::Low => assert!(out.rule_draft.is_none()),
            _ => {
                let rule = out.rule_draft.clone().unwrap();
                assert_eq!(rule["status"], "DRAFT");
                assert!(rule["backtest"]["labelled_transactions"].as_u64().unwrap() > 20);
            }
        }
    }
    // TX-3004: the impossible-travel hypothesis leads.
    let s3004 = s.service.run_investigation("TX-3004").await.unwrap();
    assert!(s3004.evidence.iter().any(|e| e.kind == "impossible_travel"));
    assert!(s3004.hypotheses.iter().any(|h| h.contains("cloned")));
}

#[tokio::test]
async fn an_unknown_transaction_fails_the_investigation_after_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        &dir.path().join("f.db"),
        settings(),
        None,
        vec![],
        Default::default(),
    )
    .await;
    let out = s.service.start("inv-missing", "TX-0000").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::Failed);
    assert_eq!(executed(&out), [(CONTEXT_TOOL.to_owned(), "FAILED".to_owned())]);
    assert!(
        out.error.as_deref().unwrap().contains("TX-0000 not found"),
        "{:?}",
        out.error
    );
    assert_eq!(decided(&out), [CONTEXT_TOOL, COMPLETE]);
    assert_eq!(s.metrics.completed_count("FAILED", "LOW"), 1);
}

#[tokio::test]
async fn the_hosted_graph_runs_the_sample_input_with_the_offline_model() {
    let graph = fraud_investigation::graph(
        Arc::new(graphloom_core::checkpoint::InMemorySaver::new()),
        Arc::new(graphloom_core::InMemoryStore::new()),
        fraud_investigation::default_model().unwrap(),
    )
    .unwrap();
    assert_eq!(fraud_investigation::GRAPH_ID, "fraud_investigation");
    let out = graph
        .invoke_input(
            RunInput::Json(fraud_investigation::sample_input()),
            RunConfig::thread("sample"),
        )
        .await
        .unwrap();
    let v = out.values.to_json().unwrap();
    assert_eq!(v["status"], "COMPLETED");
    assert_eq!(v["severity"], "CRITICAL");
    assert_eq!(v["completed_steps"].as_array().unwrap().len(), 6);
    // A bare input gets the defaults on the first decision.
    let bare = graph
        .invoke_input(
            RunInput::Json(serde_json::json!({"transaction_id": "TX-2004"})),
            RunConfig::thread("bare"),
        )
        .await
        .unwrap();
    assert_eq!(bare.values.max_steps, 20);
    assert_eq!(bare.values.investigation_id, "bare");
    assert_eq!(bare.values.status.as_str(), "COMPLETED");
    assert_eq!(bare.values.severity, Severity::Low);
    assert!(bare
        .values
        .safeguards
        .get("tool_timeout_seconds")
        .is_some_and(Value::is_number));
}
