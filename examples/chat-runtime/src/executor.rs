//! The graph executor port and its in-process adapter.
//!
//! [`GraphExecutor::run_graph`] is the one execution interface: it returns a stream of
//! [`EventEnvelope`]s and a final result. The in-process adapter drives the graph in its own
//! task, so iterating (or dropping) the stream has no effect on the run: the stream always
//! ends with exactly one `done`, and the final result resolves exactly once.

use crate::events::{AiEvent, EventEnvelope, GraphLlmCaller};
use crate::{ChatState, ChatStateUpdate};
use futures::stream::BoxStream;
use futures::StreamExt;
use graphloom_core::{CompiledGraph, MessageKind, RunConfig, RunEvent, RunInput, StreamMode, StreamOptions};
use graphloom_llm::{Message, Usage};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};

/// What a graph run is asked to do.
#[derive(Debug, Clone)]
pub struct GraphRunRequest {
    /// Correlation and billing identity; `graph_run_id` is owned by the AI runtime.
    pub caller: GraphLlmCaller,
    /// The conversation thread (checkpoints accumulate per thread).
    pub thread_id: String,
    /// New messages of this turn.
    pub messages: Vec<Message>,
}

/// The outcome of a finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphFinal {
    /// The run.
    pub graph_run_id: String,
    /// The final assistant text.
    pub answer: String,
    /// Model calls made (one `usage_report` each).
    pub model_calls: usize,
    /// Tool calls made.
    pub tool_calls: usize,
    /// Tokens of all model calls.
    pub usage: Usage,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The graph ended with an error.
    #[error("graph run failed: {0}")]
    Graph(String),
    /// The executor's task ended without a result.
    #[error("the run was aborted")]
    Aborted,
}

/// The final result of a run; resolves once, whether or not the stream was read.
#[derive(Debug)]
pub struct FinalResult(oneshot::Receiver<Result<GraphFinal, RunError>>);

impl Future for FinalResult {
    type Output = Result<GraphFinal, RunError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(RunError::Aborted)))
    }
}

/// A started run: its events and its final result.
pub struct GraphRun {
    /// Every event of the run, ending with exactly one `done`.
    pub stream: BoxStream<'static, EventEnvelope>,
    /// The final result.
    pub final_result: FinalResult,
}

impl std::fmt::Debug for GraphRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphRun").finish_non_exhaustive()
    }
}

/// The unified execution interface.
pub trait GraphExecutor: Send + Sync {
    /// Start a run.
    fn run_graph(&self, request: GraphRunRequest) -> GraphRun;
}

/// Runs the chat graph in this process.
#[derive(Clone)]
pub struct InProcGraphExecutor {
    graph: CompiledGraph<ChatState>,
}

impl std::fmt::Debug for InProcGraphExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcGraphExecutor").finish_non_exhaustive()
    }
}

impl InProcGraphExecutor {
    /// An executor for `graph`.
    #[must_use]
    pub fn new(graph: CompiledGraph<ChatState>) -> Self {
        Self { graph }
    }
}

impl GraphExecutor for InProcGraphExecutor {
    fn run_graph(&self, request: GraphRunRequest) -> GraphRun {
        let (tx, rx) = mpsc::unbounded_channel::<EventEnvelope>();
        let (final_tx, final_rx) = oneshot::channel();
        let graph = self.graph.clone();
        tokio::spawn(async move {
            let correlation = request.caller.correlation();
            let config = RunConfig::thread(request.thread_id.clone())
                .run_id(request.caller.graph_run_id.clone())
                .context(request.caller.clone());
            let input = RunInput::Update(ChatStateUpdate::new().messages(request.messages));
            let mut events = graph.stream(input, config, StreamOptions::modes([StreamMode::Custom]));
            let (mut model_calls, mut tool_calls, mut usage) = (0usize, 0usize, Usage::default());
            let mut end = None;
            while let Some(ev) = events.next().await {
                match ev {
                    RunEvent::Part(part) => {
                        let Some(event) = part
                            .data_json()
                            .ok()
                            .and_then(|v| serde_json::from_value::<AiEvent>(v).ok())
                        else {
                            continue;
                        };
                        match &event {
                            AiEvent::UsageReport { fact } => {
                                model_calls += 1;
                                usage += fact.usage;
                            }
                            AiEvent::ToolCallResult { .. } => tool_calls += 1,
                            // `done` is the executor's alone.
                            AiEvent::Done => continue,
                            _ => {}
                        }
                        // A client that went away must not stop the run.
                        let _ = tx.send(EventEnvelope {
                            correlation: correlation.clone(),
                            event,
                        });
                    }
                    RunEvent::End(out) => end = Some(out),
                }
            }
            let result = match end {
                Some(Ok(out)) => Ok(GraphFinal {
                    graph_run_id: request.caller.graph_run_id.clone(),
                    answer: out
                        .values
                        .messages
                        .iter()
                        .rev()
                        .find(|m| m.kind == MessageKind::Ai)
                        .map(Message::text)
                        .unwrap_or_default(),
                    model_calls,
                    tool_calls,
                    usage,
                }),
                Some(Err(e)) => Err(RunError::Graph(e.to_string())),
                None => Err(RunError::Aborted),
            };
            let _ = tx.send(EventEnvelope {
                correlation,
                event: AiEvent::Done,
            });
            let _ = final_tx.send(result);
        });
        GraphRun {
            stream: tokio_stream_from(rx),
            final_result: FinalResult(final_rx),
        }
    }
}

/// An unbounded receiver as a stream.
pub(crate) fn tokio_stream_from<T: Send + 'static>(rx: mpsc::UnboundedReceiver<T>) -> BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) }).boxed()
}
