//! Deferred nodes (`StateGraph::defer`): a triggered deferred node waits until no other task
//! is pending, then runs once (the join of a map-reduce whose branches have uneven lengths),
//! in-process, across a static and a dynamic interrupt, and across a checkpoint round trip.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Work {
    #[reducer(append)]
    log: Seq<String>,
    items: Vec<u32>,
}

fn log(s: impl Into<String>) -> WorkUpdate {
    WorkUpdate::new().log(vec![s.into()])
}

type Ready = std::future::Ready<Result<WorkUpdate, NodeError>>;

/// The join node: counts its calls and logs how many entries it saw.
fn counted(calls: &Arc<AtomicUsize>) -> impl Fn(Arc<Work>, Runtime) -> Ready + std::marker::Send + Sync {
    let calls = Arc::clone(calls);
    move |s: Arc<Work>, _rt| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(log(format!("join saw {}", s.log.len()))))
    }
}

/// `START -> a -> a2 -> a3 -> join` and `START -> b -> join`: branches of 3 and 1 steps.
fn uneven(defer: bool, calls: &Arc<AtomicUsize>) -> StateGraph<Work> {
    let g = StateGraph::<Work>::new()
        .add_node("a", |_s, _rt| async { Ok(log("a")) })
        .add_node("a2", |_s, _rt| async { Ok(log("a2")) })
        .add_node("a3", |_s, _rt| async { Ok(log("a3")) })
        .add_node("b", |_s, _rt| async { Ok(log("b")) })
        .add_node("join", counted(calls))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_sequence(["a", "a2", "a3", "join"])
        .add_edge("b", "join")
        .add_edge("join", END);
    if defer {
        g.defer("join")
    } else {
        g
    }
}

#[tokio::test]
async fn a_deferred_join_runs_once_after_branches_of_uneven_length() {
    // Without `defer` the join runs each time a branch reaches it (LangGraph does the same).
    let calls = Arc::new(AtomicUsize::new(0));
    let eager = uneven(false, &calls).compile().unwrap();
    let out = eager
        .invoke(WorkUpdate::new(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        out.values.log.to_vec(),
        vec!["a", "b", "a2", "join saw 2", "a3", "join saw 5"]
    );

    let calls = Arc::new(AtomicUsize::new(0));
    let g = uneven(true, &calls).compile().unwrap();
    let out = g.invoke(WorkUpdate::new(), RunConfig::default()).await.unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(out.values.log.to_vec(), vec!["a", "b", "a2", "a3", "join saw 4"]);
}

#[tokio::test]
async fn a_deferred_node_with_nothing_else_pending_runs_at_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let g = StateGraph::<Work>::new()
        .add_node("a", |_s, _rt| async { Ok(log("a")) })
        .add_node("join", counted(&calls))
        .add_edge(START, "a")
        .add_edge("a", "join")
        .add_edge("join", END)
        .defer("join")
        .compile()
        .unwrap();
    let events: Vec<RunEvent<Work>> = g
        .stream(
            RunInput::Update(WorkUpdate::new()),
            RunConfig::default(),
            StreamOptions::modes([StreamMode::Updates]),
        )
        .collect()
        .await;
    // One step each: the join did not wait a step for nothing.
    let steps: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Part(StreamPart {
                data: StreamData::Update { node, .. },
                ..
            }) => Some(node.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(steps, vec!["a", "join"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_deferred_reduce_waits_for_every_send_packet_and_the_slow_branch() {
    let calls = Arc::new(AtomicUsize::new(0));
    let g = StateGraph::<Work>::new()
        .add_packet_node("map", |n: u32, _rt| async move { Ok(log(format!("map {n}"))) })
        .add_node("slow", |_s, _rt| async { Ok(log("slow")) })
        .add_node("slower", |_s, _rt| async { Ok(log("slower")) })
        .add_node("reduce", counted(&calls))
        .add_node("fan", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "fan")
        .add_conditional_edges("fan", |s: &Work| {
            let mut r: Routes = s.items.iter().map(|&n| Send::new("map", n)).collect();
            r.0.push(Route::from("slow"));
            r
        })
        .add_edge("map", "reduce")
        .add_sequence(["slow", "slower", "reduce"])
        .add_edge("reduce", END)
        .defer("reduce")
        .compile()
        .unwrap();
    let out = g
        .invoke(WorkUpdate::new().items(vec![1, 2, 3]), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        out.values.log.to_vec(),
        vec!["slow", "map 1", "map 2", "map 3", "slower", "join saw 5"]
    );
}

/// `START -> a -> join`, `START -> b -> ask -> join`; `ask` asks for a value.
fn interrupted(saver: InMemorySaver, calls: &Arc<AtomicUsize>) -> CompiledGraph<Work> {
    StateGraph::<Work>::new()
        .add_node("a", |_s, _rt| async { Ok(log("a")) })
        .add_node("b", |_s, _rt| async { Ok(log("b")) })
        .add_node("ask", |_s, rt: Runtime| async move {
            let v = rt.interrupt("value?")?;
            Ok(log(format!("ask {v}")))
        })
        .add_node("join", counted(calls))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", "join")
        .add_sequence(["b", "ask", "join"])
        .add_edge("join", END)
        .defer("join")
        .interrupt_after(NodeSet::of(["b"]))
        .checkpointer(saver)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn the_deferral_survives_interrupts_and_a_checkpoint_round_trip() {
    let saver = InMemorySaver::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let cfg = RunConfig::thread("defer-1");
    let first = interrupted(saver.clone(), &calls);
    let out = first.invoke(WorkUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    // `a` triggered the join, but `ask` is pending: only `ask` is next.
    assert_eq!(first.get_state(&cfg).await.unwrap().next, vec!["ask".to_string()]);

    // Each later step runs on a graph rebuilt from the saved checkpoint only.
    let second = interrupted(saver.clone(), &calls);
    let out = second
        .invoke_input(RunInput::Continue, cfg.clone())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts[0].value, json!("value?"));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        second.get_state(&cfg).await.unwrap().next,
        vec!["ask".to_string()]
    );

    let third = interrupted(saver, &calls);
    let done = third.resume(Command::resume(7), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(done.values.log.to_vec(), vec!["a", "b", "ask 7", "join saw 3"]);
    assert!(third.get_state(&cfg).await.unwrap().next.is_empty());
}

#[test]
fn deferring_a_node_leaves_the_drawing_as_it_was() {
    let calls = Arc::new(AtomicUsize::new(0));
    let plain = uneven(false, &calls).compile().unwrap().draw_mermaid();
    let deferred = uneven(true, &calls).compile().unwrap().draw_mermaid();
    assert_eq!(plain, deferred);
    assert!(deferred.contains("join"));
}

#[tokio::test]
async fn a_deferred_node_also_waits_for_send_packets_when_no_edge_is_pending() {
    // LangGraph 1.2 runs the deferred node beside the pending `Send` tasks here (it saw
    // `["a", "a"]`, before any map wrote); graphloom waits for them, so a reduce sees
    // every mapper's output.
    let calls = Arc::new(AtomicUsize::new(0));
    let g = StateGraph::<Work>::new()
        .add_node("a", |_s, _rt| async { Ok(log("a")) })
        .add_node("b", |_s, _rt| async { Ok(log("a")) })
        .add_packet_node("map", |n: u32, _rt| async move { Ok(log(format!("map {n}"))) })
        .add_node("reduce", counted(&calls))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("b", "reduce")
        .add_conditional_edges("a", |s: &Work| {
            s.items.iter().map(|&n| Send::new("map", n)).collect::<Routes>()
        })
        .add_edge("map", END)
        .add_edge("reduce", END)
        .defer("reduce")
        .compile()
        .unwrap();
    let out = g
        .invoke(WorkUpdate::new().items(vec![1, 2]), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        out.values.log.to_vec(),
        vec!["a", "a", "map 1", "map 2", "join saw 4"]
    );
}
