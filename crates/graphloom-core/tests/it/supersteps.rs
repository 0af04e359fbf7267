//! Superstep semantics: parallel branches, joins, conflicting writes, reducers, Send fan-out,
//! Command goto.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Flow {
    #[reducer(append)]
    log: Seq<String>,
    #[reducer(add)]
    total: i64,
    last: String,
}

fn log(s: &str) -> FlowUpdate {
    FlowUpdate::new().log(vec![s.to_owned()])
}

#[tokio::test]
async fn parallel_branches_see_the_same_snapshot_and_join_waits_for_all() {
    let g = StateGraph::<Flow>::new()
        .add_node("a", |s: Arc<Flow>, _rt| async move {
            // `b` runs in the same step: its write must not be visible here.
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(log(&format!("a saw {}", s.log.len())).total(1))
        })
        .add_node("b", |s: Arc<Flow>, _rt| async move {
            Ok(log(&format!("b saw {}", s.log.len())).total(10))
        })
        .add_node("b2", |_s, _rt| async move { Ok(log("b2").total(100)) })
        .add_node("c", |s: Arc<Flow>, _rt| async move {
            Ok(log(&format!("c total {}", s.total)))
        })
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("b", "b2")
        .add_join(["a", "b2"], "c")
        .add_edge("c", END)
        .compile()
        .unwrap();
    let out = g.invoke(log("in"), RunConfig::default()).await.unwrap();
    // a and b in step 1 (merge order by node name, not finish order), b2 in step 2,
    // c only once both a and b2 have run.
    assert_eq!(
        out.values.log.to_vec(),
        vec!["in", "a saw 1", "b saw 1", "b2", "c total 111"]
    );
    assert_eq!(out.values.total, 111);
    assert_eq!(out.status, RunStatus::Done);
}

#[tokio::test]
async fn two_writes_to_a_last_value_field_in_one_step_is_an_error_naming_both() {
    let g = StateGraph::<Flow>::new()
        .add_node("x", |_s, _rt| async { Ok(FlowUpdate::new().last("x".into())) })
        .add_node("y", |_s, _rt| async { Ok(FlowUpdate::new().last("y".into())) })
        .add_edge(START, "x")
        .add_edge(START, "y")
        .add_edge("x", END)
        .add_edge("y", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(FlowUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    match err {
        Error::State {
            source: StateError::Conflict { field, nodes },
            ..
        } => {
            assert_eq!(field, "last");
            assert_eq!(nodes, vec!["x".to_string(), "y".to_string()]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn reducer_fields_merge_writes_of_one_step() {
    let g = StateGraph::<Flow>::new()
        .add_node("x", |_s, _rt| async { Ok(log("x").total(2)) })
        .add_node("y", |_s, _rt| async { Ok(log("y").total(3)) })
        .add_edge(START, "x")
        .add_edge(START, "y")
        .add_edge("x", END)
        .add_edge("y", END)
        .compile()
        .unwrap();
    let out = g.invoke(FlowUpdate::new(), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.total, 5);
    assert_eq!(out.values.log.to_vec(), vec!["x", "y"]);
}

#[derive(State, Clone, Default, Debug)]
struct MapReduce {
    subjects: Vec<u32>,
    #[reducer(append)]
    results: Seq<u32>,
}

#[tokio::test]
async fn send_runs_a_node_once_per_packet_and_reduces() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let g = StateGraph::<MapReduce>::new()
        .add_packet_node("square", move |n: u32, _rt| {
            c.fetch_add(1, Ordering::SeqCst);
            async move { Ok(MapReduceUpdate::new().results(vec![n * n])) }
        })
        .add_node("sum", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_conditional_edges(START, |s: &MapReduce| {
            s.subjects
                .iter()
                .map(|&n| Send::new("square", n))
                .collect::<Routes>()
        })
        .add_edge("square", "sum")
        .add_edge("sum", END)
        .compile()
        .unwrap();
    let input: Vec<u32> = (1..=100).collect();
    let out = g
        .invoke(
            MapReduceUpdate::new().subjects(input.clone()),
            RunConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 100);
    // Results come in packet order, whatever order the tasks finished in.
    let expected: Vec<u32> = input.iter().map(|n| n * n).collect();
    assert_eq!(out.values.results.to_vec(), expected);
}

#[tokio::test]
async fn command_goto_routes_without_static_edges_and_applies_its_update() {
    let g = StateGraph::<Flow>::new()
        .add_node("router", |s: Arc<Flow>, _rt| async move {
            let target = if s.total > 0 { "pos" } else { "neg" };
            Ok(Command::new().update(log("routed")).goto(target))
        })
        .add_node("pos", |_s, _rt| async { Ok(log("pos")) })
        .add_node("neg", |_s, _rt| async { Ok(log("neg")) })
        .destinations("router", ["pos", "neg"])
        .add_edge(START, "router")
        .add_edge("pos", END)
        .add_edge("neg", END)
        .compile()
        .unwrap();
    let out = g
        .invoke(FlowUpdate::new().total(5), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out.values.log.to_vec(), vec!["routed", "pos"]);
    let out = g
        .invoke(FlowUpdate::new().total(-5), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out.values.log.to_vec(), vec!["routed", "neg"]);
}

#[tokio::test]
async fn conditional_edges_with_a_path_map_and_loops() {
    let g = StateGraph::<Flow>::new()
        .add_node("inc", |_s, _rt| async { Ok(FlowUpdate::new().total(1)) })
        .add_edge(START, "inc")
        .add_conditional_edges_map(
            "inc",
            |s: &Flow| if s.total < 5 { "again" } else { "stop" },
            [("again", "inc"), ("stop", END)],
        )
        .compile()
        .unwrap();
    let out = g.invoke(FlowUpdate::new(), RunConfig::default()).await.unwrap();
    assert_eq!(out.values.total, 5);
}

#[tokio::test]
async fn a_router_naming_an_unknown_node_fails_the_run_clearly() {
    let g = StateGraph::<Flow>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_conditional_edges("a", |_s: &Flow| "nowhere")
        .compile()
        .unwrap();
    let err = g
        .invoke(FlowUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::UnknownNode(n) if n == "nowhere"), "{err}");
}

#[tokio::test]
async fn compile_finds_unknown_unreachable_and_dead_end_nodes() {
    let unknown = StateGraph::<Flow>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", "missing")
        .compile();
    assert!(matches!(&unknown, Err(Error::InvalidGraph(m)) if m.contains("unknown node `missing`")));

    let unreachable = StateGraph::<Flow>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_node("island", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", END)
        .add_edge("island", END)
        .compile();
    assert!(matches!(&unreachable, Err(Error::InvalidGraph(m)) if m.contains("`island` cannot be reached")));

    let dead_end = StateGraph::<Flow>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .compile();
    assert!(matches!(&dead_end, Err(Error::InvalidGraph(m)) if m.contains("`a` has no way out")));

    let no_start = StateGraph::<Flow>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge("a", END)
        .compile();
    assert!(matches!(&no_start, Err(Error::InvalidGraph(m)) if m.contains("no edge from START")));

    let dup = StateGraph::<Flow>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile();
    assert!(matches!(&dup, Err(Error::InvalidGraph(m)) if m.contains("added twice")));
}

#[tokio::test]
async fn mermaid_draws_edges_solid_and_conditional_edges_dotted() {
    let g = StateGraph::<Flow>::new()
        .add_node("inc", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "inc")
        .add_conditional_edges_map("inc", |_s: &Flow| "stop", [("again", "inc"), ("stop", END)])
        .compile()
        .unwrap();
    let m = g.draw_mermaid();
    assert!(m.contains("__start__ --> inc;"), "{m}");
    assert!(m.contains("inc -. &nbsp;again&nbsp; .-> inc;"), "{m}");
    assert!(m.contains("inc -. &nbsp;stop&nbsp; .-> __end__;"), "{m}");
}
