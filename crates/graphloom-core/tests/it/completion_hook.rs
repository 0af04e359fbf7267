//! `RunConfig::on_complete`: told once when a run completes, alongside its last checkpoint's
//! put in `sync` mode, after it in the other modes, never for a run that pauses or fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Checkpointer, InMemorySaver,
    ListQuery, TaskWrites, Version,
};
use graphloom_core::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Steps {
    #[reducer(append)]
    seen: Seq<String>,
    stop: bool,
    fail: bool,
}

/// What happened, in order: puts starting and ending (by step), the hook starting.
type Log = Arc<Mutex<Vec<String>>>;

/// An in-memory saver whose puts of step `hold_step` wait until the hook has started (so
/// a test hangs, and times out, unless the two run at once), and that can fail that put.
#[derive(Clone)]
struct Gated {
    inner: InMemorySaver,
    log: Log,
    hold_step: i64,
    hook_started: Arc<tokio::sync::Notify>,
    fail: bool,
    /// Sleep in the put of `hold_step` instead of waiting for the hook.
    sleep: bool,
    /// What `saves_in_order` says.
    in_order: bool,
}

impl Gated {
    fn new(hold_step: i64, fail: bool) -> Self {
        Self {
            inner: InMemorySaver::new(),
            log: Arc::default(),
            hold_step,
            hook_started: Arc::default(),
            fail,
            sleep: false,
            in_order: false,
        }
    }

    async fn gate(&self, step: i64) -> Result<()> {
        self.log.lock().unwrap().push(format!("put {step}"));
        if step == self.hold_step && self.sleep {
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.log.lock().unwrap().push(format!("put {step} done"));
        } else if step == self.hold_step {
            self.hook_started.notified().await;
            self.log.lock().unwrap().push(format!("put {step} released"));
            if self.fail {
                return Err(Error::Backend(BackendError::new(
                    BackendErrorKind::Other,
                    "disk full",
                )));
            }
        }
        Ok(())
    }
}

impl Checkpointer for Gated {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.inner.get_tuple(config).await
    }
    async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        self.inner.list(query).await
    }
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.gate(metadata.step).await?;
        self.inner.put(config, checkpoint, metadata, new_versions).await
    }
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.inner.put_writes(config, writes, task_id, task_path).await
    }
    async fn put_writes_then_checkpoint(
        &self,
        writes: TaskWrites,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        self.gate(metadata.step).await?;
        self.inner
            .put_writes_then_checkpoint(writes, config, checkpoint, metadata, new_versions)
            .await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.inner.delete_thread(thread_id).await
    }
    fn saves_in_order(&self) -> bool {
        self.in_order
    }
    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.inner.copy_thread(source, target).await
    }
}

/// `a -> b -> END`, or `a` pauses (`stop`) or fails (`fail`).
fn graph(saver: Gated) -> CompiledGraph<Steps> {
    let log = Arc::clone(&saver.log);
    StateGraph::<Steps>::new()
        .add_node("a", move |s: Arc<Steps>, rt: Runtime| {
            log.lock().unwrap().push("node a".into());
            async move {
                if s.stop {
                    rt.interrupt(json!("continue?"))?;
                }
                if s.fail {
                    return Err(NodeError::fatal("boom"));
                }
                Ok(StepsUpdate::new().seen(vec!["a".into()]))
            }
        })
        .add_node("b", |_s: Arc<Steps>, _rt| async move {
            Ok(StepsUpdate::new().seen(vec!["b".into()]))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

/// A hook that logs its start, wakes the gated put, and keeps what it was told.
fn hook(saver: &Gated, told: Arc<Mutex<Vec<Completion>>>) -> CompletionHook {
    let (log, started) = (Arc::clone(&saver.log), Arc::clone(&saver.hook_started));
    CompletionHook::new(move |c: Completion| {
        let (log, started, told) = (Arc::clone(&log), Arc::clone(&started), Arc::clone(&told));
        async move {
            log.lock().unwrap().push("hook".into());
            started.notify_one();
            told.lock().unwrap().push(c);
        }
    })
}

fn config(thread: &str, durability: Durability, hook: CompletionHook) -> RunConfig {
    RunConfig {
        on_complete: Some(hook),
        ..RunConfig::thread(thread).durability(durability)
    }
}

/// `sync`: the last checkpoint (step 2, after `b`) is put while the hook runs, the hook
/// starting after the put was issued; the run returns after both, with the checkpoint the
/// hook was told about saved as the thread's latest.
#[tokio::test]
async fn in_sync_mode_the_hook_runs_alongside_the_last_put() {
    let saver = Gated::new(2, false);
    let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
    let g = graph(saver.clone());
    let cfg = config("t", Durability::Sync, hook(&saver, Arc::clone(&told)));
    let out = tokio::time::timeout(Duration::from_secs(10), g.invoke(StepsUpdate::new(), cfg))
        .await
        .expect("the last put waits for the hook: they must run at once")
        .unwrap();
    assert_eq!(out.values.seen.to_vec(), ["a", "b"]);
    let log = saver.log.lock().unwrap().clone();
    // Input and `__start__` checkpoints go together, then `a`'s, then `b`'s with the hook.
    assert_eq!(
        log,
        [
            "put -1",
            "put 0",
            "node a",
            "put 1",
            "put 2",
            "hook",
            "put 2 released"
        ]
    );
    let told = told.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    let latest = g.get_state(&RunConfig::thread("t")).await.unwrap();
    let latest_id = latest.config.checkpoint_id;
    assert_eq!(told[0].checkpoint_id, latest_id);
    assert_eq!(told[0].thread_id.as_deref(), Some("t"));
    assert_eq!(told[0].values.to_json().unwrap()["seen"], json!(["a", "b"]));
}

/// `sync`: when the last put fails the run fails, although the hook ran (it must check
/// for the checkpoint itself, as the server's does); the thread's latest checkpoint is the
/// one before.
#[tokio::test]
async fn a_failed_last_put_fails_the_run_after_the_hook() {
    let saver = Gated::new(2, true);
    let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
    let g = graph(saver.clone());
    let cfg = config("t", Durability::Sync, hook(&saver, Arc::clone(&told)));
    let err = tokio::time::timeout(Duration::from_secs(10), g.invoke(StepsUpdate::new(), cfg))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    let told = told.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    let snap = g.get_state(&RunConfig::thread("t")).await.unwrap();
    assert_ne!(snap.config.checkpoint_id, told[0].checkpoint_id);
    assert_eq!(snap.values.seen.to_vec(), ["a"]);
}

/// `async` and `exit`: nothing is held; the hook is told after the last checkpoint is saved.
#[tokio::test]
async fn in_async_and_exit_modes_the_hook_follows_the_save() {
    for mode in [Durability::Async, Durability::Exit] {
        let saver = Gated::new(i64::MAX, false);
        let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
        let g = graph(saver.clone());
        let thread = format!("{mode:?}");
        let out = g
            .invoke(
                StepsUpdate::new(),
                config(&thread, mode, hook(&saver, Arc::clone(&told))),
            )
            .await
            .unwrap();
        assert_eq!(out.values.seen.to_vec(), ["a", "b"]);
        let log = saver.log.lock().unwrap().clone();
        assert_eq!(log.last().map(String::as_str), Some("hook"), "{mode:?}: {log:?}");
        let latest = g.get_state(&RunConfig::thread(&thread)).await.unwrap();
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), 1, "{mode:?}");
        assert_eq!(told[0].checkpoint_id, latest.config.checkpoint_id, "{mode:?}");
    }
}

/// A run that pauses or fails has not completed: the hook is not told, and every
/// checkpoint is saved as without it.
#[tokio::test]
async fn runs_that_pause_or_fail_do_not_complete() {
    for (input, thread) in [
        (StepsUpdate::new().stop(true), "paused"),
        (StepsUpdate::new().fail(true), "failed"),
    ] {
        let saver = Gated::new(i64::MAX, false);
        let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
        let g = graph(saver.clone());
        let res = g
            .invoke(
                input,
                config(thread, Durability::Sync, hook(&saver, Arc::clone(&told))),
            )
            .await;
        assert!(told.lock().unwrap().is_empty(), "{thread}");
        assert!(!saver.log.lock().unwrap().contains(&"hook".to_owned()));
        let snap = g.get_state(&RunConfig::thread(thread)).await.unwrap();
        match thread {
            "paused" => {
                assert_eq!(res.unwrap().status, RunStatus::Interrupted);
                assert_eq!(snap.next, ["a"]);
            }
            _ => {
                assert!(res.unwrap_err().to_string().contains("boom"));
                assert_eq!(snap.next, ["a"]);
            }
        }
    }
}

/// A run without a thread completes too: the hook is told, without a checkpoint.
#[tokio::test]
async fn a_run_without_a_thread_tells_the_hook_without_a_checkpoint() {
    let saver = Gated::new(i64::MAX, false);
    let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
    let g = graph(saver.clone());
    let cfg = RunConfig {
        on_complete: Some(hook(&saver, Arc::clone(&told))),
        ..RunConfig::default()
    };
    g.invoke(StepsUpdate::new(), cfg).await.unwrap();
    let told = told.lock().unwrap().clone();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].checkpoint_id, None);
    assert_eq!(told[0].thread_id, None);
}

/// A caller watching checkpoint events is told of each only once it is saved: the last
/// checkpoint is not held then, and the hook runs after its put.
#[tokio::test]
async fn with_checkpoint_events_the_last_checkpoint_is_not_held() {
    use futures::StreamExt;
    for mode in [None, Some(StreamMode::Checkpoints), Some(StreamMode::Debug)] {
        let mut saver = Gated::new(2, false);
        saver.sleep = true;
        let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
        let g = graph(saver.clone());
        let cfg = config("t", Durability::Sync, hook(&saver, Arc::clone(&told)));
        let modes: Vec<StreamMode> = mode.into_iter().chain([StreamMode::Values]).collect();
        let events: Vec<RunEvent<Steps>> = g
            .stream(
                RunInput::Update(StepsUpdate::new()),
                cfg,
                StreamOptions::modes(modes),
            )
            .collect()
            .await;
        assert!(matches!(events.last(), Some(RunEvent::End(Ok(_)))));
        let log = saver.log.lock().unwrap().clone();
        let tail = &log[log.len() - 3..];
        match mode {
            // Held: the hook runs while the put sleeps.
            None => assert_eq!(tail, ["put 2", "hook", "put 2 done"]),
            Some(m) => assert_eq!(tail, ["put 2", "put 2 done", "hook"], "{m:?}"),
        }
        assert_eq!(told.lock().unwrap().len(), 1);
    }
}

/// With `early_checkpoint_events`, a caller watching checkpoint events gets each when its
/// checkpoint is made: the first node starts while the input is saved, the last
/// checkpoint is put alongside the hook, and every checkpoint of a step has its event, in
/// order.
#[tokio::test]
async fn early_checkpoint_events_let_the_saves_overlap() {
    use futures::StreamExt;
    for (hold_step, early) in [(0, false), (0, true), (2, false), (2, true)] {
        let mut saver = Gated::new(hold_step, false);
        saver.sleep = true;
        saver.in_order = true;
        let told: Arc<Mutex<Vec<Completion>>> = Arc::default();
        let g = graph(saver.clone());
        let thread = format!("t{hold_step}{early}");
        let cfg = RunConfig {
            early_checkpoint_events: early,
            ..config(&thread, Durability::Sync, hook(&saver, Arc::clone(&told)))
        };
        let events: Vec<RunEvent<Steps>> = g
            .stream(
                RunInput::Update(StepsUpdate::new()),
                cfg,
                StreamOptions::modes(vec![StreamMode::Checkpoints]),
            )
            .collect()
            .await;
        assert!(matches!(events.last(), Some(RunEvent::End(Ok(_)))), "{early}");
        let steps: Vec<i64> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Part(StreamPart {
                    mode: StreamMode::Checkpoints,
                    data: StreamData::Json(c),
                    ..
                }) => c["metadata"]["step"].as_i64(),
                _ => None,
            })
            .collect();
        assert_eq!(steps, [0, 1, 2], "early: {early}");
        let log = saver.log.lock().unwrap().clone();
        let expected: &[&str] = match (hold_step, early) {
            // The input's saves are done before `a` starts.
            (0, false) => &[
                "put -1",
                "put 0",
                "put 0 done",
                "node a",
                "put 1",
                "put 2",
                "hook",
            ],
            // `a` starts while they are in flight.
            (0, _) => &[
                "put -1",
                "put 0",
                "node a",
                "put 1",
                "put 0 done",
                "put 2",
                "hook",
            ],
            // The last checkpoint is saved, then the hook runs.
            (_, false) => &[
                "put -1",
                "put 0",
                "node a",
                "put 1",
                "put 2",
                "put 2 done",
                "hook",
            ],
            // The hook runs while it is put.
            _ => &[
                "put -1",
                "put 0",
                "node a",
                "put 1",
                "put 2",
                "hook",
                "put 2 done",
            ],
        };
        assert_eq!(log, expected, "hold {hold_step}, early: {early}");
        assert_eq!(told.lock().unwrap().len(), 1);
    }
}

/// On a backend that saves in order the run's input and `__start__` checkpoints are issued
/// and the first node starts while they are saved; its step's save waits for them. On any
/// other backend they are saved before the first node starts.
#[tokio::test]
async fn the_first_node_starts_while_the_input_is_saved_where_saves_are_in_order() {
    for in_order in [false, true] {
        let mut saver = Gated::new(0, false);
        saver.sleep = true;
        saver.in_order = in_order;
        let g = graph(saver.clone());
        let thread = format!("t{in_order}");
        let out = g
            .invoke(StepsUpdate::new(), RunConfig::thread(&thread))
            .await
            .unwrap();
        assert_eq!(out.values.seen.to_vec(), ["a", "b"]);
        let log = saver.log.lock().unwrap().clone();
        let expected: &[&str] = if in_order {
            // `a`'s checkpoint is queued behind them while they are still in flight.
            &["put -1", "put 0", "node a", "put 1", "put 0 done", "put 2"]
        } else {
            &["put -1", "put 0", "put 0 done", "node a", "put 1", "put 2"]
        };
        assert_eq!(log, expected, "in order: {in_order}");
        let history = g
            .get_state_history(&RunConfig::thread(&thread), HistoryQuery::default())
            .await
            .unwrap();
        let steps: Vec<i64> = history
            .iter()
            .filter_map(|s| s.metadata.as_ref())
            .map(|m| m.step)
            .collect();
        assert_eq!(steps, [2, 1, 0, -1]);
    }

    // The first node fails: what was issued is saved all the same, with the failure.
    let mut saver = Gated::new(i64::MAX, false);
    saver.in_order = true;
    let g = graph(saver.clone());
    let err = g
        .invoke(StepsUpdate::new().fail(true), RunConfig::thread("f"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("boom"));
    let snap = g.get_state(&RunConfig::thread("f")).await.unwrap();
    assert_eq!(snap.next, ["a"]);
    assert!(snap.values.fail);
    assert_eq!(snap.metadata.map(|m| m.step), Some(0));
}
