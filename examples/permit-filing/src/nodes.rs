//! The nodes of the pipeline, the approval records and the verdict parsing.

use crate::approvals::{create_approval_request, get_approval_status, record_verdict, ApprovalRecord};
use crate::skills::{self, mutating_capability};
use crate::{status, PendingMutation, PermitState, PermitStateUpdate};
use graphloom_core::store::{DynStore, PutOptions, SearchQuery};
use graphloom_core::{Message, MessageKind, NodeError, Runtime, State, ToolCall};
use graphloom_llm::{Budget, ChatModel, ChatOptions, DynChatModel, MessageExt, NodeResultExt, UsageTotals};
use graphloom_prebuilt::{Tool, ToolRuntime};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

type NodeResult = Result<PermitStateUpdate, NodeError>;

/// How long one tool call may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

fn start(node: &str) -> PermitStateUpdate {
    PermitStateUpdate::new()
        .current_node(Some(node.to_owned()))
        .node_trail(vec![node.to_owned()])
}

fn working_memory_ns(conversation_id: &str) -> Vec<String> {
    vec!["working_memory".into(), conversation_id.to_owned()]
}

fn derived_id(kind: &str, parts: &[&str]) -> String {
    let name = format!("permit-filing/{kind}/{}", parts.join("/"));
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes()).to_string()
}

/// `system_prompt_node`: persona, user identity and the skill-select instruction; resets
/// the per-turn fields.
pub async fn system_prompt_node(s: Arc<PermitState>, rt: Runtime) -> NodeResult {
    let mut u = start(crate::SYSTEM_PROMPT_NODE)
        .llm_phase("initial".into())
        .skill_injection_done(false)
        .selected_skill_ids(Vec::new())
        .pending_tool_calls(Vec::new())
        .status(status::RUNNING.into())
        .error(None);
    if s.execution_id.is_empty() {
        u = u.execution_id(uuid::Uuid::new_v4().to_string());
    }
    if s.conversation_id.is_empty() {
        u = u.conversation_id(rt.thread_id().unwrap_or("default").to_owned());
    }
    let (tokens, cost) = skills::agent_budget(&s.agent_type);
    if s.max_tokens == 0 {
        u = u.max_tokens(tokens);
    }
    if s.max_cost_usd <= 0.0 {
        u = u.max_cost_usd(cost);
    }
    if s.max_iterations == 0 {
        u = u.max_iterations(crate::DEFAULT_MAX_ITERATIONS);
    }
    if s.hitl_reviewer_strategy.is_empty() {
        u = u.hitl_reviewer_strategy("role_based".into());
    }
    if s.system_prompt.is_empty() {
        u = u.system_prompt(assemble_system_prompt(&s));
    }
    Ok(u)
}

fn assemble_system_prompt(s: &PermitState) -> String {
    let root = skills::root_skill(&s.agent_type);
    let persona = root.as_ref().and_then(|r| r.persona).unwrap_or(
        "You are a careful assistant. You do not do regulatory or oil and gas work without a domain skill.",
    );
    let name = s.metadata["display_name"].as_str().unwrap_or("user");
    let role = s.metadata["role"].as_str().unwrap_or("user");
    let selectable: Vec<String> = skills::catalog()
        .into_iter()
        .filter(|k| k.persona.is_none())
        .map(|k| format!("{} ({})", k.id, k.name))
        .collect();
    format!(
        "{persona}\n\n=== User ===\nName: {name}\nRole: {role}\n\nWhen you need specialised context, \
         write SKILL_SELECT:{{skill_id}} in your answer. Skills: {}.",
        selectable.join(", ")
    )
}

/// `memory_node`: working memory and episodic search from the store; hydrates
/// `pending_mutation` from working memory when the state has none (a cold resume).
pub async fn memory_node(s: Arc<PermitState>, rt: Runtime) -> NodeResult {
    let mut u = start(crate::MEMORY_NODE);
    let Some(store) = rt.store() else {
        return Ok(u.memory_context(json!({})));
    };
    let conv = if s.conversation_id.is_empty() {
        rt.thread_id().unwrap_or("default").to_owned()
    } else {
        s.conversation_id.clone()
    };
    let wm = working_memory_ns(&conv);
    let read = |key: &'static str| {
        let wm = wm.clone();
        async move { store.get(&wm, key).await.ok().flatten().map(|i| i.value) }
    };
    let scratchpad = read("scratchpad").await;
    let entities = read("entities").await;
    let query = s
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default();
    let ns = vec!["episodic".to_owned(), s.tenant_id.clone()];
    let episodic = match store.search(&ns, SearchQuery::new().query(query).limit(3)).await {
        Ok(found) => found,
        Err(_) => store
            .search(&ns, SearchQuery::new().limit(3))
            .await
            .unwrap_or_default(),
    };
    let episodic: Vec<Value> = episodic.into_iter().map(|i| i.item.value).collect();
    u = u.memory_context(json!({"scratchpad": scratchpad, "entities": entities, "episodic": episodic}));
    if s.pending_mutation.is_none() {
        if let Some(pm) = read("pending_mutation")
            .await
            .and_then(|v| serde_json::from_value::<PendingMutation>(v).ok())
        {
            u = u.pending_mutation(Some(pm));
        }
    }
    Ok(u)
}

/// `resume_guard`: reconcile a gated mutation against its approval record. Approved: the
/// frozen call is rebuilt for one replay. Rejected: dropped, the model is told. Pending or
/// unreadable: pause again (fail closed).
pub async fn resume_guard(s: Arc<PermitState>, rt: Runtime) -> NodeResult {
    let u = start(crate::RESUME_GUARD);
    let Some(mut pm) = s.pending_mutation.clone() else {
        return Ok(u);
    };
    let record = get_approval_status(rt.store(), &pm.hitl_approval_id).await;
    match record.as_ref().map(|r| r.status.as_str()) {
        Some("approved") => {
            pm.status = "approved".into();
            let call = ToolCall {
                id: pm.tool_call_id.clone(),
                name: pm.tool_name.clone(),
                args: pm.args.clone(),
            };
            let replay = Message::ai_with_tool_calls("", vec![call.clone()])
                .with_id(format!("replay-{}", pm.tool_call_id));
            Ok(u.pending_mutation(Some(pm))
                .pending_tool_calls(vec![call])
                .messages(vec![replay])
                .hitl_reviewer_id(record.and_then(|r| r.reviewer_id))
                .status(status::RUNNING.into()))
        }
        Some("rejected") => {
            if let Some(store) = rt.store() {
                let _ = store
                    .delete(&working_memory_ns(&s.conversation_id), "pending_mutation")
                    .await;
            }
            let comment = record
                .as_ref()
                .and_then(|r| r.comment.clone())
                .unwrap_or_else(|| "no comment".into());
            let note = Message::system(format!(
                "HITL: the reviewer rejected the {} call with arguments {} (comment: {comment}). It was \
                 not executed. Tell the user and do not retry it.",
                pm.tool_name, pm.args
            ));
            Ok(u.pending_mutation(None)
                .messages(vec![note])
                .hitl_required(false)
                .hitl_reviewer_id(record.and_then(|r| r.reviewer_id))
                .status(status::RUNNING.into()))
        }
        _ => Ok(u
            .hitl_approval_id(Some(pm.hitl_approval_id.clone()))
            .hitl_checkpoint_type(Some("mutating_capability".into()))
            .status(status::AWAITING_HITL.into())),
    }
}

/// Which LLM call a node makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `initial_llm_call`.
    Initial,
    /// `synthesis_llm_call`.
    Synthesis,
}

/// The budget of a run, from its state (agent defaults where unset).
fn budget_of(s: &PermitState) -> Budget {
    let (tokens, cost) = skills::agent_budget(&s.agent_type);
    Budget::unlimited()
        .total_tokens(if s.max_tokens == 0 { tokens } else { s.max_tokens })
        .cost_usd(if s.max_cost_usd <= 0.0 {
            cost
        } else {
            s.max_cost_usd
        })
}

fn prompt(s: &PermitState) -> Vec<Message> {
    let mut out = vec![Message::system(if s.system_prompt.is_empty() {
        assemble_system_prompt(s)
    } else {
        s.system_prompt.clone()
    })];
    if let Some(root) = skills::root_skill(&s.agent_type) {
        out.extend(root.context_templates.iter().map(|t| Message::system(*t)));
    }
    let mem = &s.memory_context;
    let mut memory = String::new();
    if let Some(text) = mem["scratchpad"]["text"].as_str() {
        memory.push_str(&format!("[Working Memory -- Scratchpad]\n{text}\n"));
    }
    if let Some(items) = mem["entities"]["items"].as_array() {
        memory.push_str("[Working Memory -- Extracted Entities]\n");
        for e in items {
            memory.push_str(&format!(
                "- {}\n",
                e.as_str().map_or_else(|| e.to_string(), str::to_owned)
            ));
        }
    }
    if let Some(items) = mem["episodic"].as_array().filter(|a| !a.is_empty()) {
        memory.push_str("[Episodic Memory -- Relevant Past Conversations]\n");
        for e in items {
            memory.push_str(&format!("- {}\n", e["summary"].as_str().unwrap_or_default()));
        }
    }
    if !memory.is_empty() {
        out.push(Message::system(format!("=== Memory Context ===\n{memory}")));
    }
    out.extend(
        s.messages
            .iter()
            .filter(|m| m.kind != MessageKind::Remove)
            .cloned(),
    );
    out
}

/// `initial_llm_call` / `synthesis_llm_call`: check the budget, call the model with the
/// visible tools, record usage and cost. Synthesis is skipped when no skill was injected.
pub async fn llm_call(
    model: Arc<dyn DynChatModel>,
    s: Arc<PermitState>,
    _rt: Runtime,
    phase: Phase,
) -> NodeResult {
    let (name, phase_name) = match phase {
        Phase::Initial => (crate::INITIAL_LLM_CALL, "initial"),
        Phase::Synthesis => (crate::SYNTHESIS_LLM_CALL, "synthesis"),
    };
    let u = start(name)
        .llm_phase(phase_name.into())
        .pending_tool_calls(Vec::new());
    if phase == Phase::Synthesis && s.injected_skill_ids.is_empty() {
        return Ok(u);
    }
    let totals = UsageTotals {
        input_tokens: s.tokens_used,
        cost_usd: s.cost_usd,
        ..UsageTotals::default()
    };
    let budget = budget_of(&s);
    // A cost limit that could never stop this model is refused before it is called.
    crate::prices()
        .and_then(|p| p.check_budget(model.dyn_model_name(), &budget))
        .map_err(graphloom_llm::Error::into_node_error)?;
    budget.check(&totals, Duration::ZERO).node()?;
    let tools = skills::all_tools();
    let specs = skills::visible_tools(&s.agent_type, &s.injected_skill_ids)
        .iter()
        .filter_map(|n| tools.get(n))
        .map(|t| t.spec())
        .collect::<Vec<_>>();
    let opts = ChatOptions::new().tools(specs).metadata("llm_phase", phase_name);
    let answer = match model.invoke(&prompt(&s), &opts).await {
        Ok(m) => m,
        Err(e @ graphloom_llm::Error::BudgetExceeded { .. }) => return Err(e.into_node_error()),
        Err(e) => return Ok(u.error(Some(format!("{name}: {e}")))),
    };
    let usage = answer.usage().unwrap_or_default();
    let cost = crate::prices()
        .ok()
        .and_then(|p| p.cost(model.dyn_model_name(), &usage))
        .unwrap_or(0.0);
    Ok(u.pending_tool_calls(answer.tool_calls.clone())
        .tokens_used(s.tokens_used + usage.input_tokens + usage.output_tokens)
        .cost_usd(s.cost_usd + cost)
        .model(model.dyn_model_name().to_owned())
        .messages(vec![answer]))
}

/// `tool_node`: the `before_tool_call` gate, then every pending call; `after_tool_call`
/// skill rules; state-aware entity tools; the iteration counter and its limit.
pub async fn tool_node(
    tools: Arc<BTreeMap<String, Arc<dyn Tool>>>,
    s: Arc<PermitState>,
    rt: Runtime,
) -> NodeResult {
    let mut u = start(crate::TOOL_NODE).pending_tool_calls(Vec::new());
    let calls = s.pending_tool_calls.clone();
    let replay = s
        .pending_mutation
        .as_ref()
        .filter(|pm| pm.status == "approved" && calls.len() == 1 && calls[0].id == pm.tool_call_id)
        .cloned();
    let conv = s.conversation_id.clone();
    let visible = skills::visible_tools(&s.agent_type, &s.injected_skill_ids);
    if replay.is_none() {
        // Only tools this agent is offered can be gated; any other name is an unknown tool.
        if let Some((call, capability)) = calls.iter().find_map(|c| {
            mutating_capability(&c.name)
                .filter(|_| visible.iter().any(|v| v == &c.name))
                .map(|cap| (c, cap))
        }) {
            return Ok(gate(u, &s, &rt, call, capability, &conv).await);
        }
    }
    let state_json = s.to_json().unwrap_or(Value::Null);
    let mut messages = Vec::new();
    let mut recent = s.recent_entity_context.clone();
    let mut failed_resolves = s.consecutive_failed_resolves;
    let mut hitl: Option<&'static str> = None;
    let mut unresolved: Vec<String> = Vec::new();
    for call in &calls {
        let is_replay = replay.as_ref().is_some_and(|pm| pm.tool_call_id == call.id);
        let tool = tools
            .get(&call.name)
            .filter(|_| is_replay || visible.iter().any(|v| v == &call.name));
        let content = match tool {
            None => {
                json!({"status": "error", "message": format!("unknown tool `{}`", call.name)}).to_string()
            }
            Some(tool) => {
                let trt = ToolRuntime::new(state_json.clone(), call.id.clone(), rt.clone());
                match tokio::time::timeout(TOOL_TIMEOUT, tool.call(call.args.clone(), trt)).await {
                    Ok(Ok(out)) => out.to_text(),
                    Ok(Err(e)) => json!({"status": "error", "message": e.to_string()}).to_string(),
                    Err(_) => json!({"status": "error", "message": "timed out"}).to_string(),
                }
            }
        };
        if call.name == "entity_resolve" {
            let v: Value = serde_json::from_str(&content).unwrap_or(Value::Null);
            if v["status"] == "resolved" {
                failed_resolves = 0;
                if let Some(id) = v["entity"]["id"].as_str() {
                    recent.retain(|e| e != id);
                    recent.push(id.to_owned());
                    if recent.len() > 10 {
                        recent.remove(0);
                    }
                }
            } else {
                failed_resolves += 1;
                unresolved.push(call.args["query"].as_str().unwrap_or_default().to_owned());
            }
        }
        if let Some(rule) = skills::hitl_rule_for(&s.agent_type, &s.injected_skill_ids, &call.name) {
            hitl = Some(rule);
        }
        let mut msg = Message::tool(content, call.id.clone());
        msg.name = Some(call.name.clone());
        messages.push(msg);
    }
    if replay.is_some() {
        if let Some(store) = rt.store() {
            let _ = store.delete(&working_memory_ns(&conv), "pending_mutation").await;
        }
        u = u.pending_mutation(None).hitl_required(false);
    }
    if let Some(checkpoint) = hitl {
        u = u
            .hitl_required(true)
            .hitl_checkpoint_type(Some(checkpoint.into()))
            .hitl_approval_id(None);
    }
    let iteration = s.iteration + 1;
    if failed_resolves >= crate::FORCE_CLARIFY_AFTER && !unresolved.is_empty() {
        // platform:force_clarify_after_failed_resolves fires after this tool call: stop
        // guessing and ask (or, where the tenant overrides it, abort).
        let u = u
            .messages(messages)
            .iteration(iteration)
            .recent_entity_context(recent)
            .consecutive_failed_resolves(failed_resolves);
        return Ok(force_clarify(u, &s, &rt, failed_resolves, &unresolved).await);
    }
    if iteration >= crate::effective_max_iterations(&s) {
        u = u.error(Some(format!(
            "iteration limit of {} reached",
            crate::effective_max_iterations(&s)
        )));
    }
    Ok(u.messages(messages)
        .iteration(iteration)
        .recent_entity_context(recent)
        .consecutive_failed_resolves(failed_resolves))
}

/// The force-clarify rule: `consecutive_failed_resolves` reached
/// [`crate::FORCE_CLARIFY_AFTER`]. The run pauses for a human clarification (an approval
/// record of checkpoint type `force_clarify`, whose reviewer comment carries the answer),
/// or, with the tenant override `metadata.force_clarify_action = "abort"`, fails.
async fn force_clarify(
    u: PermitStateUpdate,
    s: &PermitState,
    rt: &Runtime,
    failed: u32,
    unresolved: &[String],
) -> PermitStateUpdate {
    let last = unresolved.last().map(String::as_str).unwrap_or_default();
    if s.metadata["force_clarify_action"] == "abort" {
        return u
            .hitl_required(false)
            .error(Some(format!(
                "force_clarify: {failed} entity lookups in a row did not resolve (last: \"{last}\"); aborted by tenant policy"
            )));
    }
    let approval_id = rt.idempotency_key("force_clarify");
    let record = ApprovalRecord {
        id: approval_id.clone(),
        status: "pending".into(),
        checkpoint_type: "force_clarify".into(),
        tool_call: None,
        reviewer_id: None,
        comment: None,
        snapshot: json!({
            "consecutive_failed_resolves": failed,
            "last_unresolved_query": last,
            "question": format!("{failed} lookups in a row did not identify the entity (last: \"{last}\"). Which well, lease or operator is meant?"),
        }),
    };
    if let Err(e) = create_approval_request(rt.store(), &record).await {
        // Fail closed: the run still pauses; a verdict that cannot be read keeps it paused.
        tracing::warn!("approval {approval_id} not created: {e}");
    }
    u.hitl_required(true)
        .hitl_checkpoint_type(Some("force_clarify".into()))
        .hitl_approval_id(Some(approval_id))
        .status(status::AWAITING_HITL.into())
}

/// The `before_tool_call` gate: create the approval, freeze the call into
/// `pending_mutation` (state and working memory), strip the round, pause.
async fn gate(
    u: PermitStateUpdate,
    s: &PermitState,
    rt: &Runtime,
    call: &ToolCall,
    capability: &str,
    conv: &str,
) -> PermitStateUpdate {
    let thread = rt.thread_id().unwrap_or("");
    let approval_id = derived_id("approval", &[thread, &call.id]);
    let pm = PendingMutation {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        args: call.args.clone(),
        capability_key: capability.to_owned(),
        hitl_approval_id: approval_id.clone(),
        status: "pending".into(),
    };
    let record = ApprovalRecord {
        id: approval_id.clone(),
        status: "pending".into(),
        checkpoint_type: "mutating_capability".into(),
        tool_call: serde_json::to_value(call).ok(),
        reviewer_id: None,
        comment: None,
        snapshot: json!({"conversation_id": conv, "tokens_used": s.tokens_used}),
    };
    // Failing to create the approval does not let the call through: the run pauses and
    // the resume guard, unable to read a verdict, keeps it paused.
    if let Err(e) = create_approval_request(rt.store(), &record).await {
        tracing::warn!("approval {approval_id} not created: {e}");
    }
    if let (Some(store), Ok(v)) = (rt.store(), serde_json::to_value(&pm)) {
        // Persisted with a generous TTL: seven days.
        let opts = PutOptions {
            ttl: Some(Duration::from_secs(7 * 24 * 3600)),
            ..PutOptions::default()
        };
        if let Err(e) = store
            .put(&working_memory_ns(conv), "pending_mutation", v, opts)
            .await
        {
            tracing::warn!("pending mutation not persisted to working memory: {e}");
        }
    }
    let strip: Vec<Message> = s
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Ai && m.tool_calls.iter().any(|c| c.id == call.id))
        .and_then(|m| m.id.clone())
        .map(Message::remove)
        .into_iter()
        .collect();
    u.messages(strip)
        .pending_mutation(Some(pm))
        .hitl_required(true)
        .hitl_checkpoint_type(Some("mutating_capability".into()))
        .hitl_approval_id(Some(approval_id))
        .status(status::AWAITING_HITL.into())
}

/// `skill_select_node`: `SKILL_SELECT:{id}` in the latest AI message, minus injected ones.
pub async fn skill_select_node(s: Arc<PermitState>, _rt: Runtime) -> NodeResult {
    let text = s
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Ai)
        .map(Message::text)
        .unwrap_or_default();
    Ok(start(crate::SKILL_SELECT_NODE).selected_skill_ids(select_skills(&text, &s.injected_skill_ids)))
}

/// The skill ids named by `SKILL_SELECT:{id}` patterns in `text`, in order, without
/// duplicates or ids in `injected`.
#[must_use]
pub fn select_skills(text: &str, injected: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in text.split("SKILL_SELECT:").skip(1) {
        let id: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if !id.is_empty() && !injected.contains(&id) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// `skill_inject_node`: ledger check, tier 2 definition, tier 3 artifacts, tier 3.5 entity
/// context, ledger mark; each skill becomes a system message. The ledger is kept per
/// conversation and thread: a skill injected into one thread's context is not in another
/// thread's, even for the same conversation id (the sample input run again on a new
/// thread).
pub async fn skill_inject_node(s: Arc<PermitState>, rt: Runtime) -> NodeResult {
    let ledger = vec![
        "skill_ledger".to_owned(),
        s.conversation_id.clone(),
        rt.thread_id().unwrap_or_default().to_owned(),
    ];
    let mut injected = s.injected_skill_ids.clone();
    let mut active = s.active_skills.clone();
    let mut entity_ids = s.injected_entity_ids.clone();
    let mut messages = Vec::new();
    let entity = match s.recent_entity_context.last() {
        Some(id) => skills::find_entity(rt.store(), id).await,
        None => None,
    };
    for id in &s.selected_skill_ids {
        let Some(skill) = skills::skill(id) else { continue };
        if let Some(store) = rt.store() {
            if let Ok(Some(_)) = store.get(&ledger, id).await {
                continue;
            }
        }
        let context = entity.as_ref().map(|e| {
            format!(
                "Well: {} (API: {})\nLease: {}",
                e["name"].as_str().unwrap_or("?"),
                e["api"].as_str().unwrap_or("?"),
                e["lease"].as_str().unwrap_or("?")
            )
        });
        if let Some(eid) = entity.as_ref().and_then(|e| e["id"].as_str()) {
            if !entity_ids.iter().any(|x| x == eid) {
                entity_ids.push(eid.to_owned());
            }
        }
        messages.push(
            Message::system(skills::render_skill(&skill, context.as_deref())).with_id(format!("skill-{id}")),
        );
        active.insert(id.clone(), if skill.artifacts.is_empty() { 2 } else { 3 });
        injected.push(id.clone());
        if let Some(store) = rt.store() {
            let _ = store
                .put(&ledger, id, json!({"skill_id": id}), PutOptions::default())
                .await;
        }
    }
    Ok(start(crate::SKILL_INJECT_NODE)
        .messages(messages)
        .injected_skill_ids(injected)
        .active_skills(active)
        .injected_entity_ids(entity_ids)
        .skill_injection_done(true))
}

/// `approval_node`: a checkpoint approval asked for by a skill rule (`hitl_required`) or
/// the request metadata (`hitl_checkpoint_type`).
pub async fn approval_node(s: Arc<PermitState>, rt: Runtime) -> NodeResult {
    let u = start(crate::APPROVAL_NODE);
    let by_metadata = s.metadata["hitl_checkpoint_type"].as_str().map(str::to_owned);
    let checkpoint = match (&s.hitl_checkpoint_type, by_metadata) {
        (Some(c), _) if s.hitl_required => c.clone(),
        (_, Some(c)) => c,
        _ => return Ok(u),
    };
    if let Some(id) = &s.hitl_approval_id {
        match get_approval_status(rt.store(), id).await {
            Some(rec) if rec.checkpoint_type == checkpoint && rec.status != "pending" => {
                let note = Message::system(match &rec.comment {
                    Some(c) => format!(
                        "HITL: checkpoint {checkpoint} was {} by the reviewer, who wrote: {c}",
                        rec.status
                    ),
                    None => format!(
                        "HITL: checkpoint {checkpoint} was {} by the reviewer.",
                        rec.status
                    ),
                });
                return Ok(u
                    .hitl_required(false)
                    .hitl_reviewer_id(rec.reviewer_id)
                    .status(status::RUNNING.into())
                    .messages(vec![note]));
            }
            Some(rec) if rec.checkpoint_type == checkpoint => {
                return Ok(u.status(status::AWAITING_HITL.into()));
            }
            Some(_) => {} // an earlier checkpoint: ask for this one
            // Fail closed: a verdict that cannot be read keeps the run paused.
            None if s.status == status::RESUMING => return Ok(u.status(status::AWAITING_HITL.into())),
            None => {}
        }
    }
    let approval_id = rt.idempotency_key("approval");
    let record = ApprovalRecord {
        id: approval_id.clone(),
        status: "pending".into(),
        checkpoint_type: checkpoint.clone(),
        tool_call: None,
        reviewer_id: None,
        comment: None,
        snapshot: json!({
            "messages": s.messages.len(),
            "skills": s.injected_skill_ids,
            "entities": s.recent_entity_context,
            "tokens_used": s.tokens_used,
            "metadata": s.metadata,
        }),
    };
    match create_approval_request(rt.store(), &record).await {
        Ok(()) => Ok(u
            .hitl_required(true)
            .hitl_checkpoint_type(Some(checkpoint))
            .hitl_approval_id(Some(approval_id))
            .status(status::AWAITING_HITL.into())),
        Err(e) => {
            tracing::warn!("approval service unavailable: {e}");
            Ok(u.messages(vec![Message::system(format!(
                "HITL_WARNING: checkpoint {checkpoint} could not be sent for approval ({e})."
            ))]))
        }
    }
}

/// `output_format`: finalise the status and count the iteration. While a verdict is
/// awaited, pause here; the resume value is written to the approval record and the next
/// turn starts.
pub async fn output_format(s: Arc<PermitState>, rt: Runtime) -> NodeResult {
    let u = start(crate::OUTPUT_FORMAT).iteration(s.iteration + 1);
    if s.status == status::AWAITING_HITL {
        let approval_id = s
            .hitl_approval_id
            .clone()
            .or_else(|| s.pending_mutation.as_ref().map(|p| p.hitl_approval_id.clone()))
            .unwrap_or_default();
        let request = json!({
            "type": "approval_request",
            "approval_id": approval_id,
            "checkpoint_type": s.hitl_checkpoint_type,
            "reviewer_strategy": s.hitl_reviewer_strategy,
            "tool_call": s.pending_mutation.as_ref().map(|p| json!({
                "id": p.tool_call_id, "name": p.tool_name, "args": p.args})),
            "answer_with": ["approved", "rejected", {"decision": "approved", "reviewer_id": "...", "comment": "..."}],
            // The same request in LangChain's HITL shape, so HITL clients (the console at
            // /ui, Agent Inbox) show approve / reject; answered with `{"decisions": [..]}`.
            "action_requests": [{
                "name": s.pending_mutation.as_ref().map_or("approve_checkpoint", |p| p.tool_name.as_str()),
                "args": s.pending_mutation.as_ref().map_or_else(
                    || json!({"checkpoint_type": s.hitl_checkpoint_type, "approval_id": approval_id}),
                    |p| p.args.clone()),
                "description": format!("Approval {approval_id} ({})", s.hitl_checkpoint_type.as_deref().unwrap_or("mutation")),
            }],
            "review_configs": [{
                "action_name": s.pending_mutation.as_ref().map_or("approve_checkpoint", |p| p.tool_name.as_str()),
                "allowed_decisions": ["approve", "reject"],
            }],
        });
        let mut request = request;
        if s.hitl_checkpoint_type.as_deref() == Some("force_clarify") {
            request["question"] = json!(format!(
                "{} entity lookups in a row did not resolve. Which well, lease or operator is meant? \
                 Answer with a decision whose comment names it.",
                s.consecutive_failed_resolves
            ));
        }
        let verdict = rt.interrupt(request)?;
        record_verdict(rt.store(), &approval_id, &verdict).await;
        return Ok(u.status(status::RESUMING.into()));
    }
    let done = if s.error.is_some() {
        status::FAILED
    } else {
        status::COMPLETED
    };
    Ok(u.status(done.into()))
}
