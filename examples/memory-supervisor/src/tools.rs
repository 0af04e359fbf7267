//! The memory tools (ADR-007 §2.3): unified tools for general reasoning and granular,
//! tier-specific tools for surgical retrieval.
//!
//! | tool | layer | what |
//! |---|---|---|
//! | `memory_store(content)` | unified | CIAR-score a fact, store it in L2, promote it to L3 |
//! | `memory_query(query, limit?)` | unified | search L2 and L3 concurrently, merged by relevance |
//! | `get_context_block()` | unified | recent turns (L1) and the user's long-term facts (L3) as one text block |
//! | `l1_working_memory(limit?)` | granular | this session's recent turns |
//! | `l2_search_facts(query, min_ciar_score?)` | granular | this session's facts above a CIAR score |
//! | `l3_search_knowledge(query, limit?)` | granular | the user's long-term knowledge |
//!
//! No schema has a user, session or thread parameter: the tools get the ids from the
//! runtime ([`memory_for`]), and declare those names injected so the tool node drops any
//! the model sends anyway (see [`crate::runtime_ids`]). All tools are `async` and share the
//! run's store through [`graphloom_prebuilt::ToolRuntime::store`].
//!
//! The tools that write or find memories answer with a [`ToolCommand`] (LangGraph's
//! `Command` from a tool): besides their tool message, `memory_store` appends the fact to
//! the state's `stored` and the searches append their hits to `retrieved`, so the agent's
//! state records what its tools did. Parallel calls of one message (an L2 and an L3 search
//! at once) are joined by the `append` reducer, in call order.

use crate::memory::{Memory, MemoryError};
use crate::runtime_ids::{resolve_ids, trusted_context, MemoryContext, INJECTED};
use crate::state::MemoryHit;
use graphloom_core::Message;
use graphloom_prebuilt::{FnTool, Tool, ToolCommand, ToolError, ToolOutput, ToolRuntime};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The memory of the user and session the runtime names.
///
/// # Errors
/// `unavailable` when the run names no user or the graph has no store.
pub fn memory_for(rt: &ToolRuntime) -> Result<Memory, ToolError> {
    let store = rt
        .store()
        .cloned()
        .ok_or_else(|| ToolError::unavailable(MemoryError::NoStore.to_string()))?;
    let ids = resolve_ids(
        trusted_context(
            rt.context::<MemoryContext>(),
            rt.context::<serde_json::Value>(),
            rt.thread_id(),
        )
        .as_ref(),
        &rt.state,
        rt.thread_id(),
    )
    .map_err(|e| ToolError::unavailable(e.to_string()))?;
    Ok(Memory::new(store, ids))
}

fn store_err(e: MemoryError) -> ToolError {
    ToolError::execution(e.to_string())
}

fn hits_json(hits: &[MemoryHit]) -> Value {
    json!(hits
        .iter()
        .map(|h| json!({"tier": h.tier, "content": h.content, "ciar": h.ciar, "score": h.score}))
        .collect::<Vec<_>>())
}

/// The tool's answer `content` as its tool message, and `items` appended to state key
/// `key`, in one command.
fn answer_and_record(rt: &ToolRuntime, tool: &str, content: &Value, key: &str, items: Value) -> ToolOutput {
    let mut answer = Message::tool(content.to_string(), rt.tool_call_id.clone());
    answer.name = Some(tool.to_owned());
    answer.extra.insert("status".into(), json!("success"));
    ToolOutput::command(
        ToolCommand::new()
            .update("messages", json!([answer]))
            .update(key, items),
    )
}

/// The recent turns in a tool runtime's state (human and AI text, oldest first).
fn recent_turns(rt: &ToolRuntime, limit: usize) -> Vec<String> {
    let msgs: Vec<Message> = rt
        .state
        .get("messages")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let turns: Vec<String> = msgs
        .iter()
        .filter(|m| m.tool_calls.is_empty())
        .filter_map(|m| match m.kind {
            graphloom_core::MessageKind::Human => Some(format!("user: {}", m.text())),
            graphloom_core::MessageKind::Ai => Some(format!("assistant: {}", m.text())),
            _ => None,
        })
        .collect();
    turns[turns.len().saturating_sub(limit)..].to_vec()
}

/// `memory_store` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StoreArgs {
    /// The fact to remember, in the user's words.
    pub content: String,
}

/// `memory_query` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct QueryArgs {
    /// What to look for.
    pub query: String,
    /// Most results (default 5).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `get_context_block` arguments (none).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// `l1_working_memory` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct L1Args {
    /// How many recent turns (default 6).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `l2_search_facts` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct L2Args {
    /// What to look for.
    pub query: String,
    /// Only facts with at least this CIAR score (default 0.0).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_ciar_score: Option<f64>,
}

/// `l3_search_knowledge` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct L3Args {
    /// What to look for.
    pub query: String,
    /// Most results (default 5).
    #[serde(default)]
    pub limit: Option<u32>,
}

fn limit(l: Option<u32>, default: usize) -> usize {
    l.map_or(default, |n| (n as usize).clamp(1, 20))
}

/// `memory_store`.
#[must_use]
pub fn memory_store() -> FnTool {
    FnTool::new(
        "memory_store",
        "Remember a fact the user stated, for this session and (if it matters lastingly) for future sessions.",
        |a: StoreArgs, rt: ToolRuntime| async move {
            let mem = memory_for(&rt)?;
            let fact = mem.remember(a.content.trim(), "memory_store").await.map_err(store_err)?;
            let content = json!({
                "stored": fact.content,
                "ciar": fact.ciar,
                "tiers": if fact.promoted { json!(["L2", "L3"]) } else { json!(["L2"]) },
            });
            Ok::<_, ToolError>(answer_and_record(&rt, "memory_store", &content, "stored", json!([fact])))
        },
    )
    .inject(INJECTED)
}

/// `memory_query`.
#[must_use]
pub fn memory_query() -> FnTool {
    FnTool::new(
        "memory_query",
        "Search everything remembered about the user (this session and earlier ones).",
        |a: QueryArgs, rt: ToolRuntime| async move {
            let mem = memory_for(&rt)?;
            let n = limit(a.limit, 5);
            let (l2, l3) = futures::join!(
                mem.search_session(&a.query, 0.0, n),
                mem.search_long_term(&a.query, n)
            );
            let mut hits = l2.map_err(store_err)?;
            for h in l3.map_err(store_err)? {
                if !hits.iter().any(|x| x.key == h.key) {
                    hits.push(h);
                }
            }
            hits.sort_by(|a, b| b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)));
            hits.truncate(n);
            let content = json!({"query": a.query, "found": hits_json(&hits)});
            Ok::<_, ToolError>(answer_and_record(
                &rt,
                "memory_query",
                &content,
                "retrieved",
                json!(hits),
            ))
        },
    )
    .inject(INJECTED)
}

/// `get_context_block`.
#[must_use]
pub fn get_context_block() -> FnTool {
    FnTool::new(
        "get_context_block",
        "Get one block of context: the recent conversation and what is known about the user long-term.",
        |_a: NoArgs, rt: ToolRuntime| async move {
            let mem = memory_for(&rt)?;
            let facts = mem.recent_long_term(5).await.map_err(store_err)?;
            let mut block = String::from("Recent conversation:\n");
            for t in recent_turns(&rt, 6) {
                block.push_str(&format!("- {t}\n"));
            }
            block.push_str("Known about the user:\n");
            if facts.is_empty() {
                block.push_str("- nothing yet\n");
            }
            for f in &facts {
                block.push_str(&format!("- {}\n", f.content));
            }
            Ok::<_, ToolError>(block)
        },
    )
    .inject(INJECTED)
}

/// `l1_working_memory`.
#[must_use]
pub fn l1_working_memory() -> FnTool {
    FnTool::new(
        "l1_working_memory",
        "The most recent turns of this session (working memory).",
        |a: L1Args, rt: ToolRuntime| async move {
            // Resolving the ids checks the run has a user, like every memory tool.
            memory_for(&rt)?;
            Ok::<_, ToolError>(json!({"turns": recent_turns(&rt, limit(a.limit, 6))}))
        },
    )
    .inject(INJECTED)
}

/// `l2_search_facts`.
#[must_use]
pub fn l2_search_facts() -> FnTool {
    FnTool::new(
        "l2_search_facts",
        "Search the facts stated in this session, keeping those with at least the given CIAR score.",
        |a: L2Args, rt: ToolRuntime| async move {
            let mem = memory_for(&rt)?;
            let hits = mem
                .search_session(&a.query, a.min_ciar_score.unwrap_or(0.0), 5)
                .await
                .map_err(store_err)?;
            let content = json!({"tier": "L2", "found": hits_json(&hits)});
            Ok::<_, ToolError>(answer_and_record(
                &rt,
                "l2_search_facts",
                &content,
                "retrieved",
                json!(hits),
            ))
        },
    )
    .inject(INJECTED)
}

/// `l3_search_knowledge`.
#[must_use]
pub fn l3_search_knowledge() -> FnTool {
    FnTool::new(
        "l3_search_knowledge",
        "Search the user's long-term knowledge, gathered across all sessions.",
        |a: L3Args, rt: ToolRuntime| async move {
            let mem = memory_for(&rt)?;
            let hits = mem
                .search_long_term(&a.query, limit(a.limit, 5))
                .await
                .map_err(store_err)?;
            let content = json!({"tier": "L3", "found": hits_json(&hits)});
            Ok::<_, ToolError>(answer_and_record(
                &rt,
                "l3_search_knowledge",
                &content,
                "retrieved",
                json!(hits),
            ))
        },
    )
    .inject(INJECTED)
}

/// The unified tools (reasoning mode).
#[must_use]
pub fn unified_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        memory_store().arc(),
        memory_query().arc(),
        get_context_block().arc(),
    ]
}

/// The granular tools (retrieval mode).
#[must_use]
pub fn granular_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        l1_working_memory().arc(),
        l2_search_facts().arc(),
        l3_search_knowledge().arc(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_schema_has_an_id_parameter() {
        for t in unified_tools().into_iter().chain(granular_tools()) {
            let props = t.schema().get("properties").cloned().unwrap_or_default();
            for id in INJECTED {
                assert!(props.get(id).is_none(), "{} exposes {id}", t.name());
            }
            assert_eq!(t.injected(), INJECTED, "{}", t.name());
        }
    }
}
