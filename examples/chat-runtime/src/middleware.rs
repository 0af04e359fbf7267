//! The chat runtime's pipeline as `create_agent` middleware: the model call goes through
//! the [`CompletionAdapter`] (text deltas, the prompt hash, one usage report per call) and
//! every tool call through the [`ToolRunner`] (validate, execute, validate, redact, emit),
//! each a wrapper that replaces the default call.

use crate::adapter::CompletionAdapter;
use crate::events::{AiEvent, GraphLlmCaller};
use crate::ledger::StoreLedger;
use crate::runtime::ChargeReceipt;
use crate::tools::{ToolContract, ToolRunner};
use futures::future::BoxFuture;
use graphloom_core::{NodeError, Runtime};
use graphloom_llm::{NodeResultExt, ToolSpec};
use graphloom_prebuilt::middleware::{
    Hook, Hooks, Middleware, ModelNext, ModelRequest, ModelResponse, ToolCallRequest, ToolNext,
};
use graphloom_prebuilt::{Tool, ToolError, ToolOutput, ToolRuntime};
use serde_json::Value;
use std::sync::Arc;

/// Every model call of the agent through the adapter: the one executor port. With a
/// [`StoreLedger`], each call's receipt is written before the call returns.
pub struct CompletionPort {
    adapter: CompletionAdapter,
    caller: fn(&Runtime) -> GraphLlmCaller,
    ledger: Option<StoreLedger>,
}

impl CompletionPort {
    /// Calls through `adapter`, billed to `caller(runtime)`.
    #[must_use]
    pub fn new(adapter: CompletionAdapter, caller: fn(&Runtime) -> GraphLlmCaller) -> Self {
        Self {
            adapter,
            caller,
            ledger: None,
        }
    }

    /// Write every call's [`ChargeReceipt`] to `ledger` before the model node goes on (a
    /// failed write fails the call, retryably: no update without its receipt).
    #[must_use]
    pub fn ledger(mut self, ledger: StoreLedger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The invocation id of the next model call of `rt`'s task: the task's idempotency key
    /// with the call's index in the task attempt. The same when the task runs again: the
    /// task id is derived from the checkpoint the task runs from (a run retaken after a
    /// crash starts again from that checkpoint), and every attempt counts from 0.
    fn invocation_id(rt: &Runtime) -> String {
        let index = rt.next_sequence();
        rt.idempotency_key(&format!("chat_runtime/model-call/{index}"))
    }
}

impl Middleware for CompletionPort {
    fn name(&self) -> &str {
        "CompletionPort"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapModelCall])
    }
    fn wrap_model_call<'a>(
        &'a self,
        request: ModelRequest,
        _next: ModelNext,
    ) -> BoxFuture<'a, Result<ModelResponse, NodeError>> {
        Box::pin(async move {
            let rt = request.runtime.clone();
            let caller = (self.caller)(&rt);
            let mut history = Vec::with_capacity(request.messages.len() + 1);
            if let Some(p) = request.system_prompt {
                history.push(graphloom_core::Message::system(p));
            }
            history.extend(request.messages);
            let options = request.options.tools(request.tools);
            let emit = |e: AiEvent| rt.write(&e);
            let (fact, outcome) = self
                .adapter
                .invoke(Self::invocation_id(&rt), &caller, &history, &options, &emit)
                .await;
            if let Some(ledger) = &self.ledger {
                ledger
                    .record(&ChargeReceipt::of(&caller, &fact))
                    .await
                    .map_err(|e| {
                        NodeError::new(format!(
                            "the charge receipt of model call {} was not written: {e}",
                            fact.invocation_id
                        ))
                        .with_source(e)
                    })?;
            }
            let message = outcome.node()?;
            Ok(ModelResponse::of(message))
        })
    }
}

/// Every tool call through the runner's pipeline (it validates, so the tool node's own
/// checks are not reached).
pub struct ToolPipeline {
    runner: ToolRunner,
}

impl ToolPipeline {
    /// Run calls through `runner`.
    #[must_use]
    pub fn new(runner: ToolRunner) -> Self {
        Self { runner }
    }
}

fn outcome(
    runner: &ToolRunner,
    call: &graphloom_core::ToolCall,
    rt: &ToolRuntime,
) -> BoxFuture<'static, ToolOutput> {
    let runner = runner.clone();
    let call = call.clone();
    let rt = rt.clone();
    Box::pin(async move {
        let emit = |e: AiEvent| rt.write(&e);
        let out = runner.exec(&call, &emit).await;
        // The model reads the same UI-safe payload the stream carries, failures included.
        ToolOutput::json(out.payload())
    })
}

impl Middleware for ToolPipeline {
    fn name(&self) -> &str {
        "ToolPipeline"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::WrapToolCall])
    }
    fn wrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        _next: ToolNext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let fut = outcome(&self.runner, &request.call, &request.runtime);
        Box::pin(async move { Ok(fut.await) })
    }
}

/// A contract offered to the model as a tool; a call outside the pipeline middleware still
/// goes through the runner, so nothing unredacted is ever returned.
pub struct ContractTool {
    spec: ToolSpec,
    runner: ToolRunner,
}

impl ContractTool {
    /// The tools of `contracts`, each run by `runner`.
    #[must_use]
    pub fn all(contracts: &[ToolContract], runner: &ToolRunner) -> Vec<Arc<dyn Tool>> {
        contracts
            .iter()
            .map(|c| {
                Arc::new(ContractTool {
                    spec: c.spec(),
                    runner: runner.clone(),
                }) as Arc<dyn Tool>
            })
            .collect()
    }
    /// The tools of every contract `runner` has.
    #[must_use]
    pub fn of_runner(runner: &ToolRunner) -> Vec<Arc<dyn Tool>> {
        runner
            .specs()
            .into_iter()
            .map(|spec| {
                Arc::new(ContractTool {
                    spec,
                    runner: runner.clone(),
                }) as Arc<dyn Tool>
            })
            .collect()
    }
}

impl Tool for ContractTool {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn schema(&self) -> &Value {
        &self.spec.parameters
    }
    fn call(&self, args: Value, rt: ToolRuntime) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let call = graphloom_core::ToolCall {
            id: rt.tool_call_id.clone(),
            name: self.spec.name.clone(),
            args,
        };
        let fut = outcome(&self.runner, &call, &rt);
        Box::pin(async move { Ok(fut.await) })
    }
}
