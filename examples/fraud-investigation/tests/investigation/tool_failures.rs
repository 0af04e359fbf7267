//! Tool failures are not fatal (TDD-002 §6.3): a failing, panicking or hanging tool is
//! recorded and the run goes on; only the whole run's time limit ends it, as TIMED_OUT.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{decided, executed, settings, setup, Counts};
use fraud_investigation::tools::{
    CONTEXT_TOOL, PATTERN_TOOL, REASONING_TOOL, RECOMMENDATION_TOOL, RULE_DRAFT_TOOL, SIMILARITY_TOOL,
};
use fraud_investigation::{Fault, FaultyTool, InvestigationStatus, Severity, ToolStatus, COMPLETE};
use std::sync::Arc;
use std::time::Duration;

fn ok(tool: &str) -> (String, String) {
    (tool.to_owned(), "SUCCESS".to_owned())
}

#[tokio::test]
async fn a_failing_tool_is_recorded_and_the_investigation_adapts() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        &dir.path().join("f.db"),
        settings(),
        None,
        vec![Arc::new(FaultyTool::new(
            PATTERN_TOOL,
            Fault::Fail("pattern service returned HTTP 500".into()),
        ))],
        Counts::default(),
    )
    .await;
    let out = s.service.start("inv-fail", "TX-1009").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::Completed);
    assert_eq!(
        executed(&out),
        [
            ok(CONTEXT_TOOL),
            (PATTERN_TOOL.to_owned(), "FAILED".to_owned()),
            ok(SIMILARITY_TOOL),
            ok(REASONING_TOOL),
            ok(RECOMMENDATION_TOOL),
            (RULE_DRAFT_TOOL.to_owned(), "FAILED".to_owned()),
        ]
    );
    let failed = out.execution_of(PATTERN_TOOL).unwrap();
    assert_eq!(
        failed.error_message.as_deref(),
        Some("pattern service returned HTTP 500")
    );
    assert!(
        out.has_run(PATTERN_TOOL),
        "a failed tool is marked completed, never retried"
    );
    assert_eq!(
        out.completed_steps.iter().filter(|t| *t == PATTERN_TOOL).count(),
        1
    );
    // Reasoning worked from the similar cases alone, and said what was missing.
    assert_eq!(
        out.reasoning["missing_evidence"],
        serde_json::json!([PATTERN_TOOL])
    );
    assert!(out.pattern_results.is_empty());
    // Without patterns the rule draft has nothing to build on: recorded, not fatal.
    let draft = out.execution_of(RULE_DRAFT_TOOL).unwrap();
    assert!(draft
        .error_message
        .as_deref()
        .unwrap()
        .contains("no detected patterns"));
    assert!(out.severity >= Severity::High, "{:?}", out.severity);
    assert!(s.metrics.render().contains(
        "ops_agent_tool_execution_latency_seconds_count{tool_name=\"pattern_tool\",status=\"FAILED\"} 1"
    ));
}

#[tokio::test]
async fn a_panicking_tool_is_a_failed_execution_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        &dir.path().join("f.db"),
        settings(),
        None,
        vec![Arc::new(FaultyTool::new(SIMILARITY_TOOL, Fault::Panic))],
        Counts::default(),
    )
    .await;
    let out = s.service.start("inv-panic", "TX-3004").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::Completed);
    let x = out.execution_of(SIMILARITY_TOOL).unwrap();
    assert_eq!(x.status, ToolStatus::Failed);
    assert_eq!(x.error_message.as_deref(), Some("the tool panicked"));
    assert_eq!(out.completed_steps.len(), 6);
}

#[tokio::test]
async fn a_hanging_tool_times_out_and_the_run_continues() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = settings();
    st.langgraph.tool_timeout = Duration::from_millis(300);
    let s = setup(
        &dir.path().join("f.db"),
        st,
        None,
        vec![Arc::new(FaultyTool::new(SIMILARITY_TOOL, Fault::Hang))],
        Counts::default(),
    )
    .await;
    let out = s.service.start("inv-hang", "TX-1009").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::Completed);
    let x = out.execution_of(SIMILARITY_TOOL).unwrap();
    assert_eq!(x.status, ToolStatus::TimedOut);
    assert_eq!(x.error_message.as_deref(), Some("Tool timed out after 0.3s"));
    assert!(x.execution_time_ms >= 300);
    // The planner went on without the similar cases.
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
        ]
    );
    assert_eq!(
        out.reasoning["missing_evidence"],
        serde_json::json!([SIMILARITY_TOOL])
    );
    assert_eq!(out.severity, Severity::Critical);
    assert!(s.metrics.render().contains("status=\"TIMED_OUT\""));
}

#[tokio::test]
async fn the_run_time_limit_marks_the_investigation_timed_out_and_it_can_be_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let counts = Counts::default();
    let mut st = settings();
    st.langgraph.investigation_timeout = Duration::from_secs(2);
    let s = setup(
        &path,
        st,
        None,
        vec![Arc::new(FaultyTool::new(REASONING_TOOL, Fault::Hang))],
        counts.clone(),
    )
    .await;
    let out = s.service.start("inv-slow", "TX-4003").await.unwrap();
    assert_eq!(out.status, InvestigationStatus::TimedOut);
    assert!(
        out.error.as_deref().unwrap().contains("timed out after 2s"),
        "{:?}",
        out.error
    );
    assert_eq!(
        out.completed_steps.len(),
        3,
        "context, pattern and similarity finished in time"
    );
    // Persisted as TIMED_OUT.
    let stored = s.service.load_state("inv-slow").await.unwrap().unwrap();
    assert_eq!(stored.status, InvestigationStatus::TimedOut);
    assert_eq!(s.metrics.completed_count("TIMED_OUT", "LOW"), 1);
    drop(s);

    // Later, with a working reasoning tool, the investigation is resumed and finishes
    // without running the first three tools again.
    let s = setup(&path, settings(), None, vec![], counts.clone()).await;
    let done = s.service.resume_investigation("inv-slow").await.unwrap();
    assert_eq!(done.status, InvestigationStatus::Completed);
    assert!(done.error.is_none());
    assert_eq!(done.completed_steps.len(), 6);
    let c = counts.lock().unwrap().clone();
    for t in [CONTEXT_TOOL, PATTERN_TOOL, SIMILARITY_TOOL, REASONING_TOOL] {
        assert_eq!(c.get(t), Some(&1), "{t}: {c:?}");
    }
}
