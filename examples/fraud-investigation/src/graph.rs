//! The graph (TDD-002 §3):
//!
//! ```text
//! START → planner → [route_after_planner] → tool_executor → planner → ... → completion → END
//!                          ↘ completion (next_action == "COMPLETE", or past max_steps)
//! ```

use crate::completion::make_completion_node;
use crate::config::Settings;
use crate::executor::make_executor_node;
use crate::metrics::Metrics;
use crate::planner::{make_planner_node, Planner};
use crate::state::{InvestigationState, COMPLETE};
use crate::tools::ToolRegistry;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, RetryPolicy, StateGraph, END, START};
use graphloom_llm::DynChatModel;
use std::sync::Arc;
use std::time::Duration;

/// Node names.
pub const PLANNER: &str = "planner";
/// The tool executor node.
pub const TOOL_EXECUTOR: &str = "tool_executor";
/// The completion node.
pub const COMPLETION: &str = "completion";

/// Where to go after the planner.
///
/// The planner itself completes once `step_count` reaches `max_steps` (so the last allowed
/// tool still runs); the check here is the backstop for a state edited from outside. It
/// compares with `>` where the seed's router has `>=`: the planner increments `step_count`
/// when it selects a tool, so `>=` here would skip the tool the planner just selected.
#[must_use]
pub fn route_after_planner(state: &InvestigationState) -> &'static str {
    if state.next_action == COMPLETE || state.step_count > state.max_steps {
        COMPLETION
    } else {
        TOOL_EXECUTOR
    }
}

/// Everything the graph is built from.
#[derive(Clone)]
pub struct GraphParts {
    /// The tools.
    pub registry: Arc<ToolRegistry>,
    /// The planner model (`None`: deterministic planning).
    pub llm: Option<Arc<dyn DynChatModel>>,
    /// Settings.
    pub settings: Settings,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Where state is persisted after every step.
    pub checkpointer: Arc<dyn DynCheckpointer>,
    /// Where completion writes the audit document (optional).
    pub store: Option<Arc<dyn DynStore>>,
}

impl std::fmt::Debug for GraphParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphParts")
            .field("registry", &self.registry)
            .field("settings", &self.settings)
            .field("store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

/// Build and compile the investigation graph.
///
/// # Errors
/// When the graph does not compile (it does; the error is the builder's).
pub fn build_investigation_graph(
    parts: &GraphParts,
) -> graphloom_core::Result<CompiledGraph<InvestigationState>> {
    let planner = Arc::new(Planner::new(
        parts.llm.clone(),
        Arc::clone(&parts.registry),
        parts.settings.clone(),
        Arc::clone(&parts.metrics),
    ));
    let mut g = StateGraph::<InvestigationState>::new()
        .name("fraud-investigation")
        .add_node(PLANNER, make_planner_node(planner))
        .add_node(
            TOOL_EXECUTOR,
            make_executor_node(
                Arc::clone(&parts.registry),
                Arc::clone(&parts.metrics),
                parts.settings.langgraph.tool_timeout,
            ),
        )
        .add_node(COMPLETION, make_completion_node(Arc::clone(&parts.metrics)))
        .add_edge(START, PLANNER)
        .add_conditional_edges_map(
            PLANNER,
            |s: &InvestigationState| route_after_planner(s),
            [(TOOL_EXECUTOR, TOOL_EXECUTOR), (COMPLETION, COMPLETION)],
        )
        .add_edge(TOOL_EXECUTOR, PLANNER)
        .add_edge(COMPLETION, END)
        // Writing the audit document may hit a transient store error.
        .retry(
            COMPLETION,
            RetryPolicy::attempts(3)
                .initial_interval(Duration::from_millis(100))
                .jitter(false),
        )
        // On PostgreSQL, the investigation record goes with the final checkpoint.
        .checkpointer_dyn(crate::record::with_record_hook(Arc::clone(&parts.checkpointer)));
    if let Some(store) = &parts.store {
        g = g.store_dyn(Arc::clone(store));
    }
    g.compile()
}
