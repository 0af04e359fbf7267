//! Error handlers: a node's handler runs once its retries are spent, takes the node's place
//! (its update, its `goto`; the node's edges are not followed), is told the failure, and a
//! run stopped while it runs resumes into the handler, never into the node. Graph-wide
//! defaults apply to nodes that set nothing of their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use futures::StreamExt;
use graphloom_core::checkpoint::InMemorySaver;
use graphloom_core::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reducer(append)]
    log: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("ledger unreachable")]
struct Ledger;

/// Bound on anything a test awaits.
const WAIT: Duration = Duration::from_secs(10);

fn no_wait_retries(n: usize) -> RetryPolicy {
    RetryPolicy::attempts(n)
        .initial_interval(Duration::from_millis(1))
        .jitter(false)
}

/// `a` always fails (after `attempts` tries) and routes to `b` when it does not; its
/// handler writes what it was told and goes to `fallback`.
fn compensated(calls: Arc<AtomicUsize>, seen: Arc<Mutex<Option<NodeFailure>>>) -> CompiledGraph<Log> {
    StateGraph::<Log>::new()
        .add_node("a", move |_s, _rt| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<LogUpdate, _>(NodeError::from(Ledger)) }
        })
        .retry("a", no_wait_retries(3))
        .error_handler("a", move |_s, failure: NodeFailure, _rt| {
            let seen = Arc::clone(&seen);
            async move {
                let note = format!("{} after {}: {}", failure.node, failure.attempts, failure.message);
                *seen.lock().unwrap() = Some(failure);
                Ok(Command::new()
                    .update(LogUpdate::new().log(vec![note]))
                    .goto("fallback"))
            }
        })
        .destinations("a", ["fallback"])
        .add_node("b", |_s, _rt| async {
            Ok(LogUpdate::new().log(vec!["b".into()]))
        })
        .add_node("fallback", |_s, _rt| async {
            Ok(LogUpdate::new().log(vec!["fallback".into()]))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .add_edge("fallback", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_handler_takes_the_failed_nodes_place_after_its_retries() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(None));
    let g = compensated(Arc::clone(&calls), Arc::clone(&seen));
    let mut updates = Vec::new();
    let mut s = g.stream(
        RunInput::Update(LogUpdate::new()),
        RunConfig::thread("t"),
        StreamOptions::modes([StreamMode::Updates]),
    );
    while let Some(ev) = s.next().await {
        match ev {
            RunEvent::Part(p) => updates.push(p.data_json().unwrap()),
            RunEvent::End(end) => assert!(end.is_ok(), "{end:?}"),
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the retries run first");
    // The handler's update streams under its own name; `a`'s edge to `b` is not followed.
    assert_eq!(
        updates,
        vec![
            serde_json::json!({"__error_handler__a": {"log": ["a after 3: ledger unreachable"]}}),
            serde_json::json!({"fallback": {"log": ["fallback"]}}),
        ]
    );
    let failure = seen.lock().unwrap().clone().unwrap();
    assert_eq!(failure.kind, NodeErrorKind::Retryable);
    assert!(
        failure.downcast_ref::<Ledger>().is_some(),
        "the node's own error is the source"
    );
    let st = g.get_state(&RunConfig::thread("t")).await.unwrap();
    assert_eq!(st.values.log, vec!["a after 3: ledger unreachable", "fallback"]);
    assert!(st.next.is_empty());
}

#[tokio::test]
async fn a_run_stopped_while_the_handler_runs_resumes_into_the_handler_not_the_node() {
    let node_calls = Arc::new(AtomicUsize::new(0));
    let handler_calls = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let (n, h, st) = (
        Arc::clone(&node_calls),
        Arc::clone(&handler_calls),
        Arc::clone(&started),
    );
    let g = StateGraph::<Log>::new()
        .add_node("pay", move |_s, _rt| {
            n.fetch_add(1, Ordering::SeqCst);
            async { Err::<LogUpdate, _>(NodeError::fatal("card declined")) }
        })
        .error_handler("pay", move |_s, failure, _rt| {
            let first = h.fetch_add(1, Ordering::SeqCst) == 0;
            let started = Arc::clone(&st);
            async move {
                if first {
                    // The process "dies" here: the run is dropped while the handler waits.
                    started.notify_one();
                    std::future::pending::<()>().await;
                }
                Ok(LogUpdate::new().log(vec![format!("refunded: {}", failure.message)]))
            }
        })
        .add_edge(START, "pay")
        .add_edge("pay", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t");
    tokio::select! {
        out = g.invoke(LogUpdate::new(), cfg.clone()) => panic!("the first handler never returns: {out:?}"),
        () = started.notified() => {}
        () = tokio::time::sleep(WAIT) => panic!("the handler did not start"),
    }
    // What a resume sees: the node still to run, its failure saved.
    let st = g.get_state(&cfg).await.unwrap();
    assert_eq!(st.next, vec!["pay".to_string()]);
    let out = tokio::time::timeout(WAIT, g.invoke_input(RunInput::Continue, cfg.clone()))
        .await
        .expect("the resume ends")
        .unwrap();
    assert_eq!(out.values.log, vec!["refunded: card declined"]);
    assert_eq!(node_calls.load(Ordering::SeqCst), 1, "the node never runs again");
    assert_eq!(handler_calls.load(Ordering::SeqCst), 2);
    // The resumed handler was told the saved failure: kind and message, no typed source.
}

#[tokio::test]
async fn node_defaults_apply_where_a_node_sets_nothing_and_a_nodes_own_wins() {
    let g = StateGraph::<Log>::new()
        .node_defaults(
            NodeDefaults::new()
                .retry(no_wait_retries(2))
                .timeout(TimeoutPolicy::idle(Duration::from_millis(50)))
                .error_handler(|_s, f: NodeFailure, _rt| async move {
                    Ok(LogUpdate::new()
                        .log(vec![format!("default: {} {:?} x{}", f.node, f.kind, f.attempts)]))
                }),
        )
        .add_node("hangs", |_s, _rt| async {
            std::future::pending::<()>().await;
            Ok(LogUpdate::new())
        })
        .add_node("fails", |_s, _rt| async {
            Err::<LogUpdate, _>(NodeError::fatal("no"))
        })
        .retry("fails", no_wait_retries(1))
        .error_handler("fails", |_s, f: NodeFailure, _rt| async move {
            Ok(LogUpdate::new().log(vec![format!("own: {} x{}", f.node, f.attempts)]))
        })
        .add_edge(START, "hangs")
        .add_edge(START, "fails")
        .add_edge("hangs", END)
        .add_edge("fails", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let out = tokio::time::timeout(WAIT, g.invoke(LogUpdate::new(), RunConfig::thread("t")))
        .await
        .expect("the run ends")
        .unwrap();
    let mut log = out.values.log;
    log.sort();
    assert_eq!(log, vec!["default: hangs TimedOut x2", "own: fails x1"]);
}

#[tokio::test]
async fn a_failing_handler_fails_the_run_under_its_own_name() {
    let g = StateGraph::<Log>::new()
        .add_node("a", |_s, _rt| async {
            Err::<LogUpdate, _>(NodeError::fatal("first"))
        })
        .error_handler("a", |_s, _f, _rt| async {
            Err::<LogUpdate, _>(NodeError::fatal("the compensation failed too"))
        })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(LogUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Node { node, message, .. } if node == "__error_handler__a" && message == "the compensation failed too"),
        "{err}"
    );
}

#[tokio::test]
async fn a_handler_may_ask_a_person_and_the_resume_runs_the_handler_not_the_node() {
    let node_calls = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&node_calls);
    let g = StateGraph::<Log>::new()
        .add_node("pay", move |_s, _rt| {
            n.fetch_add(1, Ordering::SeqCst);
            async { Err::<LogUpdate, _>(NodeError::fatal("card declined")) }
        })
        .error_handler("pay", |_s, f: NodeFailure, rt: Runtime| async move {
            let answer = rt.interrupt(format!("{}; refund?", f.message))?;
            Ok(LogUpdate::new().log(vec![format!("refund: {}", answer.as_str().unwrap_or("?"))]))
        })
        .add_edge(START, "pay")
        .add_edge("pay", END)
        .checkpointer(InMemorySaver::new())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t");
    let paused = g.invoke(LogUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(paused.status, RunStatus::Interrupted);
    let st = g.get_state(&cfg).await.unwrap();
    let asked: Vec<_> = st.interrupts.iter().map(|i| i.value.clone()).collect();
    assert_eq!(asked, vec![serde_json::json!("card declined; refund?")]);
    assert_eq!(st.next, vec!["pay".to_string()]);
    let done = g.resume(Command::resume("yes"), cfg).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.values.log, vec!["refund: yes"]);
    assert_eq!(node_calls.load(Ordering::SeqCst), 1);
}
