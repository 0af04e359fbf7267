//! Vector search: the [`Embedder`] a store calls, its [`IndexConfig`], [`cosine`] similarity,
//! and [`HashEmbedder`], a deterministic embedder for tests and offline use.

use super::filter::value_at_path;
use crate::error::Result;
use futures::future::BoxFuture;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// Index field naming the whole value, embedded as its JSON text.
pub const WHOLE_VALUE: &str = "$";

/// Turns texts into vectors for vector search.
pub trait Embedder: Send + Sync {
    /// One vector per text, in order, each of the index's `dims`.
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>>;
}

/// Vector-search settings of a store.
#[derive(Clone)]
pub struct IndexConfig {
    /// Length of every vector the embedder returns.
    pub dims: usize,
    /// The embedder.
    pub embedder: Arc<dyn Embedder>,
    /// What to embed of each value: [`WHOLE_VALUE`] (`"$"`, the default) or top-level / dotted
    /// paths whose string values (or the strings of an array there) are embedded.
    pub fields: Vec<String>,
}

impl IndexConfig {
    /// Embed whole values with `embedder`, which returns vectors of `dims`.
    pub fn new(dims: usize, embedder: Arc<dyn Embedder>) -> Self {
        Self {
            dims,
            embedder,
            fields: vec![WHOLE_VALUE.to_owned()],
        }
    }
    /// Embed these fields instead of the whole value.
    #[must_use]
    pub fn fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }
}

impl fmt::Debug for IndexConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexConfig")
            .field("dims", &self.dims)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}

/// The texts of `value` to embed for index field `path`: the whole value as JSON for
/// [`WHOLE_VALUE`]; else the string at the path, or each string of an array at the path.
/// Anything else (missing field, number, object) gives no text.
#[must_use]
pub fn texts_at_path(value: &Value, path: &str) -> Vec<String> {
    if path == WHOLE_VALUE {
        return vec![value.to_string()];
    }
    match value_at_path(value, path) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Cosine similarity of two vectors, in `[-1, 1]`; 0 if either is all zeros or their
/// lengths differ.
#[must_use]
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    let score = dot / (na.sqrt() * nb.sqrt());
    if score.is_nan() {
        0.0
    } else {
        score.clamp(-1.0, 1.0)
    }
}

/// A deterministic embedder **for tests and offline use**, not for real semantic search.
///
/// Each text becomes a bag of words (lower-cased alphanumeric runs), each word hashed to one
/// of `dims` slots with a hashed sign; the vector is normalized to unit length (all zeros for
/// a text without words). Texts sharing words therefore score higher than unrelated ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashEmbedder {
    /// Length of the vectors.
    pub dims: usize,
}

impl HashEmbedder {
    /// An embedder of `dims`-long vectors.
    #[must_use]
    pub fn new(dims: usize) -> Self {
        Self { dims }
    }

    /// The vector of one text.
    #[must_use]
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dims];
        if self.dims == 0 {
            return v;
        }
        let dims = self.dims as u64;
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let h = xxhash_rust::xxh3::xxh3_64(word.to_lowercase().as_bytes());
            // Both values are below `dims`, which came from a usize.
            let slot = usize::try_from(h % dims).unwrap_or_default();
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            v[slot] += sign;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            for x in &mut v {
                *x /= norm;
            }
        }
        v
    }
}

impl Embedder for HashEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>>> {
        let vectors = texts.iter().map(|t| self.embed_one(t)).collect();
        Box::pin(futures::future::ready(Ok(vectors)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cosine_basics() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-9);
        assert!((cosine(&[1.0, 0.0], &[-3.0, 0.0]) + 1.0).abs() < 1e-9);
        assert!(cosine(&[1.0, 0.0], &[0.0, 5.0]).abs() < 1e-9);
        assert!((cosine(&[1.0, 1.0], &[1.0, 0.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[], &[]), 0.0);
    }

    #[tokio::test]
    async fn hash_embedder_is_deterministic_and_unit_length() {
        let e = HashEmbedder::new(64);
        let out = e
            .embed(vec![
                "Rust async runtime".into(),
                "rust ASYNC runtime".into(),
                "...".into(),
            ])
            .await
            .unwrap();
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|v| v.len() == 64));
        assert_eq!(out[0], out[1], "case-insensitive and deterministic");
        let norm: f32 = out[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(out[2].iter().all(|&x| x == 0.0));
        let q = e.embed_one("async rust");
        let far = e.embed_one("sourdough bread baking");
        assert!(cosine(&q, &out[0]) > cosine(&q, &far));
        assert!(HashEmbedder::new(0).embed_one("x").is_empty());
    }

    #[test]
    fn texts_at_paths() {
        let v = json!({"title": "hi", "tags": ["a", 1, "b"], "n": 3, "meta": {"s": "deep"}});
        assert_eq!(texts_at_path(&v, "$"), vec![v.to_string()]);
        assert_eq!(texts_at_path(&v, "title"), vec!["hi"]);
        assert_eq!(texts_at_path(&v, "tags"), vec!["a", "b"]);
        assert_eq!(texts_at_path(&v, "meta.s"), vec!["deep"]);
        assert!(texts_at_path(&v, "n").is_empty());
        assert!(texts_at_path(&v, "nope").is_empty());
    }
}
