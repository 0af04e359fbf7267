//! The [`ChatModel`] trait and [`ChatModelExt`] (bound tools and options, structured
//! output, collecting a stream). Its object-safe twin is [`crate::DynChatModel`].

use crate::chunk::{ChatChunk, ChunkAssembler};
use crate::error::Result;
use crate::options::{ChatOptions, ToolChoice, ToolSpec};
use crate::structured;
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
/// Implement it with `async fn invoke`; use [`DynChatModel`](crate::DynChatModel)
/// (`Arc<dyn DynChatModel>`) where the model is chosen at run time. Every `ChatModel` is a
/// `DynChatModel`, and
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

    /// Tags bound to the model itself ([`ChatModelExt::with_options`]), merged under each
    /// call's: the `messages` stream reads them to leave out a model bound `nostream`.
    fn bound_tags(&self) -> &[String] {
        &[]
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
            fn bound_tags(&self) -> &[String] {
                (**self).bound_tags()
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
    fn bound_tags(&self) -> &[String] {
        if self.defaults.tags.is_empty() {
            self.inner.bound_tags()
        } else {
            &self.defaults.tags
        }
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
