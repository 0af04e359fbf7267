//! The investigation tools and the [`ToolRegistry`] (TDD-002 §8).
//!
//! A tool reads the whole state and returns the part of the state it changes
//! ([`ToolOutcome::update`]) plus summaries for its [`crate::ToolExecution`] record. The
//! executor node adds the audit fields (`completed_steps`, `tool_executions`), times the
//! call and enforces the per-tool timeout; tools only do their job.

mod context;
mod pattern;
mod reasoning;
mod recommendation;
mod rule_draft;
mod similarity;

pub use context::ContextTool;
pub use pattern::{PatternTool, PATTERN_NAMES};
pub use reasoning::{fraud_probability, ReasoningTool};
pub use recommendation::RecommendationTool;
pub use rule_draft::{Condition, RuleDraftTool};
pub use similarity::SimilarityTool;

use crate::data::{Dataset, TxSignals};
use crate::state::{InvestigationState, InvestigationStateUpdate, JsonObject};
use futures::future::BoxFuture;
use graphloom_llm::DynChatModel;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// `context_tool`.
pub const CONTEXT_TOOL: &str = "context_tool";
/// `pattern_tool`.
pub const PATTERN_TOOL: &str = "pattern_tool";
/// `similarity_tool`.
pub const SIMILARITY_TOOL: &str = "similarity_tool";
/// `reasoning_tool`.
pub const REASONING_TOOL: &str = "reasoning_tool";
/// `recommendation_tool`.
pub const RECOMMENDATION_TOOL: &str = "recommendation_tool";
/// `rule_draft_tool`.
pub const RULE_DRAFT_TOOL: &str = "rule_draft_tool";

/// The deterministic order the planner falls back to (TDD-002 §4.4). It satisfies every
/// ordering rule of the planner prompt.
pub const FALLBACK_SEQUENCE: [&str; 6] = [
    CONTEXT_TOOL,
    PATTERN_TOOL,
    SIMILARITY_TOOL,
    REASONING_TOOL,
    RECOMMENDATION_TOOL,
    RULE_DRAFT_TOOL,
];

/// What a successful tool returns.
#[derive(Clone, Default)]
pub struct ToolOutcome {
    /// The state fields it sets or appends to.
    pub update: InvestigationStateUpdate,
    /// Summary of its input, for the execution record.
    pub input_summary: JsonObject,
    /// Summary of its output, for the execution record.
    pub output_summary: JsonObject,
}

impl std::fmt::Debug for ToolOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolOutcome")
            .field("input_summary", &self.input_summary)
            .field("output_summary", &self.output_summary)
            .finish_non_exhaustive()
    }
}

/// A tool failure; the message goes to the execution record (and the planner carries on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailure(pub String);

impl ToolFailure {
    /// A failure with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// An investigation tool.
pub trait InvestigationTool: Send + Sync {
    /// The name the planner selects it by.
    fn name(&self) -> &str;
    /// What it does (shown to the planner model).
    fn description(&self) -> &str;
    /// Run against the current state.
    fn execute(&self, state: Arc<InvestigationState>)
        -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>>;
}

/// Registry for investigation tools. Tools register at graph build time.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn InvestigationTool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tool_names())
            .finish()
    }
}

/// A registry error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("Tool already registered: {0}")]
    Duplicate(String),
    /// No tool with this name.
    #[error("Unknown tool: {0}")]
    Unknown(String),
}

impl ToolRegistry {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The six standard tools over `data`.
    ///
    /// # Errors
    /// Never (the six names are distinct); kept fallible like [`Self::register`].
    pub fn standard(
        data: Arc<Dataset>,
        settings: &crate::Settings,
        reasoning_llm: Option<Arc<dyn DynChatModel>>,
    ) -> Result<Self, RegistryError> {
        let mut r = Self::new();
        for t in standard_tools(data, settings, reasoning_llm) {
            r.register(t)?;
        }
        Ok(r)
    }

    /// Register a tool by its name.
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] if the name is taken.
    pub fn register(&mut self, tool: Arc<dyn InvestigationTool>) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Register `tool`, replacing a tool of the same name (for tests and fault injection).
    pub fn replace(&mut self, tool: Arc<dyn InvestigationTool>) {
        self.tools.insert(tool.name().to_owned(), tool);
    }

    /// A tool by name.
    ///
    /// # Errors
    /// [`RegistryError::Unknown`] if there is none.
    pub fn get(&self, name: &str) -> Result<Arc<dyn InvestigationTool>, RegistryError> {
        self.tools
            .get(name)
            .cloned()
            .ok_or_else(|| RegistryError::Unknown(name.to_owned()))
    }

    /// Every tool's name and description.
    #[must_use]
    pub fn list_tools(&self) -> Vec<(String, String)> {
        self.tools
            .values()
            .map(|t| (t.name().to_owned(), t.description().to_owned()))
            .collect()
    }

    /// Whether a tool is registered.
    #[must_use]
    pub fn has(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Registered names, sorted.
    #[must_use]
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }
}

/// The six standard tools.
#[must_use]
pub fn standard_tools(
    data: Arc<Dataset>,
    settings: &crate::Settings,
    reasoning_llm: Option<Arc<dyn DynChatModel>>,
) -> Vec<Arc<dyn InvestigationTool>> {
    let narrative = if settings.reasoning_llm_enabled {
        reasoning_llm
    } else {
        None
    };
    vec![
        Arc::new(ContextTool::new(Arc::clone(&data))),
        Arc::new(PatternTool),
        Arc::new(SimilarityTool::new(
            Arc::clone(&data),
            settings.vector_search_enabled,
        )),
        Arc::new(ReasoningTool::new(narrative, settings.planner.timeout)),
        Arc::new(RecommendationTool),
        Arc::new(RuleDraftTool::new(data)),
    ]
}

// ── helpers shared by the tools ───────────────────────────────────────────

/// A JSON object from a `json!({...})` value (anything else gives an empty object).
pub(crate) fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The risk signals context_tool stored, or why there are none.
pub(crate) fn context_signals(state: &InvestigationState) -> Result<TxSignals, ToolFailure> {
    if state.context.is_empty() {
        return Err(ToolFailure::new(
            "no transaction context: context_tool has not produced one",
        ));
    }
    let v = state
        .context
        .get("signals")
        .cloned()
        .ok_or_else(|| ToolFailure::new("the transaction context has no signals"))?;
    serde_json::from_value(v)
        .map_err(|e| ToolFailure::new(format!("the context's signals do not decode: {e}")))
}

/// The input summary most tools use.
pub(crate) fn input_of(state: &InvestigationState) -> JsonObject {
    obj(serde_json::json!({
        "transaction_id": state.transaction_id,
        "completed_steps": state.completed_steps.len(),
    }))
}

/// Round to three decimals.
pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A tool that sleeps, fails or panics: for tests and demos of the executor's handling.
pub struct FaultyTool {
    name: String,
    fault: Fault,
}

/// What a [`FaultyTool`] does.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Return this error.
    Fail(String),
    /// Never return.
    Hang,
    /// Sleep this long, then fail.
    SlowThenFail(Duration),
    /// Panic.
    Panic,
}

impl FaultyTool {
    /// A tool named `name` (usually a standard tool's name, to replace it) that does `fault`.
    pub fn new(name: impl Into<String>, fault: Fault) -> Self {
        Self {
            name: name.into(),
            fault,
        }
    }
}

impl InvestigationTool for FaultyTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "a tool with an injected fault"
    }
    fn execute(
        &self,
        _state: Arc<InvestigationState>,
    ) -> BoxFuture<'static, Result<ToolOutcome, ToolFailure>> {
        let fault = self.fault.clone();
        Box::pin(async move {
            match fault {
                Fault::Fail(m) => Err(ToolFailure(m)),
                Fault::Hang => {
                    futures::future::pending::<()>().await;
                    Err(ToolFailure::new("unreachable"))
                }
                Fault::SlowThenFail(d) => {
                    tokio::time::sleep(d).await;
                    Err(ToolFailure::new("slow tool gave up"))
                }
                Fault::Panic => panic!("injected panic"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_rejects_duplicates_and_unknown_names() {
        let data = Dataset::bundled().unwrap();
        let mut r = ToolRegistry::standard(data, &crate::Settings::default(), None).unwrap();
        assert_eq!(r.tool_names().len(), 6);
        assert!(r.has(CONTEXT_TOOL));
        let dup = r.register(Arc::new(FaultyTool::new(CONTEXT_TOOL, Fault::Hang)));
        assert_eq!(dup, Err(RegistryError::Duplicate(CONTEXT_TOOL.into())));
        assert!(matches!(r.get("nope"), Err(RegistryError::Unknown(_))));
        assert_eq!(r.list_tools().len(), 6);
    }
}
