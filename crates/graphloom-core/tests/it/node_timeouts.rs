//! Node timeout policies: a hard run cap, an idle limit that progress (heartbeats, stream
//! writes, model tokens) refreshes, and timeouts retried by default.
//!
//! Every test runs on tokio's paused clock: time moves only when every task waits, so the
//! limits are exact and nothing waits in real time.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Counter {
    #[reducer(add)]
    n: i64,
}

const TICK: Duration = Duration::from_millis(30);
const IDLE: Duration = Duration::from_millis(50);

/// How a node shows life between its ticks of work.
#[derive(Clone, Copy)]
enum Signal {
    Nothing,
    Heartbeat,
    Write,
    Token,
}

/// One node, `work`, that does `ticks` ticks of `TICK` each, giving `signal` after each.
fn ticking(ticks: usize, signal: Signal, timeout: TimeoutPolicy) -> CompiledGraph<Counter> {
    StateGraph::<Counter>::new()
        .add_node("work", move |_s, rt: Runtime| async move {
            for i in 0..ticks {
                tokio::time::sleep(TICK).await;
                match signal {
                    Signal::Nothing => {}
                    Signal::Heartbeat => rt.heartbeat(),
                    Signal::Write => rt.write(serde_json::json!({ "tick": i })),
                    // What a model provider does with each token inside a node.
                    Signal::Token => {
                        if let Some(scoped) = graphloom_core::message_stream::current() {
                            scoped.emit_message(serde_json::json!({"id": "m1", "content": "t"}));
                        }
                    }
                }
            }
            Ok(CounterUpdate::new().n(1))
        })
        .node_timeout("work", timeout)
        .add_edge(START, "work")
        .add_edge("work", END)
        .compile()
        .unwrap()
}

async fn run(g: &CompiledGraph<Counter>) -> Result<i64> {
    g.invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .map(|o| o.values.n)
}

fn is_timeout(err: &Error, want: TimeoutKind, ms: u64) -> bool {
    matches!(err, Error::NodeTimeout { node, after_ms, kind } if node == "work" && *kind == want && *after_ms == ms)
}

#[tokio::test(start_paused = true)]
async fn a_silent_node_fails_its_idle_limit_long_before_its_hard_cap() {
    let policy = TimeoutPolicy::idle(IDLE).with_run(Duration::from_secs(60));
    let g = ticking(10, Signal::Nothing, policy);
    let started = tokio::time::Instant::now();
    let err = run(&g).await.unwrap_err();
    assert!(is_timeout(&err, TimeoutKind::Idle, 50), "{err}");
    assert_eq!(err.to_string(), "node `work` made no progress for 50 ms");
    assert_eq!(started.elapsed(), IDLE);
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_a_node_alive_past_its_idle_limit() {
    // Ten ticks of 30 ms take 300 ms, six times the idle limit.
    for refresh in [RefreshOn::Auto, RefreshOn::Heartbeat] {
        let g = ticking(
            10,
            Signal::Heartbeat,
            TimeoutPolicy::idle(IDLE).refresh_on(refresh),
        );
        assert_eq!(run(&g).await.unwrap(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn stream_writes_and_model_tokens_are_progress_unless_only_heartbeats_count() {
    for signal in [Signal::Write, Signal::Token] {
        let g = ticking(10, signal, TimeoutPolicy::idle(IDLE));
        assert_eq!(run(&g).await.unwrap(), 1);
        let strict = ticking(
            10,
            signal,
            TimeoutPolicy::idle(IDLE).refresh_on(RefreshOn::Heartbeat),
        );
        let err = run(&strict).await.unwrap_err();
        assert!(is_timeout(&err, TimeoutKind::Idle, 50), "{err}");
    }
}

#[tokio::test(start_paused = true)]
async fn progress_never_extends_the_hard_run_timeout() {
    let policy = TimeoutPolicy::run(Duration::from_millis(100)).with_idle(IDLE);
    let g = ticking(10, Signal::Heartbeat, policy);
    let started = tokio::time::Instant::now();
    let err = run(&g).await.unwrap_err();
    assert!(is_timeout(&err, TimeoutKind::Run, 100), "{err}");
    assert_eq!(err.to_string(), "node `work` timed out after 100 ms");
    assert_eq!(started.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_is_retried_by_default_with_a_fresh_idle_clock() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let g = StateGraph::<Counter>::new()
        .add_node("work", move |_s, _rt| {
            let first = c.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first {
                    std::future::pending::<()>().await;
                }
                // The retry works for longer than the idle limit in total, each piece
                // within it: its clock started with the attempt, not the task.
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok(CounterUpdate::new().n(1))
            }
        })
        .node_timeout("work", TimeoutPolicy::idle(IDLE))
        .retry(
            "work",
            RetryPolicy::attempts(2)
                .initial_interval(Duration::from_millis(10))
                .jitter(false),
        )
        .add_edge(START, "work")
        .add_edge("work", END)
        .compile()
        .unwrap();
    assert_eq!(run(&g).await.unwrap(), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_retry_predicate_can_refuse_to_retry_timeouts() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let g = StateGraph::<Counter>::new()
        .add_node("work", move |_s, _rt| {
            c.fetch_add(1, Ordering::SeqCst);
            async {
                std::future::pending::<()>().await;
                Ok(NodeOutput::None)
            }
        })
        .node_timeout("work", TimeoutPolicy::idle(IDLE))
        .retry(
            "work",
            RetryPolicy::attempts(3).retry_on(|e| e.kind() != NodeErrorKind::TimedOut),
        )
        .add_edge(START, "work")
        .add_edge("work", END)
        .compile()
        .unwrap();
    let err = run(&g).await.unwrap_err();
    assert!(is_timeout(&err, TimeoutKind::Idle, 50), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_duration_is_a_hard_run_timeout() {
    let p = TimeoutPolicy::from(Duration::from_secs(3));
    assert_eq!(p.run_timeout(), Some(Duration::from_secs(3)));
    assert_eq!(p.idle_timeout(), None);
    assert_eq!(p.refresh(), RefreshOn::Auto);
}
