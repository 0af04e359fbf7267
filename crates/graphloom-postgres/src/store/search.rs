//! `Store::search`: filters split between SQL and Rust, optional brute-force vector ranking.

use super::{decode_ns, push_prefix, rfc3339, storable_labels, PostgresStore};
use crate::error::SqlxResultExt;
use graphloom_core::store::{cosine, Filter, Item, SearchItem, SearchQuery};
use graphloom_core::Result;
use serde_json::{json, Map, Value};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder};
use std::cmp::Ordering;
use std::collections::HashMap;

/// A condition SQL evaluates exactly as [`Filter`] does.
#[derive(Debug, Clone, PartialEq)]
enum Pushed {
    /// The top-level field equals the value (JSONB equality: numbers by value, arrays and
    /// objects element by element).
    Eq(String, Value),
    /// The top-level field is missing or differs from the value.
    Ne(String, Value),
}

/// Split a (valid) filter into conditions for SQL and the rest, for Rust.
///
/// Pushed: a top-level key without `.` whose condition is a plain non-object value, or an
/// object of only `$eq` / `$ne`. Dotted paths (a literal dotted key wins over the path),
/// nested objects and ordered comparisons (strings compare byte-wise in Rust) stay in Rust.
fn split_filter(filter: &Map<String, Value>) -> (Vec<Pushed>, Map<String, Value>) {
    let mut pushed = Vec::new();
    let mut rest = Map::new();
    for (field, condition) in filter {
        if field.contains('.') {
            rest.insert(field.clone(), condition.clone());
            continue;
        }
        match condition {
            Value::Object(ops) if !ops.is_empty() && ops.keys().all(|k| k == "$eq" || k == "$ne") => {
                for (op, operand) in ops {
                    if op == "$eq" {
                        pushed.push(Pushed::Eq(field.clone(), operand.clone()));
                    } else {
                        pushed.push(Pushed::Ne(field.clone(), operand.clone()));
                    }
                }
            }
            Value::Object(_) => {
                rest.insert(field.clone(), condition.clone());
            }
            plain => pushed.push(Pushed::Eq(field.clone(), plain.clone())),
        }
    }
    (pushed, rest)
}

fn push_conditions(qb: &mut QueryBuilder<'_, Postgres>, pushed: &[Pushed]) {
    for condition in pushed {
        match condition {
            Pushed::Eq(field, value) => {
                // Containment uses the GIN index; the equality makes it exact.
                qb.push(" AND s.value @> ")
                    .push_bind(Json(json!({ field.clone(): value.clone() })))
                    .push("::jsonb AND s.value -> ")
                    .push_bind(field.clone())
                    .push(" = ")
                    .push_bind(Json(value.clone()))
                    .push("::jsonb");
            }
            Pushed::Ne(field, value) => {
                qb.push(" AND s.value -> ")
                    .push_bind(field.clone())
                    .push(" IS DISTINCT FROM ")
                    .push_bind(Json(value.clone()))
                    .push("::jsonb");
            }
        }
    }
}

/// prefix, key, value, created_at, updated_at.
type ItemRow = (String, String, Json<Value>, String, String);
/// An item row with one of its embeddings.
type VectorRow = (String, String, Json<Value>, String, String, Vec<f32>);

fn item((prefix, key, value, created_at, updated_at): ItemRow) -> Item {
    Item {
        namespace: decode_ns(&prefix),
        key,
        value: value.0,
        created_at,
        updated_at,
    }
}

impl PostgresStore {
    pub(super) async fn search_items(
        &self,
        prefix: &[String],
        query: SearchQuery,
    ) -> Result<Vec<SearchItem>> {
        Filter::parse(&query.filter)?;
        let (pushed, rest) = split_filter(&query.filter);
        let rest = Filter::parse(&rest)?;
        let query_vector = match (&query.query, &self.index) {
            (Some(text), Some(index)) => self.embed(index, vec![text.clone()]).await?.pop(),
            _ => None,
        };
        if !storable_labels(prefix) || query.limit == 0 {
            return Ok(Vec::new());
        }
        self.migrate().await?;
        let refresh = query.refresh_ttl.unwrap_or(self.ttl.refresh_on_read);

        let columns = format!(
            "s.prefix, s.key, s.value, {}, {}",
            rfc3339("s.created_at"),
            rfc3339("s.updated_at")
        );
        let results: Vec<SearchItem> = match query_vector {
            None => {
                let mut qb = QueryBuilder::<Postgres>::new(format!(
                    "SELECT {columns} FROM graphloom_store s \
                     WHERE (s.expires_at IS NULL OR s.expires_at > now())"
                ));
                push_prefix(&mut qb, "s.prefix", prefix);
                push_conditions(&mut qb, &pushed);
                qb.push(" ORDER BY s.updated_at DESC, s.prefix, s.key");
                let in_sql = rest.is_empty();
                if in_sql {
                    qb.push(" LIMIT ")
                        .push_bind(i64::try_from(query.limit).unwrap_or(i64::MAX))
                        .push(" OFFSET ")
                        .push_bind(i64::try_from(query.offset).unwrap_or(i64::MAX));
                }
                let rows: Vec<ItemRow> = qb
                    .build_query_as()
                    .fetch_all(&self.pool)
                    .await
                    .during("store search")?;
                let found = rows
                    .into_iter()
                    .map(item)
                    .map(|item| SearchItem { item, score: None });
                if in_sql {
                    found.collect()
                } else {
                    found
                        .filter(|f| rest.matches(&f.item.value))
                        .skip(query.offset)
                        .take(query.limit)
                        .collect()
                }
            }
            Some(q) => {
                let mut qb = QueryBuilder::<Postgres>::new(format!(
                    "SELECT {columns}, v.embedding FROM graphloom_store s \
                     JOIN graphloom_store_vectors v ON v.prefix = s.prefix AND v.key = s.key \
                     WHERE (s.expires_at IS NULL OR s.expires_at > now())"
                ));
                push_prefix(&mut qb, "s.prefix", prefix);
                push_conditions(&mut qb, &pushed);
                let rows: Vec<VectorRow> = qb
                    .build_query_as()
                    .fetch_all(&self.pool)
                    .await
                    .during("store vector search")?;
                let mut best: HashMap<(String, String), SearchItem> = HashMap::new();
                for (prefix, key, value, created_at, updated_at, embedding) in rows {
                    let score = cosine(&q, &embedding);
                    match best.get_mut(&(prefix.clone(), key.clone())) {
                        Some(hit) => {
                            if hit.score.is_some_and(|s| score > s) {
                                hit.score = Some(score);
                            }
                        }
                        None => {
                            let found = SearchItem {
                                item: item((prefix.clone(), key.clone(), value, created_at, updated_at)),
                                score: Some(score),
                            };
                            best.insert((prefix, key), found);
                        }
                    }
                }
                let mut hits: Vec<SearchItem> = best
                    .into_values()
                    .filter(|f| rest.matches(&f.item.value))
                    .collect();
                hits.sort_by(|a, b| {
                    let by_score = match (a.score, b.score) {
                        (Some(x), Some(y)) => y.total_cmp(&x),
                        _ => Ordering::Equal,
                    };
                    by_score
                        .then_with(|| b.item.updated_at.cmp(&a.item.updated_at))
                        .then_with(|| a.item.namespace.cmp(&b.item.namespace))
                        .then_with(|| a.item.key.cmp(&b.item.key))
                });
                hits.into_iter().skip(query.offset).take(query.limit).collect()
            }
        };

        if refresh && !results.is_empty() {
            let (prefixes, keys): (Vec<String>, Vec<String>) = results
                .iter()
                .map(|f| (super::encode_ns(&f.item.namespace), f.item.key.clone()))
                .unzip();
            // The rows are locked in key order first: concurrent refreshes of overlapping
            // results (whose order differs) would otherwise lock them in the join's order
            // and could deadlock each other.
            sqlx::query(
                "WITH target AS (
                     SELECT s.prefix, s.key FROM graphloom_store s
                     JOIN unnest($1::text[], $2::text[]) AS r(prefix, key)
                       ON s.prefix = r.prefix AND s.key = r.key
                     WHERE s.ttl IS NOT NULL
                     ORDER BY s.prefix, s.key
                     FOR UPDATE OF s
                 )
                 UPDATE graphloom_store s SET expires_at = now() + s.ttl
                 FROM target t WHERE s.prefix = t.prefix AND s.key = t.key",
            )
            .bind(prefixes)
            .bind(keys)
            .execute(&self.pool)
            .await
            .during("store search: refresh ttl")?;
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn splits_what_sql_does_exactly() {
        let (pushed, rest) = split_filter(&map(json!({
            "kind": "note",
            "tags": ["a", "b"],
            "n": {"$gt": 3},
            "s": {"$ne": "x", "$eq": "y"},
            "author.name": "ada",
            "author": {"name": "ada"},
        })));
        assert_eq!(
            pushed,
            vec![
                // In the filter's own order (JSON objects keep it).
                Pushed::Eq("kind".into(), json!("note")),
                Pushed::Eq("tags".into(), json!(["a", "b"])),
                Pushed::Ne("s".into(), json!("x")),
                Pushed::Eq("s".into(), json!("y")),
            ]
        );
        let mut keys: Vec<&String> = rest.keys().collect();
        keys.sort();
        assert_eq!(keys, ["author", "author.name", "n"]);
    }
}
