//! Checkpoint hooks on a real PostgreSQL: the hook's rows are committed with the
//! checkpoints it wants and only those; a failing hook leaves neither the checkpoint (nor the
//! pending writes saved with it) nor its own rows, and says why; the thread then resumes
//! from the step before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::DynCheckpointer;
use graphloom_core::*;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::{CheckpointHook, HookCheckpoint, HookError, HookFuture, PostgresSaver};
use serde_json::{json, Value};
use sqlx::PgConnection;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(State, Clone, Default, Debug)]
struct Job {
    #[reducer(append)]
    items: Seq<String>,
    done: bool,
}

/// The hook's own error.
#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused by the test")
    }
}

impl std::error::Error for Refused {}

/// One row per finished thread, holding the whole state of its final checkpoint.
#[derive(Clone, Default)]
struct Finished {
    refuse: Arc<AtomicBool>,
    setups: Arc<AtomicUsize>,
    applied: Arc<AtomicUsize>,
}

impl CheckpointHook for Finished {
    fn name(&self) -> &str {
        "finished"
    }

    fn setup<'a>(&'a self, pool: &'a sqlx::PgPool) -> HookFuture<'a, Result<(), HookError>> {
        Box::pin(async move {
            self.setups.fetch_add(1, Ordering::SeqCst);
            sqlx::query(
                "CREATE TABLE IF NOT EXISTS job_done (
                     thread_id TEXT PRIMARY KEY, checkpoint_id TEXT NOT NULL,
                     step BIGINT NOT NULL, state JSONB NOT NULL)",
            )
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    fn wants(&self, cp: &HookCheckpoint<'_>) -> bool {
        cp.checkpoint_ns().is_empty() && cp.new_json("done") == Some(&Value::Bool(true))
    }

    fn apply<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        cp: &'a HookCheckpoint<'a>,
    ) -> HookFuture<'a, Result<(), HookError>> {
        Box::pin(async move {
            self.applied.fetch_add(1, Ordering::SeqCst);
            let state = Value::Object(cp.values(&mut *conn).await?.into_iter().collect());
            sqlx::query(
                "INSERT INTO job_done VALUES ($1, $2, $3, $4)
                 ON CONFLICT (thread_id) DO UPDATE SET
                     checkpoint_id = EXCLUDED.checkpoint_id, step = EXCLUDED.step, state = EXCLUDED.state",
            )
            .bind(cp.thread_id())
            .bind(cp.checkpoint_id())
            .bind(cp.metadata().step)
            .bind(sqlx::types::Json(state))
            .execute(&mut *conn)
            .await?;
            if self.refuse.load(Ordering::SeqCst) {
                // After its own insert: the rollback must take that row too.
                return Err(Refused.into());
            }
            Ok(())
        })
    }
}

fn job_graph(saver: PostgresSaver, finishes: Arc<AtomicUsize>) -> CompiledGraph<Job> {
    StateGraph::<Job>::new()
        .add_node("a", |_s, _rt| async {
            Ok(JobUpdate::new().items(vec!["a".into()]))
        })
        .add_node("b", |_s, _rt| async {
            Ok(JobUpdate::new().items(vec!["b".into()]))
        })
        .add_node("finish", move |_s, _rt| {
            finishes.fetch_add(1, Ordering::SeqCst);
            async { Ok(JobUpdate::new().items(vec!["finish".into()]).done(true)) }
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", "finish")
        .add_edge("finish", END)
        .checkpointer(saver)
        .compile()
        .unwrap()
}

async fn rows(pool: &sqlx::PgPool) -> Vec<(String, String, i64, Value)> {
    sqlx::query_as::<_, (String, String, i64, sqlx::types::Json<Value>)>(
        "SELECT thread_id, checkpoint_id, step, state FROM job_done ORDER BY thread_id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(t, c, s, v)| (t, c, s, v.0))
    .collect()
}

#[tokio::test]
async fn the_hook_commits_a_row_with_the_checkpoint_it_wants_and_only_that_one() {
    let (url, _db) = test_database().await;
    let hook = Finished::default();
    let saver = PostgresSaver::connect(&url)
        .await
        .unwrap()
        .with_hook(hook.clone());
    // `migrate` sets the hook up before any checkpoint.
    saver.migrate().await.unwrap();
    assert_eq!(hook.setups.load(Ordering::SeqCst), 1);
    assert!(rows(saver.pool()).await.is_empty());

    let finishes = Arc::new(AtomicUsize::new(0));
    let g = job_graph(saver.clone(), Arc::clone(&finishes));
    let out = g
        .invoke(JobUpdate::new(), RunConfig::thread("job-1"))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Done);

    let history = g
        .get_state_history(&RunConfig::thread("job-1"), None)
        .await
        .unwrap();
    assert!(history.len() >= 4, "{}", history.len());
    // One apply for the one checkpoint (of several) that set `done`.
    assert_eq!(hook.applied.load(Ordering::SeqCst), 1);
    let got = rows(saver.pool()).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let (thread, checkpoint_id, step, state) = &got[0];
    assert_eq!(thread, "job-1");
    let last = &history[0];
    assert_eq!(Some(checkpoint_id.as_str()), last.config.checkpoint_id.as_deref());
    assert_eq!(Some(*step), last.metadata.as_ref().map(|m| m.step));
    // The whole state, though the checkpoint itself stored only the item it appended.
    assert_eq!(state["items"], json!(["a", "b", "finish"]));
    assert_eq!(state["done"], json!(true));
    // Queryable as JSON in SQL.
    let done: Vec<String> =
        sqlx::query_scalar("SELECT thread_id FROM job_done WHERE state->>'done' = 'true'")
            .fetch_all(saver.pool())
            .await
            .unwrap();
    assert_eq!(done, vec!["job-1".to_owned()]);

    // A second thread: setup is not run again; its own row.
    g.invoke(JobUpdate::new(), RunConfig::thread("job-2"))
        .await
        .unwrap();
    assert_eq!(hook.setups.load(Ordering::SeqCst), 1);
    assert_eq!(rows(saver.pool()).await.len(), 2);
}

#[tokio::test]
async fn a_failing_hook_saves_neither_the_checkpoint_nor_its_writes_nor_its_rows() {
    let (url, _db) = test_database().await;
    let hook = Finished::default();
    hook.refuse.store(true, Ordering::SeqCst);
    let saver = PostgresSaver::connect(&url)
        .await
        .unwrap()
        .with_hook(hook.clone());
    let finishes = Arc::new(AtomicUsize::new(0));
    let g = job_graph(saver.clone(), Arc::clone(&finishes));
    let cfg = RunConfig::thread("job-x");

    let err = g.invoke(JobUpdate::new(), cfg.clone()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("checkpoint hook `finished` failed"), "{text}");
    assert!(text.contains("was not saved"), "{text}");
    assert!(text.contains("refused by the test"), "{text}");
    assert!(err.find_source::<Refused>().is_some(), "{err:?}");
    assert_eq!(finishes.load(Ordering::SeqCst), 1);

    // The thread stands where it stood before `finish`: its writes were not kept either.
    let snap = g.get_state(&cfg).await.unwrap();
    assert!(!snap.values.done);
    assert_eq!(snap.values.items.to_vec(), vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(snap.next, vec!["finish".to_owned()]);
    // The hook's own insert was rolled back with it (the table exists: setup ran).
    assert!(rows(saver.pool()).await.is_empty());

    // Fixed: the run continues from there, `finish` runs again, one row.
    hook.refuse.store(false, Ordering::SeqCst);
    let out = g.invoke_input(RunInput::Continue, cfg.clone()).await.unwrap();
    assert!(out.values.done);
    assert_eq!(finishes.load(Ordering::SeqCst), 2);
    let got = rows(saver.pool()).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].3["items"], json!(["a", "b", "finish"]));
}

#[tokio::test]
async fn a_dropped_table_fails_the_put_with_the_database_error_and_update_state_is_hooked_too() {
    let (url, _db) = test_database().await;
    let hook = Finished::default();
    let saver = PostgresSaver::connect(&url)
        .await
        .unwrap()
        .with_hook(hook.clone());
    saver.migrate().await.unwrap();
    sqlx::query("DROP TABLE job_done")
        .execute(saver.pool())
        .await
        .unwrap();
    let g = job_graph(saver.clone(), Arc::new(AtomicUsize::new(0)));
    let cfg = RunConfig::thread("job-d");
    let err = g.invoke(JobUpdate::new(), cfg.clone()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("job_done"), "{text}");
    let Error::Backend(backend) = &err else {
        panic!("expected a backend error, got {err:?}");
    };
    let sql = backend
        .find_source::<sqlx::Error>()
        .expect("the driver's error is kept");
    let code = sql.as_database_error().and_then(|d| d.code()).unwrap();
    assert_eq!(code, "42P01"); // undefined_table
    assert!(!g.get_state(&cfg).await.unwrap().values.done);

    // `update_state` writes through `put` (no task writes): hooked the same way.
    let update = g
        .update_state(&cfg, Some(JobUpdate::new().done(true)), Some("finish"))
        .await;
    assert!(update.is_err(), "{update:?}");
    assert!(!g.get_state(&cfg).await.unwrap().values.done);
    sqlx::query(
        "CREATE TABLE job_done (thread_id TEXT PRIMARY KEY, checkpoint_id TEXT NOT NULL,
             step BIGINT NOT NULL, state JSONB NOT NULL)",
    )
    .execute(saver.pool())
    .await
    .unwrap();
    let written = g
        .update_state(&cfg, Some(JobUpdate::new().done(true)), Some("finish"))
        .await
        .unwrap();
    let got = rows(saver.pool()).await;
    assert_eq!(got.len(), 1);
    assert_eq!(Some(got[0].1.as_str()), written.checkpoint_id.as_deref());
    assert_eq!(got[0].3["items"], json!(["a", "b"]));
}

#[tokio::test]
async fn hooks_are_per_saver_clone_replaced_by_name_and_found_behind_a_shared_checkpointer() {
    let (url, _db) = test_database().await;
    let plain = PostgresSaver::connect(&url).await.unwrap();
    let first = Finished::default();
    let second = Finished::default();
    let hooked = plain.clone().with_hook(first.clone()).with_hook(second.clone());
    assert!(hooked.has_hook("finished"));
    assert!(!plain.has_hook("finished"));

    // The saver without the hook writes no rows (and creates no table).
    let g = job_graph(plain.clone(), Arc::new(AtomicUsize::new(0)));
    g.invoke(JobUpdate::new(), RunConfig::thread("plain"))
        .await
        .unwrap();
    let table: Option<String> = sqlx::query_scalar("SELECT to_regclass('job_done')::text")
        .fetch_one(plain.pool())
        .await
        .unwrap();
    assert_eq!(table, None);

    // The second hook of the same name replaced the first.
    let g = job_graph(hooked.clone(), Arc::new(AtomicUsize::new(0)));
    g.invoke(JobUpdate::new(), RunConfig::thread("hooked"))
        .await
        .unwrap();
    assert_eq!(first.applied.load(Ordering::SeqCst), 0);
    assert_eq!(second.applied.load(Ordering::SeqCst), 1);
    assert_eq!(rows(plain.pool()).await.len(), 1);

    // Behind `Arc<dyn DynCheckpointer>`, as a server hands it to its graphs.
    let shared: Arc<dyn DynCheckpointer> = Arc::new(hooked.clone());
    assert!(PostgresSaver::downcast(shared.as_ref()).is_some_and(|s| s.has_hook("finished")));
    let in_arc: Arc<dyn DynCheckpointer> = Arc::new(Arc::new(plain.clone()));
    assert!(PostgresSaver::downcast(in_arc.as_ref()).is_some_and(|s| !s.has_hook("finished")));
    let memory: Arc<dyn DynCheckpointer> = Arc::new(graphloom_core::checkpoint::InMemorySaver::new());
    assert!(PostgresSaver::downcast(memory.as_ref()).is_none());
}
