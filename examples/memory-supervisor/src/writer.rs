//! The memory writer sub-graph (ADR-007 §2.2): CIAR calculation → promotion → retrieval.
//!
//! ```text
//! START → score → promote ─┬─▶ recall_session ───┐
//!                          └─▶ recall_long_term ─┴─▶ confirm → END
//! ```
//!
//! `recall_session` (L2) and `recall_long_term` (L3) run in the same superstep and both
//! append to `retrieved`; the `append` reducer merges their writes in a fixed order (with a
//! last-value field the two writes would be a conflict error). No model is involved: the
//! fact is taken from the user's words.

use crate::ciar::{self, PROMOTION_THRESHOLD};
use crate::memory::Memory;
use crate::runtime_ids::{resolve_ids, trusted_context, MemoryContext};
use crate::state::{MemoryHit, StoredFact, Tier};
use graphloom_core::{
    CompiledGraph, Message, MessageKind, NodeError, Runtime, Seq, State, StateGraph, END, START,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

/// The fact being written and its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Candidate {
    /// The fact.
    pub content: String,
    /// Its store key.
    pub key: String,
    /// CIAR score.
    pub ciar: f64,
    /// Certainty factor.
    pub certainty: f64,
    /// Impact factor.
    pub impact: f64,
}

/// The writer's state: the keys it shares with the supervisor, plus its candidate.
#[derive(State, Clone, Default, Debug)]
pub struct WriterState {
    /// The conversation (shared).
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
    /// User from the input (shared; the run context wins).
    pub user_id: String,
    /// Session from the input (shared; the run context wins).
    pub session_id: String,
    /// The fact being written (private to the sub-graph).
    pub candidate: Option<Candidate>,
    /// Facts written (shared).
    #[reducer(append)]
    pub stored: Seq<StoredFact>,
    /// Related memories found (shared: the supervisor's record of retrievals).
    #[reducer(append)]
    pub retrieved: Seq<MemoryHit>,
    /// Related memories found by this run of the sub-graph (private).
    #[reducer(append)]
    pub related: Seq<MemoryHit>,
}

fn memory(s: &WriterState, rt: &Runtime) -> Result<Memory, NodeError> {
    let store = rt
        .store()
        .cloned()
        .ok_or_else(|| NodeError::fatal("the graph has no store for long-term memory"))?;
    let state = json!({"user_id": s.user_id, "session_id": s.session_id});
    let ids = resolve_ids(
        trusted_context(
            rt.context::<MemoryContext>(),
            rt.context::<serde_json::Value>(),
            rt.thread_id(),
        )
        .as_ref(),
        &state,
        rt.thread_id(),
    )
    .map_err(|e| NodeError::fatal(e.to_string()))?;
    Ok(Memory::new(store, ids))
}

async fn score(s: Arc<WriterState>, _rt: Runtime) -> Result<WriterStateUpdate, NodeError> {
    let said = s
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Human)
        .map(Message::text)
        .unwrap_or_default();
    let fact = ciar::extract_fact(&said);
    if fact.is_empty() {
        return Ok(WriterStateUpdate::new().candidate(None));
    }
    let c = ciar::score(&fact, 0.0, 0.0);
    Ok(WriterStateUpdate::new().candidate(Some(Candidate {
        key: ciar::fact_key(&fact),
        content: fact,
        ciar: c.score,
        certainty: c.certainty,
        impact: c.impact,
    })))
}

async fn promote(s: Arc<WriterState>, rt: Runtime) -> Result<WriterStateUpdate, NodeError> {
    let Some(c) = &s.candidate else {
        return Ok(WriterStateUpdate::new());
    };
    let fact = memory(&s, &rt)?
        .remember(&c.content, "memory_writer")
        .await
        .map_err(|e| NodeError::new(e.to_string()))?;
    Ok(WriterStateUpdate::new().stored(vec![fact]))
}

async fn recall(s: Arc<WriterState>, rt: Runtime, tier: Tier) -> Result<WriterStateUpdate, NodeError> {
    let Some(c) = &s.candidate else {
        return Ok(WriterStateUpdate::new());
    };
    let mem = memory(&s, &rt)?;
    let found = match tier {
        Tier::L2 => mem.search_session(&c.content, 0.0, 4).await,
        _ => mem.search_long_term(&c.content, 4).await,
    }
    .map_err(|e| NodeError::new(e.to_string()))?;
    let related: Vec<MemoryHit> = found.into_iter().filter(|h| h.key != c.key).take(3).collect();
    Ok(WriterStateUpdate::new()
        .retrieved(related.clone())
        .related(related))
}

async fn confirm(s: Arc<WriterState>, _rt: Runtime) -> Result<WriterStateUpdate, NodeError> {
    let text = match &s.candidate {
        None => "I didn't find a fact to remember in that message.".to_owned(),
        Some(c) => {
            let where_ = if c.ciar >= PROMOTION_THRESHOLD {
                "saved to your long-term memory"
            } else {
                "kept for this session only"
            };
            let mut t = format!("Noted: \"{}\" (CIAR {:.2}, {where_}).", c.content, c.ciar);
            let mut related: Vec<String> = Vec::new();
            for h in s.related.iter() {
                if !related.contains(&h.content) {
                    related.push(h.content.clone());
                }
            }
            if !related.is_empty() {
                t.push_str(&format!(" Related: {}.", related.join("; ")));
            }
            t
        }
    };
    Ok(WriterStateUpdate::new().messages(vec![Message::ai(text)]))
}

/// Node names.
pub const RECALL_SESSION: &str = "recall_session";
/// The long-term recall node.
pub const RECALL_LONG_TERM: &str = "recall_long_term";

/// The memory writer sub-graph.
///
/// # Errors
/// Never (the graph is fixed); the builder's error type.
pub fn memory_writer() -> graphloom_core::Result<CompiledGraph<WriterState>> {
    StateGraph::<WriterState>::new()
        .name("memory_writer")
        .add_node("score", score)
        .add_node("promote", promote)
        .add_node(RECALL_SESSION, |s, rt| recall(s, rt, Tier::L2))
        .add_node(RECALL_LONG_TERM, |s, rt| recall(s, rt, Tier::L3))
        .add_node("confirm", confirm)
        .add_edge(START, "score")
        .add_edge("score", "promote")
        .add_edge("promote", RECALL_SESSION)
        .add_edge("promote", RECALL_LONG_TERM)
        .add_join([RECALL_SESSION, RECALL_LONG_TERM], "confirm")
        .add_edge("confirm", END)
        .compile()
}
