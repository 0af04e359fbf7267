//! [`ContextExt`]: the run's typed context, from a node's or a tool's runtime.

use crate::tool::ToolRuntime;
use graphloom_core::Runtime;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::any::Any;

/// The run's context (`RunConfig::context`) as a `T`, whether the caller handed a `T`
/// (in process) or JSON (the server passes a request's `context` as a
/// `serde_json::Value`). The context reaches nodes, tools and middleware; it is never sent
/// to the model and never stored in the state.
pub trait ContextExt {
    /// The context as a `T`: the value itself when it is a `T`, else decoded from JSON;
    /// `None` without a context or when it does not decode.
    fn typed_context<T: DeserializeOwned + Clone + Any + Send + Sync>(&self) -> Option<T>;
}

fn typed<T: DeserializeOwned + Clone + Any + Send + Sync>(
    direct: Option<&T>,
    json: Option<&Value>,
) -> Option<T> {
    if let Some(v) = direct {
        return Some(v.clone());
    }
    json.and_then(|v| T::deserialize(v).ok())
}

impl ContextExt for Runtime {
    fn typed_context<T: DeserializeOwned + Clone + Any + Send + Sync>(&self) -> Option<T> {
        typed(self.context::<T>(), self.context::<Value>())
    }
}

impl ContextExt for ToolRuntime {
    fn typed_context<T: DeserializeOwned + Clone + Any + Send + Sync>(&self) -> Option<T> {
        typed(self.context::<T>(), self.context::<Value>())
    }
}
