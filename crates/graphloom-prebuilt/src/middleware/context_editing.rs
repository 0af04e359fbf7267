//! [`ContextEditing`]: when the conversation sent to the model grows past a token
//! budget, replace the results of older tool calls with a placeholder (LangChain's
//! `ContextEditingMiddleware` with `ClearToolUsesEdit`). Only the request is edited; the
//! state keeps the full results.

use super::{Hook, Hooks, Middleware, ModelNext, ModelRequest, ModelResponse};
use futures::future::BoxFuture;
use graphloom_core::{Message, MessageKind, NodeError};
use serde_json::Value;
use std::collections::HashSet;

/// The token count of messages: the provider-independent estimate of
/// [`graphloom_llm::estimate_tokens`] over their text, tool calls included.
#[must_use]
pub fn count_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| {
            let calls: u64 = m
                .tool_calls
                .iter()
                .map(|c| {
                    graphloom_llm::estimate_tokens(&c.name)
                        + graphloom_llm::estimate_tokens(&c.args.to_string())
                })
                .sum();
            graphloom_llm::estimate_tokens(&m.text()) + calls
        })
        .sum()
}

/// Clear old tool results over a token budget; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct ContextEditing {
    trigger: u64,
    keep: usize,
    clear_at_least: u64,
    exclude: HashSet<String>,
    placeholder: String,
}

impl Default for ContextEditing {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextEditing {
    /// Past 100,000 tokens, clear all tool results but the last 3.
    pub fn new() -> Self {
        Self {
            trigger: 100_000,
            keep: 3,
            clear_at_least: 0,
            exclude: HashSet::new(),
            placeholder: "[cleared]".to_owned(),
        }
    }
    /// Edit when the request is over `tokens`.
    pub fn trigger_tokens(mut self, tokens: u64) -> Self {
        self.trigger = tokens;
        self
    }
    /// Keep the last `n` tool results.
    pub fn keep(mut self, n: usize) -> Self {
        self.keep = n;
        self
    }
    /// Once editing, clear results until at least `tokens` are saved (0: clear every
    /// result but the kept ones).
    pub fn clear_at_least(mut self, tokens: u64) -> Self {
        self.clear_at_least = tokens;
        self
    }
    /// Never clear the results of these tools.
    pub fn exclude_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.exclude = names.into_iter().map(Into::into).collect();
        self
    }
    /// The text put in place of a cleared result.
    pub fn placeholder(mut self, text: impl Into<String>) -> Self {
        self.placeholder = text.into();
        self
    }

    /// `messages` with old tool results cleared, if they are over the trigger.
    pub fn edit(&self, messages: &mut [Message]) {
        if count_tokens(messages) <= self.trigger {
            return;
        }
        let candidates: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.kind == MessageKind::Tool)
            .filter(|(_, m)| !m.name.as_ref().is_some_and(|n| self.exclude.contains(n)))
            .filter(|(_, m)| m.extra.get("context_editing").is_none())
            .map(|(i, _)| i)
            .collect();
        let clearable = candidates.len().saturating_sub(self.keep);
        let mut saved = 0u64;
        for &i in candidates.iter().take(clearable) {
            if self.clear_at_least > 0 && saved >= self.clear_at_least {
                break;
            }
            let m = &mut messages[i];
            saved += graphloom_llm::estimate_tokens(&m.text());
            m.content = Value::String(self.placeholder.clone());
            m.extra.insert(
                "context_editing".into(),
                serde_json::json!({"cleared": true, "strategy": "clear_tool_uses"}),
            );
        }
    }
}

impl Middleware for ContextEditing {
    fn name(&self) -> &str {
        "ContextEditingMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn wrap_model_call<'a>(
        &'a self,
        mut request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        self.edit(&mut request.messages);
        next.call(request)
    }
}
