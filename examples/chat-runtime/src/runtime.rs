//! The AI runtime: owns the graph run id, calls the executor port, and relays the run's
//! events with a pump that runs to completion whatever the client does (so billing sees
//! every `usage_report`), fanning out to the client and to the billing subscriber.

use crate::events::{AiEvent, Correlation, EventEnvelope, GraphLlmCaller, LlmCaller, UsageFact};
use crate::executor::{tokio_stream_from, FinalResult, GraphExecutor, GraphRunRequest};
use futures::stream::BoxStream;
use futures::StreamExt;
use graphloom_llm::Message;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// Receives every usage fact of every run.
pub trait BillingSink: Send + Sync {
    /// Record one model call's usage. Called once per `usage_report`, from the relay's pump.
    fn record(&self, correlation: &Correlation, fact: &UsageFact);
}

/// A charge, keyed by the model call's invocation id.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargeReceipt {
    /// Correlation ids of the run.
    pub correlation: Correlation,
    /// The usage fact.
    pub fact: UsageFact,
}

/// Billing kept in memory; idempotent on `invocation_id` (a replayed fact charges once).
#[derive(Debug, Default)]
pub struct InMemoryBilling {
    receipts: Mutex<BTreeMap<String, ChargeReceipt>>,
    deliveries: Mutex<usize>,
}

impl InMemoryBilling {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    /// Every receipt, ordered by invocation id (UUID v7: call order).
    #[must_use]
    pub fn receipts(&self) -> Vec<ChargeReceipt> {
        self.receipts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
    /// How many facts were delivered (duplicates included).
    #[must_use]
    pub fn deliveries(&self) -> usize {
        *self.deliveries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl BillingSink for InMemoryBilling {
    fn record(&self, correlation: &Correlation, fact: &UsageFact) {
        *self.deliveries.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.receipts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(fact.invocation_id.clone())
            .or_insert_with(|| ChargeReceipt {
                correlation: correlation.clone(),
                fact: fact.clone(),
            });
    }
}

/// One chat turn to run.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// Who asks (billing and correlation ids).
    pub caller: LlmCaller,
    /// The conversation thread.
    pub thread_id: String,
    /// The new messages.
    pub messages: Vec<Message>,
}

/// A running chat turn.
pub struct ChatRun {
    /// The run id the runtime generated.
    pub graph_run_id: String,
    /// The client's view of the events; dropping it does not stop the run or billing.
    pub events: BoxStream<'static, EventEnvelope>,
    /// The final result.
    pub final_result: FinalResult,
}

impl std::fmt::Debug for ChatRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatRun")
            .field("graph_run_id", &self.graph_run_id)
            .finish_non_exhaustive()
    }
}

/// The AI runtime.
#[derive(Clone)]
pub struct ChatRuntime {
    executor: Arc<dyn GraphExecutor>,
    billing: Arc<dyn BillingSink>,
    graph_name: String,
    graph_version: String,
}

impl std::fmt::Debug for ChatRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatRuntime")
            .field("graph_name", &self.graph_name)
            .finish_non_exhaustive()
    }
}

impl ChatRuntime {
    /// A runtime for the chat graph behind `executor`, billing to `billing`.
    #[must_use]
    pub fn new(executor: Arc<dyn GraphExecutor>, billing: Arc<dyn BillingSink>) -> Self {
        Self {
            executor,
            billing,
            graph_name: crate::GRAPH_ID.to_owned(),
            graph_version: crate::GRAPH_VERSION.to_owned(),
        }
    }

    /// Start a turn: a fresh graph run id, the executor's run, and the relay's pump. The
    /// returned stream yields events as they are produced.
    #[must_use]
    pub fn run_chat_stream(&self, request: ChatRequest) -> ChatRun {
        let graph_run_id = uuid::Uuid::now_v7().to_string();
        let caller = GraphLlmCaller {
            caller: request.caller,
            graph_run_id: graph_run_id.clone(),
            graph_name: self.graph_name.clone(),
            graph_version: self.graph_version.clone(),
        };
        let run = self.executor.run_graph(GraphRunRequest {
            caller,
            thread_id: request.thread_id,
            messages: request.messages,
        });
        let (ui_tx, ui_rx) = mpsc::unbounded_channel();
        let billing = self.billing.clone();
        let mut upstream = run.stream;
        // The pump: reads the run to its end, whoever listens.
        tokio::spawn(async move {
            let mut ui = Some(ui_tx);
            while let Some(envelope) = upstream.next().await {
                if let AiEvent::UsageReport { fact } = &envelope.event {
                    billing.record(&envelope.correlation, fact);
                }
                if let Some(tx) = &ui {
                    if tx.send(envelope).is_err() {
                        // The client disconnected: stop forwarding, keep pumping.
                        ui = None;
                    }
                }
            }
        });
        ChatRun {
            graph_run_id,
            events: tokio_stream_from(ui_rx),
            final_result: run.final_result,
        }
    }
}
