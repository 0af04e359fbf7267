//! Resume after a crash (TDD-002 §11): the run is killed while a tool is executing, the
//! graph is rebuilt from the same SQLite file, and the thread is resumed. Finished tools
//! and planner decisions are not redone; the interrupted tool runs again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{choose, decided, settings, setup, Counts};
use fraud_investigation::tools::{
    ToolFailure, ToolOutcome, CONTEXT_TOOL, PATTERN_TOOL, REASONING_TOOL, RECOMMENDATION_TOOL,
    RULE_DRAFT_TOOL, SIMILARITY_TOOL,
};
use fraud_investigation::{
    InvestigationState, InvestigationStatus, InvestigationTool, COMPLETE, TOOL_EXECUTOR,
};
use futures::future::BoxFuture;
use graphloom_core::RunConfig;
use graphloom_llm::ScriptedModel;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// `similarity_tool` that signals it started, then never returns: the process "dies"
/// while it runs.
struct StartsThenHangs {
    started: Arc<Notify>,
}

impl InvestigationTool for StartsThenHangs {
    fn name(&self) -> &str {
        SIMILARITY_TOOL
    }
    fn description(&self) -> &str {
        "hangs"
    }
    fn execute(
        &self,
        _state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let started = Arc::clone(&self.started);
        Box::pin(async move {
            started.notify_one();
            futures::future::pending::<()>().await;
            Err(ToolFailure::new("unreachable"))
        })
    }
}

#[tokio::test]
async fn a_crashed_investigation_resumes_from_its_last_step_without_redoing_tools() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("investigations.db");
    let counts = Counts::default();
    let started = Arc::new(Notify::new());

    // First process: the model plans context, patterns, similarity; similarity hangs.
    let first_model = ScriptedModel::new([
        choose(CONTEXT_TOOL, "context", 0.9),
        choose(PATTERN_TOOL, "patterns", 0.9),
        choose(SIMILARITY_TOOL, "cases", 0.9),
    ]);
    let first = setup(
        &path,
        settings(),
        Some(Arc::new(first_model.clone())),
        vec![Arc::new(StartsThenHangs {
            started: Arc::clone(&started),
        })],
        counts.clone(),
    )
    .await;
    let service = Arc::new(first.service);
    let run = {
        let service = Arc::clone(&service);
        tokio::spawn(async move { service.start("inv-crash", "TX-1009").await })
    };
    tokio::time::timeout(Duration::from_secs(30), started.notified())
        .await
        .expect("similarity_tool started");
    // Crash: the run is dropped mid-tool and everything in memory goes with it.
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    drop(service);
    drop(first.store);
    assert_eq!(first_model.calls(), 3);

    // Second process: a new graph over the same file.
    let second_model = ScriptedModel::new([
        choose(REASONING_TOOL, "weigh", 0.8),
        choose(RECOMMENDATION_TOOL, "act", 0.8),
        choose(RULE_DRAFT_TOOL, "draft", 0.8),
    ]);
    let second = setup(
        &path,
        settings(),
        Some(Arc::new(second_model.clone())),
        vec![],
        counts.clone(),
    )
    .await;
    let before = second.service.load_state("inv-crash").await.unwrap().unwrap();
    assert_eq!(before.status, InvestigationStatus::InProgress);
    assert_eq!(before.completed_steps.to_vec(), [CONTEXT_TOOL, PATTERN_TOOL]);
    assert_eq!(before.next_action, SIMILARITY_TOOL);
    let snap = second
        .service
        .graph()
        .get_state(&RunConfig::thread("inv-crash"))
        .await
        .unwrap();
    assert_eq!(snap.next, [TOOL_EXECUTOR], "the interrupted tool step is pending");

    let done = second.service.resume_investigation("inv-crash").await.unwrap();
    assert_eq!(done.status, InvestigationStatus::Completed);
    assert_eq!(
        decided(&done),
        [
            CONTEXT_TOOL,
            PATTERN_TOOL,
            SIMILARITY_TOOL,
            REASONING_TOOL,
            RECOMMENDATION_TOOL,
            RULE_DRAFT_TOOL,
            COMPLETE
        ],
        "each decision once: the similarity decision was not taken again"
    );
    assert_eq!(done.tool_executions.len(), 6);
    assert_eq!(
        second_model.calls(),
        3,
        "the model was asked only for the remaining decisions"
    );
    // Every tool finished exactly once across both processes.
    let c = counts.lock().unwrap().clone();
    for t in fraud_investigation::FALLBACK_SEQUENCE {
        assert_eq!(c.get(t), Some(&1), "{t}: {c:?}");
    }
    // Resuming a finished investigation returns it as it is.
    let again = second.service.resume_investigation("inv-crash").await.unwrap();
    assert_eq!(again, done);
    assert!(matches!(
        second.service.resume_investigation("inv-unknown").await,
        Err(fraud_investigation::ServiceError::NotFound(_))
    ));
}
