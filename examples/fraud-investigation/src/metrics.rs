//! Prometheus metrics (TDD-002 §12), with `prometheus-client`.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `ops_agent_planner_decisions_total` | counter | `selected_tool`, `used_fallback` |
//! | `ops_agent_tool_execution_latency_seconds` | histogram | `tool_name`, `status` |
//! | `ops_agent_investigation_steps` | histogram (buckets 1-20) | |
//! | `ops_agent_investigation_completed_total` | counter | `status`, `severity` |
//!
//! One [`Metrics`] per service (tests make their own, so they never see each other's
//! counts); [`Metrics::registry`] exposes the registry for a `/metrics` endpoint and
//! [`Metrics::render`] encodes it in the text exposition format.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// `ops_agent_planner_decisions_total` (the registry adds `_total` to counters).
pub const PLANNER_DECISIONS: &str = "ops_agent_planner_decisions";
/// `ops_agent_tool_execution_latency_seconds`.
pub const TOOL_LATENCY: &str = "ops_agent_tool_execution_latency_seconds";
/// `ops_agent_investigation_steps`.
pub const INVESTIGATION_STEPS: &str = "ops_agent_investigation_steps";
/// `ops_agent_investigation_completed_total`.
pub const INVESTIGATION_COMPLETED: &str = "ops_agent_investigation_completed";

/// Labels of the planner decision counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// A tool or `COMPLETE`.
    pub selected_tool: String,
    /// `"true"` or `"false"`.
    pub used_fallback: String,
}

/// Labels of the tool latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    /// The tool.
    pub tool_name: String,
    /// `SUCCESS`, `FAILED` or `TIMED_OUT`.
    pub status: String,
}

/// Labels of the completion counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CompletedLabels {
    /// Final status.
    pub status: String,
    /// Final severity.
    pub severity: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ])
}

/// The agent's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    planner_decisions: Family<DecisionLabels, Counter>,
    tool_latency: Family<ToolLabels, Histogram, fn() -> Histogram>,
    steps: Histogram,
    completed: Family<CompletedLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Fresh metrics in a fresh registry.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let planner_decisions = Family::<DecisionLabels, Counter>::default();
        let tool_latency: Family<ToolLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let steps = Histogram::new((1..=20).map(f64::from));
        let completed = Family::<CompletedLabels, Counter>::default();
        registry.register(
            PLANNER_DECISIONS,
            "Planner decisions by selected tool and whether the deterministic fallback chose it",
            planner_decisions.clone(),
        );
        registry.register(
            TOOL_LATENCY,
            "Tool execution latency by tool and outcome",
            tool_latency.clone(),
        );
        registry.register(
            INVESTIGATION_STEPS,
            "Tool steps taken per finished investigation",
            steps.clone(),
        );
        registry.register(
            INVESTIGATION_COMPLETED,
            "Finished investigations by final status and severity",
            completed.clone(),
        );
        Self {
            registry,
            planner_decisions,
            tool_latency,
            steps,
            completed,
        }
    }

    /// The registry (for a `/metrics` endpoint).
    #[must_use]
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The metrics in the Prometheus text exposition format.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Count a planner decision.
    pub fn planner_decision(&self, selected_tool: &str, used_fallback: bool) {
        self.planner_decisions
            .get_or_create(&DecisionLabels {
                selected_tool: selected_tool.to_owned(),
                used_fallback: used_fallback.to_string(),
            })
            .inc();
    }

    /// Observe a tool execution.
    pub fn tool_execution(&self, tool_name: &str, status: &str, seconds: f64) {
        self.tool_latency
            .get_or_create(&ToolLabels {
                tool_name: tool_name.to_owned(),
                status: status.to_owned(),
            })
            .observe(seconds);
    }

    /// Record a finished investigation.
    pub fn investigation_finished(&self, status: &str, severity: &str, steps: u32) {
        self.completed
            .get_or_create(&CompletedLabels {
                status: status.to_owned(),
                severity: severity.to_owned(),
            })
            .inc();
        self.steps.observe(f64::from(steps));
    }

    /// The planner decision count for these labels (for tests and reports).
    #[must_use]
    pub fn planner_decision_count(&self, selected_tool: &str, used_fallback: bool) -> u64 {
        self.planner_decisions
            .get_or_create(&DecisionLabels {
                selected_tool: selected_tool.to_owned(),
                used_fallback: used_fallback.to_string(),
            })
            .get()
    }

    /// The completion count for these labels.
    #[must_use]
    pub fn completed_count(&self, status: &str, severity: &str) -> u64 {
        self.completed
            .get_or_create(&CompletedLabels {
                status: status.to_owned(),
                severity: severity.to_owned(),
            })
            .get()
    }
}

/// The registry, for a server that exports it (`graphloom serve` does: `GraphDeps::metrics`).
impl AsRef<Registry> for Metrics {
    fn as_ref(&self) -> &Registry {
        &self.registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_uses_the_seed_names() {
        let m = Metrics::new();
        m.planner_decision("context_tool", false);
        m.tool_execution("context_tool", "SUCCESS", 0.01);
        m.investigation_finished("COMPLETED", "LOW", 6);
        let text = m.render();
        for name in [
            "ops_agent_planner_decisions_total{selected_tool=\"context_tool\",used_fallback=\"false\"} 1",
            "ops_agent_tool_execution_latency_seconds_count{tool_name=\"context_tool\",status=\"SUCCESS\"} 1",
            "ops_agent_investigation_steps_bucket{le=\"20.0\"} 1",
            "ops_agent_investigation_completed_total{status=\"COMPLETED\",severity=\"LOW\"} 1",
        ] {
            assert!(text.contains(name), "missing `{name}` in\n{text}");
        }
    }
}
