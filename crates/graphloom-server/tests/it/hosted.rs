//! `HostedGraph` on compiled graphs: JSON runs, commands, thread state, drawing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::{JsonState, JsonUpdate, NodeOutput, Runtime, StateGraph, StreamMode, END, START};
use graphloom_server::hosted::{
    hosted, HostedGraph, JsonCommand, JsonRunEvent, JsonRunOutput, JsonRunRequest,
};
use serde_json::{json, Value};
use std::sync::Arc;

fn upd(v: Value) -> NodeOutput<JsonState> {
    let u: JsonUpdate = v.as_object().cloned().unwrap().into();
    NodeOutput::Update(u)
}

fn shape() -> JsonState {
    JsonState::from_reducer_names([("log", "append"), ("answer", "last")]).unwrap()
}

/// START -> a -> b -> END, b reads the context's `who`.
fn two_nodes() -> Arc<dyn HostedGraph> {
    let g = StateGraph::with_shape(shape())
        .add_node("a", |_s: Arc<JsonState>, _rt| async {
            Ok(upd(json!({"log": ["a"]})))
        })
        .add_node("b", |_s: Arc<JsonState>, rt: Runtime| async move {
            let who = rt
                .context::<Value>()
                .and_then(|c| c.get("who"))
                .cloned()
                .unwrap_or(Value::Null);
            Ok(upd(json!({"log": ["b"], "answer": who})))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    hosted(g)
}

/// START -> ask (two interrupts) -> END.
fn asking() -> Arc<dyn HostedGraph> {
    let g = StateGraph::with_shape(shape())
        .add_node("ask", |_s: Arc<JsonState>, rt: Runtime| async move {
            let first = rt.interrupt("first?")?;
            let second = rt.interrupt("second?")?;
            Ok(upd(json!({"answer": [first, second]})))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    hosted(g)
}

async fn run(
    g: &Arc<dyn HostedGraph>,
    req: JsonRunRequest,
) -> (Vec<(StreamMode, Vec<String>, Value)>, JsonRunOutput) {
    let mut parts = Vec::new();
    let mut end = None;
    let mut s = g.stream(req);
    while let Some(ev) = s.next().await {
        assert!(end.is_none(), "End must be the last event");
        match ev {
            JsonRunEvent::Part { mode, ns, data } => parts.push((mode, ns, data)),
            JsonRunEvent::End(out) => end = Some(out.unwrap()),
        }
    }
    (parts, end.expect("an End event"))
}

fn req(thread: &str, input: Option<Value>, modes: &[StreamMode]) -> JsonRunRequest {
    JsonRunRequest {
        input,
        thread_id: Some(thread.into()),
        modes: modes.to_vec(),
        ..JsonRunRequest::default()
    }
}

#[tokio::test]
async fn stream_maps_parts_and_end_to_json_and_passes_context() {
    let g = two_nodes();
    let mut r = req(
        "t1",
        Some(json!({"log": ["in"]})),
        &[StreamMode::Values, StreamMode::Updates],
    );
    r.context = Some(json!({"who": "ada"}));
    let (parts, out) = run(&g, r).await;
    let updates: Vec<&Value> = parts
        .iter()
        .filter(|p| p.0 == StreamMode::Updates)
        .map(|p| &p.2)
        .collect();
    assert_eq!(
        updates,
        vec![
            &json!({"a": {"log": ["a"]}}),
            &json!({"b": {"log": ["b"], "answer": "ada"}})
        ]
    );
    let last_values = parts.iter().rev().find(|p| p.0 == StreamMode::Values).unwrap();
    assert_eq!(last_values.2, json!({"log": ["in", "a", "b"], "answer": "ada"}));
    assert!(parts.iter().all(|p| p.1.is_empty()));
    assert_eq!(out.values, json!({"log": ["in", "a", "b"], "answer": "ada"}));
    assert!(!out.interrupted);
    assert!(out.checkpoint.unwrap().checkpoint_id.is_some());
}

#[tokio::test]
async fn resume_by_single_value_then_by_id_map() {
    let g = asking();
    let (parts, out) = run(&g, req("t", Some(json!({})), &[StreamMode::Updates])).await;
    assert!(out.interrupted);
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!("first?"));
    let first_id = out.interrupts[0].id.clone();
    assert_eq!(first_id.len(), 32);
    assert_eq!(
        parts.last().unwrap().2,
        json!({"__interrupt__": [{"id": first_id, "value": "first?"}]})
    );

    // A single value resumes the one pending interrupt.
    let mut r = req("t", None, &[StreamMode::Updates]);
    r.command = Some(JsonCommand {
        resume: Some(json!("yes")),
        ..JsonCommand::default()
    });
    let (_, out) = run(&g, r).await;
    assert!(out.interrupted);
    assert_eq!(out.interrupts[0].value, json!("second?"));
    let second_id = out.interrupts[0].id.clone();

    // An object keyed by interrupt ids resumes by id.
    let mut r = req("t", None, &[StreamMode::Updates]);
    r.command = Some(JsonCommand {
        resume: Some(json!({ second_id.clone(): {"ok": true} })),
        ..JsonCommand::default()
    });
    let (_, out) = run(&g, r).await;
    assert!(!out.interrupted);
    assert_eq!(out.values["answer"], json!(["yes", {"ok": true}]));
}

#[tokio::test]
async fn object_resume_without_id_keys_is_one_value() {
    let g = asking();
    run(&g, req("t", Some(json!({})), &[])).await;
    let mut r = req("t", None, &[]);
    r.command = Some(JsonCommand {
        resume: Some(json!({"approved": true})),
        ..JsonCommand::default()
    });
    let (_, out) = run(&g, r).await;
    assert_eq!(out.interrupts[0].value, json!("second?"));
    let st = g.get_state("t", None).await.unwrap().unwrap();
    assert_eq!(st["interrupts"][0]["value"], json!("second?"));
}

#[tokio::test]
async fn command_update_and_goto_from_json() {
    let g = two_nodes();
    run(&g, req("t", Some(json!({"log": ["in"]})), &[])).await;
    let mut r = req("t", None, &[]);
    r.command = Some(JsonCommand {
        update: Some(json!([["log", ["cmd"]]])),
        goto: vec![json!("b")],
        ..JsonCommand::default()
    });
    let (_, out) = run(&g, r).await;
    assert_eq!(out.values["log"], json!(["in", "a", "b", "cmd", "b"]));

    let mut r = req("t", None, &[]);
    r.command = Some(JsonCommand {
        goto: vec![json!({"node": "a", "input": {"log": []}})],
        ..JsonCommand::default()
    });
    let (_, out) = run(&g, r).await;
    assert_eq!(out.values["log"], json!(["in", "a", "b", "cmd", "b", "a", "b"]));
}

#[tokio::test]
async fn bad_command_ends_the_stream_with_an_error() {
    let g = two_nodes();
    let mut r = req("t", None, &[StreamMode::Values]);
    r.command = Some(JsonCommand {
        update: Some(json!({"nope": 1})),
        ..JsonCommand::default()
    });
    let evs: Vec<JsonRunEvent> = g.stream(r).collect().await;
    assert_eq!(evs.len(), 1);
    assert!(matches!(&evs[0], JsonRunEvent::End(Err(_))));
    let mut r = req("t", None, &[]);
    r.command = Some(JsonCommand {
        goto: vec![json!(3)],
        ..JsonCommand::default()
    });
    let evs: Vec<JsonRunEvent> = g.stream(r).collect().await;
    assert!(matches!(&evs[..], [JsonRunEvent::End(Err(_))]));
}

#[tokio::test]
async fn thread_state_history_and_update_shapes() {
    let g = two_nodes();
    assert_eq!(g.get_state("nobody", None).await.unwrap(), None);
    assert!(g
        .history("nobody", Default::default(), None, None)
        .await
        .unwrap()
        .is_empty());

    run(&g, req("t", Some(json!({"log": ["in"]})), &[])).await;
    let st = g.get_state("t", None).await.unwrap().unwrap();
    assert_eq!(st["values"], json!({"log": ["in", "a", "b"], "answer": null}));
    assert_eq!(st["next"], json!([]));
    assert_eq!(st["tasks"], json!([]));
    assert_eq!(st["interrupts"], json!([]));
    let cp = st["checkpoint_id"].as_str().unwrap().to_owned();
    assert_eq!(
        st["checkpoint"],
        json!({"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cp, "checkpoint_map": null})
    );
    assert_eq!(
        st["parent_checkpoint"]["checkpoint_id"],
        st["parent_checkpoint_id"]
    );
    assert!(st["parent_checkpoint_id"].is_string());
    assert_eq!(st["metadata"]["step"], json!(2));
    assert_eq!(st["metadata"]["source"], json!("loop"));
    assert!(st["created_at"].is_string());

    let hist = g.history("t", Default::default(), None, None).await.unwrap();
    assert_eq!(hist.len(), 4);
    assert_eq!(hist[0]["checkpoint_id"], json!(cp));
    // Older checkpoints list their next tasks in the ThreadState task shape.
    let task = &hist[1]["tasks"][0];
    assert_eq!(hist[1]["next"], json!(["b"]));
    assert_eq!(task["name"], json!("b"));
    for key in [
        "id",
        "path",
        "error",
        "interrupts",
        "checkpoint",
        "state",
        "result",
    ] {
        assert!(task.get(key).is_some(), "task lacks {key}");
    }
    let limited = g.history("t", Default::default(), None, Some(2)).await.unwrap();
    assert_eq!(limited.len(), 2);
    let before = g
        .history("t", Default::default(), Some(cp.clone()), None)
        .await
        .unwrap();
    assert_eq!(before.len(), 3);

    // An old checkpoint by id.
    let old_id = hist[2]["checkpoint_id"].as_str().unwrap();
    let old = g.get_state("t", Some(old_id)).await.unwrap().unwrap();
    assert_eq!(old["values"]["log"], json!(["in"]));
    assert_eq!(g.get_state("t", Some("no-such-checkpoint")).await.unwrap(), None);

    let new_cp = g
        .update_state("t", None, Some(json!({"answer": "edited"})), Some("b"))
        .await
        .unwrap();
    assert_eq!(new_cp.thread_id, "t");
    let st = g.get_state("t", None).await.unwrap().unwrap();
    assert_eq!(st["values"]["answer"], json!("edited"));
    assert_eq!(st["checkpoint_id"], json!(new_cp.checkpoint_id));
    assert_eq!(st["metadata"]["source"], json!("update"));
    assert!(g
        .update_state("t", None, Some(json!({"nope": 1})), None)
        .await
        .is_err());
}

#[tokio::test]
async fn interrupted_thread_state_lists_task_interrupts() {
    let g = asking();
    run(&g, req("t", Some(json!({})), &[])).await;
    let st = g.get_state("t", None).await.unwrap().unwrap();
    assert_eq!(st["next"], json!(["ask"]));
    assert_eq!(st["tasks"][0]["name"], json!("ask"));
    assert_eq!(st["tasks"][0]["interrupts"][0]["value"], json!("first?"));
    assert_eq!(st["interrupts"], st["tasks"][0]["interrupts"]);
}

#[tokio::test]
async fn drawing_lists_nodes_and_edges() {
    let g = StateGraph::with_shape(shape())
        .add_node("a", |_s: Arc<JsonState>, _rt| async { Ok(NodeOutput::None) })
        .add_node("b", |_s: Arc<JsonState>, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_conditional_edges_map("a", |_s: &JsonState| "go", [("go", "b"), ("stop", END)])
        .add_edge("b", END)
        .compile()
        .unwrap();
    let g = hosted(g);
    assert_eq!(g.node_names(), vec!["a".to_string(), "b".to_string()]);
    let d = g.drawing();
    let ids: Vec<&str> = d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["__start__", "a", "b", "__end__"]);
    // LangGraph's `get_graph().to_json()`: the entry is a runnable, the exit an id alone.
    assert_eq!(
        d["nodes"][0],
        json!({"id": "__start__", "type": "runnable", "data": {"id": ["graphloom", "graph", "Node"], "name": "__start__"}})
    );
    assert_eq!(d["nodes"][3], json!({"id": "__end__"}));
    assert_eq!(d["nodes"][1]["type"], json!("runnable"));
    assert_eq!(d["nodes"][1]["data"]["name"], json!("a"));
    let mut edges = d["edges"].as_array().unwrap().clone();
    edges.sort_by_key(|e| e.to_string());
    let mut want = vec![
        // `conditional` only when true, as LangGraph's graph JSON has it.
        json!({"source": "__start__", "target": "a"}),
        // Path-map keys name their edges, as LangGraph's graph JSON does.
        json!({"source": "a", "target": "b", "data": "go", "conditional": true}),
        json!({"source": "a", "target": "__end__", "data": "stop", "conditional": true}),
        json!({"source": "b", "target": "__end__"}),
    ];
    want.sort_by_key(|e| e.to_string());
    assert_eq!(edges, want);
    assert!(g.mermaid().contains("graph TD"));
    let schema = g.state_schema();
    assert!(schema["properties"].get("log").is_some());
    assert_eq!(g.input_schema(), schema);
    assert_eq!(g.output_schema(), schema);
}

#[tokio::test]
async fn factory_compiles_against_server_deps() {
    use graphloom_core::checkpoint::DynCheckpointer;
    use graphloom_core::store::DynStore;
    use graphloom_server::hosted::{factory, GraphDeps};
    let f = factory(|deps: &GraphDeps| {
        StateGraph::with_shape(shape())
            .add_node("a", |_s: Arc<JsonState>, _rt| async {
                Ok(upd(json!({"log": ["a"]})))
            })
            .add_edge(START, "a")
            .add_edge("a", END)
            .checkpointer_dyn(Arc::clone(&deps.checkpointer))
            .store_dyn(Arc::clone(&deps.store))
            .compile()
    });
    let deps = GraphDeps::new(
        Arc::new(InMemorySaver::new()) as Arc<dyn DynCheckpointer>,
        Arc::new(graphloom_core::InMemoryStore::new()) as Arc<dyn DynStore>,
    );
    let g = f(&deps).unwrap();
    run(&g, req("t", Some(json!({})), &[])).await;
    let st = g.get_state("t", None).await.unwrap().unwrap();
    assert_eq!(st["values"]["log"], json!(["a"]));
}
