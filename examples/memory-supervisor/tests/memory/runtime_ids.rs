//! Ids come from the runtime, never from the model (ADR-007 §2.1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{as_user, call, ns, says, setup, tool_results};
use graphloom_core::store::{ListNamespaces, SearchQuery};
use graphloom_core::{RunConfig, RunInput};
use graphloom_llm::{Reply, ScriptedModel};
use memory_supervisor::RouterMode;
use serde_json::json;
use std::sync::Arc;

#[tokio::test]
async fn a_model_supplied_session_id_is_ignored() {
    let model = ScriptedModel::new([
        // The model tries to write into another user's session.
        Reply::tool_calls(
            "",
            vec![call(
                "c1",
                "memory_store",
                json!({
                    "content": "I am allergic to peanuts",
                    "session_id": "victim-session",
                    "user_id": "mallory",
                    "thread_id": "someone-elses-thread",
                }),
            )],
        ),
        Reply::text("Got it, no peanuts."),
    ]);
    let s = setup(Arc::new(model.clone()), RouterMode::Keywords).await;
    let out = s
        .graph
        .invoke(
            says("I'm allergic to peanuts, by the way."),
            as_user("alice", "session-a"),
        )
        .await
        .unwrap();
    let results = tool_results(&out.values);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].2, "success",
        "the injected names were dropped, not rejected: {results:?}"
    );
    assert!(results[0].1.contains("\"L3\""), "promoted: {}", results[0].1);

    // Stored under the runtime's ids only.
    let spaces = s
        .store
        .list_namespaces(ListNamespaces::new().prefix(["memory"]))
        .await
        .unwrap();
    assert_eq!(
        spaces,
        [
            ns(&["memory", "alice", "knowledge"]),
            ns(&["memory", "alice", "sessions", "session-a"]),
        ]
    );
    let facts = s
        .store
        .search(
            &ns(&["memory", "alice", "sessions", "session-a"]),
            SearchQuery::new(),
        )
        .await
        .unwrap();
    assert_eq!(facts[0].item.value["content"], "I am allergic to peanuts");
    assert_eq!(facts[0].item.value["session_id"], "session-a");

    // And the model was never offered an id parameter.
    for spec in &model.requests()[0].options.tools {
        let props = &spec.parameters["properties"];
        for id in ["user_id", "session_id", "thread_id"] {
            assert!(props.get(id).is_none(), "{} offers {id}", spec.name);
        }
    }
}

#[tokio::test]
async fn without_a_user_in_the_runtime_the_memory_tools_refuse() {
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![call(
                "c1",
                "memory_query",
                json!({"query": "anything", "user_id": "alice"}),
            )],
        ),
        Reply::text("I can't access memory right now."),
    ]);
    let s = setup(Arc::new(model), RouterMode::Keywords).await;
    // No MemoryContext and no user_id in the input: the model naming a user does not help.
    let out = s
        .graph
        .invoke(says("Tell me about myself"), RunConfig::thread("anon"))
        .await
        .unwrap();
    let results = tool_results(&out.values);
    assert_eq!(results[0].2, "error");
    assert!(results[0].1.contains("no user for this run"), "{results:?}");
    let spaces = s.store.list_namespaces(ListNamespaces::new()).await.unwrap();
    assert!(spaces.is_empty(), "{spaces:?}");
}

#[tokio::test]
async fn a_hosted_run_takes_the_ids_from_the_callers_input() {
    // The hosting contract: graph(checkpointer, store, model) and a JSON input.
    let (url, _db) = graphloom_postgres::testing::test_database().await;
    let (saver, store) = memory_supervisor::open_database(&memory_supervisor::Database::Postgres(url))
        .await
        .unwrap();
    let graph = memory_supervisor::graph(
        saver,
        Arc::clone(&store),
        memory_supervisor::default_model().unwrap(),
    )
    .unwrap();
    assert_eq!(memory_supervisor::GRAPH_ID, "memory_supervisor");
    let out = graph
        .invoke_input(
            RunInput::Json(memory_supervisor::sample_input()),
            RunConfig::thread("hosted"),
        )
        .await
        .unwrap();
    assert_eq!(out.values.handoffs.to_vec(), ["memory_writer", "FINISH"]);
    assert_eq!(out.values.stored.len(), 1);
    let item = store
        .get(
            &ns(&["memory", "alice", "knowledge"]),
            "my-favourite-colour-is-teal",
        )
        .await
        .unwrap();
    assert!(item.is_some());
}
