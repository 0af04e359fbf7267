//! Conversations are checkpointed in PostgreSQL (ADR-007 §5.3): another process on the same
//! database sees the thread and continues it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{as_user, connect, last_text, says, setup};
use graphloom_core::{HistoryQuery, RunConfig};
use graphloom_llm::{Reply, ScriptedModel};
use memory_supervisor::RouterMode;
use std::sync::Arc;

#[tokio::test]
async fn a_thread_checkpointed_in_postgres_continues_in_another_process() {
    let s = setup(
        Arc::new(ScriptedModel::new(Vec::<Reply>::new())),
        RouterMode::Keywords,
    )
    .await;
    s.graph
        .invoke(
            says("Remember that my name is Alice."),
            as_user("alice", "thread-1"),
        )
        .await
        .unwrap();
    drop(s.graph);

    // A second process: new pool, new graph, same database.
    let model = ScriptedModel::new([Reply::text("Your name is Alice.")]);
    let (graph, _store) = connect(&s.url, Arc::new(model.clone()), RouterMode::Keywords).await;
    let snap = graph.get_state(&RunConfig::thread("thread-1")).await.unwrap();
    assert_eq!(snap.values.messages.len(), 2);
    assert_eq!(snap.values.handoffs.to_vec(), ["memory_writer", "FINISH"]);
    assert!(snap.next.is_empty());
    let history = graph
        .get_state_history(&RunConfig::thread("thread-1"), HistoryQuery::default())
        .await
        .unwrap();
    assert!(
        history.len() >= 4,
        "input, supervisor, memory_writer, supervisor: {}",
        history.len()
    );

    let out = graph
        .invoke(says("What's my name?"), as_user("alice", "thread-1"))
        .await
        .unwrap();
    assert_eq!(last_text(&out.values), "Your name is Alice.");
    // The agent saw the earlier turn restored from PostgreSQL.
    let seen: Vec<String> = model.requests()[0].messages.iter().map(|m| m.text()).collect();
    assert!(
        seen.iter().any(|t| t == "Remember that my name is Alice."),
        "{seen:?}"
    );
    assert_eq!(out.values.messages.len(), 4);
}
