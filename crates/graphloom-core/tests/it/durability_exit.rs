//! `Durability::Exit` (LangGraph's `durability="exit"`): nothing is saved while the run
//! goes; one checkpoint when it ends, at completion, at an interrupt (with the finished
//! siblings' writes, so they do not run again) or at an error.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{CheckpointConfig, CheckpointTuple, Checkpointer, InMemorySaver, ListQuery};
use graphloom_core::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(State, Clone, Default, Debug)]
struct Trail {
    #[reducer(append)]
    steps: Seq<String>,
}

fn step(s: &str) -> TrailUpdate {
    TrailUpdate::new().steps(vec![s.to_owned()])
}

/// The thread's checkpoints, newest first.
async fn saved(saver: &InMemorySaver, thread: &str) -> Vec<CheckpointTuple> {
    saver.list(&ListQuery::thread(thread)).await.unwrap()
}

/// `a -> b -> c`; `b` records what the saver holds for the thread while the run goes.
fn chain(saver: InMemorySaver, seen_in_b: Arc<Mutex<Vec<Option<i64>>>>) -> CompiledGraph<Trail> {
    let probe = saver.clone();
    StateGraph::<Trail>::new()
        .add_node("a", |_s, _rt| async { Ok(step("a")) })
        .add_node("b", move |_s, rt: Runtime| {
            let probe = probe.clone();
            let seen = Arc::clone(&seen_in_b);
            let thread = rt.thread_id().unwrap_or_default().to_owned();
            async move {
                let latest = probe
                    .get_tuple(&CheckpointConfig {
                        thread_id: thread,
                        checkpoint_ns: String::new(),
                        checkpoint_id: None,
                    })
                    .await
                    .unwrap();
                seen.lock().unwrap().push(latest.map(|t| t.metadata.step));
                Ok(step("b"))
            }
        })
        .add_node("c", |_s, _rt| async { Ok(step("c")) })
        .add_sequence(["a", "b", "c"])
        .add_edge(START, "a")
        .add_edge("c", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn exit_saves_one_checkpoint_when_the_run_completes_and_none_before() {
    let saver = InMemorySaver::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let g = chain(saver.clone(), Arc::clone(&seen));
    let cfg = RunConfig::thread("exit").durability(Durability::Exit);
    let out = g.invoke(TrailUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.values.steps.to_vec(), vec!["a", "b", "c"]);
    // While `b` ran (step 2), the thread had no checkpoint at all.
    assert_eq!(*seen.lock().unwrap(), vec![None]);
    // At the end: one checkpoint, of the last step, holding the final state.
    let history = saved(&saver, "exit").await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].metadata.step, 3);
    assert_eq!(
        g.get_state(&cfg).await.unwrap().values.steps.to_vec(),
        vec!["a", "b", "c"]
    );

    // A second run on the thread: during it, the thread still shows the first run's end;
    // after it, one more checkpoint.
    let out = g.invoke(TrailUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(out.values.steps.len(), 6);
    assert_eq!(seen.lock().unwrap()[1], Some(3));
    assert_eq!(saved(&saver, "exit").await.len(), 2);

    // The same graph in `sync` mode saves the input, the start step and every step.
    let sync = RunConfig::thread("sync");
    g.invoke(TrailUpdate::new(), sync).await.unwrap();
    assert_eq!(saved(&saver, "sync").await.len(), 5);
    assert_eq!(seen.lock().unwrap()[2], Some(1));
}

#[tokio::test]
async fn exit_saves_at_an_interrupt_with_the_finished_siblings_writes() {
    let saver = InMemorySaver::new();
    let sibling_runs = Arc::new(AtomicUsize::new(0));
    let runs = Arc::clone(&sibling_runs);
    let g = StateGraph::<Trail>::new()
        .add_node("a", |_s, _rt| async { Ok(step("a")) })
        .add_node("sibling", move |_s, _rt| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok(step("sibling")) }
        })
        .add_node("ask", |_s, rt: Runtime| async move {
            let v = rt.interrupt("go on?")?;
            Ok(step(&format!("ask {v}")))
        })
        .add_edge(START, "a")
        .add_edge("a", "sibling")
        .add_edge("a", "ask")
        .add_edge("sibling", END)
        .add_edge("ask", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("paused").durability(Durability::Exit);
    let paused = g.invoke(TrailUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    // One checkpoint: after step 1 (`a`), the one step 2 was planned from.
    let history = saved(&saver, "paused").await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].metadata.step, 1);
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["ask".to_string()]);
    assert_eq!(st.interrupts.len(), 1);

    // The sibling's writes were saved with it: it does not run again on resume.
    let done = g.resume(Command::resume("yes"), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(sibling_runs.load(Ordering::SeqCst), 1);
    let mut got = done.values.steps.to_vec();
    got.sort();
    assert_eq!(got, vec!["a", "ask \"yes\"", "sibling"]);
    assert_eq!(saved(&saver, "paused").await.len(), 2);
}

#[tokio::test]
async fn exit_saves_at_an_error_so_the_run_can_be_continued() {
    let saver = InMemorySaver::new();
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let f = Arc::clone(&fail);
    let g = StateGraph::<Trail>::new()
        .add_node("a", |_s, _rt| async { Ok(step("a")) })
        .add_node("b", move |_s, _rt| {
            let failing = f.load(Ordering::SeqCst);
            async move {
                if failing {
                    Err(NodeError::fatal("not yet"))
                } else {
                    Ok(step("b"))
                }
            }
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("failed").durability(Durability::Exit);
    let err = g.invoke(TrailUpdate::new(), cfg.clone()).await.unwrap_err();
    assert!(matches!(&err, Error::Node { node, .. } if node == "b"), "{err}");
    let history = saved(&saver, "failed").await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].metadata.step, 1);
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["b".to_string()]);
    fail.store(false, Ordering::SeqCst);
    let out = g.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.values.steps.to_vec(), vec!["a", "b"]);
}
