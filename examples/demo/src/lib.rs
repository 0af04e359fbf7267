//! The `graphloom` binary of the seed examples: the five seed systems, hosted by the
//! command of `graphloom-cli` (`graphloom serve`, `run`, `threads`, `draw`, `graphs`).
//! [`all`] is the registry; `src/main.rs` hands it to [`graphloom_cli::main`].

use graphloom_cli::{Entry, Graphs};
use graphloom_server::{hosted, GraphDeps, Hosting, RunEnd, RunOutcome};
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
        fraud_entry(),
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

/// Seed 000 as the server hosts it: its `ops_agent_*` metrics (TDD-002 §12) on the
/// server's `/metrics`, its investigation limit (`LANGGRAPH_INVESTIGATION_TIMEOUT_SECONDS`,
/// 120 s by default) as the graph's run limit, and an end hook that writes `TIMED_OUT` /
/// `FAILED` with the reason into the investigation, as the example's service layer does
/// ([`fraud_investigation::record_end`], idempotent as the hook must be).
fn fraud_entry() -> Entry {
    Entry {
        id: fraud_investigation::GRAPH_ID,
        about: "seed 000: planner -> tool executor loop over transaction data",
        factory: Arc::new(|deps: &GraphDeps| {
            deps.metrics
                .export(Arc::clone(fraud_investigation::global_metrics()) as _);
            let model = fraud_investigation::default_model()
                .map_err(|e| graphloom_core::Error::InvalidGraph(e.to_string()))?;
            let limit = fraud_investigation::Settings::from_env()
                .langgraph
                .investigation_timeout;
            let graph =
                fraud_investigation::graph(Arc::clone(&deps.checkpointer), Arc::clone(&deps.store), model)?;
            let investigation = graph.clone();
            Ok(Hosting::new(hosted(graph))
                .run_timeout(limit)
                .on_run_end(move |end: RunEnd| {
                    let graph = investigation.clone();
                    async move {
                        let (status, reason) = match end.outcome {
                            RunOutcome::Timeout => (
                                fraud_investigation::InvestigationStatus::TimedOut,
                                fraud_investigation::timeout_reason(end.timeout.unwrap_or(limit)),
                            ),
                            RunOutcome::Error => (
                                fraud_investigation::InvestigationStatus::Failed,
                                end.error.unwrap_or_default(),
                            ),
                            _ => return Ok(()),
                        };
                        fraud_investigation::record_end(
                            &graph,
                            fraud_investigation::global_metrics(),
                            &end.thread_id,
                            status,
                            reason,
                        )
                        .await
                        .map(drop)
                    }
                })
                .into_hosted())
        }),
        sample: fraud_investigation::sample_input,
    }
}
