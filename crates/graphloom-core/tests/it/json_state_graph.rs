//! A graph over the dynamic JSON state: parallel branches, a join, history, a second run.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::{json, Value};
use std::sync::Arc;

fn upd(v: Value) -> JsonUpdate {
    v.as_object().cloned().unwrap().into()
}

#[tokio::test]
async fn json_graph_runs_parallel_branches_and_join() {
    let shape = JsonState::from_reducer_names([("log", "append"), ("n", "add")]).unwrap();
    let g = StateGraph::with_shape(shape)
        .add_node("a", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"log": ["a"], "n": 1}))))
        })
        .add_node("b", |_s: Arc<JsonState>, _rt| async {
            Ok(NodeOutput::Update(upd(json!({"log": ["b"], "n": 2}))))
        })
        .add_node("c", |s: Arc<JsonState>, _rt| async move {
            let n = s.get("n").unwrap();
            Ok(NodeOutput::Update(upd(json!({"log": [format!("c saw {n}")]}))))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_join(["a", "b"], "c")
        .add_edge("c", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let out = g
        .invoke_input(RunInput::Json(json!({"log": ["start"]})), RunConfig::thread("t"))
        .await
        .unwrap();
    assert_eq!(out.values.get("log"), Some(json!(["start", "a", "b", "c saw 3"])));
    let hist = g
        .get_state_history(&RunConfig::thread("t"), HistoryQuery::default())
        .await
        .unwrap();
    let steps: Vec<i64> = hist.iter().map(|s| s.metadata.as_ref().unwrap().step).collect();
    assert_eq!(steps, vec![2, 1, 0, -1]);
    assert_eq!(hist[3].next, vec!["__start__".to_string()]);
    assert_eq!(hist[2].next, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(hist[1].next, vec!["c".to_string()]);
    assert!(hist[0].next.is_empty());
    // second run on the same thread appends
    let out = g
        .invoke_input(RunInput::Json(json!({"log": ["again"]})), RunConfig::thread("t"))
        .await
        .unwrap();
    assert_eq!(out.values.get("log").unwrap().as_array().unwrap().len(), 8);
}
