//! [`ModelFallback`]: when the model call fails, try other models in order (LangChain's
//! `ModelFallbackMiddleware`).

use super::{Hook, Hooks, Middleware, ModelNext, ModelRequest, ModelResponse};
use futures::future::BoxFuture;
use graphloom_core::NodeError;
use graphloom_llm::DynChatModel;
use std::sync::Arc;

type Predicate = Arc<dyn Fn(&graphloom_llm::Error) -> bool + Send + Sync>;

/// Try `models` in order when the call fails with an error `on` accepts (default: any
/// provider error except a budget refusal); the last error goes on when every model
/// failed.
#[derive(Clone)]
#[must_use]
pub struct ModelFallback {
    models: Vec<Arc<dyn DynChatModel>>,
    on: Predicate,
}

impl std::fmt::Debug for ModelFallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFallback")
            .field(
                "models",
                &self
                    .models
                    .iter()
                    .map(|m| m.dyn_model_name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl ModelFallback {
    /// Fall back to `models`, in order.
    pub fn new(models: impl IntoIterator<Item = Arc<dyn DynChatModel>>) -> Self {
        Self {
            models: models.into_iter().collect(),
            on: Arc::new(|e: &graphloom_llm::Error| e.kind() != graphloom_llm::ErrorKind::Budget),
        }
    }
    /// Fall back only on errors `f` accepts.
    pub fn on(mut self, f: impl Fn(&graphloom_llm::Error) -> bool + Send + Sync + 'static) -> Self {
        self.on = Arc::new(f);
        self
    }
}

impl Middleware for ModelFallback {
    fn name(&self) -> &str {
        "ModelFallbackMiddleware"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn check(&self, _agent: &super::AgentInfo<'_>) -> Result<(), crate::Error> {
        if self.models.is_empty() {
            return Err(crate::Error::middleware(
                self.name(),
                "give at least one fallback model",
            ));
        }
        Ok(())
    }
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        Box::pin(async move {
            let mut err = match next.call(request.clone()).await {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            for model in &self.models {
                let falls_back = err
                    .downcast_ref::<graphloom_llm::Error>()
                    .is_some_and(|e| (self.on)(e));
                if !falls_back {
                    return Err(err);
                }
                let mut req = request.clone();
                req.model = Arc::clone(model);
                match next.call(req).await {
                    Ok(r) => return Ok(r),
                    Err(e) => err = e,
                }
            }
            Err(err)
        })
    }
}
