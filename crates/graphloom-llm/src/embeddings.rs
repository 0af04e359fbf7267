//! Embeddings for a store's vector index: [`OpenAiEmbeddings`] (OpenAI's `/embeddings`,
//! or any server speaking it) and [`index_from_spec`], which reads the index a program's
//! store should use from a string such as `openai:text-embedding-3-small` or `hash`.

use crate::error::{Error, Result};
use crate::http::HttpSettings;
use futures::future::BoxFuture;
use graphloom_core::store::{Embedder, HashEmbedder, IndexConfig};
use graphloom_core::{BackendError, BackendErrorKind};
use serde_json::{json, Value};
use std::sync::Arc;

/// The environment variable naming a program's embedder (see [`index_from_spec`]).
pub const EMBEDDINGS_ENV: &str = "GRAPHLOOM_EMBEDDINGS";

/// The environment variable giving the vectors' length of a model [`index_from_spec`] does
/// not know.
pub const EMBEDDINGS_DIMS_ENV: &str = "GRAPHLOOM_EMBEDDINGS_DIMS";

/// Dimensions of the offline hashing embedder when `hash` names no length.
pub const HASH_DIMS: usize = 256;

/// An [`Embedder`] calling an OpenAI-compatible `POST {base}/embeddings` with a batch of
/// texts: OpenAI itself, Ollama, vLLM, LiteLLM, a local model server.
#[derive(Debug, Clone)]
pub struct OpenAiEmbeddings {
    http: HttpSettings,
    model: String,
    dims: usize,
}

impl OpenAiEmbeddings {
    /// `model` at OpenAI (`https://api.openai.com/v1`), returning vectors of `dims`.
    #[must_use]
    pub fn new(model: impl Into<String>, dims: usize) -> Self {
        Self {
            http: HttpSettings::new("https://api.openai.com/v1"),
            model: model.into(),
            dims,
        }
    }

    /// Another server speaking the same wire format (`http://127.0.0.1:11434/v1`).
    #[must_use]
    pub fn base_url(mut self, url: impl AsRef<str>) -> Self {
        let mut http = HttpSettings::new(url.as_ref());
        http.headers = self.http.headers;
        http.retry = self.http.retry;
        self.http = http;
        self
    }

    /// Send `Authorization: Bearer <key>`.
    ///
    /// # Errors
    /// When the key is not valid header text.
    pub fn api_key(mut self, key: impl AsRef<str>) -> Result<Self> {
        self.http
            .set_header("authorization", &format!("Bearer {}", key.as_ref()), true)?;
        Ok(self)
    }

    /// The vectors' length.
    #[must_use]
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// One vector per text, in order.
    ///
    /// # Errors
    /// HTTP failures (after retries), and an answer that is not the wire format or whose
    /// vectors are not `dims` long.
    pub async fn embed_texts(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let n = texts.len();
        let body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        let url = self.http.url("/v1/embeddings");
        let raw = self.http.post_json("embeddings", &url, &body, None).await?;
        let invalid = |message: String| Error::InvalidResponse {
            provider: "embeddings".into(),
            message,
            raw: crate::truncate_raw(&String::from_utf8_lossy(&raw)),
        };
        let v: Value = serde_json::from_slice(&raw).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let data = v["data"]
            .as_array()
            .ok_or_else(|| invalid("no `data` array".into()))?;
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        for (pos, d) in data.iter().enumerate() {
            let i = d["index"]
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(pos);
            let vector: Vec<f32> = d["embedding"]
                .as_array()
                .ok_or_else(|| invalid(format!("item {i} has no `embedding` array")))?
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid(format!("item {i} has a value that is not a number")))?;
            if vector.len() != self.dims {
                return Err(invalid(format!(
                    "item {i} has {} dimensions, the index {}",
                    vector.len(),
                    self.dims
                )));
            }
            match out.get_mut(i) {
                Some(slot) => *slot = Some(vector),
                None => return Err(invalid(format!("index {i} for {n} inputs"))),
            }
        }
        out.into_iter()
            .enumerate()
            .map(|(i, v)| v.ok_or_else(|| invalid(format!("no embedding for input {i}"))))
            .collect()
    }
}

impl Embedder for OpenAiEmbeddings {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, graphloom_core::Result<Vec<Vec<f32>>>> {
        Box::pin(async move {
            self.embed_texts(texts).await.map_err(|e| {
                let kind = if e.is_transient() {
                    BackendErrorKind::Connection
                } else {
                    BackendErrorKind::Other
                };
                graphloom_core::Error::Backend(BackendError::caused_by(kind, format!("embeddings: {e}"), e))
            })
        })
    }
}

/// The vectors' length of OpenAI's embedding models.
fn known_dims(model: &str) -> Option<usize> {
    match model {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        "nomic-embed-text" => Some(768),
        "mxbai-embed-large" => Some(1024),
        "all-minilm" => Some(384),
        _ => None,
    }
}

/// The vector index a string names, configured from the environment (read through `env`):
///
/// - `openai:<model>` — OpenAI's `/embeddings` (`OPENAI_API_KEY`; `OPENAI_BASE_URL` optional);
/// - `openai-compatible:<model>` — any server speaking it (`OPENAI_BASE_URL` required,
///   `OPENAI_API_KEY` optional);
/// - `ollama:<model>` — a local Ollama (`OLLAMA_BASE_URL`, default `http://127.0.0.1:11434/v1`);
/// - `hash` or `hash:<dims>` — the offline [`HashEmbedder`]: words hashed into a vector, so
///   texts sharing words rank higher; no meaning, no network. An explicit choice for
///   offline demos and tests, never a default.
///
/// The vectors' length is known for common models (`text-embedding-3-small`: 1536);
/// for others set `GRAPHLOOM_EMBEDDINGS_DIMS`. The index embeds each item's whole value.
///
/// # Errors
/// An unknown form, a missing variable, or a model of unknown length.
pub fn index_from_spec_with(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<IndexConfig> {
    let get = |k: &str| env(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let invalid = |reason: &str| Error::InvalidModelSpec {
        spec: spec.to_owned(),
        reason: reason.to_owned(),
    };
    let spec_t = spec.trim();
    let (kind, model) = spec_t.split_once(':').unwrap_or((spec_t, ""));
    let model = model.trim();
    let dims = |model: &str| -> Result<usize> {
        match get(EMBEDDINGS_DIMS_ENV) {
            Some(d) => d
                .parse::<usize>()
                .ok()
                .filter(|d| *d > 0)
                .ok_or_else(|| invalid(&format!("{EMBEDDINGS_DIMS_ENV}={d} is not a positive number"))),
            None => known_dims(model)
                .ok_or_else(|| invalid(&format!("unknown vector length: set {EMBEDDINGS_DIMS_ENV}"))),
        }
    };
    let need = |var: &str, what: &str, provider: &str| {
        get(var).ok_or_else(|| Error::MissingEnv {
            provider: provider.to_owned(),
            what: what.to_owned(),
            var: var.to_owned(),
        })
    };
    match kind.to_ascii_lowercase().as_str() {
        "hash" => {
            let d = if model.is_empty() {
                HASH_DIMS
            } else {
                model
                    .parse::<usize>()
                    .ok()
                    .filter(|d| *d > 0)
                    .ok_or_else(|| invalid("`hash:<dims>` takes a positive number"))?
            };
            Ok(IndexConfig::new(d, Arc::new(HashEmbedder::new(d))))
        }
        _ if model.is_empty() => Err(invalid(
            "expected `openai:<model>`, `openai-compatible:<model>`, `ollama:<model>` or `hash`",
        )),
        "openai" => {
            let key = need("OPENAI_API_KEY", "an API key", "openai")?;
            let mut e = OpenAiEmbeddings::new(model, dims(model)?);
            if let Some(base) = get("OPENAI_BASE_URL") {
                e = e.base_url(base);
            }
            let e = e.api_key(key)?;
            Ok(IndexConfig::new(e.dims(), Arc::new(e)))
        }
        "openai-compatible" => {
            let base = need("OPENAI_BASE_URL", "a base URL", "openai-compatible")?;
            let mut e = OpenAiEmbeddings::new(model, dims(model)?).base_url(base);
            if let Some(key) = get("OPENAI_API_KEY") {
                e = e.api_key(key)?;
            }
            Ok(IndexConfig::new(e.dims(), Arc::new(e)))
        }
        "ollama" => {
            let base = get("OLLAMA_BASE_URL").unwrap_or_else(|| crate::OLLAMA_DEFAULT_BASE_URL.to_owned());
            let e = OpenAiEmbeddings::new(model, dims(model)?).base_url(base);
            Ok(IndexConfig::new(e.dims(), Arc::new(e)))
        }
        _ => Err(invalid(
            "unknown embedder; use openai, openai-compatible, ollama or hash",
        )),
    }
}

/// [`index_from_spec_with`] reading the process environment.
///
/// # Errors
/// See [`index_from_spec_with`].
pub fn index_from_spec(spec: &str) -> Result<IndexConfig> {
    index_from_spec_with(spec, |k| std::env::var(k).ok())
}

/// The index [`EMBEDDINGS_ENV`] names, if it is set (see [`index_from_spec`]).
///
/// # Errors
/// When it is set to something [`index_from_spec`] refuses.
pub fn index_from_env() -> Result<Option<IndexConfig>> {
    match std::env::var(EMBEDDINGS_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
    {
        Some(spec) => index_from_spec(&spec).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let none = |_: &str| None;
        assert_eq!(
            index_from_spec_with("hash", none).map(|i| i.dims).ok(),
            Some(HASH_DIMS)
        );
        assert_eq!(
            index_from_spec_with("hash:64", none).map(|i| i.dims).ok(),
            Some(64)
        );
        assert!(index_from_spec_with("hash:0", none).is_err());
        let err = index_from_spec_with("openai:text-embedding-3-small", none)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("OPENAI_API_KEY"), "{err}");
        let env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:1/v1".to_owned());
        assert!(index_from_spec_with("openai-compatible:my-model", env).is_err());
        let env = |k: &str| match k {
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:1/v1".to_owned()),
            EMBEDDINGS_DIMS_ENV => Some("8".to_owned()),
            _ => None,
        };
        assert_eq!(
            index_from_spec_with("openai-compatible:my-model", env)
                .map(|i| i.dims)
                .ok(),
            Some(8)
        );
        assert!(index_from_spec_with("word2vec", none).is_err());
    }
}
