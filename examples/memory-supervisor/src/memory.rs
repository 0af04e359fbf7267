//! The memory tiers on the graph's store.
//!
//! | tier | what | where |
//! |---|---|---|
//! | L1 working memory | this session's recent turns | the conversation in the state |
//! | L2 session facts | facts stated in this session, CIAR-scored | store `["memory", user, "sessions", session]` |
//! | L3 long-term knowledge | the user's facts, across sessions and threads | store `["memory", user, "knowledge"]` |
//!
//! Every namespace starts with the user id, which comes from the runtime
//! ([`crate::resolve_ids`]): one user's searches never see another's items. A fact stated
//! again overwrites itself (its key is its words, [`crate::ciar::fact_key`]).

use crate::ciar::{self, PROMOTION_THRESHOLD};
use crate::runtime_ids::{Ids, NoUser};
use crate::state::{MemoryHit, StoredFact, Tier};
use graphloom_core::store::{
    DynStore, HashEmbedder, IndexConfig, IndexFields, PutOptions, SearchItem, SearchQuery,
};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Searches ranked by similarity keep hits scoring at least this.
pub const MIN_RELEVANCE: f64 = 0.2;
/// Dimensions of the offline embedder.
pub const EMBEDDING_DIMS: usize = 256;

/// The vector index the example's stores use: the deterministic offline
/// [`HashEmbedder`] over each item's `content`. Swap in a real embedder for semantic search.
#[must_use]
pub fn memory_index() -> IndexConfig {
    IndexConfig::new(EMBEDDING_DIMS, Arc::new(HashEmbedder::new(EMBEDDING_DIMS))).fields(["content"])
}

/// How a fact is written: a store with a vector index (the example's [`memory_index`], or
/// the one a server is given with `GRAPHLOOM_EMBEDDINGS`) embeds its `content` only, so a
/// search ranks facts by what they say, not by their scores and timestamps.
fn fact_put() -> PutOptions {
    PutOptions::new().index(IndexFields::Fields(vec!["content".to_owned()]))
}

/// A memory failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// No user to read or write memory for.
    #[error(transparent)]
    NoUser(#[from] NoUser),
    /// The graph has no store.
    #[error("the graph has no store for long-term memory")]
    NoStore,
    /// The store failed.
    #[error("memory store: {0}")]
    Store(#[from] graphloom_core::Error),
}

/// Namespace of a session's facts (L2).
#[must_use]
pub fn session_namespace(ids: &Ids) -> Vec<String> {
    vec![
        "memory".into(),
        ids.user_id.clone(),
        "sessions".into(),
        ids.session_id.clone(),
    ]
}

/// Namespace of a user's long-term knowledge (L3).
#[must_use]
pub fn long_term_namespace(user_id: &str) -> Vec<String> {
    vec!["memory".into(), user_id.to_owned(), "knowledge".into()]
}

/// A clock: seconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The system clock.
#[must_use]
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default()
    })
}

const DAY_SECS: f64 = 86_400.0;

/// The memory of one user in one session.
#[derive(Clone)]
pub struct Memory {
    store: Arc<dyn DynStore>,
    ids: Ids,
    clock: Clock,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

/// The CIAR score of a stored fact at time `now`: its content scored with the days since
/// it was stated (`stated_at`) and since it was last used (`last_used_at`). A fact written
/// before these fields existed counts as stated and used now.
#[must_use]
pub fn current_ciar(value: &Value, now: f64) -> ciar::Ciar {
    let content = value.get("content").and_then(Value::as_str).unwrap_or_default();
    let stated = value.get("stated_at").and_then(Value::as_f64).unwrap_or(now);
    let used = value
        .get("last_used_at")
        .and_then(Value::as_f64)
        .unwrap_or(stated);
    ciar::score(content, (now - stated) / DAY_SECS, (now - used) / DAY_SECS)
}

fn hit(tier: Tier, item: &SearchItem, now: f64) -> MemoryHit {
    let v = &item.item.value;
    MemoryHit {
        tier,
        key: item.item.key.clone(),
        content: v
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        ciar: current_ciar(v, now).score,
        score: item.score.map(|s| (s * 1000.0).round() / 1000.0),
    }
}

fn relevant(items: &[SearchItem]) -> impl Iterator<Item = &SearchItem> {
    items
        .iter()
        .filter(|i| i.score.is_none_or(|s| s >= MIN_RELEVANCE))
}

impl Memory {
    /// The memory of `ids` on `store`.
    #[must_use]
    pub fn new(store: Arc<dyn DynStore>, ids: Ids) -> Self {
        Self {
            store,
            ids,
            clock: system_clock(),
        }
    }

    /// The same memory reading the time from `clock` (a test's or a replay's clock).
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Mark the facts `found` in `ns` as used now: their recency starts over.
    async fn touch(&self, ns: &[String], found: &[&SearchItem], now: f64) -> Result<(), MemoryError> {
        for item in found {
            let mut v = item.item.value.clone();
            if let Value::Object(o) = &mut v {
                o.insert("last_used_at".into(), json!(now));
                if !o.contains_key("stated_at") {
                    o.insert("stated_at".into(), json!(now));
                }
            }
            self.store.put(ns, &item.item.key, v, fact_put()).await?;
        }
        Ok(())
    }

    /// Whose memory this is.
    #[must_use]
    pub fn ids(&self) -> &Ids {
        &self.ids
    }

    /// Score `content`, write it to the session's facts (L2) and, when it scores at least
    /// [`PROMOTION_THRESHOLD`], to the user's long-term knowledge (L3).
    ///
    /// # Errors
    /// Store failures.
    pub async fn remember(&self, content: &str, source: &str) -> Result<StoredFact, MemoryError> {
        // Stated now: age and recency start at 1.
        let now = (self.clock)();
        let c = ciar::score(content, 0.0, 0.0);
        let key = ciar::fact_key(content);
        let promoted = c.score >= PROMOTION_THRESHOLD;
        let value = json!({
            "content": content,
            "ciar": c.score,
            "certainty": c.certainty,
            "impact": c.impact,
            "source": source,
            "session_id": self.ids.session_id,
            "promoted": promoted,
            "stated_at": now,
            "last_used_at": now,
        });
        self.store
            .put(&session_namespace(&self.ids), &key, value.clone(), fact_put())
            .await?;
        if promoted {
            self.store
                .put(&long_term_namespace(&self.ids.user_id), &key, value, fact_put())
                .await?;
        }
        Ok(StoredFact {
            key,
            content: content.to_owned(),
            ciar: c.score,
            promoted,
        })
    }

    /// This session's facts (L2) relevant to `query` whose CIAR score *now* (age since
    /// stated, recency since last used) is at least `min_ciar`. The facts returned count as
    /// used: their recency starts over.
    ///
    /// # Errors
    /// Store failures.
    pub async fn search_session(
        &self,
        query: &str,
        min_ciar: f64,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let now = (self.clock)();
        let ns = session_namespace(&self.ids);
        // The score depends on the time, so the store cannot filter it: read the session's
        // facts (a session holds few), keep those still scoring enough.
        let items = self
            .store
            .search(&ns, SearchQuery::new().query(query).limit(limit.max(1) * 20))
            .await?;
        let found: Vec<&SearchItem> = relevant(&items)
            .filter(|i| current_ciar(&i.item.value, now).score >= min_ciar)
            .take(limit)
            .collect();
        let hits = found.iter().map(|i| hit(Tier::L2, i, now)).collect();
        self.touch(&ns, &found, now).await?;
        Ok(hits)
    }

    /// The user's long-term knowledge (L3) relevant to `query`, from every session, with
    /// each fact's CIAR score now. The facts returned count as used.
    ///
    /// # Errors
    /// Store failures.
    pub async fn search_long_term(&self, query: &str, limit: usize) -> Result<Vec<MemoryHit>, MemoryError> {
        let now = (self.clock)();
        let ns = long_term_namespace(&self.ids.user_id);
        let items = self
            .store
            .search(&ns, SearchQuery::new().query(query).limit(limit))
            .await?;
        let found: Vec<&SearchItem> = relevant(&items).collect();
        let hits = found.iter().map(|i| hit(Tier::L3, i, now)).collect();
        self.touch(&ns, &found, now).await?;
        Ok(hits)
    }

    /// The user's most recently updated long-term facts.
    ///
    /// # Errors
    /// Store failures.
    pub async fn recent_long_term(&self, limit: usize) -> Result<Vec<MemoryHit>, MemoryError> {
        let items = self
            .store
            .search(
                &long_term_namespace(&self.ids.user_id),
                SearchQuery::new().limit(limit),
            )
            .await?;
        let now = (self.clock)();
        Ok(items.iter().map(|i| hit(Tier::L3, i, now)).collect())
    }
}
