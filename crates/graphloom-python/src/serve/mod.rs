//! `graphloom serve` for Python graphs: the Rust server (`graphloom-cli`'s serve, every
//! option of it) hosting graphs that run in Python.
//!
//! The package's command (`graphloom/server/__init__.py`) reads `langgraph.json`, imports
//! the graphs, starts an event loop on a thread of its own and calls [`serve`] with the
//! arguments and one bridge per graph; [`serve`] releases the GIL and runs the server
//! until it stops. See [`graph`] for how a call reaches Python and comes back.

mod graph;
mod sink;

pub(crate) use sink::Sink;

use graph::{Described, PyGraph};
use graphloom_cli::{Entry, Graphs};
use graphloom_server::HostedGraph;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;

/// Serve `graphs` (`(graph id, bridge)` pairs) with the command line `argv` (`graphloom
/// serve ...`, the program's name first), the store's vector index `index` (`(dims,
/// fields, embed)`, as the Python stores take it: `store.index` of langgraph.json) used by
/// the server's own store routes too. Returns the exit code; blocks until the server stops
/// (Ctrl-C), without the GIL.
#[pyfunction]
#[pyo3(signature = (argv, graphs, index=None))]
pub(crate) fn serve(
    py: Python<'_>,
    argv: Vec<String>,
    graphs: Vec<(String, Py<PyAny>)>,
    index: crate::store::IndexArg,
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
    let code = py.detach(move || graphloom_cli::main_from(graphs, argv));
    Ok(if code == std::process::ExitCode::SUCCESS {
        0
    } else {
        1
    })
}
