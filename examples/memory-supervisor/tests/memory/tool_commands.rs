//! The memory tools answer with a `ToolCommand`: besides its tool message, `memory_store`
//! appends the fact to the agent's `stored`, and the searches append their hits to
//! `retrieved`; the hits of parallel searches of one message are joined in call order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{as_user, call, says, setup, tool_results};
use graphloom_llm::{Reply, ScriptedModel};
use memory_supervisor::{RouterMode, Tier};
use serde_json::json;
use std::sync::Arc;

#[tokio::test]
async fn searches_record_their_hits_and_memory_store_its_fact_in_the_state() {
    let q = json!({"query": "favourite colour"});
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![
                call("first", "l3_search_knowledge", q.clone()),
                call("second", "l2_search_facts", q),
            ],
        ),
        Reply::text("Your favourite colour is teal."),
    ]);
    let s = setup(Arc::new(model), RouterMode::Keywords).await;
    let cfg = as_user("alice", "c1");
    let first = s
        .graph
        .invoke(says("Remember that my favourite colour is teal."), cfg.clone())
        .await
        .unwrap();
    let before = first.values.retrieved.len();
    let out = s
        .graph
        .invoke(says("What do you remember about my favourite colour?"), cfg)
        .await
        .unwrap();
    let r = tool_results(&out.values);
    assert!(r.iter().all(|(_, _, status)| status == "success"), "{r:?}");
    let new: Vec<(Tier, String)> = out
        .values
        .retrieved
        .iter()
        .skip(before)
        .map(|h| (h.tier, h.content.clone()))
        .collect();
    assert_eq!(
        new,
        [
            (Tier::L3, "my favourite colour is teal".to_owned()),
            (Tier::L2, "my favourite colour is teal".to_owned())
        ],
        "the L3 call came first in the message"
    );

    // memory_store run by an agent on its own: its fact lands in `stored`.
    let model = ScriptedModel::new([
        Reply::tool_calls(
            "",
            vec![call("s1", "memory_store", json!({"content": "I live in Lisbon"}))],
        ),
        Reply::text("Noted."),
    ]);
    let agent = memory_supervisor::agents::react_agent(
        "assistant",
        Arc::new(model),
        memory_supervisor::tools::unified_tools(),
        memory_supervisor::agents::ASSISTANT_PROMPT,
    )
    .unwrap();
    let out = agent
        .invoke(
            says("I live in Lisbon."),
            as_user("alice", "c2").store(Arc::clone(&s.store)),
        )
        .await
        .unwrap();
    let stored: Vec<&str> = out.values.stored.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(stored, ["I live in Lisbon"]);
    assert_eq!(tool_results(&out.values)[0].2, "success");
}
