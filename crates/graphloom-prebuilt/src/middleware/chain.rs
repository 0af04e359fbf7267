//! The wrapper chains: [`ModelNext`] and [`ToolNext`] call the next wrapper, or the model
//! or tool itself after the last one.

use super::{Middleware, ModelRequest, ModelResponse, ToolCallRequest};
use crate::tool::{ToolError, ToolOutput};
use futures::future::BoxFuture;
use graphloom_core::NodeError;
use std::sync::Arc;

/// The innermost model call of a chain.
pub type ModelExec =
    Arc<dyn Fn(ModelRequest) -> BoxFuture<'static, Result<ModelResponse, NodeError>> + Send + Sync>;

/// The innermost tool call of a chain.
pub type ToolExec =
    Arc<dyn Fn(ToolCallRequest) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync>;

/// The rest of the `wrap_model_call` chain after one wrapper: call it to go on.
#[derive(Clone)]
pub struct ModelNext {
    chain: Arc<[Arc<dyn Middleware>]>,
    at: usize,
    exec: ModelExec,
}

impl std::fmt::Debug for ModelNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelNext")
            .field("remaining", &self.chain.len().saturating_sub(self.at))
            .finish()
    }
}

impl ModelNext {
    /// The chain of `chain`'s `wrap_model_call` (outermost first) around `exec` (what the
    /// model node does; also for testing or timing a stack of wrappers by hand).
    #[must_use]
    pub fn new(chain: Arc<[Arc<dyn Middleware>]>, exec: ModelExec) -> Self {
        Self { chain, at: 0, exec }
    }

    /// A chain with no wrappers around `exec` (for testing a wrapper by hand).
    #[must_use]
    pub fn exec(exec: ModelExec) -> Self {
        Self::new(Arc::from(Vec::new()), exec)
    }

    /// Run the rest of the chain: the next wrapper, or the model call.
    pub fn call(&self, request: ModelRequest) -> BoxFuture<'static, Result<ModelResponse, NodeError>> {
        match self.chain.get(self.at) {
            None => (self.exec)(request),
            Some(m) => {
                let m = Arc::clone(m);
                let next = Self {
                    chain: Arc::clone(&self.chain),
                    at: self.at + 1,
                    exec: Arc::clone(&self.exec),
                };
                Box::pin(async move { m.wrap_model_call(request, next).await })
            }
        }
    }
}

/// The rest of the `wrap_tool_call` chain after one wrapper: call it to go on.
#[derive(Clone)]
pub struct ToolNext {
    chain: Arc<[Arc<dyn Middleware>]>,
    at: usize,
    exec: ToolExec,
}

impl std::fmt::Debug for ToolNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolNext")
            .field("remaining", &self.chain.len().saturating_sub(self.at))
            .finish()
    }
}

impl ToolNext {
    /// The chain of `chain`'s `wrap_tool_call` (outermost first) around `exec`.
    #[must_use]
    pub fn new(chain: Arc<[Arc<dyn Middleware>]>, exec: ToolExec) -> Self {
        Self { chain, at: 0, exec }
    }

    /// A chain with no wrappers around `exec` (for testing a wrapper by hand).
    #[must_use]
    pub fn exec(exec: ToolExec) -> Self {
        Self::new(Arc::from(Vec::new()), exec)
    }

    /// Run the rest of the chain: the next wrapper, or the tool (checks, then the call).
    pub fn call(&self, request: ToolCallRequest) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        match self.chain.get(self.at) {
            None => (self.exec)(request),
            Some(m) => {
                let m = Arc::clone(m);
                let next = Self {
                    chain: Arc::clone(&self.chain),
                    at: self.at + 1,
                    exec: Arc::clone(&self.exec),
                };
                Box::pin(async move { m.wrap_tool_call(request, next).await })
            }
        }
    }
}

/// Something around each tool call of a [`crate::ToolNode`] (see
/// [`crate::ToolNode::wrap_calls`]): `exec` checks the arguments and runs the tool.
pub trait ToolWrap: Send + Sync {
    /// Answer `request`, calling `exec` zero or more times.
    fn wrap(
        &self,
        request: ToolCallRequest,
        exec: ToolExec,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;
}

/// `wrap_tool_call` of a list of middleware, as the tool node's wrapper.
pub(crate) struct ToolChain(pub Arc<[Arc<dyn Middleware>]>);

impl ToolWrap for ToolChain {
    fn wrap(
        &self,
        request: ToolCallRequest,
        exec: ToolExec,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        ToolNext::new(Arc::clone(&self.0), exec).call(request)
    }
}
