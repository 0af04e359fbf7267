//! The native module of graphloom's Python package (`graphloom._native`).
//!
//! It wraps the typed checkpoint tables of [`graphloom_sqlite::typed`] and
//! [`graphloom_postgres::typed`]: the Python savers (`graphloom.checkpoint.sqlite`,
//! `graphloom.checkpoint.postgres`) serialize checkpoints with their own `serde` and hand
//! the bytes here; storage, transactions and durability are graphloom's. Every call releases
//! the GIL while Rust works (SQLite reads on the calling thread, writes waiting for the
//! writer thread's group commit), so other Python threads and the event loop keep running.
//!
//! The stores (`graphloom.store.sqlite`, `graphloom.store.postgres`) wrap graphloom's
//! [`graphloom_core::store::Store`] implementations the same way (see `store.rs`).
//!
//! `serve` runs graphloom's server over Python LangGraph graphs (the package's `graphloom
//! serve` command; see `serve/`).
//!
//! Build it with maturin (`pip install .` from the repository root); the `extension-module`
//! feature is maturin's to turn on.

mod backend;
mod core;
mod pg;
mod runtime;
mod serve;
mod store;

use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    StorageError,
    pyo3::exceptions::PyException,
    "A storage operation of graphloom failed (the message names the cause)."
);

/// A graphloom error as a Python `StorageError`.
pub(crate) fn storage_error(e: &graphloom_core::Error) -> PyErr {
    StorageError::new_err(e.to_string())
}

/// The module: the savers' and the stores' cores, and the error type.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<core::Core>()?;
    m.add_class::<store::StoreCore>()?;
    m.add_class::<serve::Sink>()?;
    m.add_function(wrap_pyfunction!(serve::serve, m)?)?;
    m.add("StorageError", m.py().get_type::<StorageError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
