//! The supervisor routes each turn by intent to an isolated sub-graph, which hands control
//! back; each model-driven sub-graph is offered only the tools of its mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{as_user, last_text, says, setup};
use graphloom_llm::{Reply, ScriptedModel};
use memory_supervisor::{RouterMode, ASSISTANT, MEMORY_WRITER, RECALL_AGENT};
use serde_json::json;
use std::sync::Arc;

fn tool_names(req: &graphloom_llm::RecordedRequest) -> Vec<String> {
    let mut v: Vec<String> = req.options.tools.iter().map(|t| t.name.clone()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn each_intent_goes_to_its_sub_graph_and_control_comes_back() {
    let model = ScriptedModel::new([
        Reply::text("You asked me to remember that your favourite colour is teal."),
        Reply::text("Here is a joke about databases: they never forget."),
    ]);
    let s = setup(Arc::new(model.clone()), RouterMode::Keywords).await;
    let cfg = as_user("alice", "t1");

    let out = s
        .graph
        .invoke(says("Remember that my favourite colour is teal."), cfg.clone())
        .await
        .unwrap();
    assert_eq!(out.values.intent.as_deref(), Some("store"));
    assert_eq!(out.values.handoffs.to_vec(), [MEMORY_WRITER, "FINISH"]);
    assert!(last_text(&out.values).starts_with("Noted: \"my favourite colour is teal\""));
    assert_eq!(model.calls(), 0, "the memory writer needs no model");

    let out = s
        .graph
        .invoke(says("What do you remember about me?"), cfg.clone())
        .await
        .unwrap();
    assert_eq!(out.values.intent.as_deref(), Some("recall"));
    let out = s.graph.invoke(says("Tell me a joke"), cfg).await.unwrap();
    assert_eq!(out.values.intent.as_deref(), Some("chat"));
    assert_eq!(
        out.values.handoffs.to_vec(),
        [
            MEMORY_WRITER,
            "FINISH",
            RECALL_AGENT,
            "FINISH",
            ASSISTANT,
            "FINISH"
        ]
    );
    assert_eq!(
        last_text(&out.values),
        "Here is a joke about databases: they never forget."
    );

    // Retrieval mode sees the granular tools, reasoning mode the unified ones.
    let reqs = model.requests();
    assert_eq!(
        tool_names(&reqs[0]),
        ["l1_working_memory", "l2_search_facts", "l3_search_knowledge"]
    );
    assert_eq!(
        tool_names(&reqs[1]),
        ["get_context_block", "memory_query", "memory_store"]
    );
    // Each agent sees the whole conversation of the thread.
    assert_eq!(
        reqs[1].messages.len(),
        1 + 5,
        "system prompt and five earlier messages"
    );
}

#[tokio::test]
async fn a_model_router_answers_with_structured_output_and_falls_back_to_keywords() {
    let model = ScriptedModel::new([
        // Turn 1: the router picks the recall agent, which answers; the router finishes.
        Reply::json(json!({"next": RECALL_AGENT, "reason": "a question about memory"})),
        Reply::text("I don't remember anything about that yet."),
        Reply::json(json!({"next": "FINISH", "reason": "answered"})),
        // Turn 2: garbage, then an agent that does not exist: keywords decide both times.
        Reply::text("hmm, let me think"),
        Reply::json(json!({"next": "root_shell", "reason": "trust me"})),
    ]);
    let s = setup(Arc::new(model.clone()), RouterMode::Model).await;
    let cfg = as_user("alice", "t2");
    let out = s
        .graph
        .invoke(says("Do you remember my favourite colour?"), cfg.clone())
        .await
        .unwrap();
    assert_eq!(out.values.handoffs.to_vec(), [RECALL_AGENT, "FINISH"]);
    let out = s
        .graph
        .invoke(says("Remember that I am vegetarian."), cfg)
        .await
        .unwrap();
    assert_eq!(
        out.values.handoffs.to_vec(),
        [RECALL_AGENT, "FINISH", MEMORY_WRITER, "FINISH"],
        "garbage → keywords → memory_writer; unknown agent → keywords → FINISH"
    );
    assert!(last_text(&out.values).contains("I am vegetarian"));
    let reqs = model.requests();
    let router_req = &reqs[0];
    assert!(router_req.options.response_format.is_some(), "structured output");
    let prompt = router_req.messages[0].text();
    assert!(
        prompt.contains("memory_writer") && prompt.contains("FINISH"),
        "{prompt}"
    );
    assert!(
        reqs[1].options.response_format.is_none(),
        "the agent call is a normal chat call"
    );
}
