//! The [`ChatModel`] trait, its object-safe twin [`DynChatModel`], and [`ChatModelExt`]
//! (bound tools and options, structured output, collecting a stream).

use crate::chunk::{ChatChunk, ChunkAssembler};
use crate::error::Result;
use crate::options::{ChatOptions, ToolChoice, ToolSpec};
use crate::structured;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use graphloom_core::Message;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;

/// A stream of chunks of one answer.
pub type ChunkStream = BoxStream<'static, Result<ChatChunk>>;

/// A chat model: messages in, an AI message out (whole, or streamed in chunks).
///
/// Implement it with `async fn invoke`; use [`DynChatModel`] (`Arc<dyn DynChatModel>`) where
/// the model is chosen at run time. Every `ChatModel` is a `DynChatModel`, and
/// `Arc<dyn DynChatModel>` is a `ChatModel` again.
pub trait ChatModel: Send + Sync {
    /// The model's name as the provider knows it (`gpt-4o-mini`, `claude-sonnet-4-5`, ...).
    fn model_name(&self) -> &str;

    /// The provider (`openai`, `anthropic`, `scripted`, ...).
    fn provider(&self) -> &str;

    /// Answer `messages`: an AI message with its text, tool calls, `usage_metadata` and
    /// `response_metadata`.
    fn invoke(
        &self,
        messages: &[Message],
        options: &ChatOptions,
    ) -> impl Future<Output = Result<Message>> + Send;

    /// Answer `messages` as a stream of chunks: text deltas, tool-call argument deltas (to be
    /// joined by index), and usage near the end. [`ChunkAssembler`] (or
    /// [`ChatModelExt::stream_collect`]) builds the final message.
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream;
}

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
            Some(rt) => Box::pin(crate::stream_into::invoke_forwarded(rt, self, messages, options)),
            None => Box::pin(self.invoke(messages, options)),
        }
    }
    fn dyn_stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        match graphloom_core::message_stream::current() {
            Some(rt) => crate::stream_into::forwarded(rt, self, messages, options),
            None => self.stream(messages, options),
        }
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
}

macro_rules! forward_chat_model {
    ($ty:ty) => {
        impl<M: ChatModel + ?Sized> ChatModel for $ty {
            fn model_name(&self) -> &str {
                (**self).model_name()
            }
            fn provider(&self) -> &str {
                (**self).provider()
            }
            fn invoke(
                &self,
                messages: &[Message],
                options: &ChatOptions,
            ) -> impl Future<Output = Result<Message>> + Send {
                (**self).invoke(messages, options)
            }
            fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
                (**self).stream(messages, options)
            }
        }
    };
}
forward_chat_model!(Arc<M>);
forward_chat_model!(Box<M>);
forward_chat_model!(&M);

/// A model with default options (bound tools, tool choice, temperature, ...) merged under
/// every call's options.
#[derive(Debug, Clone)]
pub struct WithOptions<M> {
    inner: M,
    defaults: ChatOptions,
}

impl<M> WithOptions<M> {
    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
    /// The default options.
    pub fn defaults(&self) -> &ChatOptions {
        &self.defaults
    }
    /// Also offer these tools.
    #[must_use]
    pub fn bind_tools(mut self, tools: impl IntoIterator<Item = ToolSpec>) -> Self {
        self.defaults = self.defaults.tools(tools);
        self
    }
    /// Set the tool choice.
    #[must_use]
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.defaults.tool_choice = Some(choice);
        self
    }
}

impl<M: ChatModel> ChatModel for WithOptions<M> {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }
    fn provider(&self) -> &str {
        self.inner.provider()
    }
    async fn invoke(&self, messages: &[Message], options: &ChatOptions) -> Result<Message> {
        let merged = options.merged_over(&self.defaults);
        self.inner.invoke(messages, &merged).await
    }
    fn stream(&self, messages: &[Message], options: &ChatOptions) -> ChunkStream {
        self.inner.stream(messages, &options.merged_over(&self.defaults))
    }
}

/// Conveniences for every [`ChatModel`].
pub trait ChatModelExt: ChatModel + Sized {
    /// This model with `tools` offered on every call.
    fn bind_tools(self, tools: impl IntoIterator<Item = ToolSpec>) -> WithOptions<Self> {
        self.with_options(ChatOptions::new().tools(tools))
    }

    /// This model with `defaults` merged under every call's options.
    fn with_options(self, defaults: ChatOptions) -> WithOptions<Self> {
        WithOptions {
            inner: self,
            defaults,
        }
    }

    /// Ask for a `T`: the JSON Schema of `T` (from `schemars`) goes to the provider as the
    /// response format; the answer is parsed as JSON, validated against the schema (with
    /// `jsonschema`) and only then deserialised. A model that answers something else gives
    /// [`crate::Error::StructuredOutput`] with the reason and an excerpt of the raw text.
    fn invoke_structured<T>(
        &self,
        messages: &[Message],
        options: &ChatOptions,
    ) -> impl Future<Output = Result<T>> + Send
    where
        T: DeserializeOwned + schemars::JsonSchema + Send,
    {
        let (format, validator) = structured::prepare::<T>();
        let opts = options.clone().response_format(format);
        async move {
            let validator = validator?;
            let msg = self.invoke(messages, &opts).await?;
            structured::parse_message::<T>(&msg, &validator)
        }
    }

    /// Stream and assemble the chunks into the final message (what `invoke` returns, built
    /// from the stream).
    fn stream_collect(
        &self,
        messages: &[Message],
        options: &ChatOptions,
    ) -> impl Future<Output = Result<Message>> + Send {
        let stream = self.stream(messages, options);
        collect_stream(stream, self.provider().to_owned())
    }
}

impl<M: ChatModel + Sized> ChatModelExt for M {}

/// Assemble a chunk stream of `provider`'s model into the final AI message; the first error
/// ends it.
pub async fn collect_stream(mut stream: ChunkStream, provider: String) -> Result<Message> {
    let mut asm = ChunkAssembler::with_provider(provider);
    while let Some(chunk) = stream.next().await {
        asm.push(&chunk?);
    }
    Ok(asm.finish())
}
