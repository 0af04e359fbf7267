//! Prometheus metrics served at `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StatusLabel {
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NodeLabel {
    pub graph: String,
    pub node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TokenLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelTokenLabel {
    pub model: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelLabel {
    pub model: String,
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    pub(crate) runs_finished: Family<StatusLabel, Counter>,
    pub(crate) runs_current: Family<StatusLabel, Gauge>,
    pub(crate) run_seconds: Histogram,
    pub(crate) node_seconds: Family<NodeLabel, Histogram>,
    pub(crate) queue_depth: Gauge,
    pub(crate) tokens: Family<TokenLabel, Counter>,
    pub(crate) cost: Counter<f64, AtomicU64>,
    /// Tokens by model (`response_metadata.model_name`) and kind.
    pub(crate) tokens_by_model: Family<ModelTokenLabel, Counter>,
    /// Cost by model.
    pub(crate) cost_by_model: Family<ModelLabel, Counter<f64, AtomicU64>>,
    /// Runs taken up again from their last checkpoint after a transient database fault.
    pub(crate) run_retries: Counter,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("graphloom");
        let runs_finished = Family::<StatusLabel, Counter>::default();
        let runs_current = Family::<StatusLabel, Gauge>::default();
        let run_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 20));
        let node_seconds = Family::<NodeLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 20))
        });
        let queue_depth = Gauge::default();
        let tokens = Family::<TokenLabel, Counter>::default();
        let cost = Counter::<f64, AtomicU64>::default();
        registry.register(
            "runs_finished",
            "Runs ended by this process, by final status",
            runs_finished.clone(),
        );
        registry.register("runs", "Runs in the database, by status", runs_current.clone());
        registry.register("run_duration_seconds", "Wall time of runs", run_seconds.clone());
        registry.register(
            "node_duration_seconds",
            "Wall time of node executions",
            node_seconds.clone(),
        );
        registry.register("queue_depth", "Pending runs in the queue", queue_depth.clone());
        registry.register("model_tokens", "Model tokens seen in run outputs", tokens.clone());
        registry.register(
            "model_cost_usd",
            "Model cost in US dollars (known prices only)",
            cost.clone(),
        );
        let tokens_by_model = Family::<ModelTokenLabel, Counter>::default();
        let cost_by_model = Family::<ModelLabel, Counter<f64, AtomicU64>>::default();
        registry.register(
            "model_tokens_by_model",
            "Model tokens seen in run outputs, by model",
            tokens_by_model.clone(),
        );
        registry.register(
            "model_cost_by_model_usd",
            "Model cost in US dollars by model (known prices only)",
            cost_by_model.clone(),
        );
        let run_retries = Counter::default();
        registry.register(
            "run_fault_retries",
            "Runs taken up again from their last checkpoint after a transient database fault",
            run_retries.clone(),
        );
        Self {
            registry,
            run_retries,
            tokens_by_model,
            cost_by_model,
            runs_finished,
            runs_current,
            run_seconds,
            node_seconds,
            queue_depth,
            tokens,
            cost,
        }
    }

    /// The text exposition.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
