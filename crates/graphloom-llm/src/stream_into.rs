//! Model calls inside graph nodes and `messages` stream mode.
//!
//! While a run streams `messages`, graphloom-core puts each node's runtime in scope
//! (`graphloom_core::message_stream::current`). Every provider here (and every model
//! called through [`crate::DynChatModel`]) then streams its answer, forwards each chunk
//! to the run as a LangChain `AIMessageChunk` with the node's metadata, and returns the
//! assembled message under the chunks' id, so the node's own update does not emit it
//! again. A run that streams `events` gets the same treatment, and each call is also
//! reported as `on_chat_model_start`/`stream`/`end`. Outside such a run a call is a plain
//! call. [`stream_into`] does the same for an
//! explicit runtime (a model called from a task the node spawned).

use crate::chunk::ChunkAssembler;
use crate::error::Result;
use crate::message::new_message_id;
use crate::model::{collect_stream, ChatModel, ChunkStream};
use crate::options::ChatOptions;
use futures::{Stream, StreamExt};
use graphloom_core::{message_stream, EventRun, Message, RunType, Runtime};
use serde_json::{json, Map, Value};
use std::pin::Pin;
use std::task::{Context, Poll};

/// What a model call adds to the metadata of its `messages` events (LangChain's `ls_*`).
fn model_meta(provider: &str, model: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("ls_provider".into(), json!(provider));
    m.insert("ls_model_name".into(), json!(model));
    m.insert("ls_model_type".into(), json!("chat"));
    m
}

/// Polls the stream it wraps with no runtime in scope, so a model wrapped by another
/// (a budget, bound options) does not forward the chunks the outer one forwards.
struct Unscoped(ChunkStream);

impl Stream for Unscoped {
    type Item = <ChunkStream as Stream>::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        message_stream::without(|| self.0.as_mut().poll_next(cx))
    }
}

/// The name a model call is reported under in `events`, after LangChain's chat model
/// classes where there is one.
fn event_name<'a>(provider: &str, model: &'a str) -> &'a str {
    match provider {
        "openai" => "ChatOpenAI",
        "anthropic" => "ChatAnthropic",
        "scripted" => "ScriptedModel",
        _ => model,
    }
}

/// Start reporting a model call as `on_chat_model_*` events, when the run streams them.
fn model_events<M: ChatModel + ?Sized>(rt: &Runtime, model: &M, messages: &[Message]) -> Option<EventRun> {
    if !rt.wants_events() {
        return None;
    }
    let mut meta = model_meta(model.provider(), model.model_name());
    meta.insert("ls_integration".into(), json!("langchain_chat_model"));
    // LangChain reports a batch of prompts: one list of messages per prompt.
    let input = json!({ "messages": [messages] });
    rt.event_run(
        RunType::ChatModel,
        event_name(model.provider(), model.model_name()),
        input,
        meta,
    )
}

/// Reports each chunk of a model's answer as `on_chat_model_stream` and the assembled
/// answer as `on_chat_model_end` when the stream ends (nothing if it fails or is dropped:
/// LangChain has no model error event).
struct Reported {
    inner: ChunkStream,
    asm: Option<ChunkAssembler>,
    events: Option<EventRun>,
}

impl Stream for Reported {
    type Item = <ChunkStream as Stream>::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(ev) = &self.events {
                    ev.stream(chunk.to_langchain_json(chunk.id.as_deref().unwrap_or_default()));
                }
                if let Some(asm) = self.asm.as_mut() {
                    asm.push(chunk);
                }
            }
            Poll::Ready(Some(Err(_))) => {
                self.events = None;
            }
            Poll::Ready(None) => {
                if let (Some(ev), Some(asm)) = (self.events.take(), self.asm.take()) {
                    ev.end(serde_json::to_value(asm.finish()).unwrap_or(Value::Null));
                }
            }
            Poll::Pending => {}
        }
        next
    }
}

/// `model`'s answer as a stream whose chunks also go to `rt`'s `messages` stream, all
/// under one id (the first chunk's, or a fresh one) that the chunks passed on carry too,
/// and, when the run streams `events`, are reported as the call's `on_chat_model_*`.
pub(crate) fn forwarded<M: ChatModel + ?Sized>(
    rt: Runtime,
    model: &M,
    messages: &[Message],
    options: &ChatOptions,
) -> ChunkStream {
    let events = model_events(&rt, model, messages);
    let provider = model.provider().to_owned();
    let stream = forwarded_messages(rt, model, messages, options);
    match events {
        None => stream,
        Some(events) => Box::pin(Reported {
            inner: stream,
            asm: Some(ChunkAssembler::with_provider(provider)),
            events: Some(events),
        }),
    }
}

fn forwarded_messages<M: ChatModel + ?Sized>(
    rt: Runtime,
    model: &M,
    messages: &[Message],
    options: &ChatOptions,
) -> ChunkStream {
    let inner = message_stream::without(|| model.stream(messages, options));
    if options.is_nostream()
        || model
            .bound_tags()
            .iter()
            .any(|t| crate::options::is_nostream_tag(t))
    {
        // A call tagged `nostream` is the node's own business: no `messages` events.
        return Box::pin(Unscoped(inner));
    }
    let meta = model_meta(model.provider(), model.model_name());
    let mut id: Option<String> = None;
    Box::pin(Unscoped(inner).map(move |item| {
        item.map(|mut chunk| {
            let id = id
                .get_or_insert_with(|| {
                    chunk
                        .id
                        .clone()
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(new_message_id)
                })
                .clone();
            rt.emit_message_with(chunk.to_langchain_json(&id), meta.clone());
            chunk.id = Some(id);
            chunk
        })
    }))
}

/// `invoke` inside a node whose run streams `messages`: stream, forward, assemble.
pub(crate) async fn invoke_forwarded<M: ChatModel + ?Sized>(
    rt: Runtime,
    model: &M,
    messages: &[Message],
    options: &ChatOptions,
) -> Result<Message> {
    let provider = model.provider().to_owned();
    collect_stream(forwarded(rt, model, messages, options), provider).await
}

/// Call `model` for the node behind `rt` and return the final AI message.
///
/// When the run streams `events`, the call is also reported as `on_chat_model_start`
/// (its messages), one `on_chat_model_stream` per chunk and `on_chat_model_end` (the
/// assembled message), nested in the node's run.
///
/// When the run streams in `messages` mode (`rt.wants_messages()`), the answer is streamed
/// and every chunk is forwarded as a LangChain `AIMessageChunk`
/// (`{"type":"AIMessageChunk","content":..,"id":..,"tool_call_chunks":[..]}`) through
/// `rt.emit_message`, tagged by the runtime with the node's metadata (and `ls_provider`,
/// `ls_model_name`) and, inside a subgraph, its namespace. Every chunk and the returned
/// message share one id, so a client can match the streamed message with the one that
/// lands in the state, and the node's update does not emit it again. Otherwise the model
/// is simply invoked.
///
/// Inside a node, a plain `invoke` through [`crate::DynChatModel`] or on a provider of
/// this crate does the same with the node's runtime; `stream_into` is for an explicit
/// runtime (a model called from a task the node spawned) or a model of your own called
/// directly.
///
/// ```
/// use graphloom_core::{Message, RunConfig, Seq, State, StateGraph, END, START};
/// use graphloom_llm::{stream_into, ChatOptions, NodeResultExt, Reply, ScriptedModel};
///
/// #[derive(State, Clone, Default, Debug)]
/// struct Chat {
///     #[reducer(add_messages)]
///     messages: Seq<Message>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let model = ScriptedModel::new([Reply::text("Hello from the model")]);
/// let graph = StateGraph::<Chat>::new()
///     .add_node("agent", move |s: std::sync::Arc<Chat>, rt| {
///         let model = model.clone();
///         async move {
///             let history: Vec<Message> = s.messages.iter().cloned().collect();
///             let answer = stream_into(&rt, &model, &history, &ChatOptions::new()).await.node()?;
///             Ok(ChatUpdate::new().messages(vec![answer]))
///         }
///     })
///     .add_edge(START, "agent")
///     .add_edge("agent", END)
///     .compile()?;
/// let out = graph.invoke(ChatUpdate::new().messages(vec![Message::human("hi")]), RunConfig::default()).await?;
/// assert_eq!(out.values.messages.iter().last().map(Message::text).as_deref(), Some("Hello from the model"));
/// # Ok(()) }
/// ```
pub async fn stream_into<M: ChatModel + ?Sized>(
    rt: &Runtime,
    model: &M,
    messages: &[Message],
    options: &ChatOptions,
) -> Result<Message> {
    if !rt.wants_messages() && !rt.wants_events() {
        return model.invoke(messages, options).await;
    }
    let mut stream = forwarded(rt.clone(), model, messages, options);
    let mut asm = ChunkAssembler::with_provider(model.provider());
    while let Some(chunk) = stream.next().await {
        asm.push(&chunk?);
    }
    Ok(asm.finish())
}
