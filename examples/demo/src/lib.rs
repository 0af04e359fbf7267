//! The `graphloom` binary of the seed examples: the five seed systems, hosted by the
//! command of `graphloom-cli` (`graphloom serve`, `run`, `threads`, `draw`, `graphs`).
//! [`all`] is the registry; `src/main.rs` hands it to [`graphloom_cli::main`].

use graphloom_cli::{Entry, Graphs};
use graphloom_server::{hosted, GraphDeps};
use std::sync::Arc;

macro_rules! entry {
    ($krate:ident, $about:literal) => {
        entry!($krate, $about, |_deps: &GraphDeps| {})
    };
    // `export`: what else the graph hands the server (its metrics).
    ($krate:ident, $about:literal, $export:expr) => {
        Entry {
            id: $krate::GRAPH_ID,
            about: $about,
            factory: Arc::new(|deps: &GraphDeps| {
                ($export)(deps);
                // `graphloom` checks GRAPHLOOM_MODEL before building any graph; this
                // is the same error for a program that calls the factory directly.
                let model = $krate::default_model()
                    .map_err(|e| graphloom_core::Error::InvalidGraph(e.to_string()))?;
                $krate::graph(Arc::clone(&deps.checkpointer), Arc::clone(&deps.store), model).map(hosted)
            }),
            sample: $krate::sample_input,
        }
    };
}

/// Every known graph, by id.
#[must_use]
pub fn all() -> Graphs {
    Graphs::new(vec![
        entry!(
            fraud_investigation,
            "seed 000: planner -> tool executor loop over transaction data",
            // The `ops_agent_*` metrics of TDD-002 §12, on the server's `/metrics`.
            |deps: &GraphDeps| deps
                .metrics
                .export(Arc::clone(fraud_investigation::global_metrics()) as _)
        ),
        entry!(
            support_chat,
            "seed 001: ingress -> planner -> tools -> verifier -> streaming generator"
        ),
        entry!(
            memory_supervisor,
            "seed 002: supervisor routing to memory sub-graphs, store-backed"
        ),
        entry!(
            chat_runtime,
            "seed 003: chat executor with a redacting tool pipeline and usage events"
        ),
        entry!(
            permit_filing,
            "seed 004: permit pipeline with an approval gate and budgets"
        ),
    ])
}
