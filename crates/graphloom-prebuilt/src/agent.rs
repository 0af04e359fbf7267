//! [`tools_condition`] and the prebuilt ReAct agent ([`create_react_agent`]).

use crate::tool::Tool;
use crate::tool_node::ToolNode;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, Message, MessageKind, Runtime, Seq, State, StateGraph, END, START};
use graphloom_llm::{stream_into, ChatModel, ChatOptions, ChunkStream, DynChatModel, NodeResultExt};
use std::sync::Arc;

/// The state of the prebuilt agent: the conversation.
#[derive(State, Clone, Default, Debug)]
pub struct AgentState {
    /// The messages, merged with `add_messages`.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
}

/// Name of the tools node [`tools_condition`] routes to.
pub const TOOLS_NODE: &str = "tools";
/// Name of the model node of [`create_react_agent`].
pub const AGENT_NODE: &str = "agent";

/// Route to `"tools"` when the last message is an AI message that calls tools, else to
/// `END`.
#[must_use]
pub fn tools_condition(messages: &Seq<Message>) -> &'static str {
    match messages.last() {
        Some(m) if m.kind == MessageKind::Ai && !m.tool_calls.is_empty() => TOOLS_NODE,
        _ => END,
    }
}

/// `Arc<dyn DynChatModel>` as a `ChatModel` whose futures are plain boxed futures (keeps
/// the node future `Send` for every lifetime).
struct SharedModel(Arc<dyn DynChatModel>);

impl ChatModel for SharedModel {
    fn model_name(&self) -> &str {
        self.0.dyn_model_name()
    }
    fn provider(&self) -> &str {
        self.0.dyn_provider()
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> graphloom_llm::Result<Message> {
        self.0.dyn_invoke(messages, options).await
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        self.0.dyn_stream(messages, options)
    }
}

/// Options of [`create_react_agent`].
#[derive(Clone, Default)]
pub struct AgentOptions {
    /// A system message put before the conversation on every model call (not stored).
    pub system_prompt: Option<String>,
    /// Where checkpoints go (needed for approvals and resumes).
    pub checkpointer: Option<Arc<dyn DynCheckpointer>>,
    /// A long-term store for tools ([`crate::ToolRuntime::store`]).
    pub store: Option<Arc<dyn DynStore>>,
    /// Per-call model options (the tools are added to them).
    pub chat_options: ChatOptions,
    /// Configure the tool node (timeout, result cap, error handling).
    pub tool_node: Option<fn(ToolNode) -> ToolNode>,
    /// The graph's name.
    pub name: Option<String>,
}

impl std::fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOptions")
            .field("system_prompt", &self.system_prompt)
            .field("checkpointer", &self.checkpointer.is_some())
            .field("store", &self.store.is_some())
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AgentOptions {
    /// Default options.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Set the system prompt.
    #[must_use]
    pub fn system_prompt(mut self, p: impl Into<String>) -> Self {
        self.system_prompt = Some(p.into());
        self
    }
    /// Persist checkpoints.
    #[must_use]
    pub fn checkpointer(mut self, saver: impl graphloom_core::checkpoint::Checkpointer) -> Self {
        self.checkpointer = Some(Arc::new(saver));
        self
    }
    /// Give tools a store.
    #[must_use]
    pub fn store(mut self, store: impl graphloom_core::Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }
    /// Configure the tool node.
    #[must_use]
    pub fn tool_node(mut self, f: fn(ToolNode) -> ToolNode) -> Self {
        self.tool_node = Some(f);
        self
    }
}

/// A ReAct agent: `agent` calls the model with the tools bound; when it asks for tools,
/// `tools` (a [`ToolNode`], with its approval gate) answers and the model is called again;
/// when it answers without tool calls the run ends.
///
/// # Errors
/// When the graph does not compile.
pub fn create_react_agent(
    model: Arc<dyn DynChatModel>,
    tools: impl IntoIterator<Item = Arc<dyn Tool>>,
    options: AgentOptions,
) -> graphloom_core::Result<CompiledGraph<AgentState>> {
    let mut node = ToolNode::new(tools);
    if let Some(f) = options.tool_node {
        node = f(node);
    }
    let chat_options = options.chat_options.clone().tools(node.specs());
    let system = options.system_prompt.clone();
    let model = Arc::new(SharedModel(model));
    let agent = move |s: Arc<AgentState>, rt: Runtime| {
        let model = Arc::clone(&model);
        let opts = chat_options.clone();
        let system = system.clone();
        async move {
            // The conversation's messages share their bodies: this is a reference count each.
            let mut history: Vec<Message> = s.messages.to_vec();
            if let Some(p) = system {
                history.insert(0, Message::system(p));
            }
            let answer = stream_into(&rt, model.as_ref(), &history, &opts).await.node()?;
            Ok(AgentStateUpdate::new().messages(vec![answer]))
        }
    };
    let mut graph = StateGraph::<AgentState>::new()
        .name(options.name.clone().unwrap_or_else(|| "agent".to_owned()))
        .add_node(AGENT_NODE, agent)
        .add_node(
            TOOLS_NODE,
            node.into_node::<AgentState>(|s| &s.messages, |m| AgentStateUpdate::new().messages(m)),
        )
        .add_edge(START, AGENT_NODE)
        .add_conditional_edges_to(
            AGENT_NODE,
            |s: &AgentState| tools_condition(&s.messages),
            [TOOLS_NODE, END],
        )
        .add_edge(TOOLS_NODE, AGENT_NODE);
    if let Some(cp) = options.checkpointer {
        graph = graph.checkpointer_dyn(cp);
    }
    if let Some(store) = options.store {
        graph = graph.store_dyn(store);
    }
    graph.compile()
}
