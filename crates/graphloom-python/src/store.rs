//! `StoreCore`: graphloom's long-term memory store (SQLite's or PostgreSQL's) as the Python
//! stores (`graphloom.store.sqlite`, `graphloom.store.postgres`) call it.
//!
//! A batch of LangGraph ops crosses as one JSON array and its results come back as one:
//! values are JSON objects on both sides, and one crossing per batch keeps the GIL released
//! for the whole of the Rust work. Embeddings are made by a Python callable (the index's
//! `embed`), called back with the GIL held only for that call.

use crate::runtime::block_on;
use crate::storage_error;
use futures::future::BoxFuture;
use graphloom_core::store::{
    DynStore, Embedder, IndexConfig, IndexFields, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery,
    TtlConfig,
};
use graphloom_core::{BackendError, BackendErrorKind, Error, Result};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// One LangGraph op, as `graphloom/store/_base.py` encodes it.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    /// `GetOp`.
    Get {
        ns: Vec<String>,
        key: String,
        refresh: bool,
    },
    /// `PutOp`: `value` `None` deletes; `index` `false` skips embedding, a list names the
    /// fields; `ttl` in seconds.
    Put {
        ns: Vec<String>,
        key: String,
        value: Option<Map<String, Value>>,
        #[serde(default)]
        index: Option<Value>,
        #[serde(default)]
        ttl: Option<f64>,
    },
    /// `SearchOp`.
    Search {
        ns: Vec<String>,
        #[serde(default)]
        filter: Option<Map<String, Value>>,
        #[serde(default)]
        query: Option<String>,
        limit: usize,
        offset: usize,
        refresh: bool,
    },
    /// `ListNamespacesOp`, its match conditions reduced to one prefix and one suffix.
    List {
        #[serde(default)]
        prefix: Option<Vec<String>>,
        #[serde(default)]
        suffix: Option<Vec<String>>,
        #[serde(default)]
        max_depth: Option<usize>,
        limit: usize,
        offset: usize,
    },
}

/// An item as Python reads it (`score` for search results only).
#[derive(Debug, Serialize)]
struct ItemOut {
    namespace: Vec<String>,
    key: String,
    value: Value,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
}

impl ItemOut {
    fn new(item: Item, score: Option<f64>) -> Self {
        Self {
            namespace: item.namespace,
            key: item.key,
            value: item.value,
            created_at: item.created_at,
            updated_at: item.updated_at,
            score,
        }
    }
}

/// The index's `embed`, a Python callable from a list of texts to a list of vectors.
struct PyEmbedder {
    func: Py<PyAny>,
}

impl Embedder for PyEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>> {
        Box::pin(async move {
            Python::attach(|py| {
                self.func
                    .call1(py, (texts,))
                    .and_then(|v| v.extract::<Vec<Vec<f32>>>(py))
                    .map_err(|e| {
                        Error::Backend(BackendError::new(
                            BackendErrorKind::Other,
                            format!("the index's embed function failed: {e}"),
                        ))
                    })
            })
        })
    }
}

/// A duration from a Python float of seconds.
fn seconds(secs: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|e| PyValueError::new_err(format!("bad ttl {secs}: {e}")))
}

/// The index of a store: `(dims, fields, embed)`.
pub(crate) type IndexArg = Option<(usize, Vec<String>, Py<PyAny>)>;

pub(crate) fn index_config(index: IndexArg) -> Option<IndexConfig> {
    index.map(|(dims, fields, func)| IndexConfig::new(dims, Arc::new(PyEmbedder { func })).fields(fields))
}

/// The store twice: one handle whose reads restart TTLs and one whose reads do not (each
/// LangGraph op says which it wants). Both share the connections.
struct Handles {
    refreshing: Arc<dyn DynStore>,
    plain: Arc<dyn DynStore>,
    /// PostgreSQL's store, whose pool `close` closes.
    postgres: Option<graphloom_postgres::PostgresStore>,
}

/// Two handles of one store with refresh-on-read on and off; items never get a default
/// TTL here (LangGraph's ops carry their TTL already resolved).
fn ttl(refresh: bool) -> TtlConfig {
    TtlConfig {
        default_ttl: None,
        refresh_on_read: refresh,
    }
}

/// graphloom's store over one database, as the Python stores call it. Safe to share
/// between threads.
#[pyclass(frozen, module = "graphloom._native")]
pub(crate) struct StoreCore {
    handles: Handles,
}

#[pymethods]
impl StoreCore {
    /// Open (creating if needed) the store tables of the SQLite file at `path`. `index` is
    /// `(dims, fields, embed)`; `synchronous` as for the savers.
    #[staticmethod]
    #[pyo3(signature = (path, synchronous="full", index=None))]
    fn sqlite(py: Python<'_>, path: String, synchronous: &str, index: IndexArg) -> PyResult<Self> {
        let synchronous = crate::core::synchronous_setting(synchronous)?;
        let index = index_config(index);
        let store = py
            .detach(|| {
                block_on(graphloom_sqlite::SqliteStore::open_with(
                    graphloom_sqlite::SqliteOptions::new(path).synchronous(synchronous),
                ))
            })?
            .map_err(|e| storage_error(&e))?;
        let store = match index {
            Some(index) => store.with_index(index),
            None => store,
        };
        Ok(Self {
            handles: Handles {
                refreshing: Arc::new(store.clone().with_ttl(ttl(true))),
                plain: Arc::new(store.with_ttl(ttl(false))),
                postgres: None,
            },
        })
    }

    /// Connect to the PostgreSQL database at `url` and create the store tables if needed.
    #[staticmethod]
    #[pyo3(signature = (url, index=None))]
    fn postgres(py: Python<'_>, url: String, index: IndexArg) -> PyResult<Self> {
        let index = index_config(index);
        let store = py
            .detach(|| {
                block_on(async {
                    let pool = crate::pg::connect(&url).await?;
                    let store = graphloom_postgres::PostgresStore::from_pool(pool);
                    store.migrate().await?;
                    Ok::<_, Error>(store)
                })
            })?
            .map_err(|e| storage_error(&e))?;
        let store = match index {
            Some(index) => store.with_index(index),
            None => store,
        };
        Ok(Self {
            handles: Handles {
                refreshing: Arc::new(store.clone().with_ttl(ttl(true))),
                plain: Arc::new(store.clone().with_ttl(ttl(false))),
                postgres: Some(store),
            },
        })
    }

    /// Run a batch of ops (a JSON array) in order; their results as a JSON array.
    fn batch(&self, py: Python<'_>, ops: &str) -> PyResult<String> {
        let ops: Vec<Op> =
            serde_json::from_str(ops).map_err(|e| PyValueError::new_err(format!("bad store ops: {e}")))?;
        let ttls = ops
            .iter()
            .map(|op| match op {
                Op::Put { ttl: Some(t), .. } => seconds(*t).map(Some),
                _ => Ok(None),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let results = py
            .detach(|| block_on(self.run(ops, ttls)))?
            .map_err(|e| storage_error(&e))?;
        serde_json::to_string(&results).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Delete every expired item; how many were deleted.
    fn sweep(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| block_on(self.handles.plain.sweep_expired()))?
            .map_err(|e| storage_error(&e))
    }

    /// Close the database connections (PostgreSQL's pool); later calls fail.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(store) = &self.handles.postgres {
            py.detach(|| block_on(crate::pg::close(store.pool())))?;
        }
        Ok(())
    }
}

impl StoreCore {
    async fn run(&self, ops: Vec<Op>, ttls: Vec<Option<Duration>>) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(ops.len());
        for (op, ttl) in ops.into_iter().zip(ttls) {
            out.push(self.one(op, ttl).await?);
        }
        Ok(out)
    }

    fn handle(&self, refresh: bool) -> &dyn DynStore {
        if refresh {
            &*self.handles.refreshing
        } else {
            &*self.handles.plain
        }
    }

    async fn one(&self, op: Op, ttl: Option<Duration>) -> Result<Value> {
        match op {
            Op::Get { ns, key, refresh } => {
                let item = self.handle(refresh).get(&ns, &key).await?;
                to_json(&item.map(|i| ItemOut::new(i, None)))
            }
            Op::Put {
                ns, key, value: None, ..
            } => {
                self.handles.plain.delete(&ns, &key).await?;
                Ok(Value::Null)
            }
            Op::Put {
                ns,
                key,
                value: Some(value),
                index,
                ..
            } => {
                let index = match index {
                    None | Some(Value::Null) | Some(Value::Bool(true)) => IndexFields::Default,
                    Some(Value::Bool(false)) => IndexFields::Skip,
                    Some(Value::Array(fields)) => IndexFields::Fields(
                        fields
                            .into_iter()
                            .filter_map(|f| f.as_str().map(str::to_owned))
                            .collect(),
                    ),
                    Some(other) => {
                        return Err(Error::Backend(BackendError::new(
                            BackendErrorKind::InvalidInput,
                            format!("index must be false or a list of fields, not {other}"),
                        )))
                    }
                };
                let opts = PutOptions { ttl, index };
                self.handles
                    .plain
                    .put(&ns, &key, Value::Object(value), opts)
                    .await?;
                Ok(Value::Null)
            }
            Op::Search {
                ns,
                filter,
                query,
                limit,
                offset,
                refresh,
            } => {
                let search = SearchQuery {
                    filter: filter.unwrap_or_default(),
                    query,
                    limit,
                    offset,
                    refresh_ttl: Some(refresh),
                };
                let items = self.handle(refresh).search(&ns, search).await?;
                let items: Vec<ItemOut> = items
                    .into_iter()
                    .map(|SearchItem { item, score }| ItemOut::new(item, score))
                    .collect();
                to_json(&items)
            }
            Op::List {
                prefix,
                suffix,
                max_depth,
                limit,
                offset,
            } => {
                let opts = ListNamespaces {
                    prefix,
                    suffix,
                    max_depth,
                    limit,
                    offset,
                };
                let namespaces = self.handles.plain.list_namespaces(opts).await?;
                to_json(&namespaces)
            }
        }
    }
}

/// A result as JSON.
fn to_json<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| {
        Error::Backend(BackendError::new(
            BackendErrorKind::Other,
            format!("cannot encode a store result: {e}"),
        ))
    })
}
