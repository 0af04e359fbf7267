//! The completion adapter: the only code that talks to the model. It streams the answer
//! (emitting `text_delta` per chunk), computes the prompt hash (the single computation site
//! of this crate) and emits one `usage_report` per call, failed calls included.

use crate::events::{AiEvent, GraphLlmCaller, UsageFact};
use futures::StreamExt;
use graphloom_llm::{ChatModel, ChatOptions, ChunkAssembler, DynChatModel, Message, Usage};
use std::sync::Arc;
use std::time::Instant;

/// The answer of one call and its billing fact.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The assembled AI message.
    pub message: Message,
    /// What the call consumed (also emitted as `usage_report`).
    pub fact: UsageFact,
}

/// Wraps the model; graphs call [`CompletionAdapter::execute_stream`], never the model.
#[derive(Clone)]
pub struct CompletionAdapter {
    model: Arc<dyn DynChatModel>,
}

impl std::fmt::Debug for CompletionAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionAdapter")
            .field("model", &self.model.model_name())
            .finish()
    }
}

impl CompletionAdapter {
    /// An adapter over `model`.
    #[must_use]
    pub fn new(model: Arc<dyn DynChatModel>) -> Self {
        Self { model }
    }

    /// The model it calls.
    #[must_use]
    pub fn model(&self) -> Arc<dyn DynChatModel> {
        Arc::clone(&self.model)
    }

    /// Stream one answer: `text_delta` for every text chunk as it arrives, then one
    /// `usage_report` (also when the stream fails part way). The call's invocation id is a
    /// fresh UUID v7; [`CompletionAdapter::invoke`] takes one from the caller.
    ///
    /// # Errors
    /// The model's error, after its `usage_report` was emitted.
    pub async fn execute_stream(
        &self,
        caller: &GraphLlmCaller,
        messages: &[Message],
        options: &ChatOptions,
        emit: &(dyn Fn(AiEvent) + Send + Sync),
    ) -> graphloom_llm::Result<Completion> {
        let invocation_id = uuid::Uuid::now_v7().to_string();
        let (fact, outcome) = self.invoke(invocation_id, caller, messages, options, emit).await;
        outcome.map(|message| Completion { message, fact })
    }

    /// One model call under `invocation_id` (the billing idempotency key: a graph derives
    /// it from its task, so a call re-executed after a crash keeps its id): `text_delta`
    /// per text chunk, then one `usage_report`. Returns the usage fact whatever happened,
    /// and the answer or the model's error.
    pub async fn invoke(
        &self,
        invocation_id: String,
        caller: &GraphLlmCaller,
        messages: &[Message],
        options: &ChatOptions,
        emit: &(dyn Fn(AiEvent) + Send + Sync),
    ) -> (UsageFact, graphloom_llm::Result<Message>) {
        let options = options
            .clone()
            .metadata("request_id", caller.caller.request_id.as_str())
            .metadata("trace_id", caller.caller.trace_id.as_str())
            .metadata("graph_run_id", caller.graph_run_id.as_str())
            .metadata("graph_name", caller.graph_name.as_str())
            .metadata("graph_version", caller.graph_version.as_str());
        let model_name = self.model.model_name().to_owned();
        // The single computation site of the prompt hash.
        let prompt_hash = graphloom_llm::prompt_hash(&model_name, messages, &options);
        let started = Instant::now();
        let mut stream = self.model.stream(messages, &options);
        let mut asm = ChunkAssembler::with_provider(self.model.provider());
        let mut usage = Usage::default();
        let mut finish_reason = None;
        let mut failure = None;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => {
                    if !chunk.text.is_empty() {
                        emit(AiEvent::TextDelta {
                            delta: chunk.text.clone(),
                        });
                    }
                    if let Some(u) = chunk.usage {
                        usage += u;
                    }
                    if chunk.finish_reason.is_some() {
                        finish_reason.clone_from(&chunk.finish_reason);
                    }
                    asm.push(&chunk);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let message = asm.finish();
        let fact = UsageFact {
            invocation_id,
            provider: self.model.provider().to_owned(),
            model: model_name,
            prompt_hash,
            usage,
            finish_reason: if failure.is_some() { None } else { finish_reason },
            response_id: if failure.is_some() {
                None
            } else {
                message.id.clone()
            },
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            error: failure.as_ref().map(ToString::to_string),
        };
        emit(AiEvent::UsageReport { fact: fact.clone() });
        match failure {
            Some(e) => (fact, Err(e)),
            None => (fact, Ok(message)),
        }
    }
}
