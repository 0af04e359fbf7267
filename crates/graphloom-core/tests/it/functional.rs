//! The functional API: entrypoints and tasks — parallel calls, replay of finished calls
//! after an interrupt or an error, interrupts in tasks, `previous`, `Final`, streaming,
//! and a saved result that no longer decodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::func::{Entrypoint, Final, Task, TaskResultDecodeError};
use graphloom_core::{
    Command, Error, NodeError, RunConfig, RunEvent, RunInput, RunStatus, StreamMode, StreamOptions,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A task that counts its runs and returns `x + add`.
fn counted(name: &str, add: i64, runs: &Arc<AtomicUsize>) -> Task<i64, i64> {
    let runs = Arc::clone(runs);
    Task::new(name, move |x: i64, _ctx| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(x + add)
        }
    })
}

#[tokio::test]
async fn tasks_awaited_together_run_in_parallel() {
    // Each task waits for the other at a barrier: run one after the other, they never
    // pass it and the bounded wait fails the run.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meet = Task::new("meet", move |x: i64, _ctx| {
        let barrier = Arc::clone(&barrier);
        async move {
            tokio::time::timeout(Duration::from_secs(10), barrier.wait())
                .await
                .map_err(|_| NodeError::fatal("the other task never arrived"))?;
            Ok(x * 10)
        }
    });
    let ep = Entrypoint::<(i64, i64), i64>::new("pair", move |(a, b), ctx| {
        let meet = meet.clone();
        async move {
            let (x, y) = futures::try_join!(ctx.call(&meet, a), ctx.call(&meet, b))?;
            Ok(x + y)
        }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let out = ep.invoke((1, 2), RunConfig::thread("p")).await.unwrap();
    assert_eq!(out.status, RunStatus::Done);
    assert_eq!(out.value, Some(30));
}

#[tokio::test]
async fn finished_tasks_are_replayed_after_an_interrupt_not_run_again() {
    let (runs_a, runs_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, b) = (counted("a", 1, &runs_a), counted("b", 2, &runs_b));
    let ep = Entrypoint::<i64, String>::new("flow", move |x, ctx| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            let (ra, rb) = futures::try_join!(ctx.call(&a, x), ctx.call(&b, x))?;
            let answer = ctx.interrupt(json!({"sum": ra + rb}))?;
            Ok(format!("{} {}", ra + rb, answer.as_str().unwrap_or_default()))
        }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("i");
    let paused = ep.invoke(10, cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    assert_eq!(paused.value, None);
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].value, json!({"sum": 23}));
    let st = ep.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["flow".to_owned()]);
    assert_eq!(st.interrupts.len(), 1);

    let done = ep.resume(Command::resume("yes"), cfg.clone()).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.value.as_deref(), Some("23 yes"));
    assert_eq!(runs_a.load(Ordering::SeqCst), 1, "a ran again on resume");
    assert_eq!(runs_b.load(Ordering::SeqCst), 1, "b ran again on resume");
    let st = ep.get_state(&cfg).await.unwrap();
    assert!(st.next.is_empty());
    assert_eq!(st.values.output(), &json!("23 yes"));
}

#[tokio::test]
async fn a_resume_streams_like_a_graphs() {
    let (runs_a, runs_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, b) = (counted("a", 1, &runs_a), counted("b", 2, &runs_b));
    let ep = Entrypoint::<i64, String>::new("flow", move |x, ctx| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            let (ra, rb) = futures::try_join!(ctx.call(&a, x), ctx.call(&b, x))?;
            let answer = ctx.interrupt(json!({"sum": ra + rb}))?;
            Ok(format!("{} {}", ra + rb, answer.as_str().unwrap_or_default()))
        }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("sr");
    let opts = || StreamOptions::modes([StreamMode::Updates, StreamMode::Values]);
    let paused: Vec<RunEvent<_>> = ep.stream(10, cfg.clone(), opts()).collect().await;
    let Some(RunEvent::End(Ok(out))) = paused.last() else {
        panic!("the first run ends paused: {paused:?}")
    };
    assert_eq!(out.status, RunStatus::Interrupted);

    // LangGraph: `wf.stream(Command(resume="yes"), cfg)`.
    let events: Vec<RunEvent<_>> = ep
        .stream_input(Command::resume("yes"), cfg.clone(), opts())
        .collect()
        .await;
    let mut updates = Vec::new();
    let mut values = Vec::new();
    for ev in &events[..events.len() - 1] {
        let RunEvent::Part(p) = ev else {
            panic!("one End, last: {events:?}")
        };
        match p.mode {
            StreamMode::Updates => updates.push(p.data_json().unwrap()),
            StreamMode::Values => values.push(p.data_json().unwrap()),
            _ => {}
        }
    }
    assert_eq!(updates.last(), Some(&json!({"flow": "23 yes"})), "{updates:?}");
    assert!(
        updates.iter().all(|u| u.get("__interrupt__").is_none()),
        "{updates:?}"
    );
    assert_eq!(values.last(), Some(&json!("23 yes")), "{values:?}");
    let Some(RunEvent::End(Ok(done))) = events.last() else {
        panic!("the resumed run ends done: {events:?}")
    };
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.output(), &json!("23 yes"));
    assert_eq!(
        (runs_a.load(Ordering::SeqCst), runs_b.load(Ordering::SeqCst)),
        (1, 1),
        "the finished calls are replayed, not run again"
    );
    // Nothing left to resume: the same refusal as a graph's.
    let again: Vec<RunEvent<_>> = ep
        .stream_input(Command::resume("no"), cfg, opts())
        .collect()
        .await;
    assert!(
        matches!(again.last(), Some(RunEvent::End(Err(Error::InvalidResume(_))))),
        "{again:?}"
    );
}

#[tokio::test]
async fn an_interrupt_inside_a_task_pauses_and_resumes_it() {
    let runs_first = Arc::new(AtomicUsize::new(0));
    let first = counted("first", 0, &runs_first);
    let asks = Arc::new(AtomicUsize::new(0));
    let asks2 = Arc::clone(&asks);
    let ask = Task::new("ask", move |q: String, ctx| {
        let asks = Arc::clone(&asks2);
        async move {
            asks.fetch_add(1, Ordering::SeqCst);
            let a = ctx.interrupt(format!("{q}?"))?;
            let b = ctx.interrupt("again?")?;
            Ok(format!(
                "{}+{}",
                a.as_str().unwrap_or_default(),
                b.as_str().unwrap_or_default()
            ))
        }
    });
    let ep = Entrypoint::<i64, String>::new("asker", move |x, ctx| {
        let (first, ask) = (first.clone(), ask.clone());
        async move {
            let n = ctx.call(&first, x).await?;
            let answer = ctx.call(&ask, format!("n={n}")).await?;
            Ok(answer)
        }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("t");
    let p1 = ep.invoke(7, cfg.clone()).await.unwrap();
    assert_eq!(p1.status, RunStatus::Interrupted);
    assert_eq!(p1.interrupts[0].value, json!("n=7?"));
    let p2 = ep.resume(Command::resume("x"), cfg.clone()).await.unwrap();
    assert_eq!(p2.status, RunStatus::Interrupted);
    assert_eq!(p2.interrupts[0].value, json!("again?"));
    assert_ne!(p1.interrupts[0].id, p2.interrupts[0].id);
    let done = ep.resume(Command::resume("y"), cfg).await.unwrap();
    assert_eq!(done.value.as_deref(), Some("x+y"));
    assert_eq!(runs_first.load(Ordering::SeqCst), 1);
    // The interrupting task itself runs once per attempt: it had not finished.
    assert_eq!(asks.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn previous_is_the_last_return_value_on_the_thread() {
    let ep = Entrypoint::<i64, i64>::new("acc", |x, ctx| async move {
        let prev: Option<i64> = ctx.previous()?;
        Ok(prev.unwrap_or(0) + x)
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("acc");
    assert_eq!(ep.invoke(1, cfg.clone()).await.unwrap().value, Some(1));
    assert_eq!(ep.invoke(2, cfg.clone()).await.unwrap().value, Some(3));
    assert_eq!(ep.invoke(3, cfg).await.unwrap().value, Some(6));
    // Another thread starts from nothing.
    assert_eq!(
        ep.invoke(5, RunConfig::thread("other")).await.unwrap().value,
        Some(5)
    );
}

#[tokio::test]
async fn final_returns_one_value_and_saves_another() {
    let ep = Entrypoint::<i64, String>::new("fin", |x, ctx| async move {
        let prev: Option<i64> = ctx.previous()?;
        let total = prev.unwrap_or(0) + x;
        Ok(Final::new(format!("seen {:?}", prev), total))
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("f");
    assert_eq!(
        ep.invoke(2, cfg.clone()).await.unwrap().value.as_deref(),
        Some("seen None")
    );
    assert_eq!(
        ep.invoke(3, cfg.clone()).await.unwrap().value.as_deref(),
        Some("seen Some(2)")
    );
    let st = ep.get_state(&cfg).await.unwrap();
    assert_eq!(st.values.previous(), &json!(5));
    assert_eq!(st.values.output(), &json!("seen Some(2)"));
}

#[tokio::test]
async fn streams_updates_custom_and_values_as_langgraph_shapes_them() {
    let step = Task::new("step", |x: i64, ctx| async move {
        ctx.write(json!({"task_progress": x}));
        Ok(x * 2)
    });
    let ep = Entrypoint::<i64, i64>::new("main", move |x, ctx| {
        let step = step.clone();
        async move {
            ctx.write("starting");
            let y = ctx.call(&step, x).await?;
            Ok(y + 1)
        }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let opts = StreamOptions::modes([StreamMode::Updates, StreamMode::Custom, StreamMode::Values]);
    let events: Vec<RunEvent<_>> = ep.stream(4, RunConfig::thread("s"), opts).collect().await;
    let mut seen = Vec::new();
    let mut ends = 0;
    for ev in &events {
        match ev {
            RunEvent::Part(p) => seen.push((p.mode.as_str(), p.data_json().unwrap())),
            RunEvent::End(r) => {
                ends += 1;
                assert_eq!(r.as_ref().unwrap().values.output(), &json!(9));
            }
        }
    }
    assert_eq!(ends, 1);
    assert!(matches!(events.last(), Some(RunEvent::End(_))));
    let expected: Vec<(&str, Value)> = vec![
        ("custom", json!("starting")),
        ("custom", json!({"task_progress": 4})),
        ("updates", json!({"step": 8})),
        ("updates", json!({"main": 9})),
        ("values", json!(9)),
    ];
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_saved_result_that_no_longer_decodes_is_a_typed_error_naming_the_task() {
    let saver = Arc::new(InMemorySaver::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let v1_task = counted("lookup", 0, &runs);
    let v1 = Entrypoint::<i64, String>::new("job", move |x, ctx| {
        let t = v1_task.clone();
        async move {
            let n = ctx.call(&t, x).await?;
            ctx.interrupt("confirm")?;
            Ok(n.to_string())
        }
    })
    .checkpointer_dyn(saver.clone())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("d");
    assert_eq!(
        v1.invoke(41, cfg.clone()).await.unwrap().status,
        RunStatus::Interrupted
    );

    // The code changes while the thread waits: `lookup` now returns a record.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Record {
        id: i64,
    }
    let runs2 = Arc::new(AtomicUsize::new(0));
    let r2 = Arc::clone(&runs2);
    let v2_task = Task::new("lookup", move |x: i64, _ctx| {
        let r2 = Arc::clone(&r2);
        async move {
            r2.fetch_add(1, Ordering::SeqCst);
            Ok(Record { id: x })
        }
    });
    let v2 = Entrypoint::<i64, String>::new("job", move |x, ctx| {
        let t = v2_task.clone();
        async move {
            let r = ctx.call(&t, x).await?;
            ctx.interrupt("confirm")?;
            Ok(r.id.to_string())
        }
    })
    .checkpointer_dyn(saver)
    .compile()
    .unwrap();
    let err = v2.resume(Command::resume("ok"), cfg).await.unwrap_err();
    let decode = err
        .find_source::<TaskResultDecodeError>()
        .expect("a task decode error");
    assert_eq!(decode.task, "lookup");
    assert_eq!(decode.call, 0);
    assert!(
        matches!(&err, Error::Node { node, .. } if node == "job"),
        "{err:?}"
    );
    assert!(err.to_string().contains("lookup"), "{err}");
    assert_eq!(runs2.load(Ordering::SeqCst), 0, "the task was silently run again");
}

#[tokio::test]
async fn after_an_error_a_continued_run_replays_the_tasks_that_finished() {
    let runs_ok = Arc::new(AtomicUsize::new(0));
    let ok = counted("ok", 0, &runs_ok);
    let attempts = Arc::new(AtomicUsize::new(0));
    let attempts2 = Arc::clone(&attempts);
    let flaky = Task::new("flaky", move |x: i64, _ctx| {
        let attempts = Arc::clone(&attempts2);
        async move {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(NodeError::fatal("first attempt fails"));
            }
            Ok(x)
        }
    });
    let ep = Entrypoint::<i64, i64>::new("e", move |x, ctx| {
        let (ok, flaky) = (ok.clone(), flaky.clone());
        async move {
            let a = ctx.call(&ok, x).await?;
            let b = ctx.call(&flaky, x).await?;
            Ok(a + b)
        }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("e");
    let err = ep.invoke(5, cfg.clone()).await.unwrap_err();
    assert!(err.to_string().contains("first attempt fails"), "{err}");
    let out = ep.invoke_input(RunInput::Continue, cfg).await.unwrap();
    assert_eq!(out.value, Some(10));
    assert_eq!(runs_ok.load(Ordering::SeqCst), 1);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn without_a_checkpointer_tasks_simply_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let t = counted("t", 1, &runs);
    let ep = Entrypoint::<i64, i64>::new("plain", move |x, ctx| {
        let t = t.clone();
        async move { Ok(ctx.call(&t, x).await? + ctx.call(&t, x).await?) }
    })
    .compile()
    .unwrap();
    assert_eq!(ep.invoke(1, RunConfig::default()).await.unwrap().value, Some(4));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn bad_input_is_an_error_naming_the_input() {
    let ep = Entrypoint::<i64, i64>::new("typed", |x, _ctx| async move { Ok(x) })
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let input = RunInput::Json(json!({"input": "not a number"}));
    let err = ep.invoke_input(input, RunConfig::thread("b")).await.unwrap_err();
    assert!(err.to_string().contains("input"), "{err}");
    assert!(matches!(err, Error::Node { .. }), "{err:?}");
}

/// A backend that saves in order on its own writer (as SQLite does): operations are
/// queued when called and applied one after another by a background task, whether or not
/// anyone polls their futures. The put of the step-0 checkpoint (a new input's first
/// step) stays in flight until a later operation is queued behind it or a task's side
/// effect happens, whichever comes first, and says when it lands in `log`.
mod ordered {
    use graphloom_core::checkpoint::{
        Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Checkpointer, InMemorySaver,
        ListQuery, Version,
    };
    use graphloom_core::Result;
    use serde_json::Value;
    use std::collections::BTreeMap;
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use tokio::sync::{mpsc, oneshot, Notify};

    pub type Log = Arc<Mutex<Vec<String>>>;

    enum Op {
        Put(
            Box<(
                CheckpointConfig,
                Checkpoint,
                CheckpointMetadata,
                BTreeMap<String, Version>,
            )>,
            oneshot::Sender<Result<CheckpointConfig>>,
        ),
        Writes(
            CheckpointConfig,
            Vec<(String, Value)>,
            String,
            oneshot::Sender<Result<()>>,
        ),
    }

    #[derive(Clone)]
    pub struct Ordered {
        inner: InMemorySaver,
        tx: mpsc::UnboundedSender<Op>,
    }

    async fn apply(inner: &InMemorySaver, log: &Log, op: Op) {
        match op {
            Op::Put(put, done) => {
                let (c, cp, m, nv) = *put;
                let step = m.step;
                let r = inner.put(&c, cp, m, nv).await;
                log.lock().unwrap().push(format!("checkpoint {step} saved"));
                let _ = done.send(r);
            }
            Op::Writes(c, w, t, done) => {
                let _ = done.send(inner.put_writes(&c, w, &t, "").await);
            }
        }
    }

    impl Ordered {
        pub fn new(log: Log, side_effect: Arc<Notify>) -> Self {
            let inner = InMemorySaver::new();
            let (tx, mut rx) = mpsc::unbounded_channel::<Op>();
            let saver = inner.clone();
            tokio::spawn(async move {
                while let Some(op) = rx.recv().await {
                    let first_step = matches!(&op, Op::Put(put, _) if put.2.step == 0);
                    if !first_step {
                        apply(&saver, &log, op).await;
                        continue;
                    }
                    tokio::select! {
                        next = rx.recv() => {
                            apply(&saver, &log, op).await;
                            if let Some(next) = next {
                                apply(&saver, &log, next).await;
                            }
                        }
                        () = side_effect.notified() => apply(&saver, &log, op).await,
                    }
                }
            });
            Self { inner, tx }
        }
    }

    async fn answer<T>(rx: oneshot::Receiver<Result<T>>) -> Result<T> {
        rx.await.unwrap_or_else(|_| {
            Err(graphloom_core::Error::Backend(graphloom_core::BackendError::new(
                graphloom_core::BackendErrorKind::Other,
                "writer stopped",
            )))
        })
    }

    impl Checkpointer for Ordered {
        async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
            self.inner.get_tuple(config).await
        }
        async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
            self.inner.list(query).await
        }
        fn put(
            &self,
            config: &CheckpointConfig,
            checkpoint: Checkpoint,
            metadata: CheckpointMetadata,
            new_versions: BTreeMap<String, Version>,
        ) -> impl Future<Output = Result<CheckpointConfig>> + Send {
            let (done, rx) = oneshot::channel();
            let _ = self.tx.send(Op::Put(
                Box::new((config.clone(), checkpoint, metadata, new_versions)),
                done,
            ));
            answer(rx)
        }
        fn put_writes(
            &self,
            config: &CheckpointConfig,
            writes: Vec<(String, Value)>,
            task_id: &str,
            _task_path: &str,
        ) -> impl Future<Output = Result<()>> + Send {
            let (done, rx) = oneshot::channel();
            let _ = self
                .tx
                .send(Op::Writes(config.clone(), writes, task_id.to_owned(), done));
            answer(rx)
        }
        async fn delete_thread(&self, thread_id: &str) -> Result<()> {
            self.inner.delete_thread(thread_id).await
        }
        async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
            self.inner.copy_thread(source, target).await
        }
        fn saves_in_order(&self) -> bool {
            true
        }
    }
}

#[tokio::test]
async fn no_task_runs_before_the_checkpoint_it_is_keyed_to_is_saved() {
    // On a backend that saves in order, a new input's first checkpoint is still being
    // saved when the entrypoint starts. A side effect before it lands would be repeated
    // under a new call id if the process died then: the first call must wait for it.
    let log: ordered::Log = Arc::default();
    let side_effect = Arc::new(tokio::sync::Notify::new());
    let saver = ordered::Ordered::new(Arc::clone(&log), Arc::clone(&side_effect));
    let (log2, fx) = (Arc::clone(&log), Arc::clone(&side_effect));
    let effect = Task::new("effect", move |x: i64, _ctx| {
        let (log, fx) = (Arc::clone(&log2), Arc::clone(&fx));
        async move {
            log.lock().unwrap().push("side effect".into());
            fx.notify_one();
            Ok(x)
        }
    });
    let ep = Entrypoint::<i64, i64>::new("once", move |x, ctx| {
        let effect = effect.clone();
        async move { ctx.call(&effect, x).await }
    })
    .checkpointer(saver)
    .compile()
    .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), ep.invoke(3, RunConfig::thread("o")))
        .await
        .expect("the run finishes")
        .unwrap();
    assert_eq!(out.value, Some(3));
    let log = log.lock().unwrap().clone();
    let at = |what: &str| {
        log.iter()
            .position(|l| l == what)
            .unwrap_or_else(|| panic!("no `{what}` in {log:?}"))
    };
    assert!(
        at("checkpoint -1 saved") < at("side effect"),
        "the task ran before its checkpoint was saved: {log:?}"
    );
}

#[tokio::test]
async fn a_task_may_call_tasks_whose_results_are_replayed_too() {
    let runs_leaf = Arc::new(AtomicUsize::new(0));
    let leaf = counted("leaf", 100, &runs_leaf);
    let runs_outer = Arc::new(AtomicUsize::new(0));
    let ro = Arc::clone(&runs_outer);
    let outer = Task::new("outer", move |x: i64, ctx| {
        let (leaf, ro) = (leaf.clone(), Arc::clone(&ro));
        async move {
            ro.fetch_add(1, Ordering::SeqCst);
            let a = ctx.call(&leaf, x).await?;
            // Pauses the first time: `leaf` has finished and is replayed on resume.
            let more = ctx.interrupt("more?")?;
            Ok(a + more.as_i64().unwrap_or_default())
        }
    });
    let ep = Entrypoint::<i64, i64>::new("nest", move |x, ctx| {
        let outer = outer.clone();
        async move { ctx.call(&outer, x).await }
    })
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let cfg = RunConfig::thread("n");
    assert_eq!(
        ep.invoke(1, cfg.clone()).await.unwrap().status,
        RunStatus::Interrupted
    );
    let done = ep.resume(Command::resume(5), cfg.clone()).await.unwrap();
    assert_eq!(done.value, Some(106));
    assert_eq!(runs_leaf.load(Ordering::SeqCst), 1);
    assert_eq!(runs_outer.load(Ordering::SeqCst), 2);
    // The graph underneath keeps the usual history: input, start, the entrypoint's step.
    let history = ep
        .graph()
        .get_state_history(&cfg, graphloom_core::HistoryQuery::default())
        .await
        .unwrap();
    let steps: Vec<i64> = history
        .iter()
        .filter_map(|s| s.metadata.as_ref())
        .map(|m| m.step)
        .collect();
    // The functional API's numbering: `-1` the input (the entrypoint next), `0` its step.
    assert_eq!(steps, [0, -1]);
    assert_eq!(history[1].next, ["nest"]);
    assert_eq!(history[0].values.output(), &json!(106));
}

#[tokio::test]
async fn a_retried_entrypoint_replays_the_calls_its_failed_attempt_finished() {
    let runs_ok = Arc::new(AtomicUsize::new(0));
    let ok = counted("ok", 0, &runs_ok);
    let attempts = Arc::new(AtomicUsize::new(0));
    let a2 = Arc::clone(&attempts);
    let flaky = Task::new("flaky", move |x: i64, _ctx| {
        let attempts = Arc::clone(&a2);
        async move {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(NodeError::new("transient"));
            }
            Ok(x)
        }
    });
    let ep = Entrypoint::<i64, i64>::new("retried", move |x, ctx| {
        let (ok, flaky) = (ok.clone(), flaky.clone());
        async move {
            let a = ctx.call(&ok, x).await?;
            Ok(a + ctx.call(&flaky, x).await?)
        }
    })
    .retry(graphloom_core::RetryPolicy::attempts(3).initial_interval(Duration::from_millis(1)))
    .checkpointer(InMemorySaver::new())
    .compile()
    .unwrap();
    let out = ep.invoke(4, RunConfig::thread("r")).await.unwrap();
    assert_eq!(out.value, Some(8));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        runs_ok.load(Ordering::SeqCst),
        1,
        "the retry ran a finished call again"
    );
}
