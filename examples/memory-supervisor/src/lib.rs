//! graphloom example: a memory-augmented assistant as a hierarchy of graphs (ADR-007,
//! "LangGraph Integration Architecture"), ported to graphloom.
//!
//! ```text
//!                      ┌────────────── supervisor ──────────────┐
//!   START ──▶ supervisor ──▶ memory_writer │ recall_agent │ assistant ──▶ supervisor ──▶ END
//! ```
//!
//! - **Supervisor and sub-graphs** (§2.2, [`supervisor`]): the top level routes each user
//!   turn by intent to an isolated sub-graph and gets control back; built with the reusable
//!   [`graphloom_prebuilt::supervisor::create_supervisor`]. The router is a keyword
//!   classifier or the model with structured output (falling back to the classifier).
//! - **Ids from the runtime** (§2.1, [`runtime_ids`]): tools read the user and session from
//!   the run's immutable [`MemoryContext`] (`ToolRuntime::context`), or from the caller's
//!   input in the state, never from their arguments. No tool schema has an id parameter,
//!   and ids the model sends anyway are dropped before the tool runs.
//! - **Unified and granular tools** (§2.3, [`tools`]): `memory_store`, `memory_query`,
//!   `get_context_block` for the reasoning agent; `l1_working_memory`, `l2_search_facts`,
//!   `l3_search_knowledge` for the retrieval agent. Each agent sees only its own set.
//! - **Async** (§2.4): every node and tool is `async`; tools run on the runtime's tasks.
//! - **Reducers for parallel work** (§2.5): the tool node runs a message's tool calls in
//!   parallel and `add_messages` merges the answers; the memory writer's two retrieval
//!   steps run in one superstep and both append to `retrieved`.
//! - **Long-term memory in the store** ([`memory`]): session facts (L2) and the user's
//!   knowledge (L3) live in the graph's store under namespaces that start with the user id,
//!   so a fact saved on one thread is recalled on another thread of the same user and
//!   never for another user.
//! - **Checkpoints** (§5.3): PostgreSQL (`--database-url`; the tests run on it) or SQLite
//!   (the binary's default), through [`open_database`].
//!
//! ```sh
//! cargo run -p memory-supervisor                                  # offline demo, SQLite in a temp dir
//! cargo run -p memory-supervisor -- --database-url postgres://user@localhost/memory
//! GRAPHLOOM_MODEL=openai:gpt-4o-mini cargo run -p memory-supervisor -- --router model
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod agents;
pub mod ciar;
pub mod memory;
pub mod offline;
pub mod runtime_ids;
pub mod state;
pub mod supervisor;
pub mod tools;
pub mod writer;

pub use memory::{memory_index, Memory, MemoryError};
pub use runtime_ids::{resolve_ids, trusted_context, Ids, MemoryContext, NoUser};
pub use state::{MemoryHit, MemoryState, MemoryStateUpdate, StoredFact, Tier};
pub use supervisor::{
    build_graph, classify, GraphConfig, Intent, RouterMode, ASSISTANT, MEMORY_WRITER, RECALL_AGENT,
};

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::store::DynStore;
use graphloom_core::CompiledGraph;
use graphloom_llm::DynChatModel;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// The id this graph is hosted under.
pub const GRAPH_ID: &str = "memory_supervisor";

/// Environment variable naming a real model (`openai:gpt-4o-mini`, `ollama:llama3.2`, ...).
pub const MODEL_ENV: &str = "GRAPHLOOM_MODEL";

/// The supervisor graph with the model router (falling back to keywords), `model` for the
/// router and the agents, and `store` as long-term memory. The store should have a vector
/// index ([`memory_index`]) for ranked searches; without one, searches return the most
/// recent memories.
///
/// # Errors
/// When a sub-graph does not compile.
pub fn graph(
    checkpointer: Arc<dyn DynCheckpointer>,
    store: Arc<dyn DynStore>,
    model: Arc<dyn DynChatModel>,
) -> graphloom_core::Result<CompiledGraph<MemoryState>> {
    build_graph(GraphConfig {
        model,
        router: RouterMode::Model,
        checkpointer: Some(checkpointer),
        store: Some(store),
    })
}

/// The model [`MODEL_ENV`] names (through [`graphloom_llm::model_from_env`], which reads
/// the provider's key and base URL from the environment); unset or `scripted`: the
/// [`offline::model`], which routes by intent and answers from the memory tools, computed
/// from each call, so any number of turns, threads and users sharing it work.
///
/// # Errors
/// When [`MODEL_ENV`] names a model that cannot be built: never the script instead.
pub fn default_model() -> graphloom_llm::Result<Arc<dyn DynChatModel>> {
    graphloom_llm::model_from_env(|| {
        // Shared by every run of a served graph: keep no record of what it was asked.
        Arc::new(offline::model().keep_requests(0))
    })
}

/// One user turn as graph input: alice asks to remember her favourite colour. The ids are
/// the caller's (a hosted run has no [`MemoryContext`]); the model never supplies them.
#[must_use]
pub fn sample_input() -> serde_json::Value {
    json!({
        "messages": [{"type": "human", "content": "Remember that my favourite colour is teal."}],
        "user_id": "alice",
        "session_id": "session-1",
    })
}

/// Where checkpoints and memories are persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file (checkpoints and store in one file).
    Sqlite(PathBuf),
    /// A PostgreSQL URL (checkpoints and store share one pool).
    Postgres(String),
}

/// The checkpointer and the indexed store of `db`.
///
/// # Errors
/// When the database cannot be opened or migrated.
pub async fn open_database(
    db: &Database,
) -> graphloom_core::Result<(Arc<dyn DynCheckpointer>, Arc<dyn DynStore>)> {
    match db {
        Database::Sqlite(path) => {
            let saver = graphloom_sqlite::SqliteSaver::open(path).await?;
            let store = graphloom_sqlite::SqliteStore::builder(path)
                .index(memory_index())
                .open()
                .await?;
            Ok((Arc::new(saver), Arc::new(store)))
        }
        Database::Postgres(url) => {
            let saver = graphloom_postgres::PostgresSaver::connect(url).await?;
            let store =
                graphloom_postgres::PostgresStore::from_pool(saver.pool().clone()).with_index(memory_index());
            Ok((Arc::new(saver), Arc::new(store)))
        }
    }
}
