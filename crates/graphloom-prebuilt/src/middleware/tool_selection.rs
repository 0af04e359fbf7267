//! [`ToolSelector`]: when many tools are registered, let a smaller model pick the few
//! that fit the user's request before each call, so the main model sees only those
//! (LangChain's `LLMToolSelectorMiddleware`).

use super::{Hook, Hooks, Middleware, ModelNext, ModelRequest, ModelResponse};
use futures::future::BoxFuture;
use graphloom_core::{Message, MessageKind, NodeError};
use graphloom_llm::{ChatModelExt, ChatOptions, DynChatModel};
use std::collections::HashSet;
use std::sync::Arc;

/// The selector's instructions.
pub const DEFAULT_SELECTION_PROMPT: &str =
    "Your goal is to select the most relevant tools for answering the user's query.";

/// The selector model's answer.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct ToolSelection {
    /// Names of the tools to offer, most relevant first.
    pub tools: Vec<String>,
}

/// Let a model pick the tools offered; see the [module docs](self).
#[derive(Clone)]
#[must_use]
pub struct ToolSelector {
    model: Arc<dyn DynChatModel>,
    max_tools: Option<usize>,
    always: Vec<String>,
    prompt: String,
}

impl std::fmt::Debug for ToolSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSelector")
            .field("model", &self.model.dyn_model_name())
            .field("max_tools", &self.max_tools)
            .field("always", &self.always)
            .finish_non_exhaustive()
    }
}

impl ToolSelector {
    /// Select with `model`.
    pub fn new(model: Arc<dyn DynChatModel>) -> Self {
        Self {
            model,
            max_tools: None,
            always: Vec::new(),
            prompt: DEFAULT_SELECTION_PROMPT.to_owned(),
        }
    }
    /// Offer at most `n` selected tools (the first `n` the selector names).
    pub fn max_tools(mut self, n: usize) -> Self {
        self.max_tools = Some(n);
        self
    }
    /// Always offer these tools (not counted in `max_tools`).
    pub fn always_include<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.always = names.into_iter().map(Into::into).collect();
        self
    }
    /// The selector's instructions.
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }
}

impl Middleware for ToolSelector {
    fn name(&self) -> &str {
        "LLMToolSelectorMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn check(&self, agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        for name in &self.always {
            if !agent.tools.contains(name) {
                return Err(crate::Error::middleware(
                    self.name(),
                    format!("always_include names `{name}`, which is not a tool of the agent"),
                ));
            }
        }
        Ok(())
    }
    fn wrap_model_call<'a>(
        &'a self,
        mut request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        Box::pin(async move {
            let candidates: Vec<_> = request
                .tools
                .iter()
                .filter(|t| !self.always.contains(&t.name))
                .cloned()
                .collect();
            if candidates.is_empty() {
                return next.call(request).await;
            }
            let Some(query) = request
                .messages
                .iter()
                .rev()
                .find(|m| m.kind == MessageKind::Human)
                .map(Message::text)
            else {
                return next.call(request).await;
            };
            let mut listing = String::new();
            for t in &candidates {
                listing.push_str(&format!("- {}: {}\n", t.name, t.description));
            }
            let mut system = self.prompt.clone();
            if let Some(n) = self.max_tools {
                system.push_str(&format!(
                    "\nIMPORTANT: List the tool names in order of relevance, with at most {n} tools."
                ));
            }
            let ask = vec![
                Message::system(format!("{system}\n\nAvailable tools:\n{listing}")),
                Message::human(query),
            ];
            let model = Arc::clone(&self.model);
            let chosen: ToolSelection = super::quietly(async move {
                model
                    .invoke_structured::<ToolSelection>(&ask, &ChatOptions::new())
                    .await
            })
            .await
            .map_err(graphloom_llm::Error::into_node_error)?;
            let known: HashSet<&str> = candidates.iter().map(|t| t.name.as_str()).collect();
            let mut picked: Vec<String> = Vec::new();
            for name in chosen.tools {
                if known.contains(name.as_str()) && !picked.contains(&name) {
                    picked.push(name);
                }
            }
            if let Some(n) = self.max_tools {
                picked.truncate(n);
            }
            request
                .tools
                .retain(|t| self.always.contains(&t.name) || picked.contains(&t.name));
            next.call(request).await
        })
    }
}
