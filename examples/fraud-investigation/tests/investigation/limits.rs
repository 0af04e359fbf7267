//! The step limit (TDD-002 §3.5): the planner stops selecting tools at `max_steps` and the
//! investigation completes with the evidence it has.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{choose, decided, settings, setup};
use fraud_investigation::tools::{CONTEXT_TOOL, PATTERN_TOOL, SIMILARITY_TOOL};
use fraud_investigation::{
    create_initial_state, route_after_planner, InvestigationStatus, COMPLETE, COMPLETION, TOOL_EXECUTOR,
};
use graphloom_llm::ScriptedModel;
use std::sync::Arc;

#[tokio::test]
async fn max_steps_stops_the_loop_and_the_investigation_still_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = settings();
    st.langgraph.max_steps = 3;
    // The limit is enforced in code, not asked of the model.
    let model_first = ScriptedModel::new([
        choose(CONTEXT_TOOL, "context", 0.9),
        choose(SIMILARITY_TOOL, "cases", 0.9),
        choose(PATTERN_TOOL, "patterns", 0.9),
    ]);
    let s = setup(
        &dir.path().join("f.db"),
        st,
        Some(Arc::new(model_first.clone())),
        vec![],
        Default::default(),
    )
    .await;
    let out = s.service.start("inv-limit", "TX-1009").await.unwrap();
    assert_eq!(out.max_steps, 3);
    assert_eq!(out.step_count, 3);
    assert_eq!(
        decided(&out),
        [CONTEXT_TOOL, SIMILARITY_TOOL, PATTERN_TOOL, COMPLETE]
    );
    assert_eq!(out.tool_executions.len(), 3, "the third selected tool still ran");
    let last = out.planner_decisions.last().unwrap();
    assert!(
        last.reason.starts_with("rule: max_steps (3) reached"),
        "{}",
        last.reason
    );
    assert_eq!(
        model_first.calls(),
        3,
        "the model is not asked once the limit is reached"
    );
    assert_eq!(out.status, InvestigationStatus::Completed);
    // No reasoning step ran: completion weighed the analyses itself.
    assert!(out.reasoning.is_empty());
    assert!(out.confidence_score > 0.0);
    assert_eq!(s.metrics.completed_count("COMPLETED", out.severity.as_str()), 1);
    assert!(s
        .metrics
        .render()
        .contains("ops_agent_investigation_steps_sum 3.0"));
}

#[test]
fn the_router_sends_complete_and_runaway_states_to_completion() {
    let mut s = create_initial_state("i", "t", 2);
    s.next_action = CONTEXT_TOOL.into();
    s.step_count = 1;
    assert_eq!(route_after_planner(&s), TOOL_EXECUTOR);
    s.step_count = 2;
    assert_eq!(
        route_after_planner(&s),
        TOOL_EXECUTOR,
        "the step that reached the limit still runs"
    );
    s.step_count = 3;
    assert_eq!(
        route_after_planner(&s),
        COMPLETION,
        "backstop for an edited state"
    );
    s.step_count = 0;
    s.next_action = COMPLETE.into();
    assert_eq!(route_after_planner(&s), COMPLETION);
}
