//! `state.fork` from a checkpoint the thread's active run has made (its event streamed, as
//! protocol runs stream them) but not saved yet: the fork waits for the save instead of
//! answering `no_such_checkpoint`; a checkpoint that never comes still gets that answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{faulty, TestServer};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Bound on anything the test awaits.
const WAIT: Duration = Duration::from_secs(30);

async fn command(s: &TestServer, thread: &str, body: Value) -> Value {
    let (st, frame) = s.post(&format!("/threads/{thread}/commands"), body).await;
    assert_eq!(st, 200, "{frame}");
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_from_a_checkpoint_being_saved_waits_for_the_save() {
    let slot = Arc::default();
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("counter", faulty::counter(&slot, false))).await;
    let saver = slot.lock().unwrap().clone().expect("the graph was built");
    let thread = uuid::Uuid::now_v7().to_string();

    // The run's first checkpoint is made, and its save held.
    let held = saver.hold_next_save();
    let started = command(
        &s,
        &thread,
        json!({"id": 1, "method": "run.start", "params": {"assistant_id": "counter", "input": {}}}),
    )
    .await;
    assert_eq!(started["type"], "success", "{started}");
    let checkpoint = tokio::time::timeout(WAIT, held).await.unwrap().unwrap();

    // Saved a little after the fork asks for it.
    let release = Arc::clone(&saver);
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        release.release_save();
    });
    let forked = tokio::time::timeout(
        WAIT,
        command(
            &s,
            &thread,
            json!({"id": 2, "method": "state.fork", "params": {"checkpoint_id": checkpoint}}),
        ),
    )
    .await
    .unwrap();
    later.await.unwrap();
    assert_eq!(forked["type"], "success", "{forked}");
    let run = forked["result"]["run_id"].as_str().unwrap().to_owned();
    let (st, _) = tokio::time::timeout(WAIT, s.get(&format!("/threads/{thread}/runs/{run}/join")))
        .await
        .unwrap();
    assert_eq!(st, 200);
    let (_, row) = s.get(&format!("/threads/{thread}/runs/{run}")).await;
    assert_eq!(row["status"], "success", "{row}");

    // On a thread with no active run, a checkpoint it does not have is refused at once.
    let missing = command(
        &s,
        &thread,
        json!({"id": 3, "method": "state.fork", "params": {"checkpoint_id": "no-such-checkpoint"}}),
    )
    .await;
    assert_eq!(
        (missing["type"].as_str(), missing["error"].as_str()),
        (Some("error"), Some("no_such_checkpoint")),
        "{missing}"
    );
    s.stop().await;
}
