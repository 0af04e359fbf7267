//! The store is long-term memory across threads: what a user said on one thread is recalled
//! on another of theirs, never for another user; only facts that matter are promoted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{as_user, call, last_text, ns, says, setup, tool_results};
use graphloom_core::store::SearchQuery;
use graphloom_llm::{Reply, ScriptedModel};
use memory_supervisor::RouterMode;
use serde_json::json;
use std::sync::Arc;

fn lookups(prefix: &str) -> Reply {
    let q = json!({"query": "favourite colour"});
    Reply::tool_calls(
        "",
        vec![
            call(&format!("{prefix}-l2"), "l2_search_facts", q.clone()),
            call(&format!("{prefix}-l3"), "l3_search_knowledge", q),
        ],
    )
}

#[tokio::test]
async fn a_fact_saved_on_one_thread_is_recalled_on_another_for_the_same_user_only() {
    let model = ScriptedModel::new([
        lookups("alice"),
        Reply::text("Your favourite colour is teal."),
        lookups("bob"),
        Reply::text("I don't know your favourite colour."),
    ]);
    let s = setup(Arc::new(model), RouterMode::Keywords).await;

    // Thread A: alice says it.
    s.graph
        .invoke(
            says("Remember that my favourite colour is teal."),
            as_user("alice", "alice-monday"),
        )
        .await
        .unwrap();

    // Thread B, a new session of alice's: long-term memory (L3) has it, the new session's
    // facts (L2) do not.
    let b = s
        .graph
        .invoke(
            says("What do you remember about my favourite colour?"),
            as_user("alice", "alice-friday"),
        )
        .await
        .unwrap();
    let r = tool_results(&b.values);
    assert_eq!(r[0].0, "l2_search_facts");
    assert_eq!(r[0].1, r#"{"tier":"L2","found":[]}"#);
    assert_eq!(r[1].0, "l3_search_knowledge");
    assert!(r[1].1.contains("my favourite colour is teal"), "{r:?}");
    assert_eq!(last_text(&b.values), "Your favourite colour is teal.");
    assert_eq!(
        b.values.messages.len(),
        5,
        "thread B does not contain thread A's messages"
    );

    // Thread C: bob asks the same and finds nothing of alice's.
    let c = s
        .graph
        .invoke(
            says("What do you remember about my favourite colour?"),
            as_user("bob", "bob-friday"),
        )
        .await
        .unwrap();
    let r = tool_results(&c.values);
    assert!(
        r.iter()
            .all(|(_, text, status)| status == "success" && text.contains("\"found\":[]")),
        "{r:?}"
    );
}

#[tokio::test]
async fn only_facts_with_a_high_ciar_score_are_promoted_to_long_term_memory() {
    let s = setup(
        Arc::new(ScriptedModel::new(Vec::<Reply>::new())),
        RouterMode::Keywords,
    )
    .await;
    let cfg = as_user("alice", "s1");
    let teal = s
        .graph
        .invoke(says("Remember that my favourite colour is teal."), cfg.clone())
        .await
        .unwrap();
    assert!(last_text(&teal.values).contains("saved to your long-term memory"));
    let pizza = s
        .graph
        .invoke(says("Maybe I'll get pizza tonight, note that."), cfg)
        .await
        .unwrap();
    assert!(last_text(&pizza.values).contains("kept for this session only"));
    let stored: Vec<(String, bool)> = pizza
        .values
        .stored
        .iter()
        .map(|f| (f.content.clone(), f.promoted))
        .collect();
    assert_eq!(
        stored,
        [
            ("my favourite colour is teal".to_owned(), true),
            ("Maybe I'll get pizza tonight".to_owned(), false),
        ]
    );
    let l3 = s
        .store
        .search(&ns(&["memory", "alice", "knowledge"]), SearchQuery::new())
        .await
        .unwrap();
    assert_eq!(l3.len(), 1);
    let l2 = s
        .store
        .search(&ns(&["memory", "alice", "sessions", "s1"]), SearchQuery::new())
        .await
        .unwrap();
    assert_eq!(l2.len(), 2);
    assert!(l2.iter().all(|i| i.item.value["ciar"].is_number()));
}
