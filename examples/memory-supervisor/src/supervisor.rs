//! The top level (ADR-007 §2.2): a supervisor routing each user turn by intent to one of
//! three isolated sub-graphs, built with [`graphloom_prebuilt::supervisor::create_supervisor`].
//!
//! | intent | agent | sub-graph |
//! |---|---|---|
//! | `store` ("remember that ...") | `memory_writer` | CIAR score → promotion → parallel retrieval ([`crate::writer`]) |
//! | `recall` ("what do you remember about ...?") | `recall_agent` | ReAct with the granular tools |
//! | `chat` (anything else) | `assistant` | ReAct with the unified tools |
//!
//! Every agent hands control back; the supervisor finishes once the turn has an answer. The
//! router is a keyword classifier ([`RouterMode::Keywords`]) or the model with structured
//! output ([`RouterMode::Model`]), whose unusable answers fall back to the classifier.

use crate::agents::{react_agent, ASSISTANT_PROMPT, RECALL_PROMPT};
use crate::state::{MemoryState, MemoryStateUpdate};
use crate::tools::{granular_tools, unified_tools};
use crate::writer::memory_writer;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, Message, MessageKind};
use graphloom_llm::DynChatModel;
use graphloom_prebuilt::supervisor::{
    create_supervisor, Handoff, SupervisorAgent, SupervisorDecision, SupervisorOptions, SupervisorRouter,
};
use std::sync::Arc;

/// The memory writer agent.
pub const MEMORY_WRITER: &str = "memory_writer";
/// The retrieval agent.
pub const RECALL_AGENT: &str = "recall_agent";
/// The reasoning agent.
pub const ASSISTANT: &str = "assistant";

/// What the user wants from a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Remember something.
    Store,
    /// Recall something remembered.
    Recall,
    /// Anything else.
    Chat,
}

impl Intent {
    /// `store`, `recall` or `chat`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Store => "store",
            Intent::Recall => "recall",
            Intent::Chat => "chat",
        }
    }
    /// The agent serving it.
    #[must_use]
    pub fn agent(self) -> &'static str {
        match self {
            Intent::Store => MEMORY_WRITER,
            Intent::Recall => RECALL_AGENT,
            Intent::Chat => ASSISTANT,
        }
    }
    /// The intent an agent serves.
    #[must_use]
    pub fn of_agent(agent: &str) -> Option<Self> {
        match agent {
            MEMORY_WRITER => Some(Intent::Store),
            RECALL_AGENT => Some(Intent::Recall),
            ASSISTANT => Some(Intent::Chat),
            _ => None,
        }
    }
}

const RECALL_PHRASES: [&str; 9] = [
    "do you remember",
    "what do you know",
    "what do you remember",
    "what's my",
    "what is my",
    "what are my",
    "recall",
    "remind me",
    "did i tell you",
];
const STORE_PHRASES: [&str; 7] = [
    "remember that",
    "remember:",
    "please remember",
    "note that",
    "don't forget",
    "keep in mind",
    "remember my",
];

/// Classify a user message by keywords.
#[must_use]
pub fn classify(text: &str) -> Intent {
    let t = text.trim().to_lowercase();
    let recall = RECALL_PHRASES.iter().any(|p| t.contains(p));
    let store = STORE_PHRASES.iter().any(|p| t.contains(p));
    match (recall, store) {
        (true, true) if t.ends_with('?') => Intent::Recall,
        (_, true) => Intent::Store,
        (true, false) => Intent::Recall,
        (false, false) => Intent::Chat,
    }
}

/// The keyword router: finish once the last message is an answer, else route the last user
/// message by [`classify`].
#[must_use]
pub fn keyword_route(s: &MemoryState) -> Handoff {
    match s.messages.last() {
        None => Handoff::Finish,
        Some(m) if m.kind == MessageKind::Ai && m.tool_calls.is_empty() => Handoff::Finish,
        Some(_) => {
            let said = s
                .messages
                .iter()
                .rev()
                .find(|m| m.kind == MessageKind::Human)
                .map(Message::text)
                .unwrap_or_default();
            Handoff::to(classify(&said).agent())
        }
    }
}

/// How the supervisor routes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RouterMode {
    /// The keyword classifier.
    #[default]
    Keywords,
    /// The model (structured output), falling back to the classifier.
    Model,
}

/// What the graph is built from.
#[derive(Clone)]
pub struct GraphConfig {
    /// The model of the ReAct agents (and of the router in [`RouterMode::Model`]).
    pub model: Arc<dyn DynChatModel>,
    /// How the supervisor routes.
    pub router: RouterMode,
    /// Checkpoints (PostgreSQL or SQLite).
    pub checkpointer: Option<Arc<dyn DynCheckpointer>>,
    /// Long-term memory.
    pub store: Option<Arc<dyn DynStore>>,
}

impl std::fmt::Debug for GraphConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphConfig")
            .field("model", &self.model.dyn_model_name())
            .field("router", &self.router)
            .finish_non_exhaustive()
    }
}

/// The routing model's instructions (the agent list is appended by the router).
pub const ROUTER_PROMPT: &str = "You are the supervisor of a memory-augmented assistant. \
Route the user's latest message by intent: memory_writer when they ask you to remember something, \
recall_agent when they ask what you remember, assistant for anything else. \
Once the latest message is an assistant answer to the user's request, answer FINISH.";

fn record(_s: &MemoryState, d: &SupervisorDecision) -> Option<MemoryStateUpdate> {
    let mut u = MemoryStateUpdate::new().handoffs(vec![d.handoff.as_str().to_owned()]);
    if let Handoff::To(agent) = &d.handoff {
        u = u.intent(Intent::of_agent(agent).map(|i| i.as_str().to_owned()));
    }
    Some(u)
}

/// Build the supervisor graph.
///
/// # Errors
/// When a sub-graph or the supervisor does not compile.
pub fn build_graph(cfg: GraphConfig) -> graphloom_core::Result<CompiledGraph<MemoryState>> {
    let agents = vec![
        SupervisorAgent::subgraph(
            MEMORY_WRITER,
            "Remembers what the user asks to be remembered: scores it (CIAR), stores it, promotes it to long-term memory, recalls related memories.",
            memory_writer()?,
        ),
        SupervisorAgent::subgraph(
            RECALL_AGENT,
            "Answers questions about what the user said before, with the granular memory tools.",
            react_agent(RECALL_AGENT, Arc::clone(&cfg.model), granular_tools(), RECALL_PROMPT)?,
        ),
        SupervisorAgent::subgraph(
            ASSISTANT,
            "General conversation, using the unified memory tools when useful.",
            react_agent(ASSISTANT, Arc::clone(&cfg.model), unified_tools(), ASSISTANT_PROMPT)?,
        ),
    ];
    let router = match cfg.router {
        RouterMode::Keywords => SupervisorRouter::function(keyword_route),
        RouterMode::Model => {
            SupervisorRouter::model(Arc::clone(&cfg.model), |s: &MemoryState| s.messages.to_vec())
                .system_prompt(ROUTER_PROMPT)
                .fallback_with(keyword_route)
        }
    };
    let mut options = SupervisorOptions::new()
        .name("memory_supervisor")
        .on_route(record);
    if let Some(cp) = cfg.checkpointer {
        options = options.checkpointer(cp);
    }
    if let Some(store) = cfg.store {
        options = options.store(store);
    }
    create_supervisor(router, agents, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_by_keyword() {
        assert_eq!(
            classify("Remember that my favourite colour is teal."),
            Intent::Store
        );
        assert_eq!(
            classify("Maybe I'll get pizza tonight, note that."),
            Intent::Store
        );
        assert_eq!(
            classify("What do you remember about my favourite colour?"),
            Intent::Recall
        );
        assert_eq!(classify("Do you remember that I like tea?"), Intent::Recall);
        assert_eq!(classify("What's my name?"), Intent::Recall);
        assert_eq!(classify("Tell me a joke"), Intent::Chat);
        for i in [Intent::Store, Intent::Recall, Intent::Chat] {
            assert_eq!(Intent::of_agent(i.agent()), Some(i));
        }
    }
}
