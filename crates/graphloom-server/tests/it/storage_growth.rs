//! Storage does not grow with expired threads: 10,000 short threads with a 1 s TTL, each
//! with a checkpoint, are swept, and the database is back at its starting size after
//! `VACUUM` (SQLite) / `VACUUM FULL` (PostgreSQL). The live threads beside them keep their
//! state and history exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use futures::StreamExt;
use graphloom_server::ServerConfig;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SHORT: usize = 10_000;
const LIVE: usize = 10;

fn tune(cfg: &mut ServerConfig) {
    cfg.lease = Duration::from_secs(3);
    cfg.retention.sweep_interval = Duration::from_millis(100);
    cfg.retention.batch = 500;
}

/// Live threads with a few runs each (and no TTL, or a long one); their ids.
async fn live_threads(s: &TestServer) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..LIVE {
        let body = if i % 2 == 0 {
            json!({})
        } else {
            json!({"ttl": 600})
        };
        let (_, t) = s.post("/threads", body).await;
        let t = t["thread_id"].as_str().unwrap().to_owned();
        for w in 0..3 {
            let (st, out) = s
                .post(
                    &format!("/threads/{t}/runs/wait"),
                    json!({"assistant_id": "echo", "input": human(&format!("live {i} {w}"))}),
                )
                .await;
            assert_eq!(st, 200, "{out}");
        }
        ids.push(t);
    }
    ids
}

/// Every live thread's state and full history.
async fn snapshot(s: &TestServer, ids: &[String]) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for t in ids {
        let (st, state) = s.get(&format!("/threads/{t}/state")).await;
        assert_eq!(st, 200, "live thread {t}: {state}");
        let (_, history) = s.get(&format!("/threads/{t}/history?limit=1000")).await;
        out.push((state, history));
    }
    out
}

/// `SHORT` threads of one checkpoint each, with a 1 s TTL, 32 requests at a time.
async fn flood(s: &TestServer) {
    let started = Instant::now();
    let ttl = 1.0 / 60.0;
    let results: Vec<u16> = futures::stream::iter(0..SHORT)
        .map(|i| {
            let body = json!({
                "metadata": {"graph_id": "echo", "short": true},
                "ttl": {"strategy": "delete", "ttl": ttl},
                "supersteps": [{"updates": [{"as_node": "reply", "values": {
                    "messages": [{"type": "ai", "content": format!("short-lived {i} {}", "x".repeat(200))}],
                    "steps": 1
                }}]}]
            });
            async move { s.post("/threads", body).await.0 }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(results.iter().all(|st| *st == 200), "some creations failed");
    eprintln!("{SHORT} short threads created in {:?}", started.elapsed());
}

async fn thread_count(s: &TestServer) -> i64 {
    let (_, n) = s.post("/threads/count", json!({})).await;
    n.as_i64().unwrap()
}

/// Wait (at most 5 minutes) until only the live threads are left.
async fn swept(s: &TestServer) {
    let started = Instant::now();
    loop {
        let n = thread_count(s).await;
        if n == LIVE as i64 {
            break;
        }
        assert!(n >= LIVE as i64, "a live thread was deleted: {n} left");
        assert!(started.elapsed() < Duration::from_secs(300), "{n} threads left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("swept in {:?}", started.elapsed());
}

/// Poll `orphans` until no checkpoint row is left of a thread that no longer exists (the
/// sweeper deletes late writes a few seconds after their thread), at most a minute.
async fn no_orphans<F, Fut>(mut orphans: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = i64>,
{
    let started = Instant::now();
    loop {
        let n = orphans().await;
        if n == 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{n} checkpoint rows of deleted threads"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Checkpoint, blob and write rows of threads that are gone, in the SQLite file.
fn sqlite_orphans(path: &std::path::Path) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
        .iter()
        .map(|t| {
            c.query_row(
                &format!(
                    "SELECT COUNT(*) FROM {t} WHERE thread_id NOT IN (SELECT thread_id FROM server_threads)"
                ),
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
        })
        .sum()
}

/// The same rows in PostgreSQL.
async fn postgres_orphans(url: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let mut n = 0;
    for t in [
        "graphloom_checkpoints",
        "graphloom_checkpoint_blobs",
        "graphloom_checkpoint_writes",
    ] {
        let c: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM {t} WHERE thread_id NOT IN (SELECT thread_id FROM server_threads)"
        ))
        .fetch_one(&pool)
        .await
        .unwrap();
        n += c;
    }
    pool.close().await;
    n
}

/// The SQLite file's size after a checkpoint of its WAL and a VACUUM (the server stopped).
fn sqlite_size(path: &std::path::Path) -> u64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    u64::try_from(pages * size).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_returns_to_its_starting_size_after_ten_thousand_expired_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graphloom.db");
    let mut cfg = ServerConfig::sqlite(&path);
    tune(&mut cfg);
    let s = TestServer::start(cfg.clone()).await;
    let live = live_threads(&s).await;
    let before = snapshot(&s, &live).await;
    s.stop().await;
    let start = sqlite_size(&path);

    let s = TestServer::start(cfg.clone()).await;
    flood(&s).await;
    assert!(thread_count(&s).await > LIVE as i64);
    swept(&s).await;
    no_orphans(|| {
        let path = path.clone();
        async move {
            tokio::task::spawn_blocking(move || sqlite_orphans(&path))
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(
        snapshot(&s, &live).await,
        before,
        "the live threads kept their data"
    );
    s.stop().await;
    let end = sqlite_size(&path);
    eprintln!("SQLite: {start} bytes at the start, {end} after");
    assert_eq!(end, start, "the database is back at its starting size");

    let s = TestServer::start(cfg).await;
    assert_eq!(snapshot(&s, &live).await, before, "and after a restart");
    s.stop().await;
}

/// Bytes of every table of the database (with TOAST and indexes) after `VACUUM FULL`.
async fn postgres_size(url: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::query("VACUUM FULL").execute(&pool).await.unwrap();
    let size: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::int8 FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE c.relkind = 'r' AND n.nspname = 'public'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    size
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_returns_to_its_starting_size_after_ten_thousand_expired_threads() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let mut cfg = ServerConfig::postgres(&url);
    tune(&mut cfg);
    let s = TestServer::start(cfg.clone()).await;
    let live = live_threads(&s).await;
    let before = snapshot(&s, &live).await;
    let start = postgres_size(&url).await;

    flood(&s).await;
    swept(&s).await;
    no_orphans(|| postgres_orphans(&url)).await;
    assert_eq!(
        snapshot(&s, &live).await,
        before,
        "the live threads kept their data"
    );
    let end = postgres_size(&url).await;
    eprintln!("PostgreSQL: {start} bytes at the start, {end} after");
    assert_eq!(end, start, "the database is back at its starting size");
    s.stop().await;
}
