//! Finished tasks are not run again when a sibling fails and the run is resumed
//! (LangGraph's `test_pending_writes_resume`, under every durability mode).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{Checkpointer, InMemorySaver, ERROR};
use graphloom_core::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(State, Clone, Default, Debug)]
struct Sum {
    #[reducer(add)]
    value: i64,
}

async fn scenario(durability: Durability) {
    let one_calls = Arc::new(AtomicUsize::new(0));
    let two_calls = Arc::new(AtomicUsize::new(0));
    let two_fixed = Arc::new(AtomicBool::new(false));
    let saver = InMemorySaver::new();
    let (c1, c2, fixed) = (
        Arc::clone(&one_calls),
        Arc::clone(&two_calls),
        Arc::clone(&two_fixed),
    );
    let g = StateGraph::<Sum>::new()
        .add_node("one", move |_s, _rt| {
            c1.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(SumUpdate::new().value(2))
            }
        })
        .add_node("two", move |_s, _rt| {
            c2.fetch_add(1, Ordering::SeqCst);
            let ok = fixed.load(Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                if ok {
                    Ok(SumUpdate::new().value(3))
                } else {
                    Err(NodeError::new("I'm not good"))
                }
            }
        })
        .retry(
            "two",
            RetryPolicy::attempts(2)
                .initial_interval(Duration::from_millis(5))
                .jitter(false),
        )
        .add_edge(START, "one")
        .add_edge(START, "two")
        .add_edge("one", END)
        .add_edge("two", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    let cfg = RunConfig::thread("t1").durability(durability);

    let err = g
        .invoke(SumUpdate::new().value(1), cfg.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Node { node, message, .. } if node == "two" && message.contains("not good")),
        "{err}"
    );
    assert_eq!(one_calls.load(Ordering::SeqCst), 1);
    assert_eq!(two_calls.load(Ordering::SeqCst), 2);

    let state = g.get_state(&cfg).await.unwrap();
    assert_eq!(state.values.value, 1);
    assert_eq!(state.next, vec!["two".to_string()]);
    let one = state.tasks.iter().find(|t| t.name == "one").unwrap();
    let two = state.tasks.iter().find(|t| t.name == "two").unwrap();
    assert!(one.finished && one.error.is_none());
    assert!(!two.finished && two.error.as_deref().unwrap_or("").contains("not good"));

    // The saved pending writes: one's value and two's error.
    let tuple = saver.get_tuple(&state.config).await.unwrap().unwrap();
    let chans: Vec<(&str, &str)> = tuple
        .pending_writes
        .iter()
        .map(|w| (w.task_id.as_str(), w.channel.as_str()))
        .collect();
    assert!(chans.contains(&(one.id.as_str(), "value")), "{chans:?}");
    assert!(chans.contains(&(two.id.as_str(), ERROR)), "{chans:?}");

    // A failed resume re-runs only `two` and adds no checkpoint.
    let before = g
        .get_state_history(&cfg, HistoryQuery::default())
        .await
        .unwrap()
        .len();
    let err = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap_err();
    assert!(matches!(err, Error::Node { .. }));
    assert_eq!(one_calls.load(Ordering::SeqCst), 1);
    assert_eq!(two_calls.load(Ordering::SeqCst), 4);
    let after = g
        .get_state_history(&cfg, HistoryQuery::default())
        .await
        .unwrap()
        .len();
    assert_eq!(before, after, "a failed resume must not add a checkpoint");

    // Fixed: the resume finishes with one's saved write and two's new one.
    two_fixed.store(true, Ordering::SeqCst);
    let out = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap();
    assert_eq!(out.values.value, 6);
    assert_eq!(one_calls.load(Ordering::SeqCst), 1);
    assert_eq!(two_calls.load(Ordering::SeqCst), 5);
    assert!(g.get_state(&cfg).await.unwrap().next.is_empty());
}

#[tokio::test]
async fn pending_writes_resume_sync() {
    scenario(Durability::Sync).await;
}

#[tokio::test]
async fn pending_writes_resume_async() {
    scenario(Durability::Async).await;
}

#[tokio::test]
async fn pending_writes_resume_exit() {
    scenario(Durability::Exit).await;
}
