//! The supervisor's state and the records it holds.
//!
//! The conversation uses the `add_messages` reducer (the ADR's
//! `Annotated[list, add_messages]`); the memory records use `append`, so nodes or tool calls
//! running in parallel in one step each add their items and none overwrites another's
//! (ADR-007 §2.5). `user_id` and `session_id` are set by the caller's input and read by
//! tools only when the run has no [`crate::MemoryContext`]; no node or tool writes them.

use graphloom_core::{Message, Seq, State};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A memory tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Tier {
    /// Working memory: this session's recent conversation.
    L1,
    /// Session facts: what was said in this session, CIAR-scored.
    L2,
    /// Long-term knowledge: the user's facts across sessions.
    L3,
}

/// A memory found by a retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryHit {
    /// The tier it came from.
    pub tier: Tier,
    /// Its key in the store.
    pub key: String,
    /// The remembered text.
    pub content: String,
    /// Its CIAR score at the time of the search (age since stated, recency since last used).
    pub ciar: f64,
    /// Similarity to the query, when the store ranks by similarity.
    pub score: Option<f64>,
}

/// A fact written to memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoredFact {
    /// Its key in the store.
    pub key: String,
    /// The fact.
    pub content: String,
    /// Its CIAR score.
    pub ciar: f64,
    /// Whether it was promoted to long-term memory (L3).
    pub promoted: bool,
}

/// The supervisor's state (shared by key with every agent sub-graph).
#[derive(State, Clone, Default, Debug, PartialEq)]
pub struct MemoryState {
    /// The conversation.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
    /// The user, as the caller's input set it (tools prefer the run context).
    pub user_id: String,
    /// The session, as the caller's input set it (tools prefer the run context).
    pub session_id: String,
    /// The intent the supervisor routed the current turn by (`store`, `recall`, `chat`).
    pub intent: Option<String>,
    /// Every routing decision: the agent handed control to, or `FINISH`.
    #[reducer(append)]
    pub handoffs: Seq<String>,
    /// Memories retrieved by the sub-graphs, appended by parallel retrieval steps.
    #[reducer(append)]
    pub retrieved: Seq<MemoryHit>,
    /// Facts written by the memory writer.
    #[reducer(append)]
    pub stored: Seq<StoredFact>,
}
