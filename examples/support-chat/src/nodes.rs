//! The seven nodes.

use crate::data::answers_question;
use crate::events::{
    emit, ON_CHAT_MODEL_START, ON_CHAT_MODEL_STREAM, ON_CUSTOM_EVENT, ON_TOOL_END, ON_TOOL_START,
};
use crate::policy::{validate, REFUSAL};
use crate::tools::{run_tool, PlannedCall, ToolOutput, ToolStatus};
use crate::{AgentState, AgentStateUpdate, Deps, NextStep, Plan};
use futures::StreamExt;
use graphloom_core::{Message, MessageKind, NodeError, Runtime};
use graphloom_llm::{
    parse_structured, prepare_structured, ChatModel, ChatOptions, ChunkAssembler, MessageExt, NodeResultExt,
};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

type NodeResult = Result<AgentStateUpdate, NodeError>;

const PLANNER_PROMPT: &str = "You plan the next step of a customer-support agent. Answer with JSON: \
{\"next_step\": \"generate\" | \"tool_use\", \"tool_calls\": [{\"tool\": name, \"query\": text}]}. \
Use tools for anything about the user's account, orders or product facts.";

const GENERATOR_PROMPT: &str = "You are a friendly support agent. Answer from the tool results when \
there are any; never invent order details. Be brief.";

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

fn last_human(s: &AgentState) -> Option<String> {
    s.messages
        .last()
        .filter(|m| m.kind == MessageKind::Human)
        .map(Message::text)
}

/// System context shared by the planner and the generator: the summary of older turns.
fn context(s: &AgentState, system: &str) -> Vec<Message> {
    let mut out = vec![Message::system(system)];
    if !s.summary.is_empty() {
        out.push(Message::system(format!(
            "Summary of the earlier conversation:\n{}",
            s.summary
        )));
    }
    out
}

fn tokens(m: &Message) -> i64 {
    m.usage()
        .map_or(0, |u| i64::try_from(u.total_tokens).unwrap_or(i64::MAX))
}

pub(crate) async fn ingress(s: Arc<AgentState>, rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let text = last_human(&s);
    if let Err(reason) = validate(&s.user_id, text.as_deref(), &d.config) {
        // Rejected: the offending message leaves the thread and nothing else runs.
        let removal: Vec<Message> = s
            .messages
            .last()
            .filter(|m| m.kind == MessageKind::Human)
            .and_then(|m| m.id.clone())
            .map(Message::remove)
            .into_iter()
            .collect();
        return Ok(AgentStateUpdate::new()
            .safety_check(false)
            .phase("rejected".into())
            .scratchpad(json!({"rejection": format!("invalid input: {reason}")}))
            .messages(removal));
    }
    let text = text.unwrap_or_default();
    let mut user_context = json!({"tier": "standard"});
    if let Some(store) = rt.store() {
        let ns = vec!["users".to_owned()];
        if let Ok(Some(item)) = store.get(&ns, &s.user_id).await {
            user_context = item.value;
        }
    }
    let session = if s.session_id.is_empty() {
        rt.thread_id().unwrap_or_default().to_owned()
    } else {
        s.session_id.clone()
    };
    // A new turn: reset what the previous one left behind.
    let update = AgentStateUpdate::new()
        .session_id(session)
        .user_context(user_context)
        .retry_count(0)
        .scratchpad(json!({}))
        .tool_calls(Vec::new())
        .tool_outputs(Vec::new())
        .next_step(String::new())
        .start_time(now_secs());
    Ok(match d.safety.check(&text) {
        Ok(()) => update.safety_check(true).phase("plan".into()),
        Err(reason) => update
            .safety_check(false)
            .phase("refused".into())
            .scratchpad(json!({"refusal_reason": reason}))
            .messages(vec![Message::ai(REFUSAL)]),
    })
}

pub(crate) async fn planner(s: Arc<AgentState>, rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let prompt = format!("{PLANNER_PROMPT}\nTools:\n{}", d.tools.catalogue());
    let mut msgs = context(&s, &prompt);
    msgs.extend(s.messages.iter().cloned());
    if let Some(feedback) = s.scratchpad.get("feedback").and_then(Value::as_str) {
        msgs.push(Message::system(format!(
            "Attempt {} did not work: {feedback}. Try different search terms or another tool.",
            s.retry_count
        )));
    }
    emit(
        &rt,
        ON_CHAT_MODEL_START,
        json!({"input": {"message": last_human(&s), "retry_count": s.retry_count}}),
    );
    let (format, validator) = prepare_structured::<Plan>();
    let validator = validator.node()?;
    let answer = d
        .model
        // The plan is the node's own: `nostream` keeps its tokens out of the `messages`
        // stream, where a client would show them and then lose them on hydration.
        .invoke(&msgs, &ChatOptions::new().response_format(format).nostream())
        .await
        .node()?;
    // A plan that does not parse falls back to answering directly.
    let plan = parse_structured::<Plan>(&answer, &validator).unwrap_or(Plan {
        next_step: NextStep::Generate,
        tool_calls: Vec::new(),
    });
    let use_tools = plan.next_step == NextStep::ToolUse && !plan.tool_calls.is_empty();
    Ok(AgentStateUpdate::new()
        .next_step(if use_tools { "tool_use" } else { "generate" }.into())
        .tool_calls(plan.tool_calls)
        .phase(if use_tools { "execute" } else { "generate" }.into())
        .tokens_used(tokens(&answer)))
}

/// Keeps calls to known tools the user may use; the rest become error outputs.
pub(crate) async fn tool_router(s: Arc<AgentState>, _rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let permitted = s
        .user_context
        .get("permissions")
        .and_then(Value::as_array)
        .map(|p| {
            p.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
    let mut selected: Vec<PlannedCall> = Vec::new();
    let mut rejected = Vec::new();
    for call in &s.tool_calls {
        let allowed = permitted.as_ref().is_none_or(|p| p.contains(&call.tool));
        if d.tools.get(&call.tool).is_none() || !allowed {
            rejected.push(ToolOutput {
                call_id: uuid::Uuid::new_v4().to_string(),
                tool: call.tool.clone(),
                query: call.query.clone(),
                status: ToolStatus::Error,
                output: json!({"error": format!("tool {} is not available", call.tool)}),
                attempts: 0,
            });
        } else if !selected.contains(call) && selected.len() < d.config.max_tools_per_step {
            selected.push(call.clone());
        }
    }
    Ok(AgentStateUpdate::new()
        .tool_calls(selected)
        .tool_outputs(rejected))
}

/// Runs the selected calls in parallel.
pub(crate) async fn tool_executor(s: Arc<AgentState>, rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let cfg = &d.config;
    let runs = s.tool_calls.iter().filter_map(|call| {
        let tool = d.tools.get(&call.tool)?;
        let rt = &rt;
        Some(async move {
            let id = uuid::Uuid::new_v4().to_string();
            emit(
                rt,
                ON_TOOL_START,
                json!({"tool": call.tool, "input": call.query, "call_id": id}),
            );
            let out = run_tool(tool, &id, &call.query, cfg.tool_timeout, cfg.tool_attempts, cfg.retry_backoff).await;
            emit(
                rt,
                ON_TOOL_END,
                json!({"output": out.output, "tool": out.tool, "status": out.status, "call_id": id, "attempts": out.attempts}),
            );
            out
        })
    });
    let mut outputs = s.tool_outputs.clone();
    outputs.extend(futures::future::join_all(runs).await);
    Ok(AgentStateUpdate::new()
        .tool_outputs(outputs)
        .phase("verify".into()))
}

/// Success when at least one output is usable and answers the user's question
/// ([`crate::data::answers_question`]); otherwise re-plan, up to the bound.
pub(crate) async fn verifier(s: Arc<AgentState>, rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let question = s
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default();
    let answers = |o: &ToolOutput| o.usable() && answers_question(&question, &o.output);
    if s.tool_outputs.iter().any(answers) {
        return Ok(AgentStateUpdate::new().phase("generate".into()));
    }
    let problems: Vec<String> = s
        .tool_outputs
        .iter()
        .map(|o| match o.status {
            ToolStatus::Ok => format!(
                "{} found results for \"{}\" that do not answer \"{question}\"",
                o.tool, o.query
            ),
            ToolStatus::Empty => format!("{} found nothing for \"{}\"", o.tool, o.query),
            _ => format!("{} failed for \"{}\" ({})", o.tool, o.query, o.output["error"]),
        })
        .collect();
    let reason = if problems.is_empty() {
        "no tool was run".to_owned()
    } else {
        problems.join("; ")
    };
    if s.retry_count < d.config.max_replans {
        let retry = s.retry_count + 1;
        emit(
            &rt,
            ON_CUSTOM_EVENT,
            json!({"status": "planning_retry", "retry_count": retry, "reason": reason}),
        );
        return Ok(AgentStateUpdate::new()
            .retry_count(retry)
            .phase("plan".into())
            .scratchpad(json!({"feedback": reason})));
    }
    emit(
        &rt,
        ON_CUSTOM_EVENT,
        json!({"status": "asking_clarification", "retry_count": s.retry_count, "reason": reason}),
    );
    Ok(AgentStateUpdate::new()
        .phase("generate".into())
        .scratchpad(json!({"clarify": true, "feedback": reason})))
}

/// Streams the answer token by token.
pub(crate) async fn generator(s: Arc<AgentState>, rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let mut msgs = context(&s, GENERATOR_PROMPT);
    if !s.tool_outputs.is_empty() {
        let results: Vec<Value> = s
            .tool_outputs
            .iter()
            .map(|o| json!({"tool": o.tool, "query": o.query, "status": o.status, "output": o.output}))
            .collect();
        msgs.push(Message::system(format!(
            "Tool results: {}",
            Value::Array(results)
        )));
    }
    if s.scratchpad.get("clarify").and_then(Value::as_bool) == Some(true) {
        msgs.push(Message::system(
            "The tools could not answer this. Say so and ask the user one clarifying question.",
        ));
    }
    msgs.extend(s.messages.iter().cloned());
    emit(
        &rt,
        ON_CHAT_MODEL_START,
        json!({"input": {"message": last_human(&s), "tool_results": s.tool_outputs.len()}}),
    );
    let mut stream = d.model.stream(&msgs, &ChatOptions::new());
    let mut asm = ChunkAssembler::with_provider(d.model.provider());
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.node()?;
        if !chunk.text.is_empty() {
            emit(&rt, ON_CHAT_MODEL_STREAM, json!({"chunk": chunk.text}));
        }
        asm.push(&chunk);
    }
    let answer = asm.finish();
    let used = tokens(&answer);
    Ok(AgentStateUpdate::new()
        .messages(vec![answer])
        .phase("summarize".into())
        .tokens_used(used))
}

fn clip(s: &str, n: usize) -> String {
    let t: String = s.chars().take(n).collect();
    if t.len() < s.len() {
        format!("{t}...")
    } else {
        t
    }
}

/// Adds the turn to the summary and trims the context to the bound.
pub(crate) async fn summarizer(s: Arc<AgentState>, _rt: Runtime, d: Arc<Deps>) -> NodeResult {
    let all: Vec<Message> = s.messages.to_vec();
    let user = all
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default();
    let reply = all
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Ai)
        .map(Message::text)
        .unwrap_or_default();
    let tools: Vec<String> = s
        .tool_outputs
        .iter()
        .filter(|o| o.usable())
        .map(|o| o.tool.clone())
        .collect();
    let mut line = format!("- user: {} | agent: {}", clip(&user, 80), clip(&reply, 80));
    if !tools.is_empty() {
        line.push_str(&format!(" | tools: {}", tools.join(", ")));
    }
    let summary = if s.summary.is_empty() {
        line
    } else {
        format!("{}\n{line}", s.summary)
    };
    let excess = all.len().saturating_sub(d.config.max_context_messages);
    let removals: Vec<Message> = all[..excess]
        .iter()
        .filter_map(|m| m.id.clone())
        .map(Message::remove)
        .collect();
    Ok(AgentStateUpdate::new()
        .summary(summary)
        .messages(removals)
        .phase(if s.safety_check { "done" } else { "refused" }.into()))
}
