//! [`create_agent`]: LangChain v1's agent (a model calling tools in a loop, with
//! middleware around it), compiled to an ordinary graph.
//!
//! ```text
//! START -> [before_agent hooks] -> [before_model hooks] -> model -> [after_model hooks]
//!            ^                        ^                                  |
//!            |                        +---------- tools <----------------+  (tool calls)
//!            |                                                           |
//!          (once per run)                  [after_agent hooks] -> END <--+  (an answer)
//! ```

mod graph;
mod state;
mod structured;

pub use graph::{AGENT_TOOLS_NODE, MODEL_NODE};
pub use state::{AgentGraphState, AgentGraphUpdate, StateField};
pub use structured::{Strategy, StructuredOutput};

use crate::error::{Error, Result};
use crate::middleware::{AgentInfo, Hook, Middleware, ToolChain};
use crate::tool::Tool;
use crate::tool_node::ToolNode;
use graph::{HookNode, ModelNode, ToolsNode, Wiring};
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, NodeSet, Runtime, StateGraph, START};
use graphloom_llm::{ChatOptions, DynChatModel};
use std::collections::HashSet;
use std::sync::Arc;

/// A system prompt computed from the state and the run; `None` sends no system message.
pub type PromptFn = Arc<dyn Fn(&AgentGraphState, &Runtime) -> Option<String> + Send + Sync>;

/// The system prompt of an agent: fixed, or computed per model call from the state and
/// the run (its context, store, ...).
#[derive(Clone)]
pub enum SystemPrompt {
    /// The same text on every call.
    Static(String),
    /// Computed before every call; `None` sends no system message.
    Dynamic(PromptFn),
}

impl std::fmt::Debug for SystemPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SystemPrompt::Static(s) => f.debug_tuple("Static").field(s).finish(),
            SystemPrompt::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

/// Start building an agent: `model` answers, calling `tools` in a loop until it answers
/// without a tool call. See [`AgentBuilder`] for the options and [`crate::middleware`]
/// for the hooks.
///
/// ```
/// use graphloom_core::{checkpoint::InMemorySaver, Message, RunConfig, ToolCall};
/// use graphloom_llm::{Reply, ScriptedModel};
/// use graphloom_prebuilt::middleware::limits::ModelCallLimit;
/// use graphloom_prebuilt::{create_agent, AgentGraphUpdate, FnTool, ToolError};
/// use serde_json::json;
/// use std::sync::Arc;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct City {
///     /// The city.
///     city: String,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let weather = FnTool::new("weather", "The weather in a city", |a: City, _rt| async move {
///     Ok::<_, ToolError>(format!("sunny in {}", a.city))
/// });
/// let model = ScriptedModel::new([
///     graphloom_llm::Reply::tool_calls("", vec![ToolCall { id: "c1".into(), name: "weather".into(), args: json!({"city": "Oslo"}) }]),
///     Reply::text("It is sunny in Oslo."),
/// ]);
/// let agent = create_agent(Arc::new(model), [weather.arc()])
///     .system_prompt("You answer weather questions.")
///     .middleware(ModelCallLimit::new().run_limit(5))
///     .checkpointer(InMemorySaver::new())
///     .build()?;
/// let out = agent
///     .invoke(AgentGraphUpdate::new().messages(vec![Message::human("Weather in Oslo?")]), RunConfig::thread("t1"))
///     .await?;
/// assert_eq!(out.values.messages.last().map(Message::text).as_deref(), Some("It is sunny in Oslo."));
/// assert_eq!(out.values.get::<u64>("thread_model_call_count"), Some(2));
/// # Ok(()) }
/// ```
pub fn create_agent(
    model: Arc<dyn DynChatModel>,
    tools: impl IntoIterator<Item = Arc<dyn Tool>>,
) -> AgentBuilder {
    AgentBuilder {
        model,
        tools: tools.into_iter().collect(),
        middleware: Vec::new(),
        system_prompt: None,
        response_format: None,
        checkpointer: None,
        store: None,
        name: None,
        interrupt_before: Vec::new(),
        interrupt_after: Vec::new(),
        state_fields: Vec::new(),
        options: ChatOptions::new(),
        tool_node: None,
    }
}

/// Options of an agent; [`AgentBuilder::build`] compiles it.
#[must_use]
pub struct AgentBuilder {
    model: Arc<dyn DynChatModel>,
    tools: Vec<Arc<dyn Tool>>,
    middleware: Vec<Arc<dyn Middleware>>,
    system_prompt: Option<SystemPrompt>,
    response_format: Option<StructuredOutput>,
    checkpointer: Option<Arc<dyn DynCheckpointer>>,
    store: Option<Arc<dyn DynStore>>,
    name: Option<String>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
    state_fields: Vec<StateField>,
    options: ChatOptions,
    tool_node: Option<Box<dyn FnOnce(ToolNode) -> ToolNode + Send>>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model.dyn_model_name())
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name().to_owned()).collect::<Vec<_>>(),
            )
            .field(
                "middleware",
                &self
                    .middleware
                    .iter()
                    .map(|m| m.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// A fixed system prompt, sent before the conversation on every call (not stored).
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(SystemPrompt::Static(prompt.into()));
        self
    }
    /// A system prompt computed before every call from the state and the run (read the
    /// run's context with [`ContextExt::typed_context`](crate::ContextExt::typed_context)).
    pub fn system_prompt_fn(
        mut self,
        f: impl Fn(&AgentGraphState, &Runtime) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.system_prompt = Some(SystemPrompt::Dynamic(Arc::new(f)));
        self
    }
    /// Add a middleware (after those added before; see [`crate::middleware`] for the
    /// order).
    pub fn middleware(mut self, m: impl Middleware + 'static) -> Self {
        self.middleware.push(Arc::new(m));
        self
    }
    /// Add a shared middleware.
    pub fn middleware_arc(mut self, m: Arc<dyn Middleware>) -> Self {
        self.middleware.push(m);
        self
    }
    /// Ask for a structured answer (into `structured_response`).
    pub fn response_format(mut self, format: StructuredOutput) -> Self {
        self.response_format = Some(format);
        self
    }
    /// Persist checkpoints (needed for interrupts and resumes).
    pub fn checkpointer(mut self, saver: impl graphloom_core::checkpoint::Checkpointer) -> Self {
        self.checkpointer = Some(Arc::new(saver));
        self
    }
    /// Persist checkpoints with a shared saver.
    pub fn checkpointer_dyn(mut self, saver: Arc<dyn DynCheckpointer>) -> Self {
        self.checkpointer = Some(saver);
        self
    }
    /// A long-term store for tools and middleware.
    pub fn store(mut self, store: impl graphloom_core::Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }
    /// A shared long-term store.
    pub fn store_dyn(mut self, store: Arc<dyn DynStore>) -> Self {
        self.store = Some(store);
        self
    }
    /// The graph's name; AI messages of the agent carry it as their `name` (as in a team
    /// of agents).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Pause before these nodes (`model`, `tools`, a hook node).
    pub fn interrupt_before<I: IntoIterator<Item = S>, S: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_before = nodes.into_iter().map(Into::into).collect();
        self
    }
    /// Pause after these nodes.
    pub fn interrupt_after<I: IntoIterator<Item = S>, S: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after = nodes.into_iter().map(Into::into).collect();
        self
    }
    /// Add a state field of the caller's (besides the middleware's).
    pub fn state_field(mut self, field: StateField) -> Self {
        self.state_fields.push(field);
        self
    }
    /// Options of every model call (temperature, max tokens, ...).
    pub fn chat_options(mut self, options: ChatOptions) -> Self {
        self.options = options;
        self
    }
    /// Configure the tool node (timeout, result cap, error handling). A model turn runs
    /// each of its calls as its own `tools` task, so a mutating tool's approval gate holds
    /// only its own call: the ungated siblings run (once) while it waits.
    pub fn tool_node(mut self, f: impl FnOnce(ToolNode) -> ToolNode + Send + 'static) -> Self {
        self.tool_node = Some(Box::new(f));
        self
    }

    /// Compile the agent.
    ///
    /// # Errors
    /// Two middleware (or tools, or state fields) with one name; a middleware's check
    /// failing (an unpriced model with a cost budget, ...); a graph that does not compile.
    pub fn build(self) -> Result<CompiledGraph<AgentGraphState>> {
        let mut names = HashSet::new();
        for m in &self.middleware {
            if !names.insert(m.name().to_owned()) {
                return Err(Error::Duplicate {
                    what: "middleware",
                    name: m.name().to_owned(),
                });
            }
        }
        let mut tools = self.tools.clone();
        for m in &self.middleware {
            tools.extend(m.tools());
        }
        let mut tool_names = HashSet::new();
        for t in &tools {
            if !tool_names.insert(t.name().to_owned()) {
                return Err(Error::Duplicate {
                    what: "tool",
                    name: t.name().to_owned(),
                });
            }
        }
        let tool_list: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
        let info = AgentInfo {
            model_name: self.model.dyn_model_name(),
            provider: self.model.dyn_provider(),
            tools: &tool_list,
        };
        for m in &self.middleware {
            m.check(&info)?;
        }
        let mut fields = self.state_fields.clone();
        for m in &self.middleware {
            fields.extend(m.state_fields());
        }
        // A field declared twice with one reducer is one field (two instances of a
        // middleware share their counters); with two reducers it is an error.
        let mut declared: Vec<StateField> = Vec::new();
        for f in fields {
            if f.name == "messages" || f.name == "structured_response" {
                return Err(Error::Duplicate {
                    what: "state field",
                    name: f.name,
                });
            }
            match declared.iter().find(|d| d.name == f.name) {
                Some(d) if d.reducer.name() == f.reducer.name() => {}
                Some(_) => {
                    return Err(Error::Duplicate {
                        what: "state field",
                        name: f.name,
                    })
                }
                None => declared.push(f),
            }
        }
        let fields = declared;

        let with = |hook: Hook| -> Vec<Arc<dyn Middleware>> {
            self.middleware
                .iter()
                .filter(|m| m.hooks().has(hook))
                .cloned()
                .collect()
        };
        let node_name = |m: &Arc<dyn Middleware>, hook: Hook| format!("{}.{}", m.name(), hook.as_str());
        let before_agent = with(Hook::BeforeAgent);
        let before_model = with(Hook::BeforeModel);
        let mut after_model = with(Hook::AfterModel);
        after_model.reverse();
        let mut after_agent = with(Hook::AfterAgent);
        after_agent.reverse();
        let wiring = Arc::new(Wiring {
            before_agent: before_agent
                .iter()
                .map(|m| node_name(m, Hook::BeforeAgent))
                .collect(),
            before_model: before_model
                .iter()
                .map(|m| node_name(m, Hook::BeforeModel))
                .collect(),
            after_model: after_model
                .iter()
                .map(|m| node_name(m, Hook::AfterModel))
                .collect(),
            after_agent: after_agent
                .iter()
                .map(|m| node_name(m, Hook::AfterAgent))
                .collect(),
            has_tools: !tools.is_empty(),
        });
        let structured_name = self.response_format.as_ref().map(|s| s.name().to_owned());

        let model_chain: Arc<[Arc<dyn Middleware>]> = Arc::from(with(Hook::WrapModelCall));
        let tool_chain: Vec<Arc<dyn Middleware>> = with(Hook::WrapToolCall);
        let mut tool_node = ToolNode::new(tools.iter().cloned());
        if let Some(f) = self.tool_node {
            tool_node = f(tool_node);
        }
        if !tool_chain.is_empty() {
            tool_node = tool_node.wrap_calls(Arc::new(ToolChain(Arc::from(tool_chain))));
        }
        let model_node = Arc::new(ModelNode {
            model: Arc::clone(&self.model),
            system_prompt: self.system_prompt.clone(),
            tools: tool_node.specs(),
            options: self.options.clone(),
            chain: model_chain,
            exec: graph::model_exec(self.response_format.clone(), self.name.clone()),
            wiring: Arc::clone(&wiring),
            structured: self.response_format.clone(),
        });

        let mut g = StateGraph::with_shape(AgentGraphState::with_fields(&fields))
            .name(self.name.clone().unwrap_or_else(|| "agent".to_owned()));
        g = g.add_node(MODEL_NODE, move |s, rt| Arc::clone(&model_node).run(s, rt));
        g = match wiring.after_model.first() {
            Some(first) => g.add_edge(MODEL_NODE, first.clone()),
            None => g.destinations(MODEL_NODE, wiring.loop_exit_destinations()),
        };
        if wiring.has_tools {
            let tools_node = Arc::new(ToolsNode {
                node: tool_node,
                structured_name: structured_name.clone(),
                shape: Arc::new(AgentGraphState::with_fields(&fields)),
            });
            let one = Arc::clone(&tools_node);
            // A model turn sends each call on its own; a jump to `tools` runs them all.
            g = g
                .add_node_with_packets(
                    AGENT_TOOLS_NODE,
                    move |s, rt| Arc::clone(&tools_node).run(s, rt),
                    move |task: graph::ToolCallTask, rt| Arc::clone(&one).run_one(task, rt),
                )
                .add_edge(AGENT_TOOLS_NODE, wiring.loop_entry());
        }
        for (hook, list) in [
            (Hook::BeforeAgent, &before_agent),
            (Hook::BeforeModel, &before_model),
            (Hook::AfterModel, &after_model),
            (Hook::AfterAgent, &after_agent),
        ] {
            for m in list {
                let name = node_name(m, hook);
                let dest = wiring.destinations(hook, &name, &m.can_jump_to(hook));
                let node = Arc::new(HookNode {
                    middleware: Arc::clone(m),
                    hook,
                    name: name.clone(),
                    wiring: Arc::clone(&wiring),
                    structured_name: structured_name.clone(),
                });
                g = g
                    .add_node(name.clone(), move |s, rt| Arc::clone(&node).run(s, rt))
                    .destinations(&name, dest);
            }
        }
        g = g.add_edge(START, wiring.entry());
        if !self.interrupt_before.is_empty() {
            g = g.interrupt_before(NodeSet::of(self.interrupt_before));
        }
        if !self.interrupt_after.is_empty() {
            g = g.interrupt_after(NodeSet::of(self.interrupt_after));
        }
        if let Some(cp) = self.checkpointer {
            g = g.checkpointer_dyn(cp);
        }
        if let Some(store) = self.store {
            g = g.store_dyn(store);
        }
        Ok(g.compile()?)
    }
}
