//! `Core`: the typed checkpoint tables of one database (a SQLite file or a PostgreSQL
//! database), as the Python savers call them. Values cross as `(type, bytes)` pairs the
//! Python side's `serde` made.

use crate::backend::Backend;
use crate::runtime::block_on;
use crate::storage_error;
use graphloom_core::checkpoint::typed::{TypedPut, TypedQuery, TypedTuple, TypedValue, TypedWrites};
use graphloom_sqlite::{SqliteOptions, Synchronous};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::{Map, Value};

/// `(channel, type, bytes)`.
type ValueRow = (String, String, Vec<u8>);
/// `(task_id, channel, type, bytes)`.
type WriteRow = (String, String, String, Vec<u8>);
/// A checkpoint as Python reads it: `(thread_id, checkpoint_ns, checkpoint_id, parent_id,
/// type, bytes, metadata_json, values, writes)`.
type TupleRow = (
    String,
    String,
    String,
    Option<String>,
    String,
    Vec<u8>,
    String,
    Vec<ValueRow>,
    Vec<WriteRow>,
);

fn row(t: TypedTuple) -> TupleRow {
    (
        t.thread_id,
        t.checkpoint_ns,
        t.checkpoint_id,
        t.parent_id,
        t.checkpoint.type_tag,
        t.checkpoint.bytes,
        t.metadata,
        t.values
            .into_iter()
            .map(|(c, v)| (c, v.type_tag, v.bytes))
            .collect(),
        t.writes
            .into_iter()
            .map(|w| (w.task_id, w.channel, w.value.type_tag, w.value.bytes))
            .collect(),
    )
}

/// A JSON object given as text.
fn json_object(text: &str, what: &str) -> PyResult<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(PyValueError::new_err(format!("{what} must be a JSON object"))),
        Err(e) => Err(PyValueError::new_err(format!("{what} is not JSON: {e}"))),
    }
}

/// SQLite's `synchronous` setting from its Python name, `"full"` or `"normal"`.
pub(crate) fn synchronous_setting(name: &str) -> PyResult<Synchronous> {
    match name {
        "full" => Ok(Synchronous::Full),
        "normal" => Ok(Synchronous::Normal),
        other => Err(PyValueError::new_err(format!(
            "synchronous must be \"full\" or \"normal\", not {other:?}"
        ))),
    }
}

/// The typed checkpoint tables of one database: a SQLite file (WAL, written through
/// graphloom's writer thread) or a PostgreSQL database (over a connection pool). Safe to
/// share between threads.
#[pyclass(frozen, module = "graphloom._native")]
pub(crate) struct Core {
    saver: Backend,
}

impl Core {
    /// The tables this saver writes.
    pub(crate) fn backend(&self) -> &Backend {
        &self.saver
    }
}

#[pymethods]
impl Core {
    /// Open (creating if needed) the SQLite file at `path` and its tables. `synchronous`
    /// is `"full"` (a write returns once fsynced) or `"normal"` (the last commits before a
    /// power loss may be lost; a process crash loses nothing).
    #[staticmethod]
    #[pyo3(signature = (path, synchronous="full"))]
    fn sqlite(py: Python<'_>, path: String, synchronous: &str) -> PyResult<Self> {
        let opts = SqliteOptions::new(path).synchronous(synchronous_setting(synchronous)?);
        let saver = py
            .detach(|| block_on(graphloom_sqlite::typed::TypedSaver::open(opts)))?
            .map_err(|e| storage_error(&e))?;
        Ok(Self {
            saver: Backend::Sqlite(saver),
        })
    }

    /// Connect to the PostgreSQL database at `url` and create its tables if needed.
    #[staticmethod]
    fn postgres(py: Python<'_>, url: &str) -> PyResult<Self> {
        let url = url.to_owned();
        let saver = py
            .detach(|| {
                block_on(async {
                    let pool = crate::pg::connect(&url).await?;
                    graphloom_postgres::typed::TypedSaver::from_pool(pool).await
                })
            })?
            .map_err(|e| storage_error(&e))?;
        Ok(Self {
            saver: Backend::Postgres(saver),
        })
    }

    /// Store a checkpoint and the channel versions it writes first.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (thread_id, checkpoint_ns, checkpoint_id, parent_id, type_tag, checkpoint, metadata, channel_versions, blobs))]
    fn put(
        &self,
        py: Python<'_>,
        thread_id: String,
        checkpoint_ns: String,
        checkpoint_id: String,
        parent_id: Option<String>,
        type_tag: String,
        checkpoint: Vec<u8>,
        metadata: &str,
        channel_versions: Vec<(String, String)>,
        blobs: Vec<(String, String, String, Vec<u8>)>,
    ) -> PyResult<()> {
        let put = TypedPut {
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_id,
            checkpoint: TypedValue::new(type_tag, checkpoint),
            channel_versions,
            blobs: blobs
                .into_iter()
                .map(|(c, v, t, b)| (c, v, TypedValue::new(t, b)))
                .collect(),
            metadata: json_object(metadata, "metadata")?,
        };
        py.detach(|| block_on(self.saver.put(put)))?
            .map_err(|e| storage_error(&e))
    }

    /// Store one task's writes: `(idx, channel, type, bytes)`; `replace` for special
    /// channels (a write again replaces the stored one).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes, replace))]
    fn put_writes(
        &self,
        py: Python<'_>,
        thread_id: String,
        checkpoint_ns: String,
        checkpoint_id: String,
        task_id: String,
        task_path: String,
        writes: Vec<(i64, String, String, Vec<u8>)>,
        replace: bool,
    ) -> PyResult<()> {
        let writes = TypedWrites {
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            task_id,
            task_path,
            writes: writes
                .into_iter()
                .map(|(i, c, t, b)| (i, c, TypedValue::new(t, b)))
                .collect(),
            replace,
        };
        py.detach(|| block_on(self.saver.put_writes(writes)))?
            .map_err(|e| storage_error(&e))
    }

    /// The checkpoint `checkpoint_id` (the newest when `None`) of a thread's namespace.
    #[pyo3(signature = (thread_id, checkpoint_ns, checkpoint_id=None))]
    fn get_tuple(
        &self,
        py: Python<'_>,
        thread_id: &str,
        checkpoint_ns: &str,
        checkpoint_id: Option<&str>,
    ) -> PyResult<Option<TupleRow>> {
        let (thread_id, checkpoint_ns) = (thread_id.to_owned(), checkpoint_ns.to_owned());
        let id = checkpoint_id.map(str::to_owned);
        py.detach(|| block_on(self.saver.get_tuple(&thread_id, &checkpoint_ns, id.as_deref())))?
            .map(|t| t.map(row))
            .map_err(|e| storage_error(&e))
    }

    /// Checkpoints newest first; `filter` is a JSON object of metadata keys.
    #[pyo3(signature = (thread_id=None, checkpoint_ns=None, filter=None, before=None, limit=None))]
    fn list(
        &self,
        py: Python<'_>,
        thread_id: Option<String>,
        checkpoint_ns: Option<String>,
        filter: Option<&str>,
        before: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<Vec<TupleRow>> {
        let query = TypedQuery {
            thread_id,
            checkpoint_ns,
            filter: filter
                .map(|f| json_object(f, "filter"))
                .transpose()?
                .unwrap_or_default(),
            before,
            limit,
        };
        py.detach(|| block_on(self.saver.list(&query)))?
            .map(|ts| ts.into_iter().map(row).collect())
            .map_err(|e| storage_error(&e))
    }

    /// Delete a thread (every namespace).
    fn delete_thread(&self, py: Python<'_>, thread_id: &str) -> PyResult<()> {
        let thread_id = thread_id.to_owned();
        py.detach(|| block_on(self.saver.delete_thread(&thread_id)))?
            .map_err(|e| storage_error(&e))
    }

    /// Delete the checkpoints of these runs.
    fn delete_for_runs(&self, py: Python<'_>, run_ids: Vec<String>) -> PyResult<()> {
        py.detach(|| block_on(self.saver.delete_for_runs(run_ids)))?
            .map_err(|e| storage_error(&e))
    }

    /// Copy a thread under another id.
    fn copy_thread(&self, py: Python<'_>, source: &str, target: &str) -> PyResult<()> {
        let (source, target) = (source.to_owned(), target.to_owned());
        py.detach(|| block_on(self.saver.copy_thread(&source, &target)))?
            .map_err(|e| storage_error(&e))
    }

    /// Prune threads to their newest checkpoint per namespace (`keep_latest`) or to nothing.
    fn prune(&self, py: Python<'_>, thread_ids: Vec<String>, keep_latest: bool) -> PyResult<()> {
        py.detach(|| block_on(self.saver.prune(thread_ids, keep_latest)))?
            .map_err(|e| storage_error(&e))
    }

    /// Close the database connections (PostgreSQL's pool); later calls fail.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| block_on(self.saver.close()))
    }
}
