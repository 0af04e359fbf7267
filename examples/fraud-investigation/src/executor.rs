//! The tool executor node (TDD-002 §6): run the selected tool under the per-tool timeout,
//! record the execution, mark the tool completed whatever its outcome.
//!
//! Failures are not fatal: a tool that errors, panics or runs past its timeout is recorded
//! as `FAILED` or `TIMED_OUT`, added to `completed_steps` (so the planner does not retry it
//! in a loop) and the run goes on. The tool runs in its own task, which is aborted on
//! timeout and also when the node itself is dropped (the whole run timed out or was
//! cancelled), so a hung tool never outlives its investigation.

use crate::metrics::Metrics;
use crate::state::{InvestigationState, InvestigationStateUpdate, ToolExecution, ToolStatus};
use crate::tools::{input_of, obj, ToolOutcome, ToolRegistry};
use graphloom_core::{NodeError, Runtime};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::field::Empty;
use tracing::Instrument;

/// The span of one tool execution: `agent.tool.<tool_name>` for the standard tools
/// (tracing span names are static), `agent.tool` with a `tool_name` field for others.
#[must_use]
pub fn tool_span(tool_name: &str, investigation_id: &str) -> tracing::Span {
    macro_rules! spans {
        ($($name:literal),*) => {
            match tool_name {
                $($name => tracing::info_span!(
                    concat!("agent.tool.", $name),
                    investigation_id = %investigation_id,
                    tool_name = $name,
                    status = Empty,
                    execution_time_ms = Empty,
                ),)*
                other => tracing::info_span!(
                    "agent.tool",
                    investigation_id = %investigation_id,
                    tool_name = %other,
                    status = Empty,
                    execution_time_ms = Empty,
                ),
            }
        };
    }
    spans!(
        "context_tool",
        "pattern_tool",
        "similarity_tool",
        "reasoning_tool",
        "recommendation_tool",
        "rule_draft_tool"
    )
}

/// Aborts the task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run `state.next_action` with `timeout`; the execution record and the update to apply.
pub async fn execute_tool(
    registry: &ToolRegistry,
    metrics: &Metrics,
    timeout: Duration,
    state: Arc<InvestigationState>,
) -> InvestigationStateUpdate {
    let name = state.next_action.clone();
    let span = tool_span(&name, &state.investigation_id);
    let started = Instant::now();
    let result: Result<ToolOutcome, (ToolStatus, String)> = match registry.get(&name) {
        Err(e) => Err((ToolStatus::Failed, e.to_string())),
        Ok(tool) => {
            let fut = tool.execute(Arc::clone(&state)).instrument(span.clone());
            let mut task = AbortOnDrop(tokio::spawn(fut));
            match tokio::time::timeout(timeout, &mut task.0).await {
                Ok(Ok(Ok(outcome))) => Ok(outcome),
                Ok(Ok(Err(e))) => Err((ToolStatus::Failed, e.0)),
                Ok(Err(join)) => Err((
                    ToolStatus::Failed,
                    if join.is_panic() {
                        "the tool panicked".to_owned()
                    } else {
                        "the tool was cancelled".to_owned()
                    },
                )),
                Err(_elapsed) => Err((
                    ToolStatus::TimedOut,
                    format!("Tool timed out after {}s", timeout.as_secs_f64()),
                )),
            }
        }
    };
    let elapsed = started.elapsed();
    let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let (mut update, status, input_summary, output_summary, error_message) = match result {
        Ok(o) => (
            o.update,
            ToolStatus::Success,
            o.input_summary,
            o.output_summary,
            None,
        ),
        Err((status, msg)) => {
            tracing::warn!(parent: &span, tool = %name, status = status.as_str(), error = %msg, "tool did not succeed");
            (
                InvestigationStateUpdate::new(),
                status,
                input_of(&state),
                obj(json!({})),
                Some(msg),
            )
        }
    };
    span.record("status", status.as_str());
    span.record("execution_time_ms", ms);
    metrics.tool_execution(&name, status.as_str(), elapsed.as_secs_f64());
    let record = ToolExecution {
        tool_name: name.clone(),
        input_summary,
        output_summary,
        execution_time_ms: ms,
        status,
        error_message,
        timestamp: graphloom_core::checkpoint::now_rfc3339(),
    };
    update.completed_steps = Some(vec![name]);
    update.tool_executions = Some(vec![record]);
    update
}

/// The executor as a graph node.
pub fn make_executor_node(
    registry: Arc<ToolRegistry>,
    metrics: Arc<Metrics>,
    timeout: Duration,
) -> impl Fn(
    Arc<InvestigationState>,
    Runtime,
) -> futures::future::BoxFuture<'static, Result<InvestigationStateUpdate, NodeError>>
       + Send
       + Sync
       + 'static {
    move |state, _rt| {
        let registry = Arc::clone(&registry);
        let metrics = Arc::clone(&metrics);
        Box::pin(async move { Ok(execute_tool(&registry, &metrics, timeout, state).await) })
    }
}
