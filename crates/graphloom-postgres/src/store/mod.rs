//! [`PostgresStore`]: the long-term memory [`Store`] on PostgreSQL.
//!
//! # Tables
//!
//! | table | key | holds |
//! |---|---|---|
//! | `graphloom_store` | prefix, key | the value as JSONB; `created_at`, `updated_at`; the item's `ttl` and `expires_at` |
//! | `graphloom_store_vectors` | prefix, key, idx | one `real[]` embedding per embedded text (deleted with the item) |
//!
//! The namespace is stored as its labels joined by `.` (labels cannot contain `.`), so
//! "everything under `["users", "42"]`" is a range scan of the primary key
//! (`prefix = 'users.42' OR prefix >= 'users.42.' AND prefix < 'users.42/'`).
//!
//! # Semantics
//!
//! - **Values are plaintext JSONB**, so filters run in the database. Plain-equality
//!   conditions on top-level keys (and `$eq` / `$ne`) are evaluated in SQL (`value @>` the
//!   condition, served by a GIN index, plus an exact `value -> key = condition`); every
//!   other condition (ranges, dotted paths, nested objects) is evaluated in Rust with
//!   graphloom-core's [`Filter`](graphloom_core::store::Filter), so every backend answers a
//!   filter the same way. JSONB cannot hold the character `\u0000`; such a value is refused
//!   with `InvalidInput`.
//! - **Expiry uses the database clock** (`now()`), the same for every replica. Expired items
//!   are never returned, even before [`Store::sweep_expired`] deletes them. A read that
//!   refreshes TTLs restarts them from the database's `now()`.
//! - **Vector search is brute force in Rust.** pgvector is not assumed (Debian 12 has no
//!   package for it): embeddings live in a side table as `real[]`, a query reads the
//!   embeddings of the live, filtered items under the prefix and ranks them by
//!   [`cosine`](graphloom_core::store::cosine) similarity (an item's score is its best
//!   embedding's). Fine for tens of thousands of items per searched prefix; beyond that, an
//!   approximate index (pgvector's HNSW) is the way to go.

mod search;

use crate::error::{backend, SqlxResultExt};
use crate::migrate::Migrated;
use graphloom_core::store::{
    texts_at_path, validate_namespace, validate_value, IndexConfig, IndexFields, Item, ListNamespaces,
    PutOptions, SearchItem, SearchQuery, Store, TtlConfig, WILDCARD,
};
use graphloom_core::{BackendErrorKind, Result};
use serde_json::Value;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder};

/// SQL rendering a `timestamptz` column as graphloom's RFC 3339 (UTC, microseconds).
fn rfc3339(column: &str) -> String {
    format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')")
}

/// The stored form of a namespace.
pub(crate) fn encode_ns(namespace: &[String]) -> String {
    namespace.join(".")
}

/// A namespace from its stored form.
pub(crate) fn decode_ns(prefix: &str) -> Vec<String> {
    prefix.split('.').map(str::to_owned).collect()
}

/// Whether labels could be part of a stored namespace (non-empty, no `.`).
fn storable_labels(labels: &[String]) -> bool {
    labels.iter().all(|l| !l.is_empty() && !l.contains('.'))
}

/// Add "the namespace is `prefix` or starts with it" to a query (nothing for an empty prefix).
pub(crate) fn push_prefix(qb: &mut QueryBuilder<'_, Postgres>, column: &str, prefix: &[String]) {
    if prefix.is_empty() {
        return;
    }
    let p = encode_ns(prefix);
    qb.push(format_args!(" AND ({column} = "))
        .push_bind(p.clone())
        .push(format_args!(" OR ({column} >= "))
        .push_bind(format!("{p}."))
        .push(format_args!(" AND {column} < "))
        .push_bind(format!("{p}/"))
        .push("))");
}

/// A [`Store`] on PostgreSQL, optionally with vector search ([`IndexConfig`]) and default
/// expiry ([`TtlConfig`]). See the [module docs](self) for the tables and semantics.
///
/// Cheap to clone; clones share the pool. Configure it before cloning: the index and TTL
/// settings are per handle.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    index: Option<IndexConfig>,
    ttl: TtlConfig,
    migrated: Migrated,
}

impl PostgresStore {
    /// Connect to `url` with sqlx's default pool options.
    ///
    /// # Errors
    /// A `Connection` error if the server cannot be reached, `InvalidInput` for a bad URL.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, PgPoolOptions::new()).await
    }

    /// Connect to `url` with these pool options.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with(url: &str, options: PgPoolOptions) -> Result<Self> {
        let pool = options.connect(url).await.during("connect")?;
        Ok(Self::from_pool(pool))
    }

    /// Use an existing pool (e.g. shared with a [`PostgresSaver`](crate::PostgresSaver)).
    #[must_use]
    pub fn from_pool(pool: PgPool) -> Self {
        Self {
            pool,
            index: None,
            ttl: TtlConfig::default(),
            migrated: Migrated::default(),
        }
    }

    /// Enable vector search: values are embedded on `put`, and a search with a query ranks
    /// by similarity.
    #[must_use]
    pub fn with_index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Use these expiry settings.
    #[must_use]
    pub fn with_ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }

    /// The connection pool.
    #[must_use]
    pub fn pool(&self) -> &PgPool {
        &self.pool
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

    /// Create or upgrade the tables now instead of on first use.
    ///
    /// # Errors
    /// A typed backend error if the migration fails.
    pub async fn migrate(&self) -> Result<()> {
        self.migrated.ensure(&self.pool).await
    }

    /// Embed `texts` with the index's embedder, checking count and dimensions.
    async fn embed(&self, index: &IndexConfig, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        let want = texts.len();
        let vectors = index.embedder.embed(texts).await?;
        if vectors.len() != want {
            return Err(backend(
                BackendErrorKind::Other,
                format!("embedder returned {} vectors for {want} texts", vectors.len()),
            ));
        }
        if let Some(bad) = vectors.iter().find(|v| v.len() != index.dims) {
            return Err(backend(
                BackendErrorKind::Other,
                format!(
                    "embedder returned a vector of {} dimensions, the index expects {}",
                    bad.len(),
                    index.dims
                ),
            ));
        }
        Ok(vectors)
    }

    /// The embeddings of `value` for the index (empty without an index or with nothing to
    /// embed), each with the field it came from.
    async fn embed_value(&self, value: &Value, fields: &IndexFields) -> Result<Vec<(String, Vec<f32>)>> {
        let Some(index) = &self.index else {
            return Ok(Vec::new());
        };
        let fields = match fields {
            IndexFields::Skip => return Ok(Vec::new()),
            IndexFields::Default => &index.fields,
            IndexFields::Fields(fields) => fields,
        };
        let (names, texts): (Vec<String>, Vec<String>) = fields
            .iter()
            .flat_map(|f| texts_at_path(value, f).into_iter().map(move |t| (f.clone(), t)))
            .unzip();
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = self.embed(index, texts).await?;
        Ok(names.into_iter().zip(vectors).collect())
    }
}

impl Store for PostgresStore {
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>> {
        if validate_namespace(namespace).is_err() {
            return Ok(None);
        }
        self.migrate().await?;
        let row: Option<(Json<Value>, String, String)> = sqlx::query_as(&format!(
            "WITH hit AS (
                 SELECT prefix, key, value, created_at, updated_at, ttl FROM graphloom_store
                 WHERE prefix = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > now())
             ), refreshed AS (
                 UPDATE graphloom_store s SET expires_at = now() + s.ttl
                 FROM hit
                 WHERE $3 AND hit.ttl IS NOT NULL AND s.prefix = hit.prefix AND s.key = hit.key
             )
             SELECT value, {}, {} FROM hit",
            rfc3339("created_at"),
            rfc3339("updated_at")
        ))
        .bind(encode_ns(namespace))
        .bind(key)
        .bind(self.ttl.refresh_on_read)
        .fetch_optional(&self.pool)
        .await
        .during("store get")?;
        Ok(row.map(|(value, created_at, updated_at)| Item {
            namespace: namespace.to_vec(),
            key: key.to_owned(),
            value: value.0,
            created_at,
            updated_at,
        }))
    }

    async fn put(&self, namespace: &[String], key: &str, value: Value, opts: PutOptions) -> Result<()> {
        validate_namespace(namespace)?;
        validate_value(&value)?;
        let vectors = self.embed_value(&value, &opts.index).await?;
        let ttl_secs = opts.ttl.or(self.ttl.default_ttl).map(|d| d.as_secs_f64());
        self.migrate().await?;
        let prefix = encode_ns(namespace);
        let mut tx = self.pool.begin().await.during("store put: begin")?;
        sqlx::query(
            "INSERT INTO graphloom_store (prefix, key, value, created_at, updated_at, ttl, expires_at)
             VALUES ($1, $2, $3, now(), now(), make_interval(secs => $4), now() + make_interval(secs => $4))
             ON CONFLICT (prefix, key) DO UPDATE SET
                 value = EXCLUDED.value,
                 created_at = CASE
                     WHEN graphloom_store.expires_at IS NOT NULL AND graphloom_store.expires_at <= now()
                     THEN EXCLUDED.created_at
                     ELSE graphloom_store.created_at END,
                 updated_at = GREATEST(EXCLUDED.updated_at, graphloom_store.updated_at + interval '1 microsecond'),
                 ttl = EXCLUDED.ttl,
                 expires_at = EXCLUDED.expires_at",
        )
        .bind(&prefix)
        .bind(key)
        .bind(Json(&value))
        .bind(ttl_secs)
        .execute(&mut *tx)
        .await
        .during("store put")?;
        sqlx::query("DELETE FROM graphloom_store_vectors WHERE prefix = $1 AND key = $2")
            .bind(&prefix)
            .bind(key)
            .execute(&mut *tx)
            .await
            .during("store put: old embeddings")?;
        if !vectors.is_empty() {
            let mut qb = QueryBuilder::<Postgres>::new(
                "INSERT INTO graphloom_store_vectors (prefix, key, idx, field, embedding) ",
            );
            qb.push_values(
                vectors.into_iter().enumerate(),
                |mut row, (i, (field, vector))| {
                    row.push_bind(prefix.clone())
                        .push_bind(key.to_owned())
                        .push_bind(i32::try_from(i).unwrap_or(i32::MAX))
                        .push_bind(field)
                        .push_bind(vector);
                },
            );
            qb.build()
                .execute(&mut *tx)
                .await
                .during("store put: embeddings")?;
        }
        tx.commit().await.during("store put: commit")?;
        Ok(())
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<()> {
        if validate_namespace(namespace).is_err() {
            return Ok(());
        }
        self.migrate().await?;
        sqlx::query("DELETE FROM graphloom_store WHERE prefix = $1 AND key = $2")
            .bind(encode_ns(namespace))
            .bind(key)
            .execute(&self.pool)
            .await
            .during("store delete")?;
        Ok(())
    }

    async fn search(&self, namespace_prefix: &[String], query: SearchQuery) -> Result<Vec<SearchItem>> {
        self.search_items(namespace_prefix, query).await
    }

    async fn list_namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        opts.validate()?;
        self.migrate().await?;
        let mut qb = QueryBuilder::<Postgres>::new(
            "SELECT DISTINCT prefix FROM graphloom_store WHERE (expires_at IS NULL OR expires_at > now())",
        );
        // The labels before the first wildcard narrow the scan; `apply` matches exactly.
        if let Some(prefix) = &opts.prefix {
            let literal: Vec<String> = prefix.iter().take_while(|l| *l != WILDCARD).cloned().collect();
            if !storable_labels(&literal) {
                return Ok(Vec::new());
            }
            push_prefix(&mut qb, "prefix", &literal);
        }
        let rows: Vec<String> = qb
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .during("store list_namespaces")?;
        Ok(opts.apply(rows.iter().map(|p| decode_ns(p))))
    }

    /// Deletes in batches of 1000 items, each its own statement: a large sweep never holds
    /// long locks or one long transaction.
    async fn sweep_expired(&self) -> Result<usize> {
        self.migrate().await?;
        let mut total = 0usize;
        loop {
            let done = sqlx::query(
                "DELETE FROM graphloom_store WHERE (prefix, key) IN \
                 (SELECT prefix, key FROM graphloom_store WHERE expires_at <= now() LIMIT 1000)",
            )
            .execute(&self.pool)
            .await
            .during("store sweep_expired")?
            .rows_affected();
            total = total.saturating_add(usize::try_from(done).unwrap_or(usize::MAX));
            if done < 1000 {
                return Ok(total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_round_trip() {
        let ns = vec!["users".to_owned(), "42".to_owned(), "a b/ü".to_owned()];
        assert_eq!(decode_ns(&encode_ns(&ns)), ns);
        assert!(storable_labels(&ns));
        assert!(!storable_labels(&["a.b".to_owned()]));
        assert!(!storable_labels(&[String::new()]));
    }
}
