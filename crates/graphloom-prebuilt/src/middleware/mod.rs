//! Middleware for [`create_agent`](crate::create_agent): typed hooks around the model
//! and tool calls, LangChain v1's `AgentMiddleware`.
//!
//! # Hooks
//!
//! | hook | runs | may |
//! |---|---|---|
//! | [`before_agent`](Middleware::before_agent) | once per run, before anything | update state, jump |
//! | [`before_model`](Middleware::before_model) | before every model call | update state, jump |
//! | [`wrap_model_call`](Middleware::wrap_model_call) | around every model call | change the request, retry, short-circuit, replace the response, write state |
//! | [`after_model`](Middleware::after_model) | after every model call | update state, jump, interrupt |
//! | [`wrap_tool_call`](Middleware::wrap_tool_call) | around every tool call | change the call, retry, block, answer without running the tool |
//! | [`after_agent`](Middleware::after_agent) | once per run, at the end | update state, jump |
//!
//! A jump ([`Jump`]) goes to the model (through the `before_model` hooks), to the tools,
//! or to the end (through the `after_agent` hooks).
//!
//! # Order
//!
//! With middleware `[a, b, c]`:
//!
//! - `before_agent` and `before_model` hooks run in list order: `a`, `b`, `c`;
//! - `after_model` and `after_agent` hooks run in reverse: `c`, `b`, `a`;
//! - `wrap_model_call` and `wrap_tool_call` nest with the first outermost:
//!   `a(b(c(call)))`, so `a` sees the request first and the response last.
//!
//! Each `before_*`/`after_*` hook is a node of the graph, named `<middleware>.<hook>`
//! (`HumanInTheLoop.after_model`), so it is drawn, streamed, checkpointed and can
//! interrupt like any node. Wrappers run inside the `model` and `tools` nodes.
//!
//! # Writing one
//!
//! Implement [`Middleware`] (say which hooks with [`Middleware::hooks`]), or build one
//! from closures with [`FnMiddleware`]:
//!
//! ```
//! use graphloom_prebuilt::middleware::{FnMiddleware, HookResult, Jump};
//! use graphloom_prebuilt::AgentGraphUpdate;
//! use graphloom_core::Message;
//!
//! // End the run when the conversation is too long.
//! let guard = FnMiddleware::new("LengthGuard").before_model(|state, _rt| {
//!     if state.messages.len() > 50 {
//!         HookResult::jump(Jump::End)
//!             .with_update(AgentGraphUpdate::new().messages(vec![Message::ai("This conversation is too long.")]))
//!     } else {
//!         HookResult::none()
//!     }
//! });
//! # let _ = guard;
//! ```

mod chain;
mod fn_middleware;

pub mod budget;
pub mod context_editing;
pub mod fallback;
pub mod hitl;
pub mod limits;
pub mod pii;
pub mod retry;
pub mod summarization;
pub mod todo;
pub mod tool_selection;

pub(crate) use chain::ToolChain;
pub use chain::{ModelExec, ModelNext, ToolExec, ToolNext, ToolWrap};
pub use fn_middleware::FnMiddleware;

use crate::create_agent::{AgentGraphState, AgentGraphUpdate, StateField};
use crate::tool::{Tool, ToolError, ToolOutput, ToolRuntime};
use futures::future::BoxFuture;
use graphloom_core::{Message, NodeError, Runtime, ToolCall};
use graphloom_llm::{ChatOptions, DynChatModel, ToolSpec};
use serde_json::Value;
use std::sync::Arc;

/// Where a hook sends the run instead of the next hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Jump {
    /// To the model call (through the `before_model` hooks).
    Model,
    /// To the tools node (the pending tool calls of the last AI message).
    Tools,
    /// To the end of the run (through the `after_agent` hooks).
    End,
}

impl Jump {
    /// The name LangChain uses (`model`, `tools`, `end`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Jump::Model => "model",
            Jump::Tools => "tools",
            Jump::End => "end",
        }
    }
}

/// One of the hooks of a [`Middleware`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// [`Middleware::before_agent`].
    BeforeAgent,
    /// [`Middleware::before_model`].
    BeforeModel,
    /// [`Middleware::after_model`].
    AfterModel,
    /// [`Middleware::after_agent`].
    AfterAgent,
    /// [`Middleware::wrap_model_call`].
    WrapModelCall,
    /// [`Middleware::wrap_tool_call`].
    WrapToolCall,
}

impl Hook {
    /// The hook's name, as in node names (`before_model`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::BeforeAgent => "before_agent",
            Hook::BeforeModel => "before_model",
            Hook::AfterModel => "after_model",
            Hook::AfterAgent => "after_agent",
            Hook::WrapModelCall => "wrap_model_call",
            Hook::WrapToolCall => "wrap_tool_call",
        }
    }
    fn bit(self) -> u8 {
        match self {
            Hook::BeforeAgent => 1,
            Hook::BeforeModel => 2,
            Hook::AfterModel => 4,
            Hook::AfterAgent => 8,
            Hook::WrapModelCall => 16,
            Hook::WrapToolCall => 32,
        }
    }
}

/// The set of hooks a middleware implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hooks(u8);

impl Hooks {
    /// No hooks.
    #[must_use]
    pub const fn none() -> Self {
        Self(0)
    }
    /// These hooks.
    #[must_use]
    pub fn of(hooks: &[Hook]) -> Self {
        Self(hooks.iter().fold(0, |acc, h| acc | h.bit()))
    }
    /// This set and `hook`.
    #[must_use]
    pub fn with(self, hook: Hook) -> Self {
        Self(self.0 | hook.bit())
    }
    /// Whether `hook` is in the set.
    #[must_use]
    pub fn has(self, hook: Hook) -> bool {
        self.0 & hook.bit() != 0
    }
}

/// What a `before_*`/`after_*` hook returns: a state update and, optionally, a jump.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct HookResult {
    /// Written to the state when the hook's node ends.
    pub update: AgentGraphUpdate,
    /// Where to go instead of the next hook.
    pub jump_to: Option<Jump>,
}

impl HookResult {
    /// Nothing to write, no jump.
    pub fn none() -> Self {
        Self::default()
    }
    /// Write `update`.
    pub fn update(update: AgentGraphUpdate) -> Self {
        Self {
            update,
            jump_to: None,
        }
    }
    /// Jump to `to`.
    pub fn jump(to: Jump) -> Self {
        Self {
            update: AgentGraphUpdate::new(),
            jump_to: Some(to),
        }
    }
    /// Also write `update` (after what is there).
    pub fn with_update(mut self, update: AgentGraphUpdate) -> Self {
        self.update = self.update.and(update);
        self
    }
}

/// The future of a `before_*`/`after_*` hook.
pub type HookFuture<'a> = BoxFuture<'a, Result<HookResult, NodeError>>;

/// One model call as the wrappers see it. Change any field before calling `next`.
#[derive(Clone)]
pub struct ModelRequest {
    /// The model to call.
    pub model: Arc<dyn DynChatModel>,
    /// The system prompt, put before `messages` (never stored in the state).
    pub system_prompt: Option<String>,
    /// The conversation sent to the model.
    pub messages: Vec<Message>,
    /// The tools offered (the agent's, the middleware's, a structured-output tool).
    pub tools: Vec<ToolSpec>,
    /// Per-call options (tool choice, temperature, response format, ...); `tools` are
    /// added to them when the call is made.
    pub options: ChatOptions,
    /// The state when the model node started.
    pub state: Arc<AgentGraphState>,
    /// The node's runtime (context, store, stream writer, interrupt).
    pub runtime: Runtime,
}

impl std::fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRequest")
            .field("model", &self.model.dyn_model_name())
            .field("system_prompt", &self.system_prompt)
            .field("messages", &self.messages.len())
            .field("tools", &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What a model call produced, as the wrappers see it.
#[derive(Debug, Clone)]
pub struct ModelResponse {
    /// The messages to add: the AI message first, then any the call produced (the tool
    /// message answering a structured-output tool call).
    pub messages: Vec<Message>,
    /// The structured response this call produced, if any.
    pub structured_response: Option<Value>,
    /// Other state writes of the wrappers (counters, ...).
    pub update: AgentGraphUpdate,
}

impl ModelResponse {
    /// A response of one AI message.
    #[must_use]
    pub fn of(message: Message) -> Self {
        Self {
            messages: vec![message],
            structured_response: None,
            update: AgentGraphUpdate::new(),
        }
    }
    /// The AI message, if there is one.
    #[must_use]
    pub fn ai_message(&self) -> Option<&Message> {
        self.messages
            .iter()
            .find(|m| m.kind == graphloom_core::MessageKind::Ai)
    }
    /// The AI message, mutably.
    pub fn ai_message_mut(&mut self) -> Option<&mut Message> {
        self.messages
            .iter_mut()
            .find(|m| m.kind == graphloom_core::MessageKind::Ai)
    }
}

/// One tool call as the wrappers see it.
#[derive(Clone)]
pub struct ToolCallRequest {
    /// The call (name and arguments as the model wrote them, or as a wrapper changed them).
    pub call: ToolCall,
    /// The tool of that name, if the agent has one.
    pub tool: Option<Arc<dyn Tool>>,
    /// What the tool receives besides its arguments (state, context, store, ...).
    pub runtime: ToolRuntime,
}

impl std::fmt::Debug for ToolCallRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallRequest")
            .field("call", &self.call)
            .field("tool", &self.tool.as_ref().map(|t| t.name().to_owned()))
            .finish_non_exhaustive()
    }
}

/// What the builder tells a middleware about the agent, for checks at build time.
#[derive(Debug)]
pub struct AgentInfo<'a> {
    /// The model's name.
    pub model_name: &'a str,
    /// The model's provider.
    pub provider: &'a str,
    /// The names of the agent's tools.
    pub tools: &'a [String],
}

/// A middleware of a [`create_agent`](crate::create_agent) agent.
///
/// Every hook has a default that does nothing (wrappers call `next`); say which hooks
/// you implement with [`Middleware::hooks`]: only those become nodes or join the
/// wrapper chains, so an unused hook costs nothing.
pub trait Middleware: Send + Sync {
    /// The middleware's name: unique in an agent; node names start with it.
    fn name(&self) -> &str;

    /// The hooks this middleware implements.
    fn hooks(&self) -> Hooks;

    /// Where `hook` may jump (drawn as edges; a jump elsewhere is still taken).
    fn can_jump_to(&self, hook: Hook) -> Vec<Jump> {
        let _ = hook;
        Vec::new()
    }

    /// State fields this middleware adds to the agent's state.
    fn state_fields(&self) -> Vec<StateField> {
        Vec::new()
    }

    /// Tools this middleware adds to the agent (offered to the model, run by the tools
    /// node).
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }

    /// A check at build time (an unpriced model with a cost budget, a tool name that does
    /// not exist, ...).
    ///
    /// # Errors
    /// [`crate::Error::Middleware`] saying what is wrong.
    fn check(&self, agent: &AgentInfo<'_>) -> Result<(), crate::Error> {
        let _ = agent;
        Ok(())
    }

    /// Once per run, before anything else.
    fn before_agent<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let _ = (state, rt);
        Box::pin(async { Ok(HookResult::none()) })
    }

    /// Before every model call.
    fn before_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let _ = (state, rt);
        Box::pin(async { Ok(HookResult::none()) })
    }

    /// After every model call (the state has the model's answer).
    fn after_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let _ = (state, rt);
        Box::pin(async { Ok(HookResult::none()) })
    }

    /// Once per run, at the end.
    fn after_agent<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let _ = (state, rt);
        Box::pin(async { Ok(HookResult::none()) })
    }

    /// Around every model call: call `next.call(request)` zero or more times.
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        next.call(request)
    }

    /// Around every tool call: call `next.call(request)` zero or more times.
    fn wrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        next: ToolNext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        next.call(request)
    }
}

/// The last AI message of the state (what `after_model` hooks inspect).
#[must_use]
pub fn last_ai_message(state: &AgentGraphState) -> Option<&Message> {
    last_ai(&state.messages).map(|(_, m)| m)
}

/// The last AI message of `messages` and its index.
pub(crate) fn last_ai(messages: &graphloom_core::Seq<Message>) -> Option<(usize, &Message)> {
    let n = messages.len();
    (0..n).rev().find_map(|i| {
        messages
            .get(i)
            .filter(|m| m.kind == graphloom_core::MessageKind::Ai)
            .map(|m| (i, m))
    })
}

/// A future polled with no node runtime in scope: a model called inside it (a summary, a
/// tool selection) does not stream its tokens as the agent's own answer.
pub(crate) struct Quiet<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for Quiet<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let inner = &mut self.0;
        graphloom_core::message_stream::without(|| inner.as_mut().poll(cx))
    }
}

/// `fut`, polled quietly (see [`Quiet`]).
pub(crate) fn quietly<F: std::future::Future>(fut: F) -> Quiet<F> {
    Quiet(Box::pin(fut))
}
