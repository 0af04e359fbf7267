//! [`DynChatModel`]: the object-safe form of [`ChatModel`], for models chosen at run time
//! (`Arc<dyn DynChatModel>`), and the place where a call inside a node that streams
//! `messages` is forwarded to the run.

use crate::error::Result;
use crate::model::{ChatModel, ChunkStream};
use crate::options::ChatOptions;
use crate::stream_into::{forwarded, invoke_forwarded};
use futures::future::BoxFuture;
use graphloom_core::Message;

/// The object-safe form of [`ChatModel`], implemented for every `ChatModel`.
pub trait DynChatModel: Send + Sync {
    /// See [`ChatModel::model_name`].
    fn dyn_model_name(&self) -> &str;
    /// See [`ChatModel::provider`].
    fn dyn_provider(&self) -> &str;
    /// See [`ChatModel::invoke`].
    fn dyn_invoke<'a>(
        &'a self,
        messages: &'a [Message],
        options: &'a ChatOptions,
    ) -> BoxFuture<'a, Result<Message>>;
    /// See [`ChatModel::stream`].
    fn dyn_stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream;
    /// See [`ChatModel::bound_tags`].
    fn dyn_bound_tags(&self) -> &[String] {
        &[]
    }
}

/// Inside a node whose run streams `messages`, a model called through `DynChatModel`
/// (any `ChatModel`, the user's own too) streams its answer and forwards the chunks to
/// the run, as LangChain's chat models do under LangGraph's stream handler; `dyn_invoke`
/// then assembles the streamed answer.
impl<M: ChatModel> DynChatModel for M {
    fn dyn_model_name(&self) -> &str {
        self.model_name()
    }
    fn dyn_provider(&self) -> &str {
        self.provider()
    }
    fn dyn_invoke<'a>(
        &'a self,
        messages: &'a [Message],
        options: &'a ChatOptions,
    ) -> BoxFuture<'a, Result<Message>> {
        match graphloom_core::message_stream::current() {
            Some(rt) => Box::pin(invoke_forwarded(rt, self, messages, options)),
            None => Box::pin(self.invoke(messages, options)),
        }
    }
    fn dyn_stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        match graphloom_core::message_stream::current() {
            Some(rt) => forwarded(rt, self, messages, options),
            None => self.stream(messages, options),
        }
    }
    fn dyn_bound_tags(&self) -> &[String] {
        self.bound_tags()
    }
}

impl ChatModel for dyn DynChatModel {
    fn model_name(&self) -> &str {
        self.dyn_model_name()
    }
    fn provider(&self) -> &str {
        self.dyn_provider()
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        self.dyn_invoke(messages, options).await
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        self.dyn_stream(messages, options)
    }
    fn bound_tags(&self) -> &[String] {
        self.dyn_bound_tags()
    }
}
