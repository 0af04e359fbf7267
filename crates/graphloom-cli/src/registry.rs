//! The graphs the command knows: the five seed examples.

use graphloom_server::{hosted, GraphDeps, GraphFactory};
use serde_json::Value;
use std::sync::Arc;

/// A known graph.
pub struct Entry {
    /// Graph id (also its assistant name in the server).
    pub id: &'static str,
    /// One line about it.
    pub about: &'static str,
    /// Compiles it against a checkpointer and store.
    pub factory: GraphFactory,
    /// An input that runs its happy path.
    pub sample: fn() -> Value,
}

macro_rules! entry {
    ($krate:ident, $about:literal) => {
        Entry {
            id: $krate::GRAPH_ID,
            about: $about,
            factory: Arc::new(|deps: &GraphDeps| {
                $krate::graph(
                    Arc::clone(&deps.checkpointer),
                    Arc::clone(&deps.store),
                    $krate::default_model(),
                )
                .map(hosted)
            }),
            sample: $krate::sample_input,
        }
    };
}

/// Every known graph, by id.
#[must_use]
pub fn all() -> Vec<Entry> {
    vec![
        entry!(
            fraud_investigation,
            "seed 000: planner -> tool executor loop over transaction data"
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
    ]
}

/// The entry named `id`, or an error listing the known ones.
///
/// # Errors
/// When no graph has that id.
pub fn find(id: &str) -> anyhow::Result<Entry> {
    let all = all();
    let known: Vec<&str> = all.iter().map(|e| e.id).collect();
    let wanted = id.replace('-', "_");
    let known_list = known.join(", ");
    all.into_iter()
        .find(|e| e.id == wanted)
        .ok_or_else(|| anyhow::anyhow!("unknown graph `{id}`; known graphs: {known_list}"))
}
