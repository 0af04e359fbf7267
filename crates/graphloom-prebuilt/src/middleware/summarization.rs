//! [`Summarization`]: when the conversation grows past a number of tokens or messages,
//! replace its older part with a summary written by a model, keeping the last messages
//! as they are (LangChain's `SummarizationMiddleware`).
//!
//! The cut never separates a model's tool calls from their results: a cut that would
//! land on a tool result moves back to the AI message that made the call. The state's
//! conversation becomes `[summary, kept messages...]`, where the summary is a human
//! message `Here is a summary of the conversation to date:\n\n<summary>` (marked
//! `lc_source: summarization`).

use super::context_editing::count_tokens;
use super::{Hook, HookFuture, HookResult, Hooks, Middleware};
use crate::create_agent::{AgentGraphState, AgentGraphUpdate};
use graphloom_core::{Message, MessageKind, Runtime};
use graphloom_llm::{ChatOptions, DynChatModel};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;

/// The default instructions of the summarising call (the conversation follows them).
pub const DEFAULT_SUMMARY_PROMPT: &str = "Extract the most important context from the conversation below: \
the user's goal, decisions and their reasons, facts learned from tools, artifacts created or changed, and \
what remains to do. This summary replaces the conversation, so keep everything needed to continue and nothing \
else. Answer with the summary only.";

/// When to summarise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// When the conversation has more than this many tokens (estimated).
    Tokens(u64),
    /// When it has more than this many messages.
    Messages(usize),
}

/// Summarise older messages; see the [module docs](self).
#[derive(Clone)]
#[must_use]
pub struct Summarization {
    model: Arc<dyn DynChatModel>,
    trigger: Trigger,
    keep: usize,
    prompt: String,
}

impl std::fmt::Debug for Summarization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summarization")
            .field("model", &self.model.dyn_model_name())
            .field("trigger", &self.trigger)
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

/// Where to cut `messages` to keep about `keep` of them without separating a tool call
/// from its results: everything before the index is summarised.
#[must_use]
pub fn safe_cutoff(messages: &[Message], keep: usize) -> usize {
    if messages.len() <= keep {
        return 0;
    }
    let cut = messages.len() - keep;
    if messages[cut].kind != MessageKind::Tool {
        return cut;
    }
    let mut ids: HashSet<&str> = HashSet::new();
    let mut idx = cut;
    while idx < messages.len() && messages[idx].kind == MessageKind::Tool {
        if let Some(id) = messages[idx].tool_call_id.as_deref() {
            ids.insert(id);
        }
        idx += 1;
    }
    for i in (0..cut).rev() {
        let m = &messages[i];
        if m.kind == MessageKind::Ai && m.tool_calls.iter().any(|c| ids.contains(c.id.as_str())) {
            return i;
        }
    }
    idx
}

impl Summarization {
    /// Summarise with `model` when `trigger` fires, keeping the last 20 messages.
    pub fn new(model: Arc<dyn DynChatModel>, trigger: Trigger) -> Self {
        Self {
            model,
            trigger,
            keep: 20,
            prompt: DEFAULT_SUMMARY_PROMPT.to_owned(),
        }
    }
    /// Keep the last `n` messages (moved back to keep tool calls with their results).
    pub fn keep_messages(mut self, n: usize) -> Self {
        self.keep = n;
        self
    }
    /// The instructions of the summarising call.
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    fn triggered(&self, messages: &[Message]) -> bool {
        match self.trigger {
            Trigger::Tokens(n) => count_tokens(messages) > n,
            Trigger::Messages(n) => messages.len() > n,
        }
    }
}

fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        let who = match m.kind {
            MessageKind::Human => "Human",
            MessageKind::Ai => "AI",
            MessageKind::Tool => "Tool",
            MessageKind::System => "System",
            MessageKind::Remove => continue,
        };
        out.push_str(who);
        out.push_str(": ");
        out.push_str(&m.text());
        for c in &m.tool_calls {
            out.push_str(&format!(" [calls {}({})]", c.name, c.args));
        }
        out.push('\n');
    }
    out
}

impl Middleware for Summarization {
    fn name(&self) -> &str {
        "SummarizationMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::BeforeModel])
    }
    fn before_model<'a>(&'a self, state: &'a AgentGraphState, _rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let messages = state.messages.to_vec();
            if !self.triggered(&messages) {
                return Ok(HookResult::none());
            }
            let cut = safe_cutoff(&messages, self.keep);
            if cut == 0 {
                return Ok(HookResult::none());
            }
            let ask = vec![
                Message::system(self.prompt.clone()),
                Message::human(format!("<messages>\n{}</messages>", transcript(&messages[..cut]))),
            ];
            let options = ChatOptions::new();
            let summary = super::quietly(self.model.dyn_invoke(&ask, &options))
                .await
                .map_err(graphloom_llm::Error::into_node_error)?;
            let mut head = Message::human(format!(
                "Here is a summary of the conversation to date:\n\n{}",
                summary.text()
            ));
            head.id = Some(graphloom_llm::new_message_id());
            head.extra
                .insert("additional_kwargs".into(), json!({"lc_source": "summarization"}));
            let mut kept = vec![head];
            kept.extend(messages[cut..].iter().cloned());
            Ok(HookResult::update(
                AgentGraphUpdate::new().messages_overwrite(kept),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphloom_core::ToolCall;

    #[test]
    fn the_cut_keeps_tool_calls_with_their_results() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "t".into(),
            args: json!({}),
        };
        let msgs = vec![
            Message::human("q"),
            Message::ai_with_tool_calls("", vec![call("a"), call("b")]),
            Message::tool("ra", "a"),
            Message::tool("rb", "b"),
            Message::ai("answer"),
        ];
        // Keeping 2 would cut between the two results: the cut moves to the AI message.
        assert_eq!(safe_cutoff(&msgs, 2), 1);
        assert_eq!(safe_cutoff(&msgs, 3), 1);
        assert_eq!(safe_cutoff(&msgs, 1), 4);
        assert_eq!(safe_cutoff(&msgs, 10), 0);
    }
}
