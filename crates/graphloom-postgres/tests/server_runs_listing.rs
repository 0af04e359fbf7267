//! The server's runs on PostgreSQL: a thread's newest runs are read along the thread's
//! index in listing order, not sorted from all of the thread's runs, even when the
//! planner has no statistics of the thread (it grew since they were taken, or before).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_postgres::server::PgDb;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PgPool;

/// Insert `n` runs numbered from `from`, on thread `long` when `long`, else each on a
/// thread of its own.
async fn insert(pool: &PgPool, from: i64, n: i64, long: bool) {
    sqlx::query(
        "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, \
         status, metadata, kwargs, multitask_strategy, due_at) \
         SELECT md5(g::text) || '-' || g, CASE WHEN $3 THEN 'long' ELSE md5(g::text) END, '', 'a', \
         g, g, 'success', '{}', '{\"input\": {\"messages\": []}, \"stream_mode\": [\"values\"]}', \
         'enqueue', g FROM generate_series($1, $2) g",
    )
    .bind(from)
    .bind(from + n - 1)
    .bind(long)
    .execute(pool)
    .await
    .unwrap();
}

/// The plan of the listing function's query for thread `long`, under the function's own
/// settings; `with_settings: false` plans it under the session's.
async fn plan(pool: &PgPool, with_settings: bool) -> String {
    let (body, settings): (String, Option<Vec<String>>) =
        sqlx::query_as("SELECT prosrc, proconfig FROM pg_proc WHERE proname = 'server_thread_runs'")
            .fetch_one(pool)
            .await
            .unwrap();
    let mut tx = pool.begin().await.unwrap();
    for s in settings.into_iter().flatten().filter(|_| with_settings) {
        let (name, value) = s.split_once('=').unwrap();
        sqlx::query("SELECT set_config($1, $2, true)")
            .bind(name)
            .bind(value)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    // The function's query, its arguments as parameters.
    let (_, query) = body.split_once("RETURN QUERY").unwrap();
    let (query, _) = query.split_once(';').unwrap();
    let mut query = query.to_owned();
    for (n, arg) in ["p_thread", "p_owner", "p_status", "p_limit", "p_offset"]
        .iter()
        .enumerate()
    {
        query = query.replace(
            arg,
            &format!("${}::{}", n + 1, ["text", "text", "text", "int8", "int8"][n]),
        );
    }
    let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {query}"))
        .bind("long")
        .bind("")
        .bind(None::<String>)
        .bind(4i64)
        .bind(0i64)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    lines.join("\n")
}

/// A database of 4,000 threads of one run each, then thread `long` of 3,000 runs; no
/// statistics taken (nor taken by autovacuum meanwhile).
async fn a_long_thread_without_statistics() -> (PgDb, graphloom_postgres::testing::TestDatabase) {
    let (url, guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    let pool = db.pool();
    sqlx::query("ALTER TABLE server_runs SET (autovacuum_enabled = false)")
        .execute(pool)
        .await
        .unwrap();
    insert(pool, 1, 4000, false).await;
    insert(pool, 4001, 3000, true).await;
    (db, guard)
}

#[tokio::test]
async fn a_threads_newest_runs_walk_its_index_in_listing_order() {
    let (db, _guard) = a_long_thread_without_statistics().await;
    let pool = db.pool();
    let plan_of_the_function = plan(pool, true).await;
    assert!(
        plan_of_the_function.contains("server_runs_thread_order_idx"),
        "{plan_of_the_function}"
    );
    assert!(!plan_of_the_function.contains("Sort"), "{plan_of_the_function}");
    // What the function's settings are for: the same query planned as the session would
    // sorts the whole thread (the planner takes it for a run or two).
    let plan_as_usual = plan(pool, false).await;
    assert!(plan_as_usual.contains("Sort"), "{plan_as_usual}");
    // And the listing reads the newest runs.
    let runs = graphloom_server_db::Db::list_runs(&db, "", "long", None, 4, 0)
        .await
        .unwrap();
    let ids: Vec<String> = runs.into_iter().map(|r| r.run_id).collect();
    let newest: Vec<String> =
        sqlx::query_scalar("SELECT md5(g::text) || '-' || g FROM generate_series(7000, 6997, -1) g")
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(ids, newest);
}

/// A run's creation reads the newest creation time among its thread's runs (it comes after
/// it): one step down the thread's index in listing order, not an aggregate of all the
/// thread's runs, also when the planner has no statistics of the thread.
#[tokio::test]
async fn a_new_run_finds_its_threads_newest_run_on_the_threads_index() {
    let (db, _guard) = a_long_thread_without_statistics().await;
    let pool = db.pool();
    let lines: Vec<String> =
        sqlx::query_scalar("EXPLAIN SELECT MAX(created_at) FROM server_runs WHERE thread_id = $1")
            .bind("long")
            .fetch_all(pool)
            .await
            .unwrap();
    let plan = lines.join("\n");
    assert!(
        plan.contains("Index Only Scan Backward using server_runs_thread_order_idx"),
        "{plan}"
    );
    assert!(plan.contains("Limit"), "{plan}");
}
