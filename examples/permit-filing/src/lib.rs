//! graphloom example: a permit-filing agent (seed 004, "LangGraph Pipeline").
//!
//! A deterministic pipeline of nodes that each return a partial state update, joined by the
//! seed's routing table:
//!
//! ```text
//! START -> system_prompt_node -> memory_node -> resume_guard
//! resume_guard      --approved replay--> tool_node | --pending/unreadable--> output_format
//!                   --no mutation/rejected--> initial_llm_call
//! initial_llm_call  --error--> output_format | --tool calls--> tool_node | else skill_select_node
//! tool_node         --awaiting_hitl or iteration limit--> output_format
//!                   --phase synthesis--> synthesis_llm_call | else initial_llm_call
//! skill_select_node --skills found--> skill_inject_node | else approval_node
//! skill_inject_node -> approval_node
//! approval_node     --awaiting_hitl--> output_format | else synthesis_llm_call
//! synthesis_llm_call --error--> output_format | --tool calls--> tool_node | else output_format
//! output_format     -> END; once a paused run is resumed: system_prompt_node (a new turn, for
//!                   a gated mutation) or approval_node (for a checkpoint approval)
//! ```
//!
//! - A mutating tool call (`create_entity`) trips the `before_tool_call` gate in
//!   [`TOOL_NODE`]: an approval record is created in the store, the call is frozen into
//!   `pending_mutation` (state and working memory), the round is stripped from the history,
//!   and the run pauses in [`OUTPUT_FORMAT`] with an interrupt. The resume value is the
//!   reviewer's verdict; it is written to the approval record, and the next turn's
//!   [`RESUME_GUARD`] reads the record (fail-closed: an unreadable or pending verdict pauses
//!   again) and replays the frozen call exactly once, or tells the model it was rejected.
//! - Two-phase LLM: [`INITIAL_LLM_CALL`] may ask for `SKILL_SELECT:{id}`; the selected skills
//!   are injected as system context and [`SYNTHESIS_LLM_CALL`] answers with them (skipped
//!   when nothing was injected).
//! - Token and cost budgets are checked before every model call with
//!   [`graphloom_llm::Budget`]; exceeding one ends the run with
//!   `graphloom_core::Error::BudgetExceeded` and a resumable checkpoint ([`raise_budget`]
//!   continues it). The iteration limit stops tool loops.
//! - [`server::router`] serves `POST /execute` and an SSE stream of node events.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
mod approvals;
pub mod field;
mod nodes;
pub mod offline;
pub mod server;
pub mod skills;

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::{
    CompiledGraph, Message, RunConfig, RunInput, RunOutput, Seq, State, StateGraph, ToolCall, END, START,
};
use graphloom_llm::{DynChatModel, ScriptedModel};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use approvals::{get_approval_status, parse_verdict, ApprovalRecord, Verdict};
pub use nodes::select_skills;

/// The graph id the CLI and server register this example under.
pub const GRAPH_ID: &str = "permit_filing";

/// Node: assembles the system prompt from the agent's root skill.
pub const SYSTEM_PROMPT_NODE: &str = "system_prompt_node";
/// Node: loads working and episodic memory; hydrates `pending_mutation`.
pub const MEMORY_NODE: &str = "memory_node";
/// Node: reconciles a gated mutation against its approval verdict.
pub const RESUME_GUARD: &str = "resume_guard";
/// Node: the first model call (may request tools or skills).
pub const INITIAL_LLM_CALL: &str = "initial_llm_call";
/// Node: runs pending tool calls behind the `before_tool_call` approval gate.
pub const TOOL_NODE: &str = "tool_node";
/// Node: scans the model's answer for `SKILL_SELECT:{id}`.
pub const SKILL_SELECT_NODE: &str = "skill_select_node";
/// Node: injects the selected skills as system context.
pub const SKILL_INJECT_NODE: &str = "skill_inject_node";
/// Node: pauses for a checkpoint approval a skill rule (or the request metadata) asked for.
pub const APPROVAL_NODE: &str = "approval_node";
/// Node: the second model call, with the injected skill context.
pub const SYNTHESIS_LLM_CALL: &str = "synthesis_llm_call";
/// Node: finalises the status; pauses here while a human verdict is awaited.
pub const OUTPUT_FORMAT: &str = "output_format";

/// Default token budget of a run (the seed's `max_tokens`), for agents without their own.
pub const DEFAULT_MAX_TOKENS: u64 = 100_000;
/// Default cost budget of a run in USD (the seed's `max_cost_usd`).
pub const DEFAULT_MAX_COST_USD: f64 = 5.0;
/// Default iteration limit (tool rounds plus turns).
pub const DEFAULT_MAX_ITERATIONS: u32 = 20;

/// Entity lookups in a row that do not resolve before the run stops to ask for a
/// clarification (the seed's `platform:force_clarify_after_failed_resolves`).
pub const FORCE_CLARIFY_AFTER: u32 = 3;

/// Execution statuses written to [`PermitState::status`].
pub mod status {
    /// Not started.
    pub const PENDING: &str = "pending";
    /// Running.
    pub const RUNNING: &str = "running";
    /// Finished.
    pub const COMPLETED: &str = "completed";
    /// Paused for a human verdict.
    pub const AWAITING_HITL: &str = "awaiting_hitl";
    /// Ended with an error (model failure, iteration limit).
    pub const FAILED: &str = "failed";
    /// A verdict arrived; the next turn is starting.
    pub const RESUMING: &str = "resuming";
}

/// A mutating tool call frozen by the approval gate, replayed only after approval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingMutation {
    /// The original tool call id (the replay answers this id).
    pub tool_call_id: String,
    /// The tool name.
    pub tool_name: String,
    /// The frozen arguments.
    pub args: Value,
    /// The capability the gate matched (`create_entity`, ...).
    pub capability_key: String,
    /// The approval record that holds the verdict.
    pub hitl_approval_id: String,
    /// `pending` until the resume guard sees `approved`.
    pub status: String,
}

/// The state every node of the pipeline reads and writes (the seed's `GraphState`).
#[derive(State, Clone, Default, Debug)]
pub struct PermitState {
    /// Id of this execution (set on the first turn).
    pub execution_id: String,
    /// Conversation id (defaults to the thread id); keys working memory.
    pub conversation_id: String,
    /// Agent id.
    pub agent_id: String,
    /// Agent type: `rule_37`, `rule_32`, or anything else for a general agent.
    pub agent_type: String,
    /// Tenant id.
    pub tenant_id: String,
    /// `pending`, `running`, `completed`, `awaiting_hitl`, `failed` (see [`status`]).
    pub status: String,
    /// The node that wrote last.
    pub current_node: Option<String>,
    /// Tool rounds and turns so far; guards against endless tool loops.
    pub iteration: u32,
    /// Why the run failed.
    pub error: Option<String>,
    /// The conversation (human, AI, tool messages, system notes, injected skills).
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
    /// A caller-supplied system prompt overrides the assembled one.
    pub system_prompt: String,
    /// The model name used for the calls (informational; recorded after each call).
    pub model: String,
    /// Tokens used by model calls.
    pub tokens_used: u64,
    /// Cost of model calls in USD (models with a price).
    pub cost_usd: f64,
    /// Token budget (0: the agent's default).
    pub max_tokens: u64,
    /// Cost budget in USD (0: the agent's default).
    pub max_cost_usd: f64,
    /// Iteration limit (0: [`DEFAULT_MAX_ITERATIONS`]).
    pub max_iterations: u32,
    /// Tool calls of the last model answer, for the tool node.
    pub pending_tool_calls: Vec<ToolCall>,
    /// Skills injected so far.
    pub injected_skill_ids: Vec<String>,
    /// Entities whose context was injected with a skill.
    pub injected_entity_ids: Vec<String>,
    /// Skill id -> tier injected (2: definition, 3: with artifacts).
    pub active_skills: BTreeMap<String, u8>,
    /// Skills the model asked for in its last answer.
    pub selected_skill_ids: Vec<String>,
    /// Whether injection happened this turn.
    pub skill_injection_done: bool,
    /// `initial` or `synthesis`.
    pub llm_phase: String,
    /// Working memory and episodic search results.
    pub memory_context: Value,
    /// Whether a human must approve before the run goes on.
    pub hitl_required: bool,
    /// Label of the approval checkpoint (`mutating_capability`, `pre_filing`, ...).
    pub hitl_checkpoint_type: Option<String>,
    /// The approval record awaited.
    pub hitl_approval_id: Option<String>,
    /// Who decided it.
    pub hitl_reviewer_id: Option<String>,
    /// `named_individual` or `role_based`.
    pub hitl_reviewer_strategy: String,
    /// Last ten entity ids touched (FIFO).
    pub recent_entity_context: Vec<String>,
    /// A gated mutating call awaiting its verdict.
    pub pending_mutation: Option<PendingMutation>,
    /// Entity resolutions in a row that did not decide.
    pub consecutive_failed_resolves: u32,
    /// Request metadata (`display_name`, `role`, `hitl_checkpoint_type`, ...).
    pub metadata: Value,
    /// Every node that ran, in order (an audit trail for people and tests).
    #[reducer(append)]
    pub node_trail: Seq<String>,
}

/// The compiled permit-filing graph over `checkpointer` and `store`, calling `model`.
///
/// The store holds the approval records (`["approvals"]`), working memory
/// (`["working_memory", conversation_id]`), episodic memory (`["episodic", tenant_id]`),
/// the skill-injection ledger and the knowledge graph that `create_entity` writes to.
pub fn graph(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
) -> graphloom_core::Result<CompiledGraph<PermitState>> {
    let tools = Arc::new(skills::all_tools());
    let m1 = Arc::clone(&model);
    let m2 = model;
    let t = Arc::clone(&tools);
    StateGraph::<PermitState>::new()
        .name(GRAPH_ID)
        .add_node(SYSTEM_PROMPT_NODE, nodes::system_prompt_node)
        .add_node(MEMORY_NODE, nodes::memory_node)
        .add_node(RESUME_GUARD, nodes::resume_guard)
        .add_node(INITIAL_LLM_CALL, move |s, rt| {
            nodes::llm_call(Arc::clone(&m1), s, rt, nodes::Phase::Initial)
        })
        .add_node(TOOL_NODE, move |s, rt| nodes::tool_node(Arc::clone(&t), s, rt))
        .add_node(SKILL_SELECT_NODE, nodes::skill_select_node)
        .add_node(SKILL_INJECT_NODE, nodes::skill_inject_node)
        .add_node(APPROVAL_NODE, nodes::approval_node)
        .add_node(SYNTHESIS_LLM_CALL, move |s, rt| {
            nodes::llm_call(Arc::clone(&m2), s, rt, nodes::Phase::Synthesis)
        })
        .add_node(OUTPUT_FORMAT, nodes::output_format)
        .add_edge(START, SYSTEM_PROMPT_NODE)
        .add_edge(SYSTEM_PROMPT_NODE, MEMORY_NODE)
        .add_edge(MEMORY_NODE, RESUME_GUARD)
        .add_conditional_edges_to(
            RESUME_GUARD,
            route_after_resume_guard,
            [OUTPUT_FORMAT, TOOL_NODE, INITIAL_LLM_CALL],
        )
        .add_conditional_edges_to(
            INITIAL_LLM_CALL,
            route_after_initial,
            [OUTPUT_FORMAT, TOOL_NODE, SKILL_SELECT_NODE],
        )
        .add_conditional_edges_to(
            TOOL_NODE,
            route_after_tool,
            [OUTPUT_FORMAT, SYNTHESIS_LLM_CALL, INITIAL_LLM_CALL],
        )
        .add_conditional_edges_to(
            SKILL_SELECT_NODE,
            route_after_skill_select,
            [APPROVAL_NODE, SKILL_INJECT_NODE],
        )
        .add_edge(SKILL_INJECT_NODE, APPROVAL_NODE)
        .add_conditional_edges_to(
            APPROVAL_NODE,
            route_after_approval,
            [OUTPUT_FORMAT, SYNTHESIS_LLM_CALL],
        )
        .add_conditional_edges_to(
            SYNTHESIS_LLM_CALL,
            route_after_synthesis,
            [OUTPUT_FORMAT, TOOL_NODE],
        )
        .add_conditional_edges_to(
            OUTPUT_FORMAT,
            route_after_output,
            [END, APPROVAL_NODE, SYSTEM_PROMPT_NODE],
        )
        .checkpointer_dyn(checkpointer)
        .store_dyn(store)
        .compile()
}

/// Routing after [`RESUME_GUARD`] (seed routing table).
pub fn route_after_resume_guard(s: &PermitState) -> &'static str {
    if s.status == status::AWAITING_HITL {
        OUTPUT_FORMAT
    } else if s
        .pending_mutation
        .as_ref()
        .is_some_and(|m| m.status == "approved")
        && !s.pending_tool_calls.is_empty()
    {
        TOOL_NODE
    } else {
        INITIAL_LLM_CALL
    }
}

/// Routing after [`INITIAL_LLM_CALL`].
pub fn route_after_initial(s: &PermitState) -> &'static str {
    if s.error.is_some() {
        OUTPUT_FORMAT
    } else if !s.pending_tool_calls.is_empty() {
        TOOL_NODE
    } else {
        SKILL_SELECT_NODE
    }
}

/// Routing after [`TOOL_NODE`].
pub fn route_after_tool(s: &PermitState) -> &'static str {
    if s.status == status::AWAITING_HITL || s.error.is_some() || s.iteration >= effective_max_iterations(s) {
        OUTPUT_FORMAT
    } else if s.llm_phase == "synthesis" {
        SYNTHESIS_LLM_CALL
    } else {
        INITIAL_LLM_CALL
    }
}

/// Routing after [`SKILL_SELECT_NODE`].
pub fn route_after_skill_select(s: &PermitState) -> &'static str {
    if s.selected_skill_ids.is_empty() {
        APPROVAL_NODE
    } else {
        SKILL_INJECT_NODE
    }
}

/// Routing after [`APPROVAL_NODE`].
pub fn route_after_approval(s: &PermitState) -> &'static str {
    if s.status == status::AWAITING_HITL {
        OUTPUT_FORMAT
    } else {
        SYNTHESIS_LLM_CALL
    }
}

/// Routing after [`SYNTHESIS_LLM_CALL`].
pub fn route_after_synthesis(s: &PermitState) -> &'static str {
    if s.error.is_some() {
        OUTPUT_FORMAT
    } else if !s.pending_tool_calls.is_empty() {
        TOOL_NODE
    } else {
        OUTPUT_FORMAT
    }
}

/// Routing after [`OUTPUT_FORMAT`]: a resumed mutation pause starts the next turn (whose
/// resume guard reads the verdict), a resumed checkpoint pause goes back to
/// [`APPROVAL_NODE`] (which reads it), anything else ends the run.
pub fn route_after_output(s: &PermitState) -> &'static str {
    if s.status != status::RESUMING {
        END
    } else if s.pending_mutation.is_none() && s.hitl_approval_id.is_some() {
        APPROVAL_NODE
    } else {
        SYSTEM_PROMPT_NODE
    }
}

/// The iteration limit in force for `s`.
#[must_use]
pub fn effective_max_iterations(s: &PermitState) -> u32 {
    if s.max_iterations == 0 {
        DEFAULT_MAX_ITERATIONS
    } else {
        s.max_iterations
    }
}

/// Raise the token and cost budgets of a run that stopped with
/// `Error::BudgetExceeded`, and continue it from its checkpoint.
pub async fn raise_budget(
    graph: &CompiledGraph<PermitState>,
    config: RunConfig,
    max_tokens: u64,
    max_cost_usd: f64,
) -> graphloom_core::Result<RunOutput<PermitState>> {
    let update = PermitStateUpdate::new()
        .max_tokens(max_tokens)
        .max_cost_usd(max_cost_usd);
    // Written as the node that ran last, whose route does not read the budget: the same
    // node runs next.
    graph.update_state(&config, Some(update), None).await?;
    graph.invoke_input(RunInput::Continue, config).await
}

/// Prices of the models a run may call: the built-in list, the scripted model priced as
/// `gpt-4o-mini` (so its cost budget counts something), and `GRAPHLOOM_MODEL_PRICES`.
///
/// # Errors
/// `GRAPHLOOM_MODEL_PRICES` set but malformed.
pub fn prices() -> graphloom_llm::Result<graphloom_llm::PriceTable> {
    graphloom_llm::PriceTable::builtin()
        .with_price(graphloom_llm::SCRIPTED_MODEL, 0.15, 0.60)
        .with_env_prices()
}

/// The model `GRAPHLOOM_MODEL` names (`openai:gpt-4o-mini`,
/// `anthropic:claude-3-5-haiku-latest`, `ollama:llama3.2`, `openai-compatible:<model>`)
/// through [`graphloom_llm::model_from_env`]; unset or `scripted`: the [`offline::model`]
/// (the steps of [`scripted_model`], each chosen from the conversation, so any number of
/// runs sharing the model work).
///
/// # Errors
/// When `GRAPHLOOM_MODEL` names a model that cannot be built: never the script instead.
pub fn default_model() -> graphloom_llm::Result<Arc<dyn DynChatModel>> {
    graphloom_llm::model_from_env(|| {
        // Shared by every run of a served graph: keep no record of what it was asked.
        Arc::new(offline::model().keep_requests(0))
    })
}

/// The offline script of the happy path for [`sample_input`], as a list for one run:
/// resolve the well, register the operator (a mutating call: pauses for approval), select
/// the spacing skill, assess spacing with it, answer.
#[must_use]
pub fn scripted_model() -> ScriptedModel {
    ScriptedModel::new(offline::happy_path(1))
}

/// A JSON input the graph's update decoder accepts: a Rule 37 request for one well.
#[must_use]
pub fn sample_input() -> Value {
    json!({
        "conversation_id": "conv-mitchell-ranch",
        "agent_id": "agent-rule37",
        "agent_type": "rule_37",
        "tenant_id": "tenant-permian",
        "metadata": {"display_name": "Dana Ortiz", "role": "regulatory analyst"},
        "messages": [{
            "type": "human",
            "content": "Prepare a Rule 37 spacing exception for Mitchell Ranch 1H (API 42-329-12345) \
                        and register the operator Permian Basin Energy LLC."
        }]
    })
}
