//! `graphloom serve` for Python graphs: the Rust server (`graphloom-cli`'s serve, every
//! option of it) hosting graphs that run in Python.
//!
//! The package's command (`graphloom/server/__init__.py`) reads `langgraph.json`, imports
//! the graphs, starts an event loop on a thread of its own and calls [`serve`] with the
//! arguments and one bridge per graph; [`serve`] releases the GIL and runs the server
//! until it stops. See [`graph`] for how a call reaches Python and comes back.

mod auth;
mod graph;
mod http;
mod sink;

pub(crate) use sink::Sink;

use crate::core::Core;
use futures::future::BoxFuture;
use graph::{Described, PyGraph};
use graphloom_cli::{Entry, Graphs};
use graphloom_server::{HostedGraph, ThreadCheckpoints};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;

/// Serve `graphs` (`(graph id, bridge)` pairs) with the command line `argv` (`graphloom
/// serve ...`, the program's name first), the store's vector index `index` (`(dims,
/// fields, embed)`, as the Python stores take it: `store.index` of langgraph.json) used by
/// the server's own store routes too, and the graphs' saver tables `saver` (the `Core` of
/// their saver), which the server deletes, copies and prunes with its own checkpoints, and
/// `auth`, the bridge of `auth.path`'s `Auth` object (`graphloom/server/_auth.py`), which
/// authenticates and authorizes every request instead of API keys or JWTs, and `http`,
/// the bridge of `http.app`, which answers (without auth) what the server's routes do not.
/// Returns the exit code; blocks until the server stops (Ctrl-C), without the GIL.
#[pyfunction]
#[pyo3(signature = (argv, graphs, index=None, saver=None, auth=None, http=None))]
pub(crate) fn serve(
    py: Python<'_>,
    argv: Vec<String>,
    graphs: Vec<(String, Py<PyAny>)>,
    index: crate::store::IndexArg,
    saver: Option<Py<Core>>,
    auth: Option<Py<PyAny>>,
    http: Option<Py<PyAny>>,
) -> PyResult<u8> {
    let mut entries = Vec::with_capacity(graphs.len());
    for (id, bridge) in graphs {
        let text: String = bridge.bind(py).call_method0("describe")?.extract()?;
        let described: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| PyValueError::new_err(format!("graph {id}: describe() is not JSON: {e}")))?;
        let graph: Arc<dyn HostedGraph> =
            Arc::new(PyGraph::new(Arc::new(bridge), Described::from_json(&described)));
        entries.push(Entry {
            // Ids live as long as the process: the server is started once per process.
            id: Box::leak(id.into_boxed_str()),
            about: "Python graph",
            factory: Arc::new(move |_deps| Ok(Arc::clone(&graph))),
            sample: || serde_json::Value::Null,
        });
    }
    let mut graphs = Graphs::new(entries).with_own_models();
    if let Some(index) = crate::store::index_config(index) {
        graphs = graphs.with_store_index(index);
    }
    if let Some(auth) = auth {
        let authorizes: bool = auth.bind(py).call_method0("authorizes")?.extract()?;
        let auth = Arc::new(auth);
        graphs = graphs.with_server(Arc::new(move |b: graphloom_server::ServerBuilder| {
            b.auth(auth::PyAuth::new(Arc::clone(&auth), authorizes))
        }));
    }
    if let Some(app) = http {
        let routes = http::fallback(Arc::new(app));
        graphs = graphs.with_server(Arc::new(move |b: graphloom_server::ServerBuilder| {
            b.fallback(routes.clone())
        }));
    }
    if let Some(saver) = saver {
        graphs = graphs.with_thread_checkpoints(Arc::new(SaverTables(saver)));
    }
    let code = py.detach(move || graphloom_cli::main_from(graphs, argv));
    Ok(if code == std::process::ExitCode::SUCCESS {
        0
    } else {
        1
    })
}

/// The Python saver's tables as the server's mirror: a Python thread deleted, copied,
/// pruned or rolled back by the server loses or gets its LangGraph checkpoints too, and
/// its storage report counts them.
struct SaverTables(Py<Core>);

impl ThreadCheckpoints for SaverTables {
    fn delete_thread<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, graphloom_core::Result<()>> {
        Box::pin(self.0.get().backend().delete_thread(thread_id))
    }
    fn copy_thread<'a>(
        &'a self,
        source: &'a str,
        target: &'a str,
    ) -> BoxFuture<'a, graphloom_core::Result<()>> {
        Box::pin(self.0.get().backend().copy_thread(source, target))
    }
    fn delete_run<'a>(
        &'a self,
        _thread_id: &'a str,
        run_id: &'a str,
    ) -> BoxFuture<'a, graphloom_core::Result<()>> {
        Box::pin(self.0.get().backend().delete_for_runs(vec![run_id.to_owned()]))
    }
    fn prune_to_latest<'a>(&'a self, thread_id: &'a str) -> BoxFuture<'a, graphloom_core::Result<()>> {
        Box::pin(self.0.get().backend().prune(vec![thread_id.to_owned()], true))
    }
    fn thread_storage<'a>(
        &'a self,
        thread_id: &'a str,
    ) -> BoxFuture<'a, graphloom_core::Result<graphloom_core::checkpoint::ThreadStorage>> {
        Box::pin(self.0.get().backend().thread_storage(thread_id))
    }
}
