//! Tools, their registry, and how the executor runs one: per-attempt timeout, retries of
//! transient failures, and redaction of whatever comes back.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What went wrong.
    pub message: String,
    /// Whether another attempt may succeed.
    pub transient: bool,
}

impl ToolError {
    /// A failure worth retrying (a dropped connection, a 503).
    #[must_use]
    pub fn transient(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            transient: true,
        }
    }
    /// A failure that will repeat (bad input, not found).
    #[must_use]
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            transient: false,
        }
    }
}

/// A tool implementation: a query in, JSON out.
pub type ToolFn = Arc<dyn Fn(String) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;

/// A tool the planner may select.
#[derive(Clone)]
pub struct SupportTool {
    /// Stable name.
    pub name: String,
    /// What it does (shown to the planner).
    pub description: String,
    /// The implementation.
    pub run: ToolFn,
}

impl SupportTool {
    /// A tool from an async function of the query.
    pub fn new<F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            run: Arc::new(move |q| Box::pin(f(q))),
        }
    }
}

/// The tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<BTreeMap<String, SupportTool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// A registry of these tools.
    #[must_use]
    pub fn new(tools: impl IntoIterator<Item = SupportTool>) -> Self {
        Self {
            tools: Arc::new(tools.into_iter().map(|t| (t.name.clone(), t)).collect()),
        }
    }
    /// A tool by name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&SupportTool> {
        self.tools.get(name)
    }
    /// `name: description` lines for the planner's prompt.
    #[must_use]
    pub fn catalogue(&self) -> String {
        self.tools
            .values()
            .map(|t| format!("- {}: {}", t.name, t.description))
            .collect::<Vec<_>>()
            .join("\n")
    }
    /// Every tool name.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }
}

/// One call the planner wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedCall {
    /// The tool's name.
    pub tool: String,
    /// What to ask it (search terms, an order number, ...).
    pub query: String,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// It answered with something.
    Ok,
    /// It answered with nothing.
    Empty,
    /// It failed (after its retries), or was not allowed.
    Error,
    /// An attempt ran past the timeout.
    TimedOut,
}

/// A tool's (redacted) result, as the verifier and generator see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolOutput {
    /// Call id (the same on `on_tool_start` and `on_tool_end`).
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The query it was given.
    pub query: String,
    /// How it ended.
    pub status: ToolStatus,
    /// The redacted output, or the error message.
    pub output: Value,
    /// Attempts made.
    pub attempts: u32,
}

impl ToolOutput {
    /// True when it answered with something.
    #[must_use]
    pub fn usable(&self) -> bool {
        self.status == ToolStatus::Ok
    }
}

/// Whether a result counts as empty: null, `[]`, `{}`, `""`, or an object whose every
/// value is empty.
#[must_use]
pub fn is_empty_result(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_empty_result),
        _ => false,
    }
}

/// Run one call: up to `attempts` tries, each cut off after `timeout`; only transient
/// errors are retried (a timed-out attempt is not: a hanging dependency would hang again
/// and multiply the wait). The output is redacted before it leaves this function.
pub async fn run_tool(
    tool: &SupportTool,
    call_id: &str,
    query: &str,
    timeout: Duration,
    attempts: u32,
    backoff: Duration,
) -> ToolOutput {
    let mut made = 0;
    let (status, output) = loop {
        made += 1;
        match tokio::time::timeout(timeout, (tool.run)(query.to_owned())).await {
            Err(_) => {
                break (
                    ToolStatus::TimedOut,
                    json!({"error": format!("timed out after {} ms", timeout.as_millis())}),
                )
            }
            Ok(Ok(v)) if is_empty_result(&v) => break (ToolStatus::Empty, v),
            Ok(Ok(v)) => break (ToolStatus::Ok, v),
            Ok(Err(e)) if e.transient && made < attempts => {
                tokio::time::sleep(backoff * made).await;
            }
            Ok(Err(e)) => break (ToolStatus::Error, json!({"error": e.message})),
        }
    };
    ToolOutput {
        call_id: call_id.to_owned(),
        tool: tool.name.clone(),
        query: query.to_owned(),
        status,
        output: redact(&output),
        attempts: made,
    }
}

/// Keys whose values never leave the executor.
pub const SENSITIVE_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "ssn",
    "card_number",
    "cvv",
    "iban",
];

/// Redact a tool result: values under sensitive keys become `[REDACTED]`; inside strings,
/// e-mail addresses become `[EMAIL]` and runs of 13 to 19 digits (card numbers, spaces and
/// dashes allowed) become `[CARD]`.
#[must_use]
pub fn redact(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let key = k.to_ascii_lowercase().replace('-', "_");
                    if SENSITIVE_KEYS.iter().any(|s| key.contains(s)) {
                        (k.clone(), Value::String("[REDACTED]".into()))
                    } else {
                        (k.clone(), redact(v))
                    }
                })
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redact).collect()),
        Value::String(s) => Value::String(redact_text(s)),
        other => other.clone(),
    }
}

/// The string rules of [`redact`].
#[must_use]
pub fn redact_text(s: &str) -> String {
    let words: Vec<String> = s
        .split(' ')
        .map(|w| {
            let at = w.find('@');
            let is_email = at.is_some_and(|i| i > 0 && w[i + 1..].contains('.') && !w.ends_with('@'));
            if is_email {
                "[EMAIL]".to_owned()
            } else {
                w.to_owned()
            }
        })
        .collect();
    mask_cards(&words.join(" "))
}

fn mask_cards(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            // Extend over digits, spaces and dashes; count the digits.
            let mut j = i;
            let mut digits = 0;
            let mut last_digit = i;
            while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == ' ' || chars[j] == '-') {
                if chars[j].is_ascii_digit() {
                    digits += 1;
                    last_digit = j;
                }
                j += 1;
            }
            if (13..=19).contains(&digits) {
                out.push_str("[CARD]");
            } else {
                out.extend(&chars[i..=last_digit]);
            }
            i = last_digit + 1;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The example's tools, over the bundled data ([`crate::data`]): `kb_search` ranks the
/// help-centre articles against the query (BM25; nothing when no article shares a term with
/// it) and `order_lookup` reads the order table by the order number in the query (nothing
/// for an unknown number; the row includes the customer's contact and payment details,
/// which redaction removes).
#[must_use]
pub fn default_tools() -> ToolRegistry {
    ToolRegistry::new([
        SupportTool::new(
            "kb_search",
            "Search help-centre articles by keywords",
            |q: String| async move {
                let articles: Vec<Value> = crate::data::search(&q, 3)
                    .into_iter()
                    .map(|(a, score)| {
                        json!({"id": a.id, "title": a.title, "body": a.body,
                               "score": (score * 1000.0).round() / 1000.0})
                    })
                    .collect();
                Ok(json!({"articles": articles}))
            },
        ),
        SupportTool::new(
            "order_lookup",
            "Look up an order by its number",
            |q: String| async move {
                let numbers = crate::data::order_numbers(&q);
                let Some(wanted) = numbers.first() else {
                    return Err(ToolError::permanent("no order number in the query"));
                };
                Ok(crate::data::orders()
                    .iter()
                    .find(|o| &o.order_id == wanted)
                    .map_or_else(|| json!({"order": null}), crate::data::order_json))
            },
        ),
    ])
}
