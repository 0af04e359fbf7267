//! [`SqliteStore`]: the SQLite [`Store`].

use crate::db::{aad, corrupt, db_err, now_ms, other, rs_err, CommitStats, Db};
use crate::options::{SqliteOptions, Synchronous};
use futures::TryStreamExt;
use graphloom_core::checkpoint::BlobCodec;
use graphloom_core::store::{
    cosine, has_prefix, texts_at_path, timestamp_after, validate_namespace, validate_value, Filter,
    IndexConfig, IndexFields, Item, ListNamespaces, PutOptions, SearchItem, SearchQuery, Store, TtlConfig,
    WILDCARD,
};
use graphloom_core::Result;
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};
use std::cmp::Ordering;
use std::collections::HashMap;
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
/// - Filters are evaluated in Rust with core's [`Filter`], after SQL selects the namespace
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

/// Restrict a query to namespaces starting with `labels` (whole labels): the namespace
/// itself or anything under `labels.`; `'/'` is the byte after `'.'`.
fn push_prefix_range(qb: &mut QueryBuilder<'_, Sqlite>, column: &str, labels: &[String]) {
    if labels.is_empty() {
        return;
    }
    let p = prefix_of(labels);
    qb.push(format!(" AND ({column} = "))
        .push_bind(p.clone())
        .push(format!(" OR ({column} >= "))
        .push_bind(format!("{p}."))
        .push(format!(" AND {column} < "))
        .push_bind(format!("{p}/"))
        .push("))");
}

/// Encode vectors as little-endian `f32`s.
fn vectors_to_blob(vectors: &[Vec<f32>]) -> Vec<u8> {
    vectors
        .iter()
        .flat_map(|v| v.iter().flat_map(|x| x.to_le_bytes()))
        .collect()
}

fn blob_to_vectors(bytes: &[u8], dims: usize) -> Option<Vec<Vec<f32>>> {
    if dims == 0 || bytes.len() % (dims * 4) != 0 {
        return None;
    }
    let floats: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some(floats.chunks(dims).map(<[f32]>::to_vec).collect())
}

/// An item row as read: `prefix, key, enc, value, created_at, updated_at, ttl_ms`.
const ITEM_COLUMNS: &str = "prefix, key, enc, value, created_at, updated_at, ttl_ms";

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

    fn read_item(&self, row: &SqliteRow) -> Result<ItemRow> {
        let prefix: String = row.try_get(0).map_err(db_err)?;
        let key: String = row.try_get(1).map_err(db_err)?;
        let namespace = namespace_of(&prefix);
        let bad = |e: String| corrupt(format!("store item {namespace:?} / {key:?}: {e}"));
        let enc: String = row.try_get(2).map_err(|e| bad(e.to_string()))?;
        let bytes: Vec<u8> = row.try_get(3).map_err(|e| bad(e.to_string()))?;
        let created_at: String = row.try_get(4).map_err(|e| bad(e.to_string()))?;
        let updated_at: String = row.try_get(5).map_err(|e| bad(e.to_string()))?;
        let ttl_ms: Option<i64> = row.try_get(6).map_err(|e| bad(e.to_string()))?;
        let value: Value = self
            .codec()
            .decode(&enc, &bytes, &item_aad(&prefix, &key))
            .map_err(|e| bad(e.to_string()))?;
        if !value.is_object() {
            return Err(bad("the stored value is not a JSON object".into()));
        }
        Ok(ItemRow {
            item: Item {
                namespace,
                key: key.clone(),
                value,
                created_at,
                updated_at,
            },
            prefix,
            key,
            ttl_ms,
        })
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
                    .map_err(rs_err)?;
                for (prefix, key) in &items {
                    stmt.execute(rusqlite::params![now, prefix, key, now])
                        .map_err(rs_err)?;
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
        .map_err(rs_err)?;
    stmt.query_row(rusqlite::params![prefix, key], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })
    .optional()
    .map_err(|e| corrupt(format!("store item {prefix:?} / {key:?}: {e}")))
}

impl Store for SqliteStore {
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
        let prefix = prefix_of(namespace);
        let row = sqlx::query(&format!(
            "SELECT {ITEM_COLUMNS} FROM store_items
             WHERE prefix = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)"
        ))
        .bind(&prefix)
        .bind(key)
        .bind(now_ms())
        .fetch_optional(self.db.reader())
        .await
        .map_err(db_err)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let found = self.read_item(&row)?;
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
                .map_err(rs_err)?;
                conn.prepare_cached("DELETE FROM store_vectors WHERE prefix = ? AND key = ?")
                    .and_then(|mut stmt| stmt.execute(rusqlite::params![&prefix, &key]))
                    .map_err(rs_err)?;
                let mut insert = conn
                    .prepare_cached(
                        "INSERT INTO store_vectors (prefix, key, field, embedding) VALUES (?, ?, ?, ?)",
                    )
                    .map_err(rs_err)?;
                for (field, blob) in &vectors {
                    insert
                        .execute(rusqlite::params![&prefix, &key, field, blob])
                        .map_err(rs_err)?;
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
                        .map_err(rs_err)?;
                }
                Ok(())
            })
            .await
    }

    async fn search(&self, namespace_prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
        let filter = Filter::parse(&query.filter)?;
        let query_vector = match (&query.query, &self.index) {
            (Some(text), Some(index)) => self.embed(index, vec![text.clone()]).await?.pop(),
            _ => None,
        };
        let refresh = query.refresh_ttl.unwrap_or(self.ttl.refresh_on_read);
        let now = now_ms();
        let wanted = query.offset.saturating_add(query.limit);

        let mut qb = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {ITEM_COLUMNS} FROM store_items WHERE (expires_at IS NULL OR expires_at > "
        ));
        qb.push_bind(now).push(")");
        push_prefix_range(&mut qb, "prefix", namespace_prefix);
        qb.push(" ORDER BY updated_at DESC, prefix, key");

        let mut tx = self.db.reader().begin().await.map_err(db_err)?;
        let mut hits: Vec<(ItemRow, Option<f64>)> = Vec::new();
        match (&query_vector, &self.index) {
            (Some(q), Some(index)) => {
                // Every embedding under the prefix, then the items that have one.
                let mut vq = QueryBuilder::<Sqlite>::new(
                    "SELECT prefix, key, field, embedding FROM store_vectors WHERE 1 = 1",
                );
                push_prefix_range(&mut vq, "prefix", namespace_prefix);
                let rows = vq
                    .build()
                    .persistent(false)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db_err)?;
                let mut best: HashMap<(String, String), f64> = HashMap::new();
                for row in rows {
                    let prefix: String = row.try_get(0).map_err(db_err)?;
                    let key: String = row.try_get(1).map_err(db_err)?;
                    let field: String = row.try_get(2).map_err(db_err)?;
                    let bytes: Vec<u8> = row.try_get(3).map_err(db_err)?;
                    let vectors = blob_to_vectors(&bytes, index.dims).ok_or_else(|| {
                        corrupt(format!(
                            "store embedding {:?} / {key:?} field {field:?}: {} bytes are not whole vectors of {} dimensions",
                            namespace_of(&prefix),
                            bytes.len(),
                            index.dims
                        ))
                    })?;
                    if let Some(score) = vectors.iter().map(|v| cosine(q, v)).max_by(f64::total_cmp) {
                        let slot = best.entry((prefix, key)).or_insert(score);
                        if score > *slot {
                            *slot = score;
                        }
                    }
                }
                if !best.is_empty() {
                    let mut rows = qb.build().persistent(false).fetch(&mut *tx);
                    while let Some(row) = rows.try_next().await.map_err(db_err)? {
                        let prefix: String = row.try_get(0).map_err(db_err)?;
                        let key: String = row.try_get(1).map_err(db_err)?;
                        let Some(score) = best.get(&(prefix, key)).copied() else {
                            continue;
                        };
                        let found = self.read_item(&row)?;
                        if has_prefix(&found.item.namespace, namespace_prefix)
                            && filter.matches(&found.item.value)
                        {
                            hits.push((found, Some(score)));
                        }
                    }
                }
                hits.sort_by(|(a, sa), (b, sb)| {
                    let by_score = match (sa, sb) {
                        (Some(x), Some(y)) => y.total_cmp(x),
                        _ => Ordering::Equal,
                    };
                    by_score
                        .then_with(|| b.item.updated_at.cmp(&a.item.updated_at))
                        .then_with(|| a.item.namespace.cmp(&b.item.namespace))
                        .then_with(|| a.item.key.cmp(&b.item.key))
                });
            }
            _ => {
                if wanted > 0 {
                    let mut rows = qb.build().persistent(false).fetch(&mut *tx);
                    while let Some(row) = rows.try_next().await.map_err(db_err)? {
                        let found = self.read_item(&row)?;
                        if has_prefix(&found.item.namespace, namespace_prefix)
                            && filter.matches(&found.item.value)
                        {
                            hits.push((found, None));
                            if hits.len() >= wanted {
                                break;
                            }
                        }
                    }
                }
            }
        }
        let _ = tx.rollback().await;

        let page: Vec<(ItemRow, Option<f64>)> =
            hits.into_iter().skip(query.offset).take(query.limit).collect();
        if refresh {
            let stale: Vec<(String, String)> = page
                .iter()
                .filter(|(r, _)| r.ttl_ms.is_some())
                .map(|(r, _)| (r.prefix.clone(), r.key.clone()))
                .collect();
            self.refresh(stale).await?;
        }
        Ok(page
            .into_iter()
            .map(|(r, score)| SearchItem { item: r.item, score })
            .collect())
    }

    async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        opts.validate()?;
        // The prefix's labels before its first wildcard narrow the scan.
        let fixed: Vec<String> = opts
            .prefix
            .iter()
            .flatten()
            .take_while(|l| l.as_str() != WILDCARD && !l.contains('.'))
            .cloned()
            .collect();
        let mut qb = QueryBuilder::<Sqlite>::new(
            "SELECT DISTINCT prefix FROM store_items WHERE (expires_at IS NULL OR expires_at > ",
        );
        qb.push_bind(now_ms()).push(")");
        push_prefix_range(&mut qb, "prefix", &fixed);
        let rows = qb
            .build()
            .persistent(false)
            .fetch_all(self.db.reader())
            .await
            .map_err(db_err)?;
        let mut namespaces = Vec::with_capacity(rows.len());
        for row in rows {
            let prefix: String = row.try_get(0).map_err(db_err)?;
            namespaces.push(namespace_of(&prefix));
        }
        Ok(opts.apply(namespaces))
    }

    async fn sweep_expired(&self) -> Result<usize> {
        self.db
            .write(|conn| {
                let now = now_ms();
                conn.prepare_cached(
                    "DELETE FROM store_vectors WHERE EXISTS (
                        SELECT 1 FROM store_items i
                        WHERE i.prefix = store_vectors.prefix AND i.key = store_vectors.key
                          AND i.expires_at <= ?)",
                )
                .and_then(|mut stmt| stmt.execute([now]))
                .map_err(rs_err)?;
                let done = conn
                    .prepare_cached("DELETE FROM store_items WHERE expires_at <= ?")
                    .and_then(|mut stmt| stmt.execute([now]))
                    .map_err(rs_err)?;
                Ok(done)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_as_little_endian_f32() {
        let v = vec![vec![1.0f32, -2.5], vec![0.0, 3.25]];
        let blob = vectors_to_blob(&v);
        assert_eq!(blob.len(), 16);
        assert_eq!(&blob[..4], &1.0f32.to_le_bytes());
        assert_eq!(blob_to_vectors(&blob, 2), Some(v));
        assert_eq!(blob_to_vectors(&blob[..6], 2), None);
        assert_eq!(blob_to_vectors(&blob, 0), None);
    }

    #[test]
    fn namespaces_join_and_split() {
        let ns = vec!["a".to_owned(), "b c".to_owned()];
        assert_eq!(namespace_of(&prefix_of(&ns)), ns);
    }
}
