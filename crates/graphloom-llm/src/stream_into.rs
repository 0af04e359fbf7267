//! Calling a model from a graph node so that `messages` stream mode sees its tokens.

use crate::chunk::ChunkAssembler;
use crate::error::Result;
use crate::message::new_message_id;
use crate::model::ChatModel;
use crate::options::ChatOptions;
use futures::StreamExt;
use graphloom_core::{Message, Runtime};

/// Call `model` from a node and return the final AI message.
///
/// When the run streams in `messages` mode (`rt.wants_messages()`), the answer is streamed
/// and every chunk is forwarded as a LangChain `AIMessageChunk`
/// (`{"type":"AIMessageChunk","content":..,"id":..,"tool_call_chunks":[..]}`) through
/// `rt.emit_message`, tagged by the runtime with the node's metadata and, inside a
/// subgraph, its namespace. Every chunk and the returned message share one id, so a client
/// can match the streamed message with the one that lands in the state. Otherwise the
/// model is simply invoked.
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
    if !rt.wants_messages() {
        return model.invoke(messages, options).await;
    }
    let mut stream = model.stream(messages, options);
    let mut asm = ChunkAssembler::with_provider(model.provider());
    let mut id: Option<String> = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let id = id.get_or_insert_with(|| chunk.id.clone().unwrap_or_else(new_message_id));
        rt.emit_message(chunk.to_langchain_json(id));
        asm.push(&chunk);
    }
    if let Some(id) = id {
        asm.set_id(id);
    }
    Ok(asm.finish())
}
