//! Shared setup: every test gets its own PostgreSQL database (checkpoints and store).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::store::DynStore;
use graphloom_core::{CompiledGraph, Message, MessageKind, RunConfig, ToolCall};
use graphloom_llm::DynChatModel;
use graphloom_postgres::testing::TestDatabase;
use memory_supervisor::{
    build_graph, open_database, Database, GraphConfig, MemoryContext, MemoryState, MemoryStateUpdate,
    RouterMode,
};
use std::sync::Arc;

/// A graph on a fresh PostgreSQL database.
pub struct Setup {
    pub graph: CompiledGraph<MemoryState>,
    pub store: Arc<dyn DynStore>,
    pub url: String,
    pub db: TestDatabase,
}

/// Build the supervisor on a fresh database.
pub async fn setup(model: Arc<dyn DynChatModel>, router: RouterMode) -> Setup {
    let (url, db) = graphloom_postgres::testing::test_database().await;
    let graph_store = connect(&url, model, router).await;
    Setup {
        graph: graph_store.0,
        store: graph_store.1,
        url,
        db,
    }
}

/// Another graph (another "process") on the same database.
pub async fn connect(
    url: &str,
    model: Arc<dyn DynChatModel>,
    router: RouterMode,
) -> (CompiledGraph<MemoryState>, Arc<dyn DynStore>) {
    let (saver, store) = open_database(&Database::Postgres(url.to_owned())).await.unwrap();
    let graph = build_graph(GraphConfig {
        model,
        router,
        checkpointer: Some(saver),
        store: Some(Arc::clone(&store)),
    })
    .unwrap();
    (graph, store)
}

/// A run on thread `session` for `user`, with the ids in the run context.
pub fn as_user(user: &str, session: &str) -> RunConfig {
    RunConfig::thread(session).context(MemoryContext::new(user, session))
}

/// A user turn.
pub fn says(text: &str) -> MemoryStateUpdate {
    MemoryStateUpdate::new().messages(vec![Message::human(text)])
}

/// A tool call.
pub fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

/// The tool messages of a state: (tool name, text, status).
pub fn tool_results(s: &MemoryState) -> Vec<(String, String, String)> {
    s.messages
        .iter()
        .filter(|m| m.kind == MessageKind::Tool)
        .map(|m| {
            (
                m.name.clone().unwrap_or_default(),
                m.text(),
                m.extra
                    .get("status")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// The text of the last message.
pub fn last_text(s: &MemoryState) -> String {
    s.messages.last().map(Message::text).unwrap_or_default()
}

/// A namespace from labels.
pub fn ns(labels: &[&str]) -> Vec<String> {
    labels.iter().map(|s| (*s).to_owned()).collect()
}
