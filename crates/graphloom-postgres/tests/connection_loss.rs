//! Connection loss: a query whose connection died returns a typed `Connection` error, the
//! pool opens a new connection for the next call, and a run cut off by killed backends
//! completes with `RunInput::Continue` without losing or repeating a step.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{CheckpointConfig, Checkpointer};
use graphloom_core::*;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::{PgPoolOptions, PostgresSaver};
use sqlx::{Connection, PgConnection};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// From a separate connection, end every other client session of the database (not an
/// autovacuum worker that happens to be on it: counting one made the count flaky).
/// Terminate every other connection to the test database and wait (up to 10 s each) until
/// they are gone: `pg_terminate_backend` only signals, and under load a backend could
/// otherwise still answer the next query.
async fn kill_other_backends(url: &str) -> i64 {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND backend_type = 'client backend') t",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    killed
}

fn is_connection_error(e: &Error) -> bool {
    matches!(e, Error::Backend(b) if b.kind() == BackendErrorKind::Connection)
}

#[tokio::test]
async fn a_query_on_a_dead_connection_is_a_typed_connection_error_and_the_next_call_works() {
    let (url, _db) = test_database().await;
    // One connection, not pinged before use: the dead connection is the one the next call gets.
    let saver = PostgresSaver::connect_with(
        &url,
        PgPoolOptions::new().max_connections(1).test_before_acquire(false),
    )
    .await
    .unwrap();
    let thread = CheckpointConfig::thread("t");
    assert!(saver.get_tuple(&thread).await.unwrap().is_none());
    assert_eq!(kill_other_backends(&url).await, 1);

    let err = saver.get_tuple(&thread).await.unwrap_err();
    assert!(is_connection_error(&err), "want a Connection error, got {err:?}");
    assert!(
        saver.get_tuple(&thread).await.unwrap().is_none(),
        "the next call works"
    );

    // Same for a write.
    assert_eq!(kill_other_backends(&url).await, 1);
    let err = saver
        .put(
            &thread,
            checkpoint::Checkpoint::empty(),
            checkpoint::CheckpointMetadata {
                source: checkpoint::CheckpointSource::Input,
                step: -1,
                parents: Default::default(),
                run_id: None,
                extra: Default::default(),
            },
            Default::default(),
        )
        .await
        .unwrap_err();
    assert!(is_connection_error(&err), "want a Connection error, got {err:?}");
    assert!(saver.list(&Default::default()).await.unwrap().is_empty());
}

#[derive(State, Clone, Default, Debug)]
struct Log {
    #[reducer(append)]
    steps: Seq<String>,
}

/// a -> b -> c, pausing before c; counts how often each node ran.
fn graph(saver: PostgresSaver, runs: Arc<[AtomicUsize; 3]>) -> CompiledGraph<Log> {
    let mut g = StateGraph::<Log>::new();
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let runs = Arc::clone(&runs);
        g = g.add_node(name, move |_s, _rt| {
            runs[i].fetch_add(1, Ordering::SeqCst);
            async move { Ok(LogUpdate::new().steps(vec![name.to_owned()])) }
        });
    }
    g.add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "c")
        .add_edge("c", END)
        .interrupt_before(NodeSet::Some(vec!["c".into()]))
        .checkpointer(saver)
        .compile()
        .unwrap()
}

async fn run_through_a_connection_loss(options: PgPoolOptions) -> usize {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect_with(&url, options).await.unwrap();
    let runs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
    let g = graph(saver, Arc::clone(&runs));
    let cfg = RunConfig::thread("lossy");
    let paused = g.invoke(LogUpdate::new(), cfg.clone()).await.unwrap();
    assert_eq!(paused.values.steps.to_vec(), ["a", "b"]);
    assert!(kill_other_backends(&url).await >= 1);

    let mut failures = 0;
    let done = loop {
        match g.invoke_input(RunInput::Continue, cfg.clone()).await {
            Ok(out) => break out,
            Err(e) if is_connection_error(&e) && failures == 0 => failures += 1,
            Err(e) => panic!("after {failures} typed failure(s): {e:?}"),
        }
    };
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(
        done.values.steps.to_vec(),
        ["a", "b", "c"],
        "no step lost or repeated"
    );
    assert_eq!(runs[0].load(Ordering::SeqCst), 1);
    assert_eq!(runs[1].load(Ordering::SeqCst), 1);
    let st = g.get_state(&cfg).await.unwrap();
    assert!(st.next.is_empty());
    assert_eq!(st.values.steps.to_vec(), ["a", "b", "c"]);
    failures
}

#[tokio::test]
async fn a_run_survives_killed_backends_with_default_pool_options() {
    // Connections are pinged before use, so the dead ones are replaced unseen.
    let failures = run_through_a_connection_loss(PgPoolOptions::new()).await;
    assert!(failures <= 1);
}

#[tokio::test]
async fn a_run_cut_off_by_a_dead_connection_completes_with_continue() {
    // Without the ping the resume hits the dead connection: one typed failure, then
    // Continue finishes the run.
    let failures =
        run_through_a_connection_loss(PgPoolOptions::new().max_connections(1).test_before_acquire(false))
            .await;
    assert_eq!(failures, 1);
}
