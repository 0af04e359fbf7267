//! [`InvestigationState`]: the state every node reads and the checkpointer persists after
//! every step (TDD-002 §2), with the two audit records it holds.
//!
//! The fields and their JSON names are the seed's `InvestigationState` TypedDict. What
//! changes in Rust:
//!
//! - Statuses and severities are enums that serialise to the seed's strings (`"TIMED_OUT"`,
//!   `"CRITICAL"`, ...), so a typo is a compile error instead of a silent new status.
//! - The audit lists (`completed_steps`, `planner_decisions`, `tool_executions`) and the
//!   evidence lists (`hypotheses`, `evidence`) have the `append` reducer: a node returns only
//!   the items it adds, and the checkpointer stores only those new items per step instead of
//!   the whole list again. Everything else keeps the last value written, like a TypedDict.
//! - `dict[str, Any]` fields are JSON objects ([`JsonObject`]); list items of a fixed shape
//!   ([`Evidence`], [`Recommendation`]) are structs that serialise to the same dicts.

use graphloom_core::{Seq, State};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A JSON object (`dict[str, Any]`).
pub type JsonObject = Map<String, Value>;

/// The planner's pseudo-tool that ends the investigation.
pub const COMPLETE: &str = "COMPLETE";

/// Status of an investigation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum InvestigationStatus {
    /// Created, not started.
    #[default]
    Pending,
    /// The planner has taken at least one decision.
    InProgress,
    /// The completion node ran.
    Completed,
    /// The run failed (or the transaction could not be loaded).
    Failed,
    /// The whole run exceeded its time limit.
    TimedOut,
}

impl InvestigationStatus {
    /// The seed's string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::InProgress => "IN_PROGRESS",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::TimedOut => "TIMED_OUT",
        }
    }
}

/// Severity of a case.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Severity {
    /// Nothing or little suspicious.
    #[default]
    Low,
    /// Worth a look.
    Medium,
    /// Likely fraud.
    High,
    /// Fraud in progress: act now.
    Critical,
}

impl Severity {
    /// The seed's string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "LOW",
            Self::Medium => "MEDIUM",
            Self::High => "HIGH",
            Self::Critical => "CRITICAL",
        }
    }
    /// The severity of a fraud probability.
    #[must_use]
    pub fn from_probability(p: f64) -> Self {
        if p >= 0.8 {
            Self::Critical
        } else if p >= 0.6 {
            Self::High
        } else if p >= 0.35 {
            Self::Medium
        } else {
            Self::Low
        }
    }
}

/// Outcome of one tool execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ToolStatus {
    /// The tool returned.
    Success,
    /// The tool returned an error (or panicked).
    Failed,
    /// The tool ran past its per-tool timeout and was cancelled.
    TimedOut,
}

impl ToolStatus {
    /// The seed's string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "SUCCESS",
            Self::Failed => "FAILED",
            Self::TimedOut => "TIMED_OUT",
        }
    }
}

/// Record of a single tool execution within an investigation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolExecution {
    /// The tool.
    pub tool_name: String,
    /// What it was given (ids and counts, never whole documents).
    pub input_summary: JsonObject,
    /// What it produced, summarised.
    pub output_summary: JsonObject,
    /// Wall-clock time.
    pub execution_time_ms: u64,
    /// `SUCCESS`, `FAILED` or `TIMED_OUT`.
    pub status: ToolStatus,
    /// Why it failed.
    pub error_message: Option<String>,
    /// When it finished (ISO 8601).
    pub timestamp: String,
}

/// Record of a single planner decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlannerDecision {
    /// 1-based decision number.
    pub step: u32,
    /// A tool name or `"COMPLETE"`.
    pub selected_tool: String,
    /// Why. Decisions of the deterministic fallback start with `fallback:`.
    pub reason: String,
    /// 0.0 - 1.0.
    pub confidence: f64,
    /// When (ISO 8601).
    pub timestamp: String,
}

impl PlannerDecision {
    /// Whether the deterministic fallback (not the model) chose this step.
    #[must_use]
    pub fn used_fallback(&self) -> bool {
        self.reason.starts_with("fallback:")
    }
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// The tool that found it.
    pub source: String,
    /// What kind of finding (`card_testing`, `similar_cases`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Human-readable detail.
    pub detail: String,
    /// How strongly it points to fraud, 0.0 - 1.0.
    pub weight: f64,
}

/// One recommended action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recommendation {
    /// What to do (`BLOCK_CARD`, `MANUAL_REVIEW`, ...).
    pub action: String,
    /// `P1` (now) to `P3` (when convenient).
    pub priority: String,
    /// Why.
    pub rationale: String,
}

/// The central state passed through all graph nodes.
#[derive(State, Clone, Debug, Default, PartialEq)]
pub struct InvestigationState {
    // ── Identity ──────────────────────────────────────────────
    /// Id of the investigation (also the checkpoint thread id).
    pub investigation_id: String,
    /// The transaction under investigation.
    pub transaction_id: String,

    // ── Transaction context (populated by context_tool) ────────
    /// Transaction, account, merchant and card history.
    pub context: JsonObject,

    // ── Evidence (populated by analysis tools) ────────────────
    /// Patterns found by pattern_tool.
    pub pattern_results: JsonObject,
    /// Similar closed cases found by similarity_tool.
    pub similarity_results: JsonObject,
    /// Candidate explanations.
    #[reducer(append)]
    pub hypotheses: Seq<String>,
    /// Findings, appended by the tools that made them.
    #[reducer(append)]
    pub evidence: Seq<Evidence>,

    // ── Reasoning (populated by reasoning_tool) ───────────────
    /// Weighed conclusion.
    pub reasoning: JsonObject,

    // ── Outputs (populated by recommendation / rule-draft tools) ─
    /// Recommended actions.
    pub recommendations: Vec<Recommendation>,
    /// A detection rule drafted from the case, with its backtest.
    pub rule_draft: Option<JsonObject>,

    // ── Scoring ───────────────────────────────────────────────
    /// 0.0 - 1.0.
    pub confidence_score: f64,
    /// `CRITICAL`, `HIGH`, `MEDIUM` or `LOW`.
    pub severity: Severity,

    // ── Execution control ─────────────────────────────────────
    /// `PENDING`, `IN_PROGRESS`, `COMPLETED`, `FAILED` or `TIMED_OUT`.
    pub status: InvestigationStatus,
    /// Tools that ran (whatever their outcome), in order.
    #[reducer(append)]
    pub completed_steps: Seq<String>,
    /// The planner's choice: a tool name or `"COMPLETE"`.
    pub next_action: String,
    /// Tool decisions taken so far.
    pub step_count: u32,
    /// Most tool decisions allowed.
    pub max_steps: u32,
    /// When the investigation started (ISO 8601).
    pub started_at: String,
    /// When it completed (ISO 8601).
    pub completed_at: Option<String>,

    // ── Runtime feature flags (persisted for the audit trace) ─
    /// `planner_llm_enabled`, `reasoning_llm_enabled`, `vector_search_enabled`,
    /// `prompt_guard_enabled`.
    pub feature_flags: BTreeMap<String, bool>,
    /// `max_steps`, `investigation_timeout_seconds`, `tool_timeout_seconds`.
    pub safeguards: JsonObject,

    // ── Audit trail ───────────────────────────────────────────
    /// Every planner decision.
    #[reducer(append)]
    pub planner_decisions: Seq<PlannerDecision>,
    /// Every tool execution.
    #[reducer(append)]
    pub tool_executions: Seq<ToolExecution>,
    /// Why the investigation failed or timed out.
    pub error: Option<String>,
}

/// Default step limit.
pub const DEFAULT_MAX_STEPS: u32 = 20;

/// Create a fresh investigation state with sensible defaults (TDD-002 §2.1). Feature flags
/// and safeguards are filled in by [`crate::Settings::initial_state`].
#[must_use]
pub fn create_initial_state(
    investigation_id: &str,
    transaction_id: &str,
    max_steps: u32,
) -> InvestigationState {
    InvestigationState {
        investigation_id: investigation_id.to_owned(),
        transaction_id: transaction_id.to_owned(),
        max_steps,
        started_at: graphloom_core::checkpoint::now_rfc3339(),
        ..InvestigationState::default()
    }
}

impl InvestigationState {
    /// This whole state as a graph input (an update that sets every field).
    ///
    /// # Errors
    /// Never for states built by this crate (the state is plain JSON).
    pub fn to_input(&self) -> Result<InvestigationStateUpdate, graphloom_core::StateError> {
        self.update_from_json(self.to_json()?)
    }
    /// Whether `tool` already ran (whatever its outcome).
    #[must_use]
    pub fn has_run(&self, tool: &str) -> bool {
        self.completed_steps.iter().any(|t| t == tool)
    }
    /// The last execution record of `tool`.
    #[must_use]
    pub fn execution_of(&self, tool: &str) -> Option<&ToolExecution> {
        self.tool_executions.iter().rev().find(|e| e.tool_name == tool)
    }
    /// Whether `tool` ran and succeeded.
    #[must_use]
    pub fn succeeded(&self, tool: &str) -> bool {
        self.execution_of(tool)
            .is_some_and(|e| e.status == ToolStatus::Success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serialises_with_the_seed_field_names_and_strings() {
        let mut s = create_initial_state("inv-1", "TX-1", 20);
        s.status = InvestigationStatus::TimedOut;
        s.severity = Severity::Critical;
        let v = s.to_json().unwrap();
        for key in [
            "investigation_id",
            "transaction_id",
            "context",
            "pattern_results",
            "similarity_results",
            "hypotheses",
            "evidence",
            "reasoning",
            "recommendations",
            "rule_draft",
            "confidence_score",
            "severity",
            "status",
            "completed_steps",
            "next_action",
            "step_count",
            "max_steps",
            "started_at",
            "completed_at",
            "feature_flags",
            "safeguards",
            "planner_decisions",
            "tool_executions",
            "error",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["status"], json!("TIMED_OUT"));
        assert_eq!(v["severity"], json!("CRITICAL"));
        assert_eq!(v["rule_draft"], json!(null));
        let back = InvestigationState::default().update_from_json(v).unwrap();
        let mut fresh = InvestigationState::default();
        fresh
            .merge(
                vec![graphloom_core::TaskUpdate {
                    node: "x",
                    update: back,
                }],
                &mut Vec::new(),
            )
            .unwrap();
        assert_eq!(fresh, s);
    }

    #[test]
    fn severity_thresholds() {
        assert_eq!(Severity::from_probability(0.95), Severity::Critical);
        assert_eq!(Severity::from_probability(0.6), Severity::High);
        assert_eq!(Severity::from_probability(0.4), Severity::Medium);
        assert_eq!(Severity::from_probability(0.1), Severity::Low);
        assert!(Severity::Critical > Severity::High);
    }
}
