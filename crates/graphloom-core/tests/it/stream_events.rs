//! `stream_events`: LangChain's `astream_events` (v2) events of a graph, its nodes and a
//! subgraph, in LangGraph's order and nesting (`parent_ids`), with its metadata, and
//! LangChain's include/exclude filters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Num {
    x: i64,
}

/// parent: START -> child (a subgraph: START -> inc -> END) -> double -> END.
fn graph() -> CompiledGraph<Num> {
    let child = StateGraph::<Num>::new()
        .add_node("inc", |s: Arc<Num>, _rt| async move {
            Ok(NumUpdate::new().x(s.x + 1))
        })
        .add_edge(START, "inc")
        .add_edge("inc", END)
        .compile()
        .unwrap();
    StateGraph::<Num>::new()
        .add_subgraph(
            "child",
            child,
            |s: &Num| NumUpdate::new().x(s.x),
            |c: &Num| NumUpdate::new().x(c.x),
        )
        .add_node("double", |s: Arc<Num>, _rt| async move {
            Ok(NumUpdate::new().x(s.x * 2))
        })
        .add_edge(START, "child")
        .add_edge("child", "double")
        .add_edge("double", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

/// One run of `g` on thread `t1` (a fresh graph each time: steps count on per thread).
async fn collect(g: &CompiledGraph<Num>, filter: EventFilter) -> Vec<StreamEvent> {
    let cfg = RunConfig::thread("t1").run_id("run-1");
    let mut s = g.stream_events(RunInput::Update(NumUpdate::new().x(1)), cfg, filter);
    let mut out = Vec::new();
    while let Some(ev) = tokio::time::timeout(std::time::Duration::from_secs(10), s.next())
        .await
        .expect("the event stream stalled")
    {
        out.push(ev.unwrap());
    }
    out
}

fn label(e: &StreamEvent) -> String {
    format!("{} {}", e.event.as_str(), e.name)
}

#[tokio::test]
async fn a_graph_with_a_subgraph_reports_its_events_in_langgraphs_order_and_nesting() {
    let events = collect(&graph(), EventFilter::all()).await;
    let labels: Vec<String> = events.iter().map(label).collect();
    assert_eq!(
        labels,
        [
            "on_chain_start LangGraph",
            "on_chain_start child",
            "on_chain_start LangGraph",
            "on_chain_start inc",
            "on_chain_stream inc",
            "on_chain_end inc",
            "on_chain_end LangGraph",
            "on_chain_stream child",
            "on_chain_end child",
            "on_chain_stream LangGraph",
            "on_chain_start double",
            "on_chain_stream double",
            "on_chain_end double",
            "on_chain_stream LangGraph",
            "on_chain_end LangGraph",
        ]
    );
    let root = &events[0];
    let child = &events[1];
    let sub = &events[2];
    let inc = &events[3];
    // The root run is the run itself; every other event has an id of its own.
    assert_eq!(root.run_id, "run-1");
    assert!(root.parent_ids.is_empty());
    assert_eq!(child.parent_ids, ["run-1"]);
    assert_eq!(sub.parent_ids, vec!["run-1".to_owned(), child.run_id.clone()]);
    assert_eq!(
        inc.parent_ids,
        vec!["run-1".to_owned(), child.run_id.clone(), sub.run_id.clone()]
    );
    let ids: std::collections::BTreeSet<&str> = [root, child, sub, inc]
        .iter()
        .map(|e| e.run_id.as_str())
        .collect();
    assert_eq!(ids.len(), 4, "each run has its own id");
    // Stream and end events of a run carry its start's id.
    assert_eq!(events[5].run_id, inc.run_id);
    assert_eq!(events[6].run_id, sub.run_id);
    assert_eq!(events[14].run_id, "run-1");

    // Tags: nodes by step, the subgraph as what its node calls, none on the root.
    assert!(root.tags.is_empty());
    assert_eq!(child.tags, ["graph:step:1"]);
    assert_eq!(sub.tags, ["seq:step:1"]);
    assert_eq!(inc.tags, ["graph:step:1"]);
    assert_eq!(events[10].tags, ["graph:step:2"]);

    // Metadata: the thread on the root; the node's place on its events; inside the
    // subgraph, its namespace as `checkpoint_ns`.
    assert_eq!(root.metadata["thread_id"], "t1");
    assert!(root.metadata.get("langgraph_node").is_none());
    let m = &child.metadata;
    assert_eq!(m["thread_id"], "t1");
    assert_eq!(m["langgraph_node"], "child");
    assert_eq!(m["langgraph_step"], 1);
    assert_eq!(m["langgraph_triggers"], json!(["branch:to:child"]));
    assert_eq!(m["langgraph_path"], json!(["__pregel_pull", "child"]));
    let child_ns = m["langgraph_checkpoint_ns"].as_str().unwrap().to_owned();
    assert!(child_ns.starts_with("child:"), "{child_ns}");
    assert!(m.get("checkpoint_ns").is_none());
    assert_eq!(sub.metadata["checkpoint_ns"], json!(child_ns));
    assert_eq!(inc.metadata["checkpoint_ns"], json!(child_ns));
    assert_eq!(inc.metadata["langgraph_node"], "inc");
    let inc_ns = inc.metadata["langgraph_checkpoint_ns"].as_str().unwrap();
    assert!(inc_ns.starts_with(&format!("{child_ns}|inc:")), "{inc_ns}");

    // Data: inputs at starts, node outputs as chunks, the graph's chunks as {node: update},
    // outputs with inputs at ends (the root's end has only its output).
    assert_eq!(root.data.input, Some(json!({"x": 1})));
    assert_eq!(child.data.input, Some(json!({"x": 1})));
    assert_eq!(events[4].data.chunk, Some(json!({"x": 2})));
    assert_eq!(events[5].data.output, Some(json!({"x": 2})));
    assert_eq!(events[5].data.input, Some(json!({"x": 1})));
    assert_eq!(events[9].data.chunk, Some(json!({"child": {"x": 2}})));
    assert_eq!(events[13].data.chunk, Some(json!({"double": {"x": 4}})));
    assert_eq!(events[14].data.output, Some(json!({"x": 4})));
    assert_eq!(events[14].data.input, None);
}

#[tokio::test]
async fn events_serialise_in_langchains_shape_and_key_order() {
    let events = collect(&graph(), EventFilter::all()).await;
    let keys = |e: &StreamEvent| -> Vec<String> {
        let text = serde_json::to_string(e).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        // serde_json::Map sorts keys; read the order from the text instead.
        let mut ks: Vec<(usize, String)> = v
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (text.find(&format!("\"{k}\":")).unwrap(), k.clone()))
            .collect();
        ks.sort();
        ks.into_iter().map(|(_, k)| k).collect()
    };
    let start = [
        "event",
        "data",
        "name",
        "tags",
        "run_id",
        "metadata",
        "parent_ids",
    ];
    let stream = [
        "event",
        "run_id",
        "name",
        "tags",
        "metadata",
        "data",
        "parent_ids",
    ];
    let end = [
        "event",
        "data",
        "run_id",
        "name",
        "tags",
        "metadata",
        "parent_ids",
    ];
    assert_eq!(keys(&events[0]), start);
    assert_eq!(keys(&events[4]), stream);
    assert_eq!(keys(&events[5]), end);
    let end_json = serde_json::to_string(&events[5]).unwrap();
    assert!(
        end_json.contains(r#""data":{"output":{"x":2},"input":{"x":1}}"#),
        "{end_json}"
    );
    // And back: a client can read them as typed events.
    let back: StreamEvent = serde_json::from_str(&end_json).unwrap();
    assert_eq!(back, events[5]);
}

#[tokio::test]
async fn filters_keep_and_drop_events_by_name_type_and_tag() {
    let only_inc = collect(&graph(), EventFilter::all().include_name("inc")).await;
    assert_eq!(
        only_inc.iter().map(label).collect::<Vec<_>>(),
        ["on_chain_start inc", "on_chain_stream inc", "on_chain_end inc"]
    );
    let step_two = collect(&graph(), EventFilter::all().include_tag("graph:step:2")).await;
    assert_eq!(
        step_two.iter().map(label).collect::<Vec<_>>(),
        [
            "on_chain_start double",
            "on_chain_stream double",
            "on_chain_end double"
        ]
    );
    let no_graphs = collect(
        &graph(),
        EventFilter::all()
            .include_type(RunType::Chain)
            .exclude_name("LangGraph"),
    )
    .await;
    assert!(!no_graphs.is_empty());
    assert!(no_graphs.iter().all(|e| e.name != "LangGraph"));
    assert_eq!(
        no_graphs.len(),
        9,
        "{:?}",
        no_graphs.iter().map(label).collect::<Vec<_>>()
    );
    let no_tools = collect(&graph(), EventFilter::all().include_type(RunType::Tool)).await;
    assert!(no_tools.is_empty());
    let untagged = collect(&graph(), EventFilter::all().exclude_tag("graph:step:1")).await;
    assert!(untagged.iter().all(|e| e.name != "child" && e.name != "inc"));
    assert!(untagged.iter().any(|e| e.name == "double"));
}

#[tokio::test]
async fn a_failing_node_reports_no_end_and_the_stream_ends_with_the_error() {
    let g = StateGraph::<Num>::new()
        .add_node("bad", |_s: Arc<Num>, _rt| async move {
            Err::<NumUpdate, _>(NodeError::fatal("nope"))
        })
        .add_edge(START, "bad")
        .add_edge("bad", END)
        .compile()
        .unwrap();
    let mut s = g.stream_events(
        RunInput::Update(NumUpdate::new().x(1)),
        RunConfig::default(),
        EventFilter::all(),
    );
    let mut labels = Vec::new();
    let mut error = None;
    while let Some(ev) = s.next().await {
        match ev {
            Ok(e) => labels.push(label(&e)),
            Err(e) => error = Some(e.to_string()),
        }
    }
    assert_eq!(labels, ["on_chain_start LangGraph", "on_chain_start bad"]);
    assert!(error.unwrap().contains("nope"));
}

#[tokio::test]
async fn events_go_with_other_modes_and_subgraph_events_need_no_opt_in() {
    let g = graph();
    let mut s = g.stream(
        RunInput::Update(NumUpdate::new().x(1)),
        RunConfig::thread("t2"),
        StreamOptions::modes([StreamMode::Updates, StreamMode::Events]),
    );
    let mut updates = 0;
    let mut names = Vec::new();
    while let Some(ev) = s.next().await {
        if let RunEvent::Part(p) = ev {
            match p.mode {
                StreamMode::Updates => {
                    assert!(p.ns.is_empty(), "updates of subgraphs were not asked for");
                    updates += 1;
                }
                StreamMode::Events => {
                    let json = p.data_json().unwrap();
                    names.push(json["name"].as_str().unwrap().to_owned());
                    assert_eq!(
                        p.event().map(|e| e.name.clone()),
                        Some(names.last().cloned().unwrap())
                    );
                }
                _ => {}
            }
        }
    }
    assert_eq!(updates, 2);
    assert!(names.iter().any(|n| n == "inc"), "{names:?}");
}
