//! graphloom example: a durable card-fraud investigation agent (TDD-002, "LangGraph Agent
//! Runtime"), ported to graphloom.
//!
//! ```text
//! START → planner → [route_after_planner] → tool_executor → planner → ... → completion → END
//! ```
//!
//! - [`InvestigationState`] is the seed's state, field for field; the audit lists use the
//!   `append` reducer so each step stores only what it added.
//! - The **planner** ([`planner`]) asks the model for `{"tool", "reason", "confidence"}` with
//!   structured output, then enforces the safety rules in code ([`validate_choice`]: context
//!   first, no repeats, the order constraints, known tools only). A model error, a timeout,
//!   an answer that is not the JSON asked for or an answer that breaks a rule all fall back
//!   to the deterministic sequence ([`deterministic_fallback`]); the decision records why.
//! - The **tool executor** ([`executor`]) runs the tool under the per-tool timeout. A tool
//!   that fails or times out is recorded `FAILED` / `TIMED_OUT` and the run goes on.
//! - The six **tools** ([`tools`]) work on a small bundled data set
//!   (`data/transactions.json`, compiled in): context, fraud patterns, similar closed cases
//!   (vector similarity of risk signals), reasoning, recommendations, a drafted detection
//!   rule with a backtest.
//! - **Completion** ([`completion`]) sets the final status, severity and confidence, writes
//!   an audit document to the store and emits metrics.
//! - The state is **checkpointed after every step** in SQLite or PostgreSQL; a crashed
//!   investigation is resumed with [`InvestigationService::resume_investigation`] without
//!   running finished tools again. The whole run has a time limit: past it the
//!   investigation is `TIMED_OUT` (and can still be resumed).
//! - On PostgreSQL, the **investigation record** ([`record`]): one
//!   `ops_agent_investigation_state` row per investigation with the state as JSONB, and its
//!   `ops_agent_tool_execution_log` rows, committed in the transaction of the checkpoint
//!   that ends the investigation (upserted, so a resumed one never gets a second row).
//! - **Observability**: tracing spans `agent.investigation`, `agent.planner`,
//!   `agent.tool.<tool_name>`, `agent.completion`; Prometheus metrics
//!   `ops_agent_planner_decisions_total`, `ops_agent_tool_execution_latency_seconds`,
//!   `ops_agent_investigation_steps`, `ops_agent_investigation_completed_total`
//!   ([`Metrics::registry`], [`Metrics::render`]).
//!
//! ```sh
//! cargo run -p fraud-investigation -- --transaction-id TX-1009   # offline: scripted planner, SQLite in a temp dir
//! cargo run -p fraud-investigation -- --deterministic --transaction-id TX-4003
//! GRAPHLOOM_MODEL=ollama:llama3.2 cargo run -p fraud-investigation -- --transaction-id TX-3004
//! cargo run -p fraud-investigation -- --database-url postgres://localhost/fraud --metrics
//! ```
//!
//! # In code
//!
//! ```
//! use fraud_investigation::{InvestigationService, InvestigationStatus, Settings, Severity};
//! use graphloom_core::checkpoint::InMemorySaver;
//! use std::sync::Arc;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! let service = InvestigationService::standard(Settings::default(), None, Arc::new(InMemorySaver::new()), None)?;
//! let done = service.run_investigation("TX-1009").await?;
//! assert_eq!(done.status, InvestigationStatus::Completed);
//! assert_eq!(done.severity, Severity::Critical);
//! assert_eq!(done.completed_steps.len(), 6);
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod completion;
pub mod config;
pub mod data;
pub mod executor;
pub mod graph;
pub mod metrics;
pub mod offline;
pub mod planner;
pub mod record;
pub mod service;
pub mod state;
pub mod tools;

pub use config::{LangGraphConfig, PlannerConfig, Settings};
pub use data::Dataset;
pub use graph::{
    build_investigation_graph, route_after_planner, GraphParts, COMPLETION, PLANNER, TOOL_EXECUTOR,
};
pub use metrics::Metrics;
pub use planner::{deterministic_fallback, validate_choice, PlannerChoice, PlannerError, RuleViolation};
pub use service::{open_database, record_end, timeout_reason, Database, InvestigationService, ServiceError};
pub use state::{
    create_initial_state, Evidence, InvestigationState, InvestigationStateUpdate, InvestigationStatus,
    PlannerDecision, Recommendation, Severity, ToolExecution, ToolStatus, COMPLETE,
};
pub use tools::{
    Fault, FaultyTool, InvestigationTool, ToolFailure, ToolOutcome, ToolRegistry, FALLBACK_SEQUENCE,
};

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::CompiledGraph;
use graphloom_llm::{DynChatModel, Reply};
use serde_json::json;
use std::sync::{Arc, OnceLock};

/// The id this graph is hosted under.
pub const GRAPH_ID: &str = "fraud_investigation";

/// Environment variable naming a real model (`openai:gpt-4o-mini`, `ollama:llama3.2`, ...).
pub const MODEL_ENV: &str = "GRAPHLOOM_MODEL";

/// The process-wide metrics that [`graph`] reports to (services built with
/// [`InvestigationService::new`] bring their own). Expose
/// `global_metrics().registry()` on a `/metrics` endpoint.
pub fn global_metrics() -> &'static Arc<Metrics> {
    static METRICS: OnceLock<Arc<Metrics>> = OnceLock::new();
    METRICS.get_or_init(|| Arc::new(Metrics::new()))
}

/// The investigation graph with the standard tools over the bundled data set, settings
/// from the environment ([`Settings::from_env`]), `model` as the planner, and
/// [`global_metrics`].
///
/// # Errors
/// When the bundled data set or the graph is broken.
pub fn graph(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
) -> graphloom_core::Result<CompiledGraph<InvestigationState>> {
    let settings = Settings::from_env();
    let data = Dataset::bundled().map_err(|e| graphloom_core::Error::InvalidGraph(e.to_string()))?;
    let registry = ToolRegistry::standard(data, &settings, Some(Arc::clone(&model)))
        .map_err(|e| graphloom_core::Error::InvalidGraph(e.to_string()))?;
    build_investigation_graph(&GraphParts {
        registry: Arc::new(registry),
        llm: Some(model),
        settings,
        metrics: Arc::clone(global_metrics()),
        checkpointer,
        store: Some(store),
    })
}

/// The planner's answers for the happy path of [`sample_input`], in the order a model
/// might give them (similarity before patterns, which the rules allow).
#[must_use]
pub fn offline_script() -> Vec<Reply> {
    [
        (
            tools::CONTEXT_TOOL,
            "No context yet: load the transaction first.",
            0.95,
        ),
        (
            tools::SIMILARITY_TOOL,
            "Compare with closed cases while patterns are pending.",
            0.8,
        ),
        (
            tools::PATTERN_TOOL,
            "Check the card's last hour for known fraud patterns.",
            0.85,
        ),
        (tools::REASONING_TOOL, "Both analyses are in: weigh them.", 0.9),
        (
            tools::RECOMMENDATION_TOOL,
            "Severity is known: recommend actions.",
            0.9,
        ),
        (
            tools::RULE_DRAFT_TOOL,
            "A strong pattern is worth a detection rule.",
            0.8,
        ),
    ]
    .into_iter()
    .map(|(tool, reason, confidence)| {
        Reply::json(json!({"tool": tool, "reason": reason, "confidence": confidence}))
    })
    .collect()
}

/// The planner model [`MODEL_ENV`] names (through [`graphloom_llm::model_from_env`], which
/// reads the provider's key and base URL from the environment); unset or `scripted`: the
/// [`offline::model`], which answers each call from what it asks (the next tool the rules
/// allow; a summary of the assessment), so any number of runs sharing it get the same
/// answers.
///
/// # Errors
/// When [`MODEL_ENV`] names a model that cannot be built: never the script instead.
pub fn default_model() -> graphloom_llm::Result<Arc<dyn DynChatModel>> {
    graphloom_llm::model_from_env(|| {
        // Shared by every run of a served graph: keep no record of what it was asked.
        Arc::new(offline::model().keep_requests(0))
    })
}

/// An input for one run (the update decoder's JSON): the card-testing case `TX-1009`.
#[must_use]
pub fn sample_input() -> serde_json::Value {
    json!({
        "investigation_id": "inv-sample-tx-1009",
        "transaction_id": "TX-1009",
        "max_steps": state::DEFAULT_MAX_STEPS,
    })
}
