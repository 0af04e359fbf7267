//! The completion node (TDD-002 §7): final status, confidence and severity, the audit
//! record in the store, the completion metrics.
//!
//! The checkpointer has already saved the state after every step (the seed's "final JSONB
//! snapshot" is the checkpoint this node's update produces). On PostgreSQL, that checkpoint
//! also carries the seed's investigation row and tool-execution log, written in its own
//! transaction by the saver's hook ([`crate::record`]), not by this node: a node's own
//! writes could not share the checkpoint's commit. When the graph has a store,
//! the node also writes one audit document per investigation under
//! `["fraud", "investigations"]` (key: the investigation id), holding the outcome, the
//! recommendations, the rule draft and the tool execution log, so that reports need not
//! read checkpoints.

use crate::metrics::Metrics;
use crate::state::{InvestigationState, InvestigationStateUpdate, InvestigationStatus, Severity, ToolStatus};
use crate::tools::{fraud_probability, round3, CONTEXT_TOOL};
use graphloom_core::store::PutOptions;
use graphloom_core::{NodeError, Runtime};
use serde_json::{json, Value};
use std::sync::Arc;

/// Namespace of the audit documents.
pub const AUDIT_NAMESPACE: [&str; 2] = ["fraud", "investigations"];

/// Patterns that make a case at least `HIGH` whatever the probability.
const ESCALATING_PATTERNS: [&str; 2] = ["card_testing", "impossible_travel"];

/// The final status, severity, confidence and error of `state`.
#[must_use]
pub fn finalize(state: &InvestigationState) -> (InvestigationStatus, Severity, f64, Option<String>) {
    if state.context.is_empty() {
        let why = state
            .execution_of(CONTEXT_TOOL)
            .and_then(|e| e.error_message.clone())
            .unwrap_or_else(|| "context_tool did not run".to_owned());
        return (
            InvestigationStatus::Failed,
            Severity::Low,
            0.0,
            Some(format!("transaction context unavailable: {why}")),
        );
    }
    let (p, confidence) = match (
        state.reasoning.get("fraud_probability").and_then(Value::as_f64),
        state.reasoning.get("confidence").and_then(Value::as_f64),
    ) {
        (Some(p), Some(c)) => (p, c),
        _ => {
            let (p, c, _) = fraud_probability(state);
            // No reasoning step: the same weighing, trusted less.
            (p, c * 0.8)
        }
    };
    let mut severity = Severity::from_probability(p);
    if state
        .evidence
        .iter()
        .any(|e| ESCALATING_PATTERNS.contains(&e.kind.as_str()))
    {
        severity = severity.max(Severity::High);
    }
    (InvestigationStatus::Completed, severity, round3(confidence), None)
}

/// Finalize, persist the audit document, emit metrics.
///
/// # Errors
/// A retryable node error when the store refuses the audit document.
pub async fn complete(
    metrics: &Metrics,
    state: Arc<InvestigationState>,
    rt: Runtime,
) -> Result<InvestigationStateUpdate, NodeError> {
    let span = tracing::info_span!(
        "agent.completion",
        investigation_id = %state.investigation_id,
        status = tracing::field::Empty,
        severity = tracing::field::Empty,
    );
    let (status, severity, confidence, error) = finalize(&state);
    let completed_at = graphloom_core::checkpoint::now_rfc3339();
    span.record("status", status.as_str());
    span.record("severity", severity.as_str());
    if let Some(store) = rt.store() {
        let ns: Vec<String> = AUDIT_NAMESPACE.iter().map(|s| (*s).to_owned()).collect();
        let failed: Vec<&str> = state
            .tool_executions
            .iter()
            .filter(|e| e.status != ToolStatus::Success)
            .map(|e| e.tool_name.as_str())
            .collect();
        let doc = json!({
            "investigation_id": state.investigation_id,
            "transaction_id": state.transaction_id,
            "status": status,
            "severity": severity,
            "confidence_score": confidence,
            "started_at": state.started_at,
            "completed_at": completed_at,
            "completed_steps": state.completed_steps.to_vec(),
            "failed_tools": failed,
            "recommendations": state.recommendations,
            "rule_draft": state.rule_draft,
            "tool_executions": state.tool_executions.to_vec(),
            "error": error,
        });
        store
            .put(&ns, &state.investigation_id, doc, PutOptions::new())
            .await
            .map_err(|e| NodeError::new(format!("could not persist the audit record: {e}")))?;
    }
    metrics.investigation_finished(status.as_str(), severity.as_str(), state.step_count);
    let _enter = span.enter();
    tracing::info!(
        investigation_id = %state.investigation_id,
        status = status.as_str(),
        severity = severity.as_str(),
        "investigation finished"
    );
    Ok(InvestigationStateUpdate::new()
        .status(status)
        .severity(severity)
        .confidence_score(confidence)
        .completed_at(Some(completed_at))
        .error(error))
}

/// The completion node.
pub fn make_completion_node(
    metrics: Arc<Metrics>,
) -> impl Fn(
    Arc<InvestigationState>,
    Runtime,
) -> futures::future::BoxFuture<'static, Result<InvestigationStateUpdate, NodeError>>
       + Send
       + Sync
       + 'static {
    move |state, rt| {
        let metrics = Arc::clone(&metrics);
        Box::pin(async move { complete(&metrics, state, rt).await })
    }
}
