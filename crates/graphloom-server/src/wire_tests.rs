//! Tests of the wire encoding of real runs of hosted graphs.
use crate::host::{hosted, HostedGraph, JsonCommand, JsonRunRequest};
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::Error;
use graphloom_core::{JsonState, JsonUpdate, NodeError, NodeOutput, Runtime, StateGraph, END, START};
use graphloom_server_wire::stream::*;
use serde_json::{json, Value};
use std::sync::Arc;

fn upd(v: Value) -> NodeOutput<JsonState> {
    let u: JsonUpdate = v.as_object().cloned().unwrap().into();
    NodeOutput::Update(u)
}

fn shape() -> JsonState {
    JsonState::from_reducer_names([("log", "append"), ("answer", "last")]).unwrap()
}

fn modes(m: &[&str]) -> WireModes {
    parse_stream_modes(&m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap()
}

/// Run `g` and encode its events for wire modes `m`.
async fn wire(
    g: &Arc<dyn HostedGraph>,
    m: &[&str],
    input: Option<Value>,
    command: Option<JsonCommand>,
    subgraphs: bool,
) -> Vec<(String, Value)> {
    let wm = modes(m);
    let req = JsonRunRequest {
        input,
        command,
        thread_id: Some("t".into()),
        modes: wm.core_modes(),
        subgraphs,
        run_id: Some("run-1".into()),
        ..JsonRunRequest::default()
    };
    let mut enc = WireEncoder::new(
        wm,
        json!({"run_id": "run-1", "thread_id": "t", "graph_id": "g", "assistant_id": "a1"}),
    );
    let mut out = Vec::new();
    let mut s = g.stream(req);
    while let Some(ev) = s.next().await {
        out.extend(enc.encode(ev));
    }
    out
}

fn names(evs: &[(String, Value)]) -> Vec<&str> {
    evs.iter().map(|(n, _)| n.as_str()).collect()
}

fn two_nodes() -> Arc<dyn HostedGraph> {
    hosted(
        StateGraph::with_shape(shape())
            .add_node("a", |_s: Arc<JsonState>, _rt| async {
                Ok(upd(json!({"log": ["a"]})))
            })
            .add_node("b", |_s: Arc<JsonState>, _rt| async {
                Ok(upd(json!({"log": ["b"]})))
            })
            .add_edge(START, "a")
            .add_edge("a", "b")
            .add_edge("b", END)
            .checkpointer(InMemorySaver::new())
            .compile()
            .unwrap(),
    )
}

fn asking() -> Arc<dyn HostedGraph> {
    hosted(
        StateGraph::with_shape(shape())
            .add_node("ask", |_s: Arc<JsonState>, rt: Runtime| async move {
                let v = rt.interrupt("ok?")?;
                Ok(upd(json!({"answer": v})))
            })
            .add_edge(START, "ask")
            .add_edge("ask", END)
            .checkpointer(InMemorySaver::new())
            .compile()
            .unwrap(),
    )
}

#[tokio::test]
async fn values_and_updates_in_order_and_nothing_at_a_good_end() {
    let evs = wire(
        &two_nodes(),
        &["values", "updates"],
        Some(json!({"log": ["in"]})),
        None,
        false,
    )
    .await;
    assert_eq!(
        evs,
        vec![
            ("values".into(), json!({"log": ["in"], "answer": null})),
            ("updates".into(), json!({"a": {"log": ["a"]}})),
            ("values".into(), json!({"log": ["in", "a"], "answer": null})),
            ("updates".into(), json!({"b": {"log": ["b"]}})),
            ("values".into(), json!({"log": ["in", "a", "b"], "answer": null})),
        ]
    );
    let only_values = wire(&two_nodes(), &["values"], Some(json!({})), None, false).await;
    assert_eq!(names(&only_values), vec!["values"; 3]);
}

#[tokio::test]
async fn interrupts_as_updates_or_as_values() {
    let g = asking();
    let evs = wire(&g, &["updates"], Some(json!({})), None, false).await;
    let (name, data) = evs.last().unwrap();
    assert_eq!(name, "updates");
    assert_eq!(data["__interrupt__"][0]["value"], json!("ok?"));
    assert_eq!(data["__interrupt__"][0]["id"].as_str().unwrap().len(), 32);

    let g = asking();
    let evs = wire(&g, &["values"], Some(json!({})), None, false).await;
    assert_eq!(names(&evs), vec!["values", "values"]);
    assert_eq!(evs[1].1["__interrupt__"][0]["value"], json!("ok?"));

    // Resumed by a command: the run finishes and its last values carry the answer.
    let cmd = JsonCommand {
        resume: Some(json!("yes")),
        ..JsonCommand::default()
    };
    let evs = wire(&g, &["values"], None, Some(cmd), false).await;
    assert_eq!(evs.last().unwrap().1["answer"], json!("yes"));
    assert!(evs.iter().all(|(_, d)| d.get("__interrupt__").is_none()));
}

#[tokio::test]
async fn subgraph_parts_carry_their_namespace_in_the_name() {
    let child = StateGraph::with_shape(JsonState::from_reducer_names([("log", "append")]).unwrap())
        .add_node("inner", |_s: Arc<JsonState>, _rt| async {
            Ok(upd(json!({"log": ["inner"]})))
        })
        .add_edge(START, "inner")
        .add_edge("inner", END)
        .compile()
        .unwrap();
    let g = hosted(
        StateGraph::with_shape(shape())
            .add_subgraph_shared("sub", child)
            .add_edge(START, "sub")
            .add_edge("sub", END)
            .checkpointer(InMemorySaver::new())
            .compile()
            .unwrap(),
    );
    let evs = wire(&g, &["updates"], Some(json!({})), None, true).await;
    let sub: Vec<&(String, Value)> = evs
        .iter()
        .filter(|(n, _)| n.starts_with("updates|sub:"))
        .collect();
    assert_eq!(sub.len(), 1, "{evs:?}");
    assert_eq!(sub[0].1, json!({"inner": {"log": ["inner"]}}));
    assert!(evs.iter().any(|(n, d)| n == "updates" && d.get("sub").is_some()));
    // Without subgraphs only the root's events.
    let evs = wire(&g, &["updates"], Some(json!({})), None, false).await;
    assert_eq!(names(&evs), vec!["updates"]);
}

fn chatty() -> Arc<dyn HostedGraph> {
    hosted(
        StateGraph::with_shape(shape())
            .add_node("talk", |_s: Arc<JsonState>, rt: Runtime| async move {
                rt.emit_message(json!({"type": "AIMessageChunk", "id": "m1", "content": "Hel",
                    "tool_call_chunks": [{"type": "tool_call_chunk", "index": 0, "id": "c1", "name": "f", "args": "{\"a\": "}],
                    "usage_metadata": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}}));
                rt.emit_message(json!({"type": "AIMessageChunk", "id": "m1", "content": "lo",
                    "tool_call_chunks": [{"type": "tool_call_chunk", "index": 0, "id": null, "name": null, "args": "1}"}],
                    "usage_metadata": {"input_tokens": 0, "output_tokens": 2, "total_tokens": 2}}));
                rt.emit_message(json!({"type": "tool", "id": "m2", "content": "done", "tool_call_id": "c1"}));
                rt.write(json!({"progress": 1}));
                Ok(upd(json!({"log": ["talked"]})))
            })
            .add_edge(START, "talk")
            .add_edge("talk", END)
            .checkpointer(InMemorySaver::new())
            .compile()
            .unwrap(),
    )
}

#[tokio::test]
async fn messages_tuple_sends_chunks_with_metadata() {
    let evs = wire(&chatty(), &["messages-tuple"], Some(json!({})), None, false).await;
    assert_eq!(names(&evs), vec!["messages"; 3]);
    let [chunk, meta] = evs[0].1.as_array().unwrap().as_slice() else {
        panic!("not a pair")
    };
    assert_eq!(chunk["content"], json!("Hel"));
    assert_eq!(meta["langgraph_node"], json!("talk"));
    assert_eq!(meta["graph_id"], json!("g"));
    assert_eq!(meta["assistant_id"], json!("a1"));
    assert_eq!(meta["run_id"], json!("run-1"));
    assert_eq!(meta["checkpoint_ns"], meta["langgraph_checkpoint_ns"]);
    assert_eq!(evs[1].1[0]["content"], json!("lo"), "tuple mode sends deltas");
}

#[tokio::test]
async fn messages_mode_accumulates() {
    let evs = wire(&chatty(), &["messages"], Some(json!({})), None, false).await;
    assert_eq!(
        names(&evs),
        vec![
            "messages/metadata",
            "messages/partial",
            "messages/partial",
            "messages/metadata",
            "messages/complete"
        ]
    );
    assert_eq!(evs[0].1["m1"]["metadata"]["langgraph_node"], json!("talk"));
    let first = &evs[1].1[0];
    assert_eq!(first["type"], json!("ai"));
    assert_eq!(first["content"], json!("Hel"));
    assert!(first.get("tool_call_chunks").is_none());
    assert_eq!(
        first["tool_calls"][0]["args"],
        json!({}),
        "cut-off args parse partially"
    );
    let second = &evs[2].1[0];
    assert_eq!(second["id"], json!("m1"));
    assert_eq!(second["content"], json!("Hello"));
    assert_eq!(
        second["tool_calls"],
        json!([{"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}])
    );
    assert_eq!(second["invalid_tool_calls"], json!([]));
    assert_eq!(
        second["usage_metadata"],
        json!({"input_tokens": 3, "output_tokens": 3, "total_tokens": 6})
    );
    assert_eq!(evs[3].1["m2"]["metadata"]["langgraph_node"], json!("talk"));
    assert_eq!(
        evs[4].1,
        json!([{"type": "tool", "id": "m2", "content": "done", "tool_call_id": "c1"}])
    );

    // Both message modes at once, plus custom.
    let evs = wire(
        &chatty(),
        &["messages", "messages-tuple", "custom"],
        Some(json!({})),
        None,
        false,
    )
    .await;
    assert_eq!(evs.iter().filter(|(n, _)| n == "messages").count(), 3);
    assert_eq!(evs.iter().filter(|(n, _)| n == "messages/partial").count(), 2);
    assert_eq!(
        evs.last().unwrap(),
        &("custom".to_owned(), json!({"progress": 1}))
    );
}

#[tokio::test]
async fn events_mode_sends_the_runs_astream_events_as_langgraph_server_does() {
    let evs = wire(&chatty(), &["events"], Some(json!({})), None, false).await;
    assert!(evs.iter().all(|(n, _)| n == "events"));
    let kinds: Vec<(&str, &str)> = evs
        .iter()
        .map(|(_, d)| (d["event"].as_str().unwrap(), d["name"].as_str().unwrap_or("")))
        .collect();
    // The graph's run is named after the graph id and sends no `on_chain_stream`; what a
    // node writes itself (messages, custom) is no `astream_events` event.
    assert_eq!(
        kinds,
        [
            ("on_chain_start", "g"),
            ("on_chain_start", "talk"),
            ("on_chain_stream", "talk"),
            ("on_chain_end", "talk"),
            ("on_chain_end", "g"),
        ]
    );
    let (root, talk) = (&evs[0].1, &evs[1].1);
    assert_eq!(root["run_id"], json!("run-1"));
    assert_eq!(root["parent_ids"], json!([]));
    assert_eq!(talk["parent_ids"], json!(["run-1"]));
    assert_eq!(talk["tags"], json!(["graph:step:1"]));
    for (_, d) in &evs {
        let meta = &d["metadata"];
        for (k, v) in [
            ("run_id", "run-1"),
            ("thread_id", "t"),
            ("graph_id", "g"),
            ("assistant_id", "a1"),
        ] {
            assert_eq!(meta[k], json!(v), "{k} in {d}");
        }
    }
    assert_eq!(talk["metadata"]["langgraph_node"], json!("talk"));
    assert_eq!(evs[3].1["data"]["output"], json!({"log": ["talked"]}));
    assert_eq!(evs[4].1["data"]["output"]["log"], json!(["talked"]));
}

#[tokio::test]
async fn a_failed_run_ends_with_an_error_event() {
    let g = hosted(
        StateGraph::with_shape(shape())
            .add_node("boom", |_s: Arc<JsonState>, _rt| async {
                Err::<NodeOutput<JsonState>, _>(NodeError::fatal("kaput"))
            })
            .add_edge(START, "boom")
            .add_edge("boom", END)
            .checkpointer(InMemorySaver::new())
            .compile()
            .unwrap(),
    );
    let evs = wire(&g, &["values"], Some(json!({})), None, false).await;
    let (name, data) = evs.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["error"], json!("NodeError"));
    assert!(data["message"].as_str().unwrap().contains("kaput"));
    assert_eq!(
        error_json(&Error::RecursionLimit { limit: 3 })["error"],
        json!("GraphRecursionError")
    );
    // A cancelled run's stream just ends; any other failure ends with its error.
    assert!(WireEncoder::end(&Err(Error::Cancelled)).is_empty());
    let timed_out = WireEncoder::end(&Err(Error::RunTimeout { after_ms: 5 }));
    assert_eq!(timed_out.len(), 1);
    assert_eq!(timed_out[0].1["error"], json!("TimeoutError"));
}
