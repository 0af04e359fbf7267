//! How the server hosts one graph beyond running it: its own run limit and an end hook.
//!
//! [`Hosting`] wraps a [`HostedGraph`] and answers [`HostedGraph::run_timeout`] and
//! [`HostedGraph::run_end_hook`] for it; everything else is the wrapped graph's.
//!
//! ```
//! use graphloom_core::{JsonState, JsonUpdate, NodeOutput, StateGraph, END, START};
//! use graphloom_server::{hosted, Hosting, HostedGraph, RunOutcome};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let g = StateGraph::with_shape(JsonState::from_reducer_names([("log", "append")])?)
//!     .add_node("work", |_s: Arc<JsonState>, _rt| async {
//!         let done: JsonUpdate = serde_json::json!({"log": ["worked"]}).as_object().cloned().unwrap_or_default().into();
//!         Ok(NodeOutput::Update(done))
//!     })
//!     .add_edge(START, "work")
//!     .add_edge("work", END)
//!     .compile()?;
//! let g = Hosting::new(hosted(g))
//!     // Runs of this graph stop after 2 minutes, however long the server allows.
//!     .run_timeout(Duration::from_secs(120))
//!     .on_run_end(|end| async move {
//!         if matches!(end.outcome, RunOutcome::Error | RunOutcome::Timeout) {
//!             eprintln!("run {} on {} ended: {:?}", end.run_id, end.thread_id, end.error);
//!         }
//!         Ok::<(), std::convert::Infallible>(())
//!     })
//!     .into_hosted();
//! assert_eq!(g.run_timeout(), Some(Duration::from_secs(120)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::graph::{HostedGraph, JsonRunEvent, JsonRunRequest};
use super::run_end::{tighter, RunEnd, RunEndHook};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use graphloom_core::checkpoint::CheckpointConfig;
use graphloom_core::store::DynStore;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// A hosted graph with its own run limit and end hook, built around any [`HostedGraph`]
/// (see the module docs). Register [`Hosting::into_hosted`] from the graph's factory.
#[derive(Clone)]
pub struct Hosting {
    graph: Arc<dyn HostedGraph>,
    run_timeout: Option<Duration>,
    on_run_end: Option<RunEndHook>,
}

impl std::fmt::Debug for Hosting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosting")
            .field("run_timeout", &self.run_timeout)
            .field("on_run_end", &self.on_run_end.is_some())
            .finish_non_exhaustive()
    }
}

impl Hosting {
    /// `graph` as it is: no limit of its own, no hook.
    #[must_use]
    pub fn new(graph: Arc<dyn HostedGraph>) -> Self {
        Self {
            graph,
            run_timeout: None,
            on_run_end: None,
        }
    }

    /// The graph's own run limit: each run of it gets the smaller of this and the server's
    /// [`ServerConfig::run_timeout`](crate::ServerConfig::run_timeout). Past it the run
    /// ends with status `timeout` (and can be continued from its last checkpoint).
    #[must_use]
    pub fn run_timeout(mut self, limit: Duration) -> Self {
        self.run_timeout = Some(limit);
        self
    }

    /// Call `hook` when a run of the graph ends, with the run and thread ids, the
    /// [`RunOutcome`] and the error's text: the place to write a domain's terminal status
    /// (`FAILED`, `TIMED_OUT`) into the thread's state.
    ///
    /// - The hook runs **before** the run's status is recorded, whatever the outcome (and
    ///   before the thread's values are copied to the thread, so what the hook writes to
    ///   the state shows in both; should the state then not read, a completed run's
    ///   output is copied instead). A crash between the two leaves the run to be taken
    ///   over, and the hook is called again when the retaken run ends: it is **at least
    ///   once**, so make it idempotent. (A completed run of a graph without a hook has its
    ///   status recorded with its last checkpoint, in one commit; a graph with one gives
    ///   that up.)
    /// - It is not called for a run handed back to the queue at shutdown, a run whose
    ///   lease another worker took, a run cancelled with `rollback` (nothing of it is
    ///   kept) or a run whose execution panicked.
    ///
    /// A hook that fails, panics or takes longer than [`RUN_END_HOOK_LIMIT`] is logged
    /// and changes nothing of the run's outcome.
    #[must_use]
    pub fn on_run_end<F, Fut, E>(mut self, hook: F) -> Self
    where
        F: Fn(RunEnd) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display,
    {
        self.on_run_end = Some(RunEndHook::new(hook));
        self
    }

    /// The graph to register.
    #[must_use]
    pub fn into_hosted(self) -> Arc<dyn HostedGraph> {
        Arc::new(self)
    }
}

// Every method of the trait is passed on, the defaulted ones too (a default here would
// hide the wrapped graph's own answer).
impl HostedGraph for Hosting {
    fn node_names(&self) -> Vec<String> {
        self.graph.node_names()
    }
    fn input_schema(&self) -> Value {
        self.graph.input_schema()
    }
    fn check_input(&self, input: &Value) -> Result<(), String> {
        self.graph.check_input(input)
    }
    fn validates_input_schema(&self) -> bool {
        self.graph.validates_input_schema()
    }
    fn output_schema(&self) -> Value {
        self.graph.output_schema()
    }
    fn state_schema(&self) -> Value {
        self.graph.state_schema()
    }
    fn drawing(&self) -> Value {
        self.graph.drawing()
    }
    fn mermaid(&self) -> String {
        self.graph.mermaid()
    }
    fn draw(&self) -> graphloom_core::draw::Drawing {
        self.graph.draw()
    }
    fn subgraphs(&self, recurse: bool) -> Vec<(String, String, Value)> {
        self.graph.subgraphs(recurse)
    }
    fn subgraph_mermaids(&self) -> Vec<(String, String)> {
        self.graph.subgraph_mermaids()
    }
    fn store(&self) -> Option<Arc<dyn DynStore>> {
        self.graph.store()
    }
    fn run_timeout(&self) -> Option<Duration> {
        tighter(self.run_timeout, self.graph.run_timeout())
    }
    fn run_end_hook(&self) -> Option<RunEndHook> {
        self.on_run_end.clone().or_else(|| self.graph.run_end_hook())
    }
    fn drains(&self) -> bool {
        self.graph.drains()
    }
    fn stream(&self, req: JsonRunRequest) -> BoxStream<'static, JsonRunEvent> {
        self.graph.stream(req)
    }
    fn get_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<Option<Value>>> {
        self.graph.get_state(thread_id, checkpoint_id)
    }
    fn history<'a>(
        &'a self,
        thread_id: &'a str,
        filter: Map<String, Value>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, graphloom_core::Result<Vec<Value>>> {
        self.graph.history(thread_id, filter, before, limit)
    }
    fn update_state<'a>(
        &'a self,
        thread_id: &'a str,
        checkpoint_id: Option<&'a str>,
        values: Option<Value>,
        as_node: Option<&'a str>,
    ) -> BoxFuture<'a, graphloom_core::Result<CheckpointConfig>> {
        self.graph.update_state(thread_id, checkpoint_id, values, as_node)
    }
}
