//! The AI runtime: owns the graph run id, calls the executor port, and relays the run's
//! events with a pump that runs to completion whatever the client does (so billing sees
//! every `usage_report`), fanning out to the client and to the billing subscriber.

use crate::events::{AiEvent, Correlation, EventEnvelope, GraphLlmCaller, LlmCaller, UsageFact};
use crate::executor::{tokio_stream_from, FinalResult, GraphExecutor, GraphRunRequest};
use futures::stream::BoxStream;
use futures::StreamExt;
use graphloom_llm::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// Receives every usage fact of every run, as a [`ChargeReceipt`].
pub trait BillingSink: Send + Sync {
    /// Record one model call's charge. Called once per `usage_report`, from the relay's
    /// pump; a sink keys receipts by [`UsageFact::invocation_id`], so a fact delivered again
    /// charges once.
    fn record(&self, receipt: &ChargeReceipt);
}

/// A charge for one model call, keyed by its invocation id: who pays (the caller's billing
/// account and virtual key), the run's correlation ids, and what the call consumed.
///
/// Serialised flat (`billing_account_id`, `virtual_key_id`, `request_id`, `trace_id`,
/// `graph_run_id`, `graph_name`, `graph_version`, `invocation_id`, `provider`, `model`,
/// `prompt_hash`, `usage`, `finish_reason`, `response_id`, `duration_ms`, `error`): the
/// value of a receipt item in the store (see [`crate::ledger`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargeReceipt {
    /// The account that pays.
    pub billing_account_id: String,
    /// The virtual key the call was made with.
    pub virtual_key_id: String,
    /// Correlation ids of the run.
    #[serde(flatten)]
    pub correlation: Correlation,
    /// The usage fact.
    #[serde(flatten)]
    pub fact: UsageFact,
}

impl ChargeReceipt {
    /// The receipt of `fact`, a call made for `caller`.
    #[must_use]
    pub fn of(caller: &GraphLlmCaller, fact: &UsageFact) -> Self {
        Self {
            billing_account_id: caller.caller.billing_account_id.clone(),
            virtual_key_id: caller.caller.virtual_key_id.clone(),
            correlation: caller.correlation(),
            fact: fact.clone(),
        }
    }
}

/// Billing kept in memory; idempotent on `invocation_id` (a replayed fact charges once).
///
/// It keeps every receipt for as long as it lives: for tests and the one-shot demo
/// (`src/main.rs`). A long-running process bills into a database instead
/// ([`crate::StoreLedger`], what a served run uses).
#[derive(Debug, Default)]
pub struct InMemoryBilling {
    ledger: Mutex<Ledger>,
}

#[derive(Debug, Default)]
struct Ledger {
    /// Receipts in the order they were first recorded.
    receipts: Vec<ChargeReceipt>,
    /// Invocation id -> index in `receipts`.
    by_id: BTreeMap<String, usize>,
    deliveries: usize,
}

impl InMemoryBilling {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    /// Every receipt, in the order the calls were first recorded (call order).
    #[must_use]
    pub fn receipts(&self) -> Vec<ChargeReceipt> {
        self.ledger
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .receipts
            .clone()
    }
    /// How many facts were delivered (duplicates included).
    #[must_use]
    pub fn deliveries(&self) -> usize {
        self.ledger
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .deliveries
    }
}

impl BillingSink for InMemoryBilling {
    fn record(&self, receipt: &ChargeReceipt) {
        let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.deliveries += 1;
        if !ledger.by_id.contains_key(&receipt.fact.invocation_id) {
            let at = ledger.receipts.len();
            ledger.by_id.insert(receipt.fact.invocation_id.clone(), at);
            ledger.receipts.push(receipt.clone());
        }
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
            caller: caller.clone(),
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
                    billing.record(&ChargeReceipt::of(&caller, fact));
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
