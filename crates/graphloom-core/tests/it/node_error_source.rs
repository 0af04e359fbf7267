//! A node's own error keeps its type: the caller downcasts it from the run's error, a retry
//! predicate matches on it, and the messages stay what they were.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::*;
use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Counter {
    #[reducer(add)]
    n: i64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum PaymentError {
    #[error("card declined (code {0})")]
    Declined(u16),
    #[error("gateway rate limited")]
    RateLimited,
}

/// An error that wraps another, as a client library's error wraps its transport's.
#[derive(Debug, thiserror::Error)]
#[error("ledger unavailable")]
struct LedgerError {
    #[source]
    io: std::io::Error,
}

/// One node, `pay`, failing with `errors[k]` on call `k` and succeeding after them.
fn paying(
    errors: Vec<NodeError>,
    calls: Arc<AtomicUsize>,
    retry: Option<RetryPolicy>,
) -> CompiledGraph<Counter> {
    let errors = Arc::new(errors);
    let mut g = StateGraph::<Counter>::new()
        .add_node("pay", move |_s, _rt| {
            let k = calls.fetch_add(1, Ordering::SeqCst);
            let errors = Arc::clone(&errors);
            async move {
                match errors.get(k) {
                    Some(e) => Err(e.clone()),
                    None => Ok(CounterUpdate::new().n(1)),
                }
            }
        })
        .add_edge(START, "pay")
        .add_edge("pay", END);
    if let Some(p) = retry {
        g = g.retry("pay", p);
    }
    g.compile().unwrap()
}

fn fast(p: RetryPolicy) -> RetryPolicy {
    p.initial_interval(Duration::from_millis(1)).jitter(false)
}

#[tokio::test]
async fn a_callers_downcast_finds_the_nodes_own_error_in_the_runs_error() {
    let g = StateGraph::<Counter>::new()
        .add_node("pay", |_s, _rt| async {
            // `?` on the node's own error type.
            Err(PaymentError::Declined(51))?;
            Ok(CounterUpdate::new())
        })
        .add_edge(START, "pay")
        .add_edge("pay", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    // The message is what it always was.
    assert_eq!(err.to_string(), "node `pay` failed: card declined (code 51)");
    assert!(matches!(
        &err,
        Error::Node { node, message, kind: NodeErrorKind::Retryable, .. }
            if node == "pay" && message == "card declined (code 51)"
    ));
    // Through std's source() ...
    let source = err.source().expect("the node's error is the source");
    assert_eq!(
        source.downcast_ref::<PaymentError>(),
        Some(&PaymentError::Declined(51))
    );
    // ... and through the helper.
    assert_eq!(
        err.find_source::<PaymentError>(),
        Some(&PaymentError::Declined(51))
    );
}

#[tokio::test]
async fn a_wrapped_cause_is_found_through_the_wrapper() {
    let g = StateGraph::<Counter>::new()
        .add_node("book", |_s, _rt| async {
            let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "ledger socket timed out");
            Err::<CounterUpdate, _>(NodeError::terminal(LedgerError { io }))
        })
        .add_edge(START, "book")
        .add_edge("book", END)
        .compile()
        .unwrap();
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "node `book` failed: ledger unavailable");
    assert!(matches!(
        &err,
        Error::Node {
            kind: NodeErrorKind::Terminal,
            ..
        }
    ));
    assert!(err.find_source::<LedgerError>().is_some());
    let io = err
        .find_source::<std::io::Error>()
        .expect("the chain reaches the io error");
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
}

#[tokio::test]
async fn a_retry_predicate_matches_on_the_error_type() {
    // Rate limits retry, a declined card does not: three calls, then the declined card ends
    // the run with its own error.
    let calls = Arc::new(AtomicUsize::new(0));
    let g = paying(
        vec![
            NodeError::from(PaymentError::RateLimited),
            NodeError::from(PaymentError::RateLimited),
            NodeError::from(PaymentError::Declined(5)),
            NodeError::from(PaymentError::RateLimited),
        ],
        Arc::clone(&calls),
        Some(fast(
            RetryPolicy::attempts(10).retry_when(|e: &PaymentError| *e == PaymentError::RateLimited),
        )),
    );
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        err.find_source::<PaymentError>(),
        Some(&PaymentError::Declined(5))
    );
}

#[tokio::test]
async fn retry_when_ignores_errors_of_other_types_and_plain_messages() {
    let calls = Arc::new(AtomicUsize::new(0));
    let g = paying(
        vec![NodeError::new("no typed cause")],
        Arc::clone(&calls),
        Some(fast(RetryPolicy::attempts(5).retry_when(|_: &PaymentError| true))),
    );
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(err.source().is_none());
    assert_eq!(err.to_string(), "node `pay` failed: no typed cause");
}

#[tokio::test]
async fn a_hand_written_predicate_can_downcast_too() {
    let calls = Arc::new(AtomicUsize::new(0));
    let g = paying(
        vec![NodeError::from(PaymentError::RateLimited)],
        Arc::clone(&calls),
        Some(fast(RetryPolicy::attempts(3).retry_on(|e: &NodeError| {
            e.kind() == NodeErrorKind::Retryable && e.downcast_ref::<PaymentError>().is_some()
        }))),
    );
    let out = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap();
    assert_eq!(out.values.n, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn terminal_errors_are_not_retried_by_the_default_policy_and_keep_their_source() {
    let calls = Arc::new(AtomicUsize::new(0));
    let g = paying(
        vec![NodeError::terminal(PaymentError::Declined(14))],
        Arc::clone(&calls),
        Some(fast(RetryPolicy::attempts(3))),
    );
    let err = g
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(matches!(
        &err,
        Error::Node {
            kind: NodeErrorKind::Terminal,
            ..
        }
    ));
    assert_eq!(
        err.find_source::<PaymentError>(),
        Some(&PaymentError::Declined(14))
    );
}

#[tokio::test]
async fn a_streamed_runs_end_keeps_the_source() {
    use futures::StreamExt;
    let g = paying(
        vec![NodeError::from(PaymentError::Declined(3))],
        Arc::new(AtomicUsize::new(0)),
        None,
    );
    let events: Vec<RunEvent<Counter>> = g
        .stream(
            RunInput::Update(CounterUpdate::new()),
            RunConfig::default(),
            StreamOptions::modes([StreamMode::Updates]),
        )
        .collect()
        .await;
    let Some(RunEvent::End(Err(err))) = events.last() else {
        panic!("the stream ends with the run's error");
    };
    assert_eq!(
        err.find_source::<PaymentError>(),
        Some(&PaymentError::Declined(3))
    );
}

#[tokio::test]
async fn a_subgraph_nodes_error_reaches_the_parents_caller() {
    let child = paying(
        vec![NodeError::terminal(PaymentError::Declined(61))],
        Arc::new(AtomicUsize::new(0)),
        None,
    );
    let parent = StateGraph::<Counter>::new()
        .add_subgraph_shared("checkout", child)
        .add_edge(START, "checkout")
        .add_edge("checkout", END)
        .compile()
        .unwrap();
    let err = parent
        .invoke(CounterUpdate::new(), RunConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Node { node, .. } if node == "checkout"),
        "{err}"
    );
    // The parent's error wraps the child run's error, which wraps the node's own.
    assert!(err.find_source::<Error>().is_some());
    assert_eq!(
        err.find_source::<PaymentError>(),
        Some(&PaymentError::Declined(61))
    );
}

#[test]
fn node_error_kinds() {
    assert_eq!(NodeError::new("x").kind(), NodeErrorKind::Retryable);
    assert_eq!(NodeError::fatal("x").kind(), NodeErrorKind::Terminal);
    assert_eq!(
        NodeError::TimedOut {
            after_ms: 1,
            kind: TimeoutKind::Run
        }
        .kind(),
        NodeErrorKind::TimedOut
    );
    assert_eq!(
        NodeError::Interrupted(Vec::new()).kind(),
        NodeErrorKind::Interrupted
    );
    let e = NodeError::fatal("while paying").with_source(PaymentError::RateLimited);
    assert_eq!(e.to_string(), "while paying");
    assert_eq!(e.downcast_ref::<PaymentError>(), Some(&PaymentError::RateLimited));
    // A source on a kind that carries none is ignored.
    let t = NodeError::TimedOut {
        after_ms: 5,
        kind: TimeoutKind::Idle,
    }
    .with_source(PaymentError::RateLimited);
    assert!(t.source().is_none());
}
