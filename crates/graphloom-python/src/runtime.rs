//! The tokio runtime the Rust backends run on: one per process, made on first use, with one
//! worker thread (the backends do their heavy work on their own threads: SQLite's writer
//! thread and the read connections of the calling thread).

use pyo3::exceptions::PyRuntimeError;
use pyo3::PyResult;
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The process's runtime.
fn runtime() -> PyResult<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("graphloom-python")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start graphloom's tokio runtime: {e}"))
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(e.clone()))
}

/// Run `fut` to completion on the runtime, blocking the calling thread (which has released
/// the GIL).
pub(crate) fn block_on<F: Future>(fut: F) -> PyResult<F::Output> {
    Ok(runtime()?.block_on(fut))
}
