//! [`FnMiddleware`]: a middleware from closures (LangChain's `@before_model`, `@wrap_model_call`, ...).

use super::{
    Hook, HookFuture, HookResult, Hooks, Jump, Middleware, ModelNext, ModelRequest, ModelResponse,
    ToolCallRequest, ToolNext,
};
use crate::create_agent::{AgentGraphState, StateField};
use crate::tool::{ToolError, ToolOutput};
use futures::future::BoxFuture;
use graphloom_core::{NodeError, Runtime};
use std::collections::HashMap;
use std::sync::Arc;

/// What a hook closure may return: a [`HookResult`], or a `Result` of one (to fail or
/// interrupt with `?`).
pub trait IntoHookResult {
    /// As a hook's result.
    ///
    /// # Errors
    /// The closure's error.
    fn into_hook_result(self) -> Result<HookResult, NodeError>;
}

impl IntoHookResult for HookResult {
    fn into_hook_result(self) -> Result<HookResult, NodeError> {
        Ok(self)
    }
}

impl IntoHookResult for Result<HookResult, NodeError> {
    fn into_hook_result(self) -> Result<HookResult, NodeError> {
        self
    }
}

type HookFn = Arc<dyn Fn(&AgentGraphState, &Runtime) -> Result<HookResult, NodeError> + Send + Sync>;
type WrapModelFn = Arc<
    dyn Fn(ModelRequest, ModelNext) -> BoxFuture<'static, Result<ModelResponse, NodeError>> + Send + Sync,
>;
type WrapToolFn =
    Arc<dyn Fn(ToolCallRequest, ToolNext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync>;

/// A middleware from closures: each set closure is a hook.
///
/// ```
/// use graphloom_prebuilt::middleware::{FnMiddleware, HookResult};
/// let counter = FnMiddleware::new("Logger")
///     .before_model(|state, _rt| {
///         tracing::info!(messages = state.messages.len(), "calling the model");
///         HookResult::none()
///     })
///     .wrap_model_call(|req, next| Box::pin(async move { next.call(req).await }));
/// # let _ = counter;
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct FnMiddleware {
    name: String,
    hooks: HashMap<&'static str, HookFn>,
    jumps: HashMap<&'static str, Vec<Jump>>,
    wrap_model: Option<WrapModelFn>,
    wrap_tool: Option<WrapToolFn>,
    fields: Vec<StateField>,
}

impl std::fmt::Debug for FnMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnMiddleware")
            .field("name", &self.name)
            .field("hooks", &self.hooks().0)
            .finish_non_exhaustive()
    }
}

impl FnMiddleware {
    /// A middleware named `name` with no hooks yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
    fn hook<R: IntoHookResult>(
        mut self,
        hook: Hook,
        f: impl Fn(&AgentGraphState, &Runtime) -> R + Send + Sync + 'static,
    ) -> Self {
        self.hooks
            .insert(hook.as_str(), Arc::new(move |s, rt| f(s, rt).into_hook_result()));
        self
    }
    /// Run `f` once per run, first.
    pub fn before_agent<R: IntoHookResult>(
        self,
        f: impl Fn(&AgentGraphState, &Runtime) -> R + Send + Sync + 'static,
    ) -> Self {
        self.hook(Hook::BeforeAgent, f)
    }
    /// Run `f` before every model call.
    pub fn before_model<R: IntoHookResult>(
        self,
        f: impl Fn(&AgentGraphState, &Runtime) -> R + Send + Sync + 'static,
    ) -> Self {
        self.hook(Hook::BeforeModel, f)
    }
    /// Run `f` after every model call.
    pub fn after_model<R: IntoHookResult>(
        self,
        f: impl Fn(&AgentGraphState, &Runtime) -> R + Send + Sync + 'static,
    ) -> Self {
        self.hook(Hook::AfterModel, f)
    }
    /// Run `f` once per run, last.
    pub fn after_agent<R: IntoHookResult>(
        self,
        f: impl Fn(&AgentGraphState, &Runtime) -> R + Send + Sync + 'static,
    ) -> Self {
        self.hook(Hook::AfterAgent, f)
    }
    /// Declare where `hook` may jump (for drawing).
    pub fn can_jump_to(mut self, hook: Hook, to: impl IntoIterator<Item = Jump>) -> Self {
        self.jumps.insert(hook.as_str(), to.into_iter().collect());
        self
    }
    /// Wrap every model call.
    pub fn wrap_model_call(
        mut self,
        f: impl Fn(ModelRequest, ModelNext) -> BoxFuture<'static, Result<ModelResponse, NodeError>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.wrap_model = Some(Arc::new(f));
        self
    }
    /// Wrap every tool call.
    pub fn wrap_tool_call(
        mut self,
        f: impl Fn(ToolCallRequest, ToolNext) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.wrap_tool = Some(Arc::new(f));
        self
    }
    /// Add a state field.
    pub fn state_field(mut self, field: StateField) -> Self {
        self.fields.push(field);
        self
    }
    /// As a shared middleware.
    #[must_use]
    pub fn arc(self) -> Arc<dyn Middleware> {
        Arc::new(self)
    }
    fn run(&self, hook: Hook, state: &AgentGraphState, rt: &Runtime) -> Result<HookResult, NodeError> {
        match self.hooks.get(hook.as_str()) {
            Some(f) => f(state, rt),
            None => Ok(HookResult::none()),
        }
    }
}

impl Middleware for FnMiddleware {
    fn name(&self) -> &str {
        &self.name
    }
    fn hooks(&self) -> Hooks {
        let mut h = Hooks::none();
        for hook in [
            Hook::BeforeAgent,
            Hook::BeforeModel,
            Hook::AfterModel,
            Hook::AfterAgent,
        ] {
            if self.hooks.contains_key(hook.as_str()) {
                h = h.with(hook);
            }
        }
        if self.wrap_model.is_some() {
            h = h.with(Hook::WrapModelCall);
        }
        if self.wrap_tool.is_some() {
            h = h.with(Hook::WrapToolCall);
        }
        h
    }
    fn can_jump_to(&self, hook: Hook) -> Vec<Jump> {
        self.jumps.get(hook.as_str()).cloned().unwrap_or_default()
    }
    fn state_fields(&self) -> Vec<StateField> {
        self.fields.clone()
    }
    fn before_agent<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let r = self.run(Hook::BeforeAgent, state, rt);
        Box::pin(async move { r })
    }
    fn before_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let r = self.run(Hook::BeforeModel, state, rt);
        Box::pin(async move { r })
    }
    fn after_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let r = self.run(Hook::AfterModel, state, rt);
        Box::pin(async move { r })
    }
    fn after_agent<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        let r = self.run(Hook::AfterAgent, state, rt);
        Box::pin(async move { r })
    }
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        match &self.wrap_model {
            Some(f) => f(request, next),
            None => next.call(request),
        }
    }
    fn wrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        next: ToolNext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        match &self.wrap_tool {
            Some(f) => f(request, next),
            None => next.call(request),
        }
    }
}
