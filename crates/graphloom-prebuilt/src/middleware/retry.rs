//! [`ModelRetry`] and [`ToolRetry`]: try a failed model or tool call again, with
//! exponential backoff and jitter, for the errors you choose (LangChain's
//! `ModelRetryMiddleware` and `ToolRetryMiddleware`).

use super::{Hook, Hooks, Middleware, ModelNext, ModelRequest, ModelResponse, ToolCallRequest, ToolNext};
use crate::tool::{ToolError, ToolErrorCode, ToolOutput};
use futures::future::BoxFuture;
use graphloom_core::{Message, NodeError};
use rand::Rng as _;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// When to wait between attempts: `initial * factor^(attempt-1)`, at most `max`, each
/// wait scaled by a random factor in [0.75, 1.25] with jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The first wait.
    pub initial: Duration,
    /// Growth per attempt.
    pub factor: f64,
    /// The longest wait.
    pub max: Duration,
    /// Randomise each wait by ±25%.
    pub jitter: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl Backoff {
    /// No wait at all (tests, or callers that retry at once).
    #[must_use]
    pub fn none() -> Self {
        Self {
            initial: Duration::ZERO,
            factor: 1.0,
            max: Duration::ZERO,
            jitter: false,
        }
    }
    /// The wait before retry number `retry` (1 = the first retry).
    #[must_use]
    pub fn delay(&self, retry: u32) -> Duration {
        let exp = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let secs = (self.initial.as_secs_f64() * self.factor.powi(exp)).min(self.max.as_secs_f64());
        let secs = if self.jitter {
            secs * rand::rng().random_range(0.75..=1.25)
        } else {
            secs
        };
        Duration::from_secs_f64(secs.max(0.0))
    }
}

/// What happens when the last retry fails too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// The error goes on (the run fails, or the tool answers with its error).
    #[default]
    Error,
    /// Answer with a message saying the call failed, and go on.
    Continue,
}

type ModelPredicate = Arc<dyn Fn(&graphloom_llm::Error) -> bool + Send + Sync>;

/// Retry failed model calls (default: 2 retries of transient errors: rate limits, 5xx,
/// connection failures, timeouts, truncated streams).
#[derive(Clone)]
#[must_use]
pub struct ModelRetry {
    max_retries: u32,
    backoff: Backoff,
    retry_on: ModelPredicate,
    on_failure: OnFailure,
}

impl std::fmt::Debug for ModelRetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRetry")
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .field("on_failure", &self.on_failure)
            .finish_non_exhaustive()
    }
}

impl Default for ModelRetry {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelRetry {
    /// Two retries of transient errors, with the default backoff.
    pub fn new() -> Self {
        Self {
            max_retries: 2,
            backoff: Backoff::default(),
            retry_on: Arc::new(graphloom_llm::Error::is_transient),
            on_failure: OnFailure::Error,
        }
    }
    /// At most `n` retries.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }
    /// The waits between attempts.
    pub fn backoff(mut self, b: Backoff) -> Self {
        self.backoff = b;
        self
    }
    /// Which provider errors are retried.
    pub fn retry_on(mut self, f: impl Fn(&graphloom_llm::Error) -> bool + Send + Sync + 'static) -> Self {
        self.retry_on = Arc::new(f);
        self
    }
    /// What to do when retries run out.
    pub fn on_failure(mut self, f: OnFailure) -> Self {
        self.on_failure = f;
        self
    }
}

/// The provider error inside a node error, if there is one.
fn llm_error(e: &NodeError) -> Option<&graphloom_llm::Error> {
    e.downcast_ref::<graphloom_llm::Error>()
}

impl Middleware for ModelRetry {
    fn name(&self) -> &str {
        "ModelRetryMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        Box::pin(async move {
            let mut retry = 0;
            loop {
                match next.call(request.clone()).await {
                    Ok(r) => return Ok(r),
                    Err(e) => {
                        let retryable = llm_error(&e).is_some_and(|le| (self.retry_on)(le));
                        if !retryable || retry >= self.max_retries {
                            return match (self.on_failure, retryable) {
                                (OnFailure::Continue, true) => {
                                    let attempts = retry + 1;
                                    Ok(ModelResponse::of(Message::ai(format!(
                                        "Model call failed after {attempts} attempt{} with {e}",
                                        if attempts == 1 { "" } else { "s" }
                                    ))))
                                }
                                _ => Err(e),
                            };
                        }
                        retry += 1;
                        let wait = self.backoff.delay(retry);
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                    }
                }
            }
        })
    }
}

/// Retry failed tool calls (default: 2 retries of execution failures and timeouts, of
/// every tool).
#[derive(Debug, Clone)]
#[must_use]
pub struct ToolRetry {
    max_retries: u32,
    backoff: Backoff,
    codes: HashSet<ToolErrorCode>,
    tools: Option<HashSet<String>>,
    on_failure: OnFailure,
}

impl Default for ToolRetry {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRetry {
    /// Two retries of execution failures and timeouts, with the default backoff.
    pub fn new() -> Self {
        Self {
            max_retries: 2,
            backoff: Backoff::default(),
            codes: [ToolErrorCode::Execution, ToolErrorCode::Timeout]
                .into_iter()
                .collect(),
            tools: None,
            on_failure: OnFailure::Error,
        }
    }
    /// At most `n` retries.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }
    /// The waits between attempts.
    pub fn backoff(mut self, b: Backoff) -> Self {
        self.backoff = b;
        self
    }
    /// Which failures are retried.
    pub fn retry_on(mut self, codes: impl IntoIterator<Item = ToolErrorCode>) -> Self {
        self.codes = codes.into_iter().collect();
        self
    }
    /// Only these tools.
    pub fn tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// What to do when retries run out: `Error` keeps the tool's error (the model reads
    /// it), `Continue` answers that the tool failed after the attempts.
    pub fn on_failure(mut self, f: OnFailure) -> Self {
        self.on_failure = f;
        self
    }
}

impl Middleware for ToolRetry {
    fn name(&self) -> &str {
        "ToolRetryMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapToolCall])
    }
    fn wrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        next: ToolNext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        if self
            .tools
            .as_ref()
            .is_some_and(|t| !t.contains(&request.call.name))
        {
            return next.call(request);
        }
        Box::pin(async move {
            let mut retry = 0;
            loop {
                match next.call(request.clone()).await {
                    Ok(out) => return Ok(out),
                    Err(e) if self.codes.contains(&e.code) && retry < self.max_retries => {
                        retry += 1;
                        let wait = self.backoff.delay(retry);
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                    }
                    Err(e) => {
                        if self.on_failure == OnFailure::Continue && self.codes.contains(&e.code) {
                            let attempts = retry + 1;
                            return Err(ToolError::new(
                                e.code,
                                format!(
                                    "Tool '{}' failed after {attempts} attempt{}: {}",
                                    request.call.name,
                                    if attempts == 1 { "" } else { "s" },
                                    e.message
                                ),
                            ));
                        }
                        return Err(e);
                    }
                }
            }
        })
    }
}
