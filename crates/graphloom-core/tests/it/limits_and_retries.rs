//! Recursion limit, retries, node and run timeouts, node cache.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Counter {
    #[reducer(add)]
    n: i64,
}

fn looping(saver: InMemorySaver) -> CompiledGraph<Counter> {
    StateGraph::<Counter>::new()
        .add_node("inc", |_s, _rt| async { Ok(CounterUpdate::new().n(1)) })
        .add_edge(START, "inc")
        .add_conditional_edges_map(
            "inc",
            |s: &Counter| if s.n < 1000 { "inc" } else { END },
            [("inc", "inc"), (END, END)],
        )
        .checkpointer(saver)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn recursion_limit_stops_a_loop_with_a_typed_error_and_a_resumable_checkpoint() {
    let g = looping(InMemorySaver::new());
    let cfg = RunConfig::thread("r").recursion_limit(10);
    let err = g.invoke(CounterUpdate::new(), cfg.clone()).await.unwrap_err();
    assert!(matches!(err, Error::RecursionLimit { limit: 10 }), "{err}");
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.values.n, 10);
    assert_eq!(st.next, vec!["inc".to_string()]);
    // Continue with a higher limit: the run picks up where it stopped.
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("r").recursion_limit(2000))
        .await
        .unwrap();
    assert_eq!(out.values.n, 1000);
}

#[tokio::test]
async fn default_recursion_limit_guards_a_runaway_loop() {
    let g = looping(InMemorySaver::new());
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::thread("d"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RecursionLimit { limit } if limit == DEFAULT_RECURSION_LIMIT));
}

#[tokio::test]
async fn remaining_steps_tell_a_node_it_is_on_the_last_step() {
    let g = StateGraph::<Counter>::new()
        .add_node("inc", |_s, rt: Runtime| async move {
            if rt.is_last_step() {
                Ok(Command::new().goto(END))
            } else {
                Ok(Command::new().update(CounterUpdate::new().n(1)).goto("inc"))
            }
        })
        .destinations("inc", ["inc", END])
        .add_edge(START, "inc")
        .compile()
        .unwrap();
    let out = g
        .invoke(CounterUpdate::new(), RunConfig::default().recursion_limit(5))
        .await
        .unwrap();
    assert_eq!(out.values.n, 4);
}

fn flaky(fail_times: usize, calls: Arc<AtomicUsize>, fatal: bool) -> CompiledGraph<Counter> {
    StateGraph::<Counter>::new()
        .add_node("flaky", move |_s, _rt| {
            let k = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if k < fail_times {
                    if fatal {
                        Err(NodeError::fatal("bad input"))
                    } else {
                        Err(NodeError::new("connection reset"))
                    }
                } else {
                    Ok(CounterUpdate::new().n(1))
                }
            }
        })
        .retry(
            "flaky",
            RetryPolicy::attempts(3)
                .initial_interval(Duration::from_millis(1))
                .jitter(false),
        )
        .add_edge(START, "flaky")
        .add_edge("flaky", END)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn retry_then_success() {
    let calls = Arc::new(AtomicUsize::new(0));
    let out = flaky(2, Arc::clone(&calls), false)
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out.values.n, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn retry_exhausted_reports_the_last_error() {
    let calls = Arc::new(AtomicUsize::new(0));
    let err = flaky(10, Arc::clone(&calls), false)
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Node { node, message, .. } if node == "flaky" && message == "connection reset")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn errors_the_predicate_rejects_are_not_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let err = flaky(10, Arc::clone(&calls), true)
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Node { .. }));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn backoff_grows_by_the_factor_and_is_capped() {
    let p = RetryPolicy::attempts(10)
        .initial_interval(Duration::from_millis(100))
        .backoff_factor(2.0)
        .max_interval(Duration::from_millis(500))
        .jitter(false);
    assert_eq!(p.delay(1), Duration::from_millis(100));
    assert_eq!(p.delay(2), Duration::from_millis(200));
    assert_eq!(p.delay(3), Duration::from_millis(400));
    assert_eq!(p.delay(4), Duration::from_millis(500));
    let j = p.clone().jitter(true);
    for _ in 0..50 {
        let d = j.delay(1);
        assert!(
            d >= Duration::from_millis(100) && d <= Duration::from_millis(500),
            "{d:?}"
        );
    }
}

#[tokio::test]
async fn a_hanging_node_times_out_with_a_typed_error() {
    let g = StateGraph::<Counter>::new()
        .add_node("hang", |_s, _rt| async {
            std::future::pending::<()>().await;
            Ok(NodeOutput::None)
        })
        .node_timeout("hang", Duration::from_millis(50))
        .add_edge(START, "hang")
        .add_edge("hang", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::NodeTimeout { node, after_ms: 50, kind: TimeoutKind::Run } if node == "hang"),
        "{err}"
    );
}

/// Two parallel nodes: `fast` (counts its calls) and `slow`, which hangs until `slow_ok`.
fn fast_and_hanging() -> (
    CompiledGraph<Counter>,
    Arc<AtomicUsize>,
    Arc<std::sync::atomic::AtomicBool>,
) {
    let fast_calls = Arc::new(AtomicUsize::new(0));
    let f = Arc::clone(&fast_calls);
    let slow_ok = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = Arc::clone(&slow_ok);
    let g = StateGraph::<Counter>::new()
        .add_node("fast", move |_s, _rt| {
            f.fetch_add(1, Ordering::SeqCst);
            async { Ok(CounterUpdate::new().n(1)) }
        })
        .add_node("slow", move |_s, _rt| {
            let ok = s2.load(Ordering::SeqCst);
            async move {
                if !ok {
                    std::future::pending::<()>().await;
                }
                Ok(CounterUpdate::new().n(10))
            }
        })
        .add_edge(START, "fast")
        .add_edge(START, "slow")
        .add_edge("fast", END)
        .add_edge("slow", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    (g, fast_calls, slow_ok)
}

#[tokio::test]
async fn run_timeout_ends_the_run_and_keeps_finished_siblings() {
    let (g, fast_calls, slow_ok) = fast_and_hanging();
    let cfg = RunConfig::thread("to").timeout(Duration::from_millis(100));
    let err = g.invoke(CounterUpdate::new(), cfg.clone()).await.unwrap_err();
    assert!(matches!(err, Error::RunTimeout { after_ms: 100 }), "{err}");
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["slow".to_string()]);
    slow_ok.store(true, Ordering::SeqCst);
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("to"))
        .await
        .unwrap();
    assert_eq!(out.values.n, 11);
    assert_eq!(fast_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cached_node_is_not_run_again_for_the_same_key() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let g = StateGraph::<Counter>::new()
        .add_node("expensive", move |s: Arc<Counter>, _rt| {
            c.fetch_add(1, Ordering::SeqCst);
            let n = s.n;
            async move { Ok(CounterUpdate::new().n(n * 10)) }
        })
        .cache(
            "expensive",
            CachePolicy::with_key(Some(Duration::from_secs(60)), |s: &Counter| s.n.to_string()),
        )
        .add_edge(START, "expensive")
        .add_edge("expensive", END)
        .compile()
        .unwrap();
    let a = g
        .invoke(CounterUpdate::new().n(2), RunConfig::default())
        .await
        .unwrap();
    let b = g
        .invoke(CounterUpdate::new().n(2), RunConfig::default())
        .await
        .unwrap();
    let c3 = g
        .invoke(CounterUpdate::new().n(3), RunConfig::default())
        .await
        .unwrap();
    assert_eq!((a.values.n, b.values.n, c3.values.n), (22, 22, 33));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn cancel_token_stops_a_running_step_and_keeps_finished_siblings() {
    let (g, fast_calls, slow_ok) = fast_and_hanging();
    let token = CancelToken::new();
    let mut cfg = RunConfig::thread("c");
    cfg.cancel = Some(token.clone());
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        t2.cancel();
    });
    let err = g.invoke(CounterUpdate::new(), cfg.clone()).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");
    assert!(token.is_cancelled());
    assert_eq!(g.get_state(&cfg).await.unwrap().next, vec!["slow".to_string()]);
    // A cancelled token stops a new run before its first step.
    let err = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");
    slow_ok.store(true, Ordering::SeqCst);
    let out = g
        .invoke_input(RunInput::Continue, RunConfig::thread("c"))
        .await
        .unwrap();
    assert_eq!(out.values.n, 11);
    assert_eq!(fast_calls.load(Ordering::SeqCst), 1);
}

/// Regression: the steps left were counted as `limit - executed + 1`, which overflowed (a
/// panic in debug builds) for a limit of `usize::MAX` on the run's first step.
#[tokio::test]
async fn the_largest_recursion_limit_runs() {
    let g = looping(InMemorySaver::new());
    let out = g
        .invoke(
            CounterUpdate::new(),
            RunConfig::thread("max").recursion_limit(usize::MAX),
        )
        .await
        .unwrap();
    assert_eq!(out.values.n, 1000);
}

#[tokio::test(start_paused = true)]
async fn a_cached_output_is_reused_within_its_ttl_and_recomputed_after_it() {
    // The clock is paused: only `advance` moves it, so the TTL is exact and nothing sleeps.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let ttl = Duration::from_secs(30);
    let g = StateGraph::<Counter>::new()
        .add_node("expensive", move |s: Arc<Counter>, _rt| {
            let call = i64::try_from(c.fetch_add(1, Ordering::SeqCst)).unwrap() + 1;
            let n = s.n;
            // The output says which call made it, so a reused one is visible.
            async move { Ok(CounterUpdate::new().n(n * 100 + call)) }
        })
        .cache(
            "expensive",
            CachePolicy::with_key(Some(ttl), |s: &Counter| s.n.to_string()),
        )
        .add_edge(START, "expensive")
        .add_edge("expensive", END)
        .compile()
        .unwrap();
    let run = |g: CompiledGraph<Counter>| async move {
        g.invoke(CounterUpdate::new().n(1), RunConfig::default())
            .await
            .unwrap()
            .values
            .n
    };
    // `n` is a sum field: input 1, plus the node's write.
    assert_eq!(run(g.clone()).await, 1 + 101);
    tokio::time::advance(ttl - Duration::from_millis(1)).await;
    assert_eq!(run(g.clone()).await, 1 + 101, "reused within the TTL");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        run(g.clone()).await,
        1 + 102,
        "recomputed once the TTL has passed"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // The new entry has a fresh TTL.
    tokio::time::advance(ttl - Duration::from_millis(1)).await;
    assert_eq!(run(g.clone()).await, 1 + 102);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
