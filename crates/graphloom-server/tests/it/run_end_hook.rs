//! A hosted graph's own run limit and end hook ([`Hosting`]): the run gets the smaller of
//! the server's and the graph's limit, and the hook hears how each run ended before the
//! run's status and its thread's values are recorded; a failing hook changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{faulty, slow, Chat, ChatUpdate, TestServer};
use graphloom_core::{NodeError, StateGraph, END, START};
use graphloom_server::{hosted, GraphDeps, GraphFactory, Hosting, RunEnd, RunOutcome};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bound on anything the test awaits.
const WAIT: Duration = Duration::from_secs(30);

type Ends = Arc<Mutex<Vec<RunEnd>>>;

/// `slow` hosted with `limit` (if any) and a hook that records each end and writes
/// `decision: "<outcome>: <error>"` into the thread's state; a hook that then fails
/// when `fail_hook`.
fn hooked(limit: Option<Duration>, ends: &Ends, fail_hook: bool) -> GraphFactory {
    let ends = Arc::clone(ends);
    Arc::new(move |deps: &GraphDeps| {
        let graph = hosted(slow(deps)?);
        let mut hosting = Hosting::new(Arc::clone(&graph));
        if let Some(limit) = limit {
            hosting = hosting.run_timeout(limit);
        }
        let ends = Arc::clone(&ends);
        Ok(hosting
            .on_run_end(move |end: RunEnd| {
                let (graph, ends) = (Arc::clone(&graph), Arc::clone(&ends));
                async move {
                    ends.lock().unwrap().push(end.clone());
                    let decision = format!("{}: {}", end.outcome, end.error.unwrap_or_default());
                    graph
                        .update_state(&end.thread_id, None, Some(json!({"decision": decision})), None)
                        .await
                        .map_err(|e| e.to_string())?;
                    if fail_hook {
                        return Err("the hook's own failure".to_owned());
                    }
                    Ok(())
                }
            })
            .into_hosted())
    })
}

/// A graph whose only node fails, with a hook that records each end and then fails.
fn failing(ends: &Ends) -> GraphFactory {
    let ends = Arc::clone(ends);
    Arc::new(move |deps: &GraphDeps| {
        let g = StateGraph::<Chat>::new()
            .add_node("boom", |_s: Arc<Chat>, _rt| async {
                Err::<ChatUpdate, _>(NodeError::fatal("the tool exploded"))
            })
            .add_edge(START, "boom")
            .add_edge("boom", END)
            .checkpointer_dyn(Arc::clone(&deps.checkpointer))
            .compile()?;
        let ends = Arc::clone(&ends);
        Ok(Hosting::new(hosted(g))
            .on_run_end(move |end: RunEnd| {
                let ends = Arc::clone(&ends);
                async move {
                    ends.lock().unwrap().push(end);
                    Err::<(), _>("the hook failed too")
                }
            })
            .into_hosted())
    })
}

/// Start a background run of `graph` on a new thread with `input`, join it; the thread,
/// the run's row.
async fn run_to_end(s: &TestServer, graph: &str, input: Value) -> (String, Value) {
    let t = s.thread().await;
    let (st, run) = s
        .post(
            &format!("/threads/{t}/runs"),
            json!({"assistant_id": graph, "input": input}),
        )
        .await;
    assert_eq!(st, 200, "{run}");
    let rid = run["run_id"].as_str().unwrap().to_owned();
    let (st, _) = tokio::time::timeout(WAIT, s.get(&format!("/threads/{t}/runs/{rid}/join")))
        .await
        .expect("the run ends in time");
    assert_eq!(st, 200);
    let (st, row) = s.get(&format!("/threads/{t}/runs/{rid}")).await;
    assert_eq!(st, 200, "{row}");
    (t, row)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graphs_limit_ends_the_run_and_the_hook_writes_before_the_record() {
    let ends = Ends::default();
    let factory = hooked(Some(Duration::from_millis(300)), &ends, false);
    // The server allows an hour; the graph allows 300 ms.
    let s = TestServer::sqlite_with(
        |c| c.run_timeout = Some(Duration::from_secs(3600)),
        |b| b.graph("limited", factory),
    )
    .await;
    let (t, row) = run_to_end(&s, "limited", json!({"sleep_ms": 60_000})).await;
    assert_eq!(row["status"], "timeout", "{row}");

    let ends = ends.lock().unwrap().clone();
    assert_eq!(ends.len(), 1, "the hook is called once: {ends:?}");
    let end = &ends[0];
    assert_eq!(end.outcome, RunOutcome::Timeout);
    assert_eq!(end.run_id, row["run_id"].as_str().unwrap());
    assert_eq!(end.thread_id, t);
    assert_eq!(end.graph_id, "limited");
    assert_eq!(end.attempt, 1);
    assert_eq!(end.timeout, Some(Duration::from_millis(300)));
    assert_eq!(end.error.as_deref(), Some("run timed out after 300 ms"));

    // What the hook wrote is in the state, and in the thread's copy of it (recorded after).
    let (_, state) = s.get(&format!("/threads/{t}/state")).await;
    assert_eq!(
        state["values"]["decision"], "timeout: run timed out after 300 ms",
        "{state}"
    );
    let (_, thread) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(thread["status"], "error", "{thread}");
    assert_eq!(
        thread["values"]["decision"], "timeout: run timed out after 300 ms",
        "{thread}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_shorter_limit_wins_and_a_failing_hook_changes_nothing() {
    let ends = Ends::default();
    let factory = hooked(Some(Duration::from_secs(3600)), &ends, true);
    let s = TestServer::sqlite_with(
        |c| c.run_timeout = Some(Duration::from_millis(300)),
        |b| b.graph("limited", factory),
    )
    .await;
    let (_, row) = run_to_end(&s, "limited", json!({"sleep_ms": 60_000})).await;
    assert_eq!(row["status"], "timeout", "{row}");
    {
        let ends = ends.lock().unwrap();
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert_eq!(ends[0].timeout, Some(Duration::from_millis(300)));
    }

    // A run that completes: the hook hears `success`; it fails, the run stays a success.
    let (t, row) = run_to_end(&s, "limited", json!({"sleep_ms": 1})).await;
    assert_eq!(row["status"], "success", "{row}");
    let ends = ends.lock().unwrap().clone();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(
        (
            ends[1].outcome,
            ends[1].error.as_deref(),
            ends[1].thread_id.as_str()
        ),
        (RunOutcome::Success, None, t.as_str())
    );
    // Its status was recorded after the hook, as for every outcome (so a crash in between
    // calls the hook again): the thread's copy of the values has what the hook wrote.
    let (_, thread) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(thread["status"], "idle", "{thread}");
    assert_eq!(thread["values"]["decision"], "success: ", "{thread}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_calls_the_hook_with_its_error() {
    let ends = Ends::default();
    let factory = failing(&ends);
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("failing", factory)).await;
    let (t, row) = run_to_end(&s, "failing", json!({})).await;
    assert_eq!(row["status"], "error", "{row}");
    let ends = ends.lock().unwrap().clone();
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0].outcome, RunOutcome::Error);
    assert_eq!(ends[0].thread_id, t);
    let error = ends[0].error.clone().unwrap_or_default();
    assert!(error.contains("the tool exploded"), "{error}");
    // No limit of its own: the server's.
    assert_eq!(ends[0].timeout, Some(Duration::from_secs(3600)));
    s.stop().await;
}

/// A run whose hook leaves the state unreadable: the thread's copy of the values is the
/// run's output, not what it was before the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_unreadable_after_the_hook_leaves_the_runs_output_on_the_thread() {
    let slot = Arc::default();
    let s = TestServer::sqlite_with(|_| {}, |b| b.graph("counter", faulty::counter(&slot, true))).await;
    let (t, row) = run_to_end(&s, "counter", json!({})).await;
    assert_eq!(row["status"], "success", "{row}");
    let (_, thread) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(thread["status"], "idle", "{thread}");
    assert_eq!(thread["values"]["steps"], 1, "{thread}");
    // The hook did make the state unreadable.
    let (st, _) = s.get(&format!("/threads/{t}/state")).await;
    assert_ne!(st, 200);
    s.stop().await;
}

#[test]
fn a_graph_without_hosting_has_no_limit_and_no_hook() {
    let g = StateGraph::<Chat>::new()
        .add_node("n", |_s: Arc<Chat>, _rt| async { Ok(ChatUpdate::new()) })
        .add_edge(START, "n")
        .add_edge("n", END)
        .compile()
        .unwrap();
    let g = hosted(g);
    assert_eq!(g.run_timeout(), None);
    assert!(g.run_end_hook().is_none());
    let wrapped = Hosting::new(Arc::clone(&g))
        .run_timeout(Duration::from_secs(5))
        .into_hosted();
    assert_eq!(wrapped.run_timeout(), Some(Duration::from_secs(5)));
    // A wrapper around a wrapper keeps the smaller limit, and the inner hook.
    let hooked = Hosting::new(wrapped)
        .on_run_end(|_end: RunEnd| async { Ok::<(), String>(()) })
        .into_hosted();
    let twice = Hosting::new(hooked)
        .run_timeout(Duration::from_secs(9))
        .into_hosted();
    assert_eq!(twice.run_timeout(), Some(Duration::from_secs(5)));
    assert!(twice.run_end_hook().is_some());
    assert_eq!(twice.node_names(), g.node_names());
}
