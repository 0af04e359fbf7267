//! The hosted-graph abstraction: what the server runs, whatever kind of graph it is.
//!
//! | module | what |
//! |---|---|
//! | [`graph`] | [`HostedGraph`], a graph behind JSON (implemented for every compiled graph), its factory and what it is compiled against ([`GraphDeps`]) |
//! | [`hosting`] | [`Hosting`], a hosted graph with its own run limit and end hook |
//! | [`run_end`] | [`RunEnd`], [`RunOutcome`] and the [`RunEndHook`] that hears them |
//! | [`mirror`] | [`ThreadCheckpoints`]: checkpoints of the same threads kept elsewhere, deleted, copied and pruned with the server's |

pub mod graph;
pub mod hosting;
pub mod mirror;
pub mod run_end;

pub use graph::{
    checkpoint_json, command_from_json, factory, hosted, resume_from_json, thread_state_json, GraphDeps,
    GraphFactory, GraphMetrics, HostedGraph, JsonCommand, JsonRunEvent, JsonRunOutput, JsonRunRequest,
    SharedRegistry,
};
pub use hosting::Hosting;
pub(crate) use mirror::Mirrored;
pub use mirror::ThreadCheckpoints;
pub(crate) use run_end::tighter;
pub use run_end::{RunEnd, RunEndHook, RunOutcome, RUN_END_HOOK_LIMIT};
