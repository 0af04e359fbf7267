//! [`SqliteStore`]: the SQLite [`Store`].
//!
//! # Tables
//!
//! | table | key | holds |
//! |---|---|---|
//! | `store_items` | prefix, key | the value, encoded with the [`BlobCodec`]; `created_at`, `updated_at`; the item's `ttl_ms` and `expires_at` |
//! | `store_vectors` | prefix, key, field | the embeddings of one indexed field, as little-endian `f32`s |
//!
//! `search.rs` holds the searches (filters, vector ranking) and `list_namespaces`.

mod search;

use search::vectors_to_blob;

use crate::aad::aad;
use crate::db::Db;
use crate::error::{corrupt, other, SqlResultExt};
use crate::options::{SqliteOptions, Synchronous};
use crate::row::{bytes_of, query_one, FromRow};
use crate::writer::CommitStats;
use graphloom_core::checkpoint::BlobCodec;
use graphloom_core::store::{
    texts_at_path, timestamp_after, validate_namespace, validate_value, IndexConfig, IndexFields, Item,
    ListNamespaces, PutOptions, SearchItem, SearchQuery, Store, TtlConfig,
};
use graphloom_core::{Error, Result};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A [`Store`] in one SQLite file (WAL mode), optionally with vector search
/// ([`IndexConfig`]) and default expiry ([`TtlConfig`]).
///
/// - Items live in `store_items`, keyed by the namespace joined with `.` (labels cannot
///   contain one) and the key. Values go through the [`BlobCodec`] (sealed with the
///   `encryption` feature and a key); namespaces, keys and timestamps are plaintext.
/// - Filters are evaluated in Rust with core's [`Filter`](graphloom_core::store::Filter), after SQL selects the namespace
///   prefix and live rows, so they mean exactly what they mean for every other store.
/// - Expiry is wall-clock time (`expires_at`, Unix milliseconds). Expired items are never
///   returned; [`Store::sweep_expired`] deletes them. Refreshing reads update `expires_at`
///   through the writer.
/// - With an [`IndexConfig`], each indexed field's embeddings are stored as little-endian
///   `f32` BLOBs in `store_vectors`, keyed `(prefix, key, field)` (several vectors of one
///   field, for a list of strings, are concatenated). Searches with a query rank items by
///   brute-force cosine similarity in Rust. Embeddings are not encrypted.
///
/// Writes go through one writer thread with group commit, as for [`crate::SqliteSaver`]; a
/// saver and a store may share one file. Cloning is cheap; clones share the connections.
#[derive(Clone)]
pub struct SqliteStore {
    db: Arc<Db>,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
    /// The latest `updated_at` handed out, so each write gets a strictly later one.
    last_ts: Arc<Mutex<Option<String>>>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.db.path())
            .field("index", &self.index)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// Opens a [`SqliteStore`] with non-default settings; see [`SqliteStore::builder`].
#[derive(Debug, Clone)]
pub struct SqliteStoreBuilder {
    opts: SqliteOptions,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
}

impl SqliteStoreBuilder {
    /// Durability of commits ([`Synchronous::Full`] by default).
    #[must_use]
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.opts = self.opts.synchronous(synchronous);
        self
    }
    /// How long to wait for another process's lock (30 s by default).
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.opts = self.opts.busy_timeout(timeout);
        self
    }
    /// How stored values are encoded, e.g. `BlobCodec::encrypted(&key)`.
    #[must_use]
    pub fn codec(mut self, codec: BlobCodec) -> Self {
        self.opts = self.opts.codec(codec);
        self
    }
    /// Number of read connections (4 by default).
    #[must_use]
    pub fn read_connections(mut self, n: u32) -> Self {
        self.opts = self.opts.read_connections(n);
        self
    }
    /// Enable vector search with this embedder and these fields.
    #[must_use]
    pub fn index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }
    /// Expiry settings (no default TTL, refresh on read, by default).
    #[must_use]
    pub fn ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }
    /// Open the store.
    ///
    /// # Errors
    /// See [`SqliteStore::open`].
    pub async fn open(self) -> Result<SqliteStore> {
        let mut store = SqliteStore::open_with(self.opts).await?;
        store.index = self.index;
        store.ttl = self.ttl;
        Ok(store)
    }
}

/// Namespace as stored: labels joined with `.`, which no label may contain.
fn prefix_of(namespace: &[String]) -> String {
    namespace.join(".")
}

fn namespace_of(prefix: &str) -> Vec<String> {
    prefix.split('.').map(str::to_owned).collect()
}

fn item_aad(prefix: &str, key: &str) -> Vec<u8> {
    aad(&["store", prefix, key])
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// An item row as read, its value still encoded.
struct RawItem {
    prefix: String,
    key: String,
    enc: String,
    bytes: Vec<u8>,
    created_at: String,
    updated_at: String,
    ttl_ms: Option<i64>,
}

impl FromRow for RawItem {
    const COLUMNS: &'static str = "prefix, key, enc, value, created_at, updated_at, ttl_ms";
    type Error = Error;

    /// The key columns first: a column after them that does not decode is a corrupt item
    /// naming its namespace and key.
    fn from_row(row: &rusqlite::Row<'_>) -> Result<Self> {
        let prefix: String = row.get(0).sql()?;
        let key: String = row.get(1).sql()?;
        let bad = |e: rusqlite::Error| bad_item(&prefix, &key, e.to_string());
        Ok(RawItem {
            enc: row.get(2).map_err(bad)?,
            bytes: bytes_of(row, 3).map_err(bad)?,
            created_at: row.get(4).map_err(bad)?,
            updated_at: row.get(5).map_err(bad)?,
            ttl_ms: row.get(6).map_err(bad)?,
            prefix,
            key,
        })
    }
}

/// A stored item that does not decode, named by its namespace and key.
fn bad_item(prefix: &str, key: &str, message: String) -> Error {
    corrupt(format!(
        "store item {:?} / {key:?}: {message}",
        namespace_of(prefix)
    ))
}

impl RawItem {
    /// Decode the value.
    fn decode(self, codec: &BlobCodec) -> Result<ItemRow> {
        let value: Value = codec
            .decode(&self.enc, &self.bytes, &item_aad(&self.prefix, &self.key))
            .map_err(|e| bad_item(&self.prefix, &self.key, e.to_string()))?;
        if !value.is_object() {
            return Err(bad_item(
                &self.prefix,
                &self.key,
                "the stored value is not a JSON object".into(),
            ));
        }
        Ok(ItemRow {
            item: Item {
                namespace: namespace_of(&self.prefix),
                key: self.key.clone(),
                value,
                created_at: self.created_at,
                updated_at: self.updated_at,
            },
            prefix: self.prefix,
            key: self.key,
            ttl_ms: self.ttl_ms,
        })
    }
}

/// An item as read, with what refreshing its TTL needs.
struct ItemRow {
    prefix: String,
    key: String,
    item: Item,
    ttl_ms: Option<i64>,
}

impl SqliteStore {
    /// Open (creating if needed) the store at `path` with default settings: WAL mode,
    /// `synchronous=FULL`, plain JSON values, no vector index, no default TTL.
    ///
    /// # Errors
    /// A backend error if the file cannot be opened or migrated.
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with(SqliteOptions::new(path)).await
    }

    /// A builder for the store at `path`, to set the index, TTL, [`Synchronous`], busy
    /// timeout, codec or read pool before opening.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteStoreBuilder {
        SqliteStoreBuilder {
            opts: SqliteOptions::new(path),
            index: None,
            ttl: TtlConfig::default(),
        }
    }

    /// Open with explicit connection options (no index, default TTL settings; see
    /// [`with_index`](Self::with_index) and [`with_ttl`](Self::with_ttl)).
    ///
    /// # Errors
    /// See [`SqliteStore::open`].
    pub async fn open_with(opts: SqliteOptions) -> Result<Self> {
        crate::SqliteDatabase::open(opts).await?.store().await
    }

    pub(crate) fn from_parts(db: Arc<Db>, last_ts: Arc<Mutex<Option<String>>>) -> Self {
        Self {
            db,
            index: None,
            ttl: TtlConfig::default(),
            last_ts,
        }
    }

    /// This store with vector search.
    #[must_use]
    pub fn with_index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// This store with expiry settings `ttl`.
    #[must_use]
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// The database file.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// How many transactions the writer committed, for how many operations.
    #[must_use]
    pub fn commit_stats(&self) -> CommitStats {
        self.db.commit_stats()
    }

    /// Its vector-search settings.
    #[must_use]
    pub fn index_config(&self) -> Option<&IndexConfig> {
        self.index.as_ref()
    }

    /// Its expiry settings.
    #[must_use]
    pub fn ttl_config(&self) -> TtlConfig {
        self.ttl
    }

    fn codec(&self) -> &BlobCodec {
        &self.db.codec
    }

    /// Embed `texts`, checking count and dimensions.
    async fn embed(&self, index: &IndexConfig, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        let want = texts.len();
        let vectors = index.embedder.embed(texts).await?;
        if vectors.len() != want {
            return Err(other(format!(
                "embedder returned {} vectors for {want} texts",
                vectors.len()
            )));
        }
        if let Some(bad) = vectors.iter().find(|v| v.len() != index.dims) {
            return Err(other(format!(
                "embedder returned a vector of {} dimensions, the index expects {}",
                bad.len(),
                index.dims
            )));
        }
        Ok(vectors)
    }

    /// The embeddings of `value`'s indexed fields, as `(field, blob)` rows.
    async fn embed_value(&self, value: &Value, fields: &IndexFields) -> Result<Vec<(String, Vec<u8>)>> {
        let Some(index) = &self.index else {
            return Ok(Vec::new());
        };
        let fields = match fields {
            IndexFields::Skip => return Ok(Vec::new()),
            IndexFields::Default => &index.fields,
            IndexFields::Fields(fields) => fields,
        };
        let per_field: Vec<(String, Vec<String>)> = fields
            .iter()
            .map(|f| (f.clone(), texts_at_path(value, f)))
            .filter(|(_, texts)| !texts.is_empty())
            .collect();
        let texts: Vec<String> = per_field.iter().flat_map(|(_, t)| t.iter().cloned()).collect();
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut vectors = self.embed(index, texts).await?.into_iter();
        let mut rows: Vec<(String, Vec<u8>)> = Vec::new();
        for (field, texts) in per_field {
            let mine: Vec<Vec<f32>> = vectors.by_ref().take(texts.len()).collect();
            let blob = vectors_to_blob(&mine);
            // The same field named twice: keep all its vectors in one row.
            if let Some(existing) = rows.iter_mut().find(|(f, _)| *f == field) {
                existing.1.extend(blob);
            } else {
                rows.push((field, blob));
            }
        }
        Ok(rows)
    }

    /// Restart the TTL of these `(prefix, key)` items (those that have one and are live).
    async fn refresh(&self, items: Vec<(String, String)>) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        self.db
            .write(move |conn| {
                let now = now_ms();
                let mut stmt = conn
                    .prepare_cached(
                        "UPDATE store_items SET expires_at = ? + ttl_ms
                         WHERE prefix = ? AND key = ? AND ttl_ms IS NOT NULL AND expires_at > ?",
                    )
                    .sql()?;
                for (prefix, key) in &items {
                    stmt.execute(rusqlite::params![now, prefix, key, now]).sql()?;
                }
                Ok(())
            })
            .await
    }
}

/// The stored `(created_at, updated_at, expires_at)` of an item, if any.
fn existing(
    conn: &rusqlite::Connection,
    prefix: &str,
    key: &str,
) -> Result<Option<(String, String, Option<i64>)>> {
    use rusqlite::OptionalExtension as _;
    let mut stmt = conn
        .prepare_cached(
            "SELECT created_at, updated_at, expires_at FROM store_items WHERE prefix = ? AND key = ?",
        )
        .sql()?;
    stmt.query_row(rusqlite::params![prefix, key], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })
    .optional()
    .map_err(|e| corrupt(format!("store item {prefix:?} / {key:?}: {e}")))
}

impl Store for SqliteStore {
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
        let prefix = prefix_of(namespace);
        // A point read by key: on this thread, no hand-off.
        let row = self.db.read(|conn| {
            query_one::<RawItem>(
                conn,
                &format!(
                    "SELECT {} FROM store_items
                     WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
                    RawItem::COLUMNS
                ),
                rusqlite::params![prefix, key, now_ms()],
            )
        })?;
        let Some(row) = row else {
            return Ok(None);
        };
        let found = row.decode(self.codec())?;
        // Labels with '.' are never stored; such a lookup must not alias another namespace.
        if found.item.namespace != namespace {
            return Ok(None);
        }
        if self.ttl.refresh_on_read && found.ttl_ms.is_some() {
            self.refresh(vec![(found.prefix, found.key)]).await?;
        }
        Ok(Some(found.item))
    }

    async fn put(&self, namespace: &[String], key: &str, value: Value, opts: PutOptions) -> Result<()> {
        validate_namespace(namespace)?;
        validate_value(&value)?;
        let vectors = self.embed_value(&value, &opts.index).await?;
        let ttl_ms = opts
            .ttl
            .or(self.ttl.default_ttl)
            .map(|ttl| i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
        let prefix = prefix_of(namespace);
        let key = key.to_owned();
        let (enc, bytes) = self
            .codec()
            .encode(&value, &item_aad(&prefix, &key))
            .map_err(|e| other(e.to_string()))?;
        let last_ts = Arc::clone(&self.last_ts);
        self.db
            .write(move |conn| {
                let now = now_ms();
                let old = existing(conn, &prefix, &key)?;
                let ts = {
                    let mut last = last_ts.lock().unwrap_or_else(PoisonError::into_inner);
                    let prev = match (&*last, &old) {
                        (Some(a), Some((_, b, _))) => Some(a.max(b).clone()),
                        (Some(a), None) => Some(a.clone()),
                        (None, Some((_, b, _))) => Some(b.clone()),
                        (None, None) => None,
                    };
                    let ts = timestamp_after(prev.as_deref());
                    *last = Some(ts.clone());
                    ts
                };
                let created_at = match old {
                    Some((created, _, expires)) if expires.is_none_or(|at| at > now) => created,
                    _ => ts.clone(),
                };
                let expires_at = ttl_ms.map(|ttl| now.saturating_add(ttl));
                conn.prepare_cached(
                    "INSERT INTO store_items
                        (prefix, key, enc, value, created_at, updated_at, ttl_ms, expires_at)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (prefix, key) DO UPDATE SET
                        enc = excluded.enc, value = excluded.value,
                        created_at = excluded.created_at, updated_at = excluded.updated_at,
                        ttl_ms = excluded.ttl_ms, expires_at = excluded.expires_at",
                )
                .and_then(|mut stmt| {
                    stmt.execute(rusqlite::params![
                        &prefix, &key, enc, &bytes, created_at, ts, ttl_ms, expires_at
                    ])
                })
                .sql()?;
                conn.prepare_cached("DELETE FROM store_vectors WHERE prefix = ? AND key = ?")
                    .and_then(|mut stmt| stmt.execute(rusqlite::params![&prefix, &key]))
                    .sql()?;
                let mut insert = conn
                    .prepare_cached(
                        "INSERT INTO store_vectors (prefix, key, field, embedding) VALUES (?, ?, ?, ?)",
                    )
                    .sql()?;
                for (field, blob) in &vectors {
                    insert
                        .execute(rusqlite::params![&prefix, &key, field, blob])
                        .sql()?;
                }
                Ok(())
            })
            .await
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<()> {
        let prefix = prefix_of(namespace);
        let key = key.to_owned();
        self.db
            .write(move |conn| {
                for sql in [
                    "DELETE FROM store_vectors WHERE prefix = ? AND key = ?",
                    "DELETE FROM store_items WHERE prefix = ? AND key = ?",
                ] {
                    conn.prepare_cached(sql)
                        .and_then(|mut stmt| stmt.execute(rusqlite::params![&prefix, &key]))
                        .sql()?;
                }
                Ok(())
            })
            .await
    }

    async fn search(&self, namespace_prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
        self.search_items(namespace_prefix, query).await
    }

    async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        self.namespaces(opts).await
    }

    /// Deletes in batches of [`SWEEP_BATCH`] items, each its own write: a large sweep never
    /// holds the writer (and the runs' commits behind it) for long.
    async fn sweep_expired(&self) -> Result<usize> {
        let mut total = 0;
        loop {
            let done = self
                .db
                .write(|conn| {
                    let now = now_ms();
                    conn.prepare_cached(
                        "DELETE FROM store_vectors WHERE EXISTS (
                            SELECT 1 FROM store_items i
                            WHERE i.prefix = store_vectors.prefix AND i.key = store_vectors.key
                              AND i.rowid IN (SELECT rowid FROM store_items WHERE expires_at <= ?1 ORDER BY rowid LIMIT ?2))",
                    )
                    .and_then(|mut stmt| stmt.execute(rusqlite::params![now, SWEEP_BATCH]))
                    .sql()?;
                    let done = conn
                        .prepare_cached(
                            "DELETE FROM store_items WHERE rowid IN \
                             (SELECT rowid FROM store_items WHERE expires_at <= ?1 ORDER BY rowid LIMIT ?2)",
                        )
                        .and_then(|mut stmt| stmt.execute(rusqlite::params![now, SWEEP_BATCH]))
                        .sql()?;
                    Ok(done)
                })
                .await?;
            total += done;
            if done < SWEEP_BATCH as usize {
                return Ok(total);
            }
        }
    }
}

/// Expired items deleted per write by [`Store::sweep_expired`].
const SWEEP_BATCH: i64 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_join_and_split() {
        let ns = vec!["a".to_owned(), "b c".to_owned()];
        assert_eq!(namespace_of(&prefix_of(&ns)), ns);
    }
}
