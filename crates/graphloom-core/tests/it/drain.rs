//! Draining a run ([`RunControl`]): it stops at the next superstep boundary with the
//! running step checkpointed, ends as [`Error::Drained`], and a continue finishes it with
//! every node run exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::func::Entrypoint;
use graphloom_core::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Trail {
    #[reducer(append)]
    log: Seq<String>,
}

/// How many times each node ran.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<BTreeMap<String, usize>>>);

impl Calls {
    fn count(&self, node: &str) {
        *self.0.lock().unwrap().entry(node.to_owned()).or_insert(0) += 1;
    }
    fn all(&self) -> BTreeMap<String, usize> {
        self.0.lock().unwrap().clone()
    }
}

fn once_each(nodes: &[&str]) -> BTreeMap<String, usize> {
    nodes.iter().map(|n| ((*n).to_owned(), 1)).collect()
}

/// A node that counts its call, runs `also` and logs its name.
fn logging(
    calls: Calls,
    name: &'static str,
    also: impl Fn() + std::marker::Send + Sync + 'static,
) -> impl Fn(Arc<Trail>, Runtime) -> futures::future::BoxFuture<'static, Result<TrailUpdate, NodeError>> {
    move |_s, _rt| {
        calls.count(name);
        also();
        Box::pin(async move { Ok(TrailUpdate::new().log(vec![name.to_owned()])) })
    }
}

/// `a -> b -> c`, where `a` asks `control` to drain.
fn chain(calls: &Calls, control: &RunControl, saver: InMemorySaver) -> CompiledGraph<Trail> {
    let c = control.clone();
    StateGraph::<Trail>::new()
        .add_node("a", logging(calls.clone(), "a", move || c.drain()))
        .add_node("b", logging(calls.clone(), "b", || {}))
        .add_node("c", logging(calls.clone(), "c", || {}))
        .add_sequence(["a", "b", "c"])
        .add_edge(START, "a")
        .add_edge("c", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

fn log_of(s: &StateSnapshot<Trail>) -> Vec<String> {
    s.values.log.to_vec()
}

#[tokio::test]
async fn a_node_asking_drain_stops_the_run_after_its_step() {
    for durability in [Durability::Sync, Durability::Async, Durability::Exit] {
        let (calls, control) = (Calls::default(), RunControl::new());
        let g = chain(&calls, &control, InMemorySaver::new());
        let cfg = RunConfig::thread("t").durability(durability);
        let err = g
            .invoke(TrailUpdate::new(), cfg.clone().control(control.clone()))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Drained), "{durability:?}: {err}");
        let snap = g.get_state(&cfg).await.unwrap();
        assert_eq!(
            log_of(&snap),
            ["a"],
            "{durability:?}: the step's writes are saved"
        );
        assert_eq!(snap.next, ["b"], "{durability:?}");
        let out = g.invoke_input(RunInput::Continue, cfg).await.unwrap();
        assert_eq!(out.values.log.to_vec(), ["a", "b", "c"], "{durability:?}");
        assert_eq!(calls.all(), once_each(&["a", "b", "c"]), "{durability:?}");
    }
}

#[tokio::test]
async fn a_drain_from_outside_waits_for_the_running_step() {
    // `fast` and `slow` run in one step; the drain comes while `slow` is still running.
    let calls = Calls::default();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(Mutex::new(Some(started_tx)));
    let release = Arc::new(tokio::sync::Notify::new());
    let (c, r) = (calls.clone(), Arc::clone(&release));
    let g = StateGraph::<Trail>::new()
        .add_node("fast", logging(calls.clone(), "fast", || {}))
        .add_node("slow", move |_s, _rt| {
            c.count("slow");
            let (started, release) = (started_tx.lock().unwrap().take(), Arc::clone(&r));
            async move {
                if let Some(tx) = started {
                    let _ = tx.send(());
                    release.notified().await;
                }
                Ok(TrailUpdate::new().log(vec!["slow".into()]))
            }
        })
        .add_node("last", logging(calls.clone(), "last", || {}))
        .add_edge(START, "fast")
        .add_edge(START, "slow")
        .add_edge(["fast", "slow"], "last")
        .add_edge("last", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let control = RunControl::new();
    let cfg = RunConfig::thread("t");
    let run = tokio::spawn({
        let (g, cfg) = (g.clone(), cfg.clone().control(control.clone()));
        async move { g.invoke(TrailUpdate::new(), cfg).await }
    });
    tokio::time::timeout(Duration::from_secs(10), started_rx)
        .await
        .unwrap()
        .unwrap();
    control.drain();
    release.notify_one();
    let err = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Drained), "{err}");
    let snap = g.get_state(&cfg).await.unwrap();
    assert_eq!(log_of(&snap), ["fast", "slow"]);
    assert_eq!(snap.next, ["last"]);
    g.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(calls.all(), once_each(&["fast", "last", "slow"]));
}

#[tokio::test]
async fn a_drain_in_the_last_step_lets_the_run_complete() {
    let (calls, control) = (Calls::default(), RunControl::new());
    let c = control.clone();
    let g = StateGraph::<Trail>::new()
        .add_node("only", logging(calls.clone(), "only", move || c.drain()))
        .add_edge(START, "only")
        .add_edge("only", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let out = g
        .invoke(
            TrailUpdate::new(),
            RunConfig::thread("t").control(control.clone()),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert!(control.is_draining());
}

#[tokio::test]
async fn a_run_drained_before_it_starts_saves_its_input_and_runs_no_node() {
    let (calls, control) = (Calls::default(), RunControl::new());
    let g = chain(&calls, &RunControl::new(), InMemorySaver::new());
    control.drain();
    let cfg = RunConfig::thread("t");
    let err = g
        .invoke(
            TrailUpdate::new().log(vec!["input".into()]),
            cfg.clone().control(control),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Drained), "{err}");
    assert!(calls.all().is_empty());
    let snap = g.get_state(&cfg).await.unwrap();
    assert_eq!(
        (log_of(&snap), snap.next),
        (vec!["input".to_owned()], vec!["a".to_owned()])
    );
    let out = g.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.values.log.to_vec(), ["input", "a", "b", "c"]);
}

#[tokio::test]
async fn a_subgraph_finishes_its_run_within_the_parent_step_that_drains() {
    let (calls, control) = (Calls::default(), RunControl::new());
    let c = control.clone();
    let child = StateGraph::<Trail>::new()
        .name("child")
        .add_node("x", logging(calls.clone(), "x", move || c.drain()))
        .add_node("y", logging(calls.clone(), "y", || {}))
        .add_edge(START, "x")
        .add_edge("x", "y")
        .add_edge("y", END)
        .compile()
        .unwrap();
    let g = StateGraph::<Trail>::new()
        .add_subgraph_shared("sub", child)
        .add_node("after", logging(calls.clone(), "after", || {}))
        .add_edge(START, "sub")
        .add_edge("sub", "after")
        .add_edge("after", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t");
    let err = g
        .invoke(TrailUpdate::new(), cfg.clone().control(control))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Drained), "{err}");
    let snap = g.get_state(&cfg).await.unwrap();
    assert_eq!(log_of(&snap), ["x", "y"]);
    assert_eq!(snap.next, ["after"]);
    let out = g.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.values.log.to_vec(), ["x", "y", "after"]);
    assert_eq!(calls.all(), once_each(&["after", "x", "y"]));
}

#[tokio::test]
async fn an_entrypoint_drained_before_it_starts_continues_later() {
    let calls = Calls::default();
    let c = calls.clone();
    let ep = Entrypoint::<i64, i64>::new("double", move |x, _ctx| {
        c.count("double");
        async move { Ok(x * 2) }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let control = RunControl::new();
    control.drain();
    let cfg = RunConfig::thread("t");
    let err = ep.invoke(21, cfg.clone().control(control)).await.unwrap_err();
    assert!(matches!(err, Error::Drained), "{err}");
    assert!(calls.all().is_empty());
    let out = ep.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.value, Some(42));
    assert_eq!(calls.all(), once_each(&["double"]));
}
