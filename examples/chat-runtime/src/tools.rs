//! Tool contracts and the tool runner: the sole tool execution point.
//!
//! Pipeline, in this fixed order: validate the arguments against the input schema, execute,
//! validate the result against the output schema, redact it to the tool's allowlist (a tool
//! without an allowlist hard-fails), emit `tool_call_result`, return the result shape.
//! Every failure still emits a `tool_call_result` with the same `toolCallId`.

use crate::events::AiEvent;
use futures::future::BoxFuture;
use graphloom_llm::{ToolCall, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A tool implementation: arguments in, a JSON result or an error text out.
pub type ToolHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// A tool's contract: stable name, schemas, UI-safe result fields and its implementation.
#[derive(Clone)]
pub struct ToolContract {
    /// Stable `snake_case` name (also the UI's component key).
    pub name: String,
    /// What the tool does (for the model).
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of the result.
    pub output_schema: Value,
    /// Top-level result fields that may reach the stream. `None` makes every call fail with
    /// `redaction_failed`: a tool must say what is UI-safe.
    pub allowlist: Option<Vec<String>>,
    /// The implementation.
    pub handler: ToolHandler,
}

impl std::fmt::Debug for ToolContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContract")
            .field("name", &self.name)
            .field("allowlist", &self.allowlist)
            .finish_non_exhaustive()
    }
}

impl ToolContract {
    /// A contract with an async implementation.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        output_schema: Value,
        allowlist: Option<&[&str]>,
        f: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, String>> + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema,
            allowlist: allowlist.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            handler: Arc::new(move |v| Box::pin(f(v))),
        }
    }

    /// The spec offered to the model.
    #[must_use]
    pub fn spec(&self) -> ToolSpec {
        ToolSpec::new(&self.name, &self.description, self.input_schema.clone())
    }
}

/// Why a tool call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorCode {
    /// Arguments or result did not match the schema.
    Validation,
    /// The implementation failed.
    Execution,
    /// No such tool.
    Unavailable,
    /// The result could not be redacted (no allowlist, or not an object).
    RedactionFailed,
}

/// The result shape of [`ToolRunner::exec`].
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// The redacted value.
    Ok {
        /// The call id used on the stream.
        tool_call_id: String,
        /// The result, reduced to the allowlisted fields.
        value: Value,
    },
    /// The call failed; `safe_message` is fit for the user and the model.
    Err {
        /// The call id used on the stream.
        tool_call_id: String,
        /// Why.
        error_code: ToolErrorCode,
        /// A message without internals.
        safe_message: String,
    },
}

impl ToolOutcome {
    /// The call id.
    #[must_use]
    pub fn tool_call_id(&self) -> &str {
        match self {
            ToolOutcome::Ok { tool_call_id, .. } | ToolOutcome::Err { tool_call_id, .. } => tool_call_id,
        }
    }
    /// What the model sees in the tool message (the same UI-safe payload as the stream).
    #[must_use]
    pub fn payload(&self) -> Value {
        match self {
            ToolOutcome::Ok { value, .. } => value.clone(),
            ToolOutcome::Err {
                error_code,
                safe_message,
                ..
            } => json!({"errorCode": error_code, "safeMessage": safe_message}),
        }
    }
}

struct Bound {
    contract: ToolContract,
    input: Option<jsonschema::Validator>,
    output: Option<jsonschema::Validator>,
}

/// Name -> tool map plus the pipeline that runs them.
#[derive(Clone, Default)]
pub struct ToolRunner {
    tools: Arc<BTreeMap<String, Arc<Bound>>>,
}

impl std::fmt::Debug for ToolRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRunner")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRunner {
    /// A runner over these tools. A schema that does not compile leaves its tool uncallable
    /// (every call fails validation) rather than silently unchecked.
    #[must_use]
    pub fn new(tools: impl IntoIterator<Item = ToolContract>) -> Self {
        let map = tools
            .into_iter()
            .map(|c| {
                let input = jsonschema::validator_for(&c.input_schema).ok();
                let output = jsonschema::validator_for(&c.output_schema).ok();
                (
                    c.name.clone(),
                    Arc::new(Bound {
                        contract: c,
                        input,
                        output,
                    }),
                )
            })
            .collect();
        Self { tools: Arc::new(map) }
    }

    /// The specs to offer the model.
    #[must_use]
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|b| b.contract.spec()).collect()
    }

    /// Run one call through the pipeline, emitting `tool_call_start` and then exactly one
    /// `tool_call_result` with the same id through `emit`.
    pub async fn exec(&self, call: &ToolCall, emit: &(dyn Fn(AiEvent) + Send + Sync)) -> ToolOutcome {
        // The model's id when it gave one; otherwise the runner owns the id.
        let id = if call.id.is_empty() {
            format!("call_{}", uuid::Uuid::new_v4().simple())
        } else {
            call.id.clone()
        };
        emit(AiEvent::ToolCallStart {
            tool_call_id: id.clone(),
            tool_name: call.name.clone(),
            args: call.args.clone(),
        });
        let outcome = match self.pipeline(call).await {
            Ok(value) => ToolOutcome::Ok {
                tool_call_id: id.clone(),
                value,
            },
            Err((error_code, safe_message)) => ToolOutcome::Err {
                tool_call_id: id.clone(),
                error_code,
                safe_message,
            },
        };
        emit(AiEvent::ToolCallResult {
            tool_call_id: id,
            tool_name: call.name.clone(),
            result: outcome.payload(),
            is_error: matches!(outcome, ToolOutcome::Err { .. }),
        });
        outcome
    }

    async fn pipeline(&self, call: &ToolCall) -> Result<Value, (ToolErrorCode, String)> {
        let Some(bound) = self.tools.get(&call.name) else {
            return Err((ToolErrorCode::Unavailable, format!("no tool named {}", call.name)));
        };
        // 1. Validate the arguments.
        check(bound.input.as_ref(), &call.args, "arguments")?;
        // 2. Execute.
        let raw = (bound.contract.handler)(call.args.clone())
            .await
            .map_err(|_| (ToolErrorCode::Execution, format!("{} failed", call.name)))?;
        // 3. Validate the result.
        check(bound.output.as_ref(), &raw, "result")?;
        // 4. Redact per allowlist (hard fail without one).
        redact(&raw, bound.contract.allowlist.as_deref())
    }
}

fn check(
    validator: Option<&jsonschema::Validator>,
    value: &Value,
    what: &str,
) -> Result<(), (ToolErrorCode, String)> {
    let Some(v) = validator else {
        return Err((
            ToolErrorCode::Validation,
            format!("the tool's {what} schema is invalid"),
        ));
    };
    match v.iter_errors(value).next() {
        None => Ok(()),
        Some(e) => Err((ToolErrorCode::Validation, format!("{what} rejected: {e}"))),
    }
}

/// Keep only the allowlisted top-level fields of an object result; anything else (unknown
/// fields included) never passes through.
///
/// # Errors
/// `redaction_failed` when there is no allowlist or the result is not an object.
pub fn redact(value: &Value, allowlist: Option<&[String]>) -> Result<Value, (ToolErrorCode, String)> {
    let Some(allow) = allowlist else {
        return Err((ToolErrorCode::RedactionFailed, "the tool has no allowlist".into()));
    };
    let Value::Object(obj) = value else {
        return Err((
            ToolErrorCode::RedactionFailed,
            "the result is not an object".into(),
        ));
    };
    let kept: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| allow.iter().any(|a| a == *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Value::Object(kept))
}

/// The example's knowledge base, bundled with the crate: articles with a URL, title and
/// body, and internal fields (owner, revision) that must never reach the UI.
pub const KNOWLEDGE_JSON: &str = include_str!("../data/knowledge.json");

/// Words that carry no topic.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "any", "are", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "if",
    "in", "is", "it", "my", "of", "on", "or", "the", "to", "what", "when", "where", "why", "with", "you",
    "your",
];

/// Topic terms: lower-cased words without stopwords, a plural `s` removed.
fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|mut w| {
            if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                w.pop();
            }
            w
        })
        .collect()
}

/// The knowledge base's articles matching `query`, best first, at most `limit`: BM25
/// (k1 = 1.2, b = 0.75) over title and body, the title counted twice; articles sharing no
/// term with the query are left out.
#[must_use]
pub fn search_knowledge(query: &str, limit: usize) -> Vec<(Value, f64)> {
    let docs: Vec<Value> = serde_json::from_str(KNOWLEDGE_JSON).unwrap_or_default();
    let q: std::collections::BTreeSet<String> = terms(query).into_iter().collect();
    if q.is_empty() || docs.is_empty() {
        return Vec::new();
    }
    let text = |d: &Value| {
        let title = d["title"].as_str().unwrap_or_default();
        terms(&format!(
            "{title} {title} {}",
            d["body"].as_str().unwrap_or_default()
        ))
    };
    let tokenised: Vec<Vec<String>> = docs.iter().map(text).collect();
    let n = docs.len() as f64;
    let avg = tokenised.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut scored: Vec<(Value, f64)> = docs
        .into_iter()
        .zip(&tokenised)
        .map(|(d, words)| {
            let len = words.len() as f64;
            let score: f64 = q
                .iter()
                .map(|t| {
                    let tf = words.iter().filter(|w| *w == t).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = tokenised.iter().filter(|d| d.contains(t)).count() as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len / avg))
                })
                .sum();
            (d, score)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(limit);
    scored
}

/// The example's knowledge search over [`KNOWLEDGE_JSON`]: returns the matching documents
/// (full text, internal fields) of which only `query`, `resultCount` and `topUrl` are
/// UI-safe.
#[must_use]
pub fn knowledge_search() -> ToolContract {
    ToolContract::new(
        "knowledge_search",
        "Search the knowledge base",
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1}},
            "required": ["query"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "resultCount": {"type": "integer", "minimum": 0},
                "topUrl": {"type": ["string", "null"]},
                "documents": {"type": "array"}
            },
            "required": ["query", "resultCount"]
        }),
        Some(&["query", "resultCount", "topUrl"]),
        |args: Value| async move {
            let q = args["query"].as_str().unwrap_or_default().to_owned();
            let found = search_knowledge(&q, 5);
            let documents: Vec<Value> = found
                .iter()
                .map(|(d, score)| {
                    let mut d = d.clone();
                    d["score"] = json!((score * 1000.0).round() / 1000.0);
                    d
                })
                .collect();
            Ok(json!({
                "query": q,
                "resultCount": documents.len(),
                "topUrl": documents.first().map(|d| d["url"].clone()),
                "documents": documents,
            }))
        },
    )
}
