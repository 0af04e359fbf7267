//! The permit-filing agent rebuilt on `graphloom_prebuilt::create_agent`: the seed's
//! `before_tool_call` gate, its token/cost budgets and its iteration limit as middleware
//! around an ordinary model/tools loop.
//!
//! The node pipeline of [`crate::graph`] (skill selection and injection, the two-phase
//! model call, checkpoint approvals, the routing table) is the seed's own and stays as
//! it is; what is cross-cutting there is middleware here:
//!
//! | seed | here |
//! |---|---|
//! | `before_tool_call` gate: an approval record, a pause, the verdict recorded, the call run once | [`ApprovalGate`]: `HumanInTheLoop` on every mutating capability, plus the record in `["approvals"]` (`pending`, then `approved` / `rejected`); `create_entity` keys its entity by (thread, tool call id), so a replay writes once |
//! | `check_budget` before every call; per-agent defaults (Rule 37: 150k tokens, $10) | `TokenBudget` with [`skills::agent_budget`](crate::skills::agent_budget); the run ends with `Error::BudgetExceeded` and a resumable checkpoint |
//! | iteration limit (20) | `ModelCallLimit` per run, ending with an AI message |
//!
//! ```text
//! START -> ModelCallLimitMiddleware.before_model -> TokenBudgetMiddleware.before_model -> model
//!       -> ModelCallLimitMiddleware.after_model -> ApprovalGate.after_model -> tools | END
//! ```

use crate::skills;
use crate::{DEFAULT_MAX_ITERATIONS, GRAPH_ID};
use futures::future::BoxFuture;
use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::{DynStore, PutOptions};
use graphloom_core::{CompiledGraph, Runtime};
use graphloom_llm::{Budget, DynChatModel};
use graphloom_prebuilt::middleware::budget::TokenBudget;
use graphloom_prebuilt::middleware::hitl::{DecisionType, HumanInTheLoop, InterruptOn};
use graphloom_prebuilt::middleware::limits::ModelCallLimit;
use graphloom_prebuilt::middleware::{
    last_ai_message, Hook, HookFuture, Hooks, Middleware, ToolCallRequest, ToolNext,
};
use graphloom_prebuilt::{create_agent, AgentGraphState, StateField, ToolError, ToolOutput};
use serde_json::{json, Value};
use std::sync::Arc;

/// The id of the approval record of one gated call: derived from (thread, tool call id),
/// so every attempt of the same call finds the same record.
#[must_use]
pub fn approval_id(thread_id: &str, tool_call_id: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("permit-filing/agent-approval/{thread_id}/{tool_call_id}").as_bytes(),
    )
    .to_string()
}

/// The seed's `before_tool_call` gate as middleware: a review of every call of a
/// mutating capability (`HumanInTheLoop`, decisions `approve` / `reject`), with the
/// approval record kept in the store's `["approvals"]` namespace: written `pending`
/// before the pause, `approved` or `rejected` once the reviewer answered.
pub struct ApprovalGate {
    review: HumanInTheLoop,
}

impl Default for ApprovalGate {
    fn default() -> Self {
        Self::new()
    }
}

impl ApprovalGate {
    /// Review every mutating capability of [`skills`].
    #[must_use]
    pub fn new() -> Self {
        let mut review = HumanInTheLoop::new().description_prefix("This call changes the knowledge graph");
        for tool in skills::tool_list(false) {
            if skills::mutating_capability(tool.name()).is_some() {
                review = review.interrupt_on(
                    tool.name(),
                    InterruptOn::allow([DecisionType::Approve, DecisionType::Reject]),
                );
            }
        }
        Self { review }
    }
}

async fn put_record(store: &Arc<dyn DynStore>, id: &str, record: Value) {
    if let Err(e) = store
        .put(&["approvals".to_owned()], id, record, PutOptions::default())
        .await
    {
        tracing::warn!("could not write approval record {id}: {e}");
    }
}

impl Middleware for ApprovalGate {
    fn name(&self) -> &str {
        "ApprovalGate"
    }
    fn hooks(&self) -> Hooks {
        Hooks::of(&[Hook::AfterModel, Hook::WrapToolCall])
    }
    fn state_fields(&self) -> Vec<StateField> {
        self.review.state_fields()
    }
    fn after_model<'a>(&'a self, state: &'a AgentGraphState, rt: &'a Runtime) -> HookFuture<'a> {
        Box::pin(async move {
            let gated: Vec<_> = last_ai_message(state)
                .map(|ai| {
                    ai.tool_calls
                        .iter()
                        .filter(|c| skills::mutating_capability(&c.name).is_some())
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let thread = rt.thread_id().unwrap_or_default().to_owned();
            if let Some(store) = rt.store() {
                for call in &gated {
                    let id = approval_id(&thread, &call.id);
                    // A record decided by an earlier attempt stays decided.
                    if matches!(store.get(&["approvals".to_owned()], &id).await, Ok(Some(_))) {
                        continue;
                    }
                    let record = json!({
                        "id": id, "status": "pending",
                        "checkpoint_type": skills::mutating_capability(&call.name).unwrap_or("mutating_capability"),
                        "tool_call": {"id": call.id, "name": call.name, "args": call.args},
                    });
                    put_record(store, &id, record).await;
                }
            }
            // Pauses here until the reviewer answers.
            let result = self.review.after_model(state, rt).await?;
            if let Some(store) = rt.store() {
                let answered: Vec<&str> = result
                    .update
                    .written_messages()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|m| m.tool_call_id.as_deref())
                    .collect();
                for call in &gated {
                    let id = approval_id(&thread, &call.id);
                    let status = if answered.contains(&call.id.as_str()) {
                        "rejected"
                    } else {
                        "approved"
                    };
                    let record = json!({
                        "id": id, "status": status,
                        "checkpoint_type": skills::mutating_capability(&call.name).unwrap_or("mutating_capability"),
                        "tool_call": {"id": call.id, "name": call.name, "args": call.args},
                    });
                    put_record(store, &id, record).await;
                }
            }
            Ok(result)
        })
    }
    fn wrap_tool_call<'a>(
        &'a self,
        request: ToolCallRequest,
        next: ToolNext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        self.review.wrap_tool_call(request, next)
    }
}

/// The permit-filing agent for `agent_type` on `create_agent`: the example's tools, the
/// agent type's root skill as system prompt, the [`ApprovalGate`], the agent type's token
/// and cost budgets, and the iteration limit.
///
/// The offline scripted model (`scripted`) is priced as `gpt-4o-mini`, so its cost
/// budget counts something; a real model is priced from the built-in table, and one the
/// table does not know is refused when the agent is built.
///
/// # Errors
/// A model without a price (the cost budget could not be kept); a graph that does not
/// compile.
pub fn agent_graph(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
    agent_type: &str,
) -> graphloom_core::Result<CompiledGraph<AgentGraphState>> {
    let (max_tokens, max_cost) = skills::agent_budget(agent_type);
    let prices = crate::prices().map_err(|e| graphloom_core::Error::InvalidGraph(e.to_string()))?;
    let persona = skills::root_skill(agent_type).and_then(|r| r.persona).unwrap_or(
        "You are a careful assistant. You do not do regulatory or oil and gas work without a domain skill.",
    );
    let root = skills::root_skill(agent_type)
        .map(|s| skills::render_skill(&s, None))
        .unwrap_or_default();
    Ok(create_agent(model, skills::tool_list(false))
        .name(format!("{GRAPH_ID}_agent"))
        .system_prompt(format!("{persona}\n\n{root}"))
        .middleware(ModelCallLimit::new().run_limit(u64::from(DEFAULT_MAX_ITERATIONS)))
        .middleware(
            TokenBudget::new(Budget::unlimited().total_tokens(max_tokens).cost_usd(max_cost)).prices(prices),
        )
        .middleware(ApprovalGate::new())
        .checkpointer_dyn(checkpointer)
        .store_dyn(store)
        .build()?)
}
