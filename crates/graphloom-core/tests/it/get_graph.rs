//! `get_graph()`: a graph's nodes and edges, and their JSON, as LangGraph's
//! `get_graph(xray=..).to_json()` gives them for the same graph (LangGraph 1.2.22's output,
//! its runnables' class paths aside).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::draw::{ViewNodeKind, XRay};
use graphloom_core::*;
use serde_json::{json, Value};

#[derive(State, Clone, Default, Debug)]
struct S {
    #[reducer(append)]
    log: Seq<String>,
}

fn node(
    name: &'static str,
) -> impl Fn(std::sync::Arc<S>, Runtime) -> futures::future::Ready<Result<SUpdate, NodeError>> + Clone {
    move |_s, _rt| futures::future::ready(Ok(SUpdate::new().log(vec![name.to_owned()])))
}

/// `a` routes to the subgraph `team` (`plan`, which routes to `act` or its end, then
/// `act`) or ends; `team -> b -> END`; the graph interrupts before `b`.
fn graph() -> CompiledGraph<S> {
    let team = StateGraph::<S>::new()
        .add_node("plan", node("plan"))
        .add_node("act", node("act"))
        .add_edge(START, "plan")
        .add_conditional_edges_to("plan", |_s: &S| "act", ["act", END])
        .add_edge("act", END)
        .compile()
        .unwrap();
    StateGraph::<S>::new()
        .add_node("a", node("a"))
        .add_subgraph_shared("team", team)
        .add_node("b", node("b"))
        .add_edge(START, "a")
        .add_conditional_edges_map("a", |_s: &S| "go", [("go", "team"), ("stop", END)])
        .add_edge("team", "b")
        .add_edge("b", END)
        .interrupt_before(NodeSet::of(["b"]))
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

fn runnable(name: &str) -> Value {
    json!({"id": name, "type": "runnable", "data": {"id": ["graphloom", "graph", "Node"], "name": name}})
}

/// The JSON with its edges sorted (LangGraph lists them in the order its dry run found
/// them).
fn sorted(mut v: Value) -> Value {
    v["edges"].as_array_mut().unwrap().sort_by_key(Value::to_string);
    v
}

#[test]
fn the_graph_is_langgraphs_nodes_and_edges() {
    let view = graph().get_graph(false);
    let kinds: Vec<_> = view.nodes.iter().map(|n| (n.id.as_str(), n.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("__start__", ViewNodeKind::Start),
            ("a", ViewNodeKind::Node),
            ("team", ViewNodeKind::Subgraph),
            ("b", ViewNodeKind::Node),
            ("__end__", ViewNodeKind::End),
        ]
    );
    let mut b = runnable("b");
    b["metadata"] = json!({"__interrupt": "before"});
    let expected = json!({
        "nodes": [
            runnable("__start__"),
            runnable("a"),
            {"id": "team", "type": "runnable", "data": {"id": ["graphloom", "graph", "CompiledGraph"], "name": "team"}},
            b,
            {"id": "__end__"},
        ],
        "edges": [
            {"source": "__start__", "target": "a"},
            {"source": "a", "target": "__end__", "data": "stop", "conditional": true},
            {"source": "a", "target": "team", "data": "go", "conditional": true},
            {"source": "team", "target": "b"},
            {"source": "b", "target": "__end__"},
        ],
    });
    assert_eq!(sorted(view.to_json()), sorted(expected));
}

#[test]
fn xray_replaces_the_subgraph_by_its_nodes_as_langgraph_does() {
    let g = graph();
    let view = g.get_graph(true);
    assert_eq!(view, g.get_graph(XRay::Depth(1)));
    let mut b = runnable("b");
    b["metadata"] = json!({"__interrupt": "before"});
    // The subgraph's entry is dropped (one edge leaves it); its exit stays (two edges reach
    // it) and leads where the subgraph node led.
    let expected = json!({
        "nodes": [
            runnable("__start__"),
            runnable("a"),
            b,
            {"id": "__end__"},
            runnable("team:plan"),
            runnable("team:act"),
            {"id": "team:__end__"},
        ],
        "edges": [
            {"source": "__start__", "target": "a"},
            {"source": "a", "target": "__end__", "data": "stop", "conditional": true},
            {"source": "a", "target": "team:plan", "data": "go", "conditional": true},
            {"source": "team:__end__", "target": "b"},
            {"source": "b", "target": "__end__"},
            {"source": "team:plan", "target": "team:__end__", "conditional": true},
            {"source": "team:plan", "target": "team:act", "conditional": true},
            {"source": "team:act", "target": "team:__end__"},
        ],
    });
    assert_eq!(sorted(view.to_json()), sorted(expected));
}
