//! Searches of the store (filters evaluated in Rust, vector ranking by brute-force cosine
//! similarity) and the listing of namespaces. Both may scan many rows: they run on tokio's
//! blocking pool, each in one read transaction.

use super::{bad_item, namespace_of, now_ms, prefix_of, ItemRow, RawItem, SqliteStore};
use crate::db::Db;
use crate::error::{corrupt, other, SqlResultExt};
use crate::row::{bytes_of, FromRow};
use graphloom_core::checkpoint::BlobCodec;
use graphloom_core::store::{cosine, has_prefix, Filter, ListNamespaces, SearchItem, SearchQuery, WILDCARD};
use graphloom_core::Result;
use rusqlite::types::Value as SqlValue;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// Restrict a query to namespaces starting with `labels` (whole labels): the namespace
/// itself or anything under `labels.`; `'/'` is the byte after `'.'`.
fn push_prefix_range(sql: &mut String, params: &mut Vec<SqlValue>, column: &str, labels: &[String]) {
    if labels.is_empty() {
        return;
    }
    let p = prefix_of(labels);
    sql.push_str(&format!(
        " AND ({column} = ? OR ({column} >= ? AND {column} < ?))"
    ));
    let (children, end) = (format!("{p}."), format!("{p}/"));
    params.extend([SqlValue::Text(p), SqlValue::Text(children), SqlValue::Text(end)]);
}

/// Encode vectors as little-endian `f32`s.
pub(super) fn vectors_to_blob(vectors: &[Vec<f32>]) -> Vec<u8> {
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

/// What a search looks for, owned so it can move to a blocking thread.
struct Search {
    prefix: Vec<String>,
    filter: Filter,
    /// The query's embedding and the index's dimensions, for a ranked search.
    vector: Option<(Vec<f32>, usize)>,
    /// Hits wanted (offset + limit) by an unranked search.
    wanted: usize,
    now: i64,
}

impl Search {
    /// The hits, best first, in one read transaction.
    fn run(&self, db: &Db, codec: &BlobCodec) -> Result<Vec<(ItemRow, Option<f64>)>> {
        let mut sql = format!(
            "SELECT {} FROM store_items WHERE (expires_at IS NULL OR expires_at > ?)",
            RawItem::COLUMNS
        );
        let mut params = vec![SqlValue::Integer(self.now)];
        push_prefix_range(&mut sql, &mut params, "prefix", &self.prefix);
        sql.push_str(" ORDER BY updated_at DESC, prefix, key");
        db.read(|conn| match &self.vector {
            Some((q, dims)) => {
                let best = self.scores(conn, q, *dims)?;
                let mut hits = Vec::new();
                if !best.is_empty() {
                    let mut stmt = conn.prepare(&sql).sql()?;
                    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).sql()?;
                    while let Some(row) = rows.next().sql()? {
                        let prefix: String = row.get(0).sql()?;
                        let key: String = row.get(1).sql()?;
                        let Some(score) = best.get(&(prefix, key)).copied() else {
                            continue;
                        };
                        let found = RawItem::from_row(row)?.decode(codec)?;
                        if has_prefix(&found.item.namespace, &self.prefix)
                            && self.filter.matches(&found.item.value)
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
                Ok(hits)
            }
            None => {
                let mut hits = Vec::new();
                if self.wanted > 0 {
                    let mut stmt = conn.prepare(&sql).sql()?;
                    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).sql()?;
                    while let Some(row) = rows.next().sql()? {
                        let found = RawItem::from_row(row)?.decode(codec)?;
                        if has_prefix(&found.item.namespace, &self.prefix)
                            && self.filter.matches(&found.item.value)
                        {
                            hits.push((found, None));
                            if hits.len() >= self.wanted {
                                break;
                            }
                        }
                    }
                }
                Ok(hits)
            }
        })
    }

    /// Every embedding under the prefix, scored: each item's best.
    fn scores(
        &self,
        conn: &rusqlite::Connection,
        q: &[f32],
        dims: usize,
    ) -> Result<HashMap<(String, String), f64>> {
        let mut sql = String::from("SELECT prefix, key, field, embedding FROM store_vectors WHERE 1 = 1");
        let mut params = Vec::new();
        push_prefix_range(&mut sql, &mut params, "prefix", &self.prefix);
        let mut stmt = conn.prepare(&sql).sql()?;
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter())).sql()?;
        let mut best: HashMap<(String, String), f64> = HashMap::new();
        while let Some(row) = rows.next().sql()? {
            let prefix: String = row.get(0).sql()?;
            let key: String = row.get(1).sql()?;
            let field: String = row.get(2).sql()?;
            let bytes: Vec<u8> = bytes_of(row, 3).map_err(|e| bad_item(&prefix, &key, e.to_string()))?;
            let vectors = blob_to_vectors(&bytes, dims).ok_or_else(|| {
                corrupt(format!(
                    "store embedding {:?} / {key:?} field {field:?}: {} bytes are not whole vectors of {dims} dimensions",
                    namespace_of(&prefix),
                    bytes.len(),
                ))
            })?;
            if let Some(score) = vectors.iter().map(|v| cosine(q, v)).max_by(f64::total_cmp) {
                let slot = best.entry((prefix, key)).or_insert(score);
                if score > *slot {
                    *slot = score;
                }
            }
        }
        Ok(best)
    }
}

impl SqliteStore {
    pub(super) async fn search_items(
        &self,
        namespace_prefix: &[String],
        query: SearchQuery,
    ) -> Result<Vec<SearchItem>> {
        let filter = Filter::parse(&query.filter)?;
        let vector = match (&query.query, &self.index) {
            (Some(text), Some(index)) => self
                .embed(index, vec![text.clone()])
                .await?
                .pop()
                .map(|v| (v, index.dims)),
            _ => None,
        };
        let refresh = query.refresh_ttl.unwrap_or(self.ttl.refresh_on_read);
        let search = Search {
            prefix: namespace_prefix.to_vec(),
            filter,
            vector,
            wanted: query.offset.saturating_add(query.limit),
            now: now_ms(),
        };
        // A search may scan many rows: on the blocking pool, not a runtime thread.
        let db = Arc::clone(&self.db);
        let hits = tokio::task::spawn_blocking(move || search.run(&db, &db.codec))
            .await
            .map_err(|e| other(format!("store search stopped: {e}")))??;

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

    pub(super) async fn namespaces(&self, opts: ListNamespaces) -> Result<Vec<Vec<String>>> {
        opts.validate()?;
        // The prefix's labels before its first wildcard narrow the scan.
        let fixed: Vec<String> = opts
            .prefix
            .iter()
            .flatten()
            .take_while(|l| l.as_str() != WILDCARD && !l.contains('.'))
            .cloned()
            .collect();
        let mut sql = String::from(
            "SELECT DISTINCT prefix FROM store_items WHERE (expires_at IS NULL OR expires_at > ?)",
        );
        let mut params = vec![SqlValue::Integer(now_ms())];
        push_prefix_range(&mut sql, &mut params, "prefix", &fixed);
        let db = Arc::clone(&self.db);
        let prefixes = tokio::task::spawn_blocking(move || {
            db.read(|conn| {
                let mut stmt = conn.prepare(&sql).sql()?;
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                        r.get::<_, String>(0)
                    })
                    .sql()?;
                rows.collect::<rusqlite::Result<Vec<String>>>().sql()
            })
        })
        .await
        .map_err(|e| other(format!("listing namespaces stopped: {e}")))??;
        let namespaces: Vec<Vec<String>> = prefixes.iter().map(|p| namespace_of(p)).collect();
        Ok(opts.apply(namespaces))
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
    fn a_prefix_range_binds_the_namespace_its_children_and_their_end() {
        let (mut sql, mut params) = (String::from("SELECT 1 WHERE 1 = 1"), vec![SqlValue::Integer(0)]);
        push_prefix_range(&mut sql, &mut params, "prefix", &["a".into(), "b".into()]);
        assert_eq!(
            sql,
            "SELECT 1 WHERE 1 = 1 AND (prefix = ? OR (prefix >= ? AND prefix < ?))"
        );
        assert_eq!(
            params,
            [
                SqlValue::Integer(0),
                SqlValue::Text("a.b".into()),
                SqlValue::Text("a.b.".into()),
                SqlValue::Text("a.b/".into())
            ]
        );
    }
}
