//! Building and running graphs.

pub(crate) mod builder;
pub(crate) mod compiled;
mod defaults;
mod history;
pub(crate) mod node;
pub(crate) mod spec;

pub use builder::{EdgeSources, StateGraph};
pub use compiled::{CompiledGraph, EventStream, RunEvent, RunOutput, RunStatus, RunStream};
pub use defaults::NodeDefaults;
pub use history::{HistoryQuery, PendingTask, StateSnapshot};
pub use node::SubgraphInfo;
