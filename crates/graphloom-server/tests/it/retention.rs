//! Retention over HTTP, on SQLite and PostgreSQL: `keep_latest` prunes a thread's history
//! and keeps its state; `delete` removes expired threads (never a busy one); the server's
//! default TTL takes threads without their own; store items expire unless read;
//! `threads.prune` still works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{human, TestServer};
use graphloom_server::db::{DefaultTtl, TtlStrategy};
use graphloom_server::ServerConfig;
use serde_json::{json, Value};
use std::future::Future;
use std::time::Duration;

/// Poll `check` until it gives a value (at most 30 s).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn tune(cfg: &mut ServerConfig) {
    cfg.lease = Duration::from_secs(3);
    cfg.retention.sweep_interval = Duration::from_millis(50);
}

async fn history_len(s: &TestServer, t: &str) -> usize {
    let (st, h) = s.get(&format!("/threads/{t}/history?limit=100")).await;
    assert_eq!(st, 200, "{h}");
    h.as_array().unwrap().len()
}

async fn texts(s: &TestServer, t: &str) -> Vec<String> {
    let (_, state) = s.get(&format!("/threads/{t}/state")).await;
    state["values"]["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn say(s: &TestServer, t: &str, text: &str) {
    let (st, out) = s
        .post(
            &format!("/threads/{t}/runs/wait"),
            json!({"assistant_id": "echo", "input": human(text)}),
        )
        .await;
    assert_eq!(st, 200, "{out}");
    assert!(out.get("__error__").is_none(), "{out}");
}

async fn keep_latest_and_delete(s: &TestServer) {
    // A thread with history: three runs.
    let t = s.thread().await;
    for w in ["a", "b", "c"] {
        say(s, &t, w).await;
    }
    let long = history_len(s, &t).await;
    assert!(long >= 6, "{long} checkpoints");
    let (st, _) = s
        .patch(
            &format!("/threads/{t}"),
            json!({"ttl": {"strategy": "keep_latest", "ttl": 0}}),
        )
        .await;
    assert_eq!(st, 200);
    eventually("keep_latest's pruning", || async {
        (history_len(s, &t).await == 1).then_some(())
    })
    .await;
    let want: Vec<String> = ["a", "echo: a", "b", "echo: b", "c", "echo: c"]
        .map(String::from)
        .to_vec();
    assert_eq!(texts(s, &t).await, want, "the state is kept whole");
    let (st, th) = s.get(&format!("/threads/{t}")).await;
    assert_eq!(st, 200, "the thread stays: {th}");
    // It goes on from there, and is pruned again after it changed.
    say(s, &t, "d").await;
    assert_eq!(texts(s, &t).await.len(), 8);
    eventually("the second pruning", || async {
        (history_len(s, &t).await == 1).then_some(())
    })
    .await;
    assert_eq!(texts(s, &t).await.last().map(String::as_str), Some("echo: d"));

    // delete: gone once expired, but not while a run holds it.
    let bt = s.thread().await;
    let (_, run) = s
        .post(
            &format!("/threads/{bt}/runs"),
            json!({"assistant_id": "slow", "input": {"sleep_ms": 800}}),
        )
        .await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    eventually("the run to start", || async {
        let (_, r) = s.get(&format!("/threads/{bt}/runs/{run_id}")).await;
        (r["status"] == "running").then_some(())
    })
    .await;
    let (st, _) = s
        .patch(
            &format!("/threads/{bt}"),
            json!({"ttl": {"strategy": "delete", "ttl": 0}}),
        )
        .await;
    assert_eq!(st, 200);
    // Sweeps pass every 50 ms while the run holds the thread: it stays.
    loop {
        let (st, r) = s.get(&format!("/threads/{bt}/runs/{run_id}")).await;
        if st == 404 {
            // Ended, and its thread (with its runs) already swept.
            break;
        }
        if r["status"] != "running" {
            assert_eq!(r["status"], "success", "{r}");
            break;
        }
        let (st, _) = s.get(&format!("/threads/{bt}")).await;
        assert_eq!(st, 200, "a busy thread is not expired");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    eventually("the expired thread's deletion", || async {
        let (st, _) = s.get(&format!("/threads/{bt}")).await;
        (st == 404).then_some(())
    })
    .await;
    let (st, h) = s.get(&format!("/threads/{bt}/history")).await;
    assert_eq!(st, 404, "{h}");

    // threads.prune keeps working.
    let p1 = s.thread().await;
    let p2 = s.thread().await;
    let (st, out) = s
        .post(
            "/threads/prune",
            json!({"thread_ids": [p1, p2, "nope"], "strategy": "delete"}),
        )
        .await;
    assert_eq!((st, &out), (200, &json!({"pruned_count": 2})));
    let (st, e) = s
        .post("/threads", json!({"ttl": {"strategy": "forever", "ttl": 1}}))
        .await;
    assert_eq!(st, 422, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keep_latest_and_delete() {
    let s = TestServer::sqlite(tune).await;
    keep_latest_and_delete(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keep_latest_and_delete() {
    let (url, _guard) = graphloom_postgres::testing::test_database().await;
    let mut cfg = ServerConfig::postgres(&url);
    tune(&mut cfg);
    let s = TestServer::start(cfg).await;
    keep_latest_and_delete(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_ttl_takes_threads_without_their_own_and_store_items_expire_unless_read() {
    let s = TestServer::sqlite(|cfg| {
        tune(cfg);
        cfg.retention.thread_ttl = Some(DefaultTtl {
            strategy: TtlStrategy::Delete,
            ttl: Duration::from_millis(300),
        });
    })
    .await;
    let plain = s.thread().await;
    let (_, own) = s.post("/threads", json!({"ttl": 60})).await;
    let own = own["thread_id"].as_str().unwrap().to_owned();
    eventually("the default TTL's deletion", || async {
        let (st, _) = s.get(&format!("/threads/{plain}")).await;
        (st == 404).then_some(())
    })
    .await;
    let (st, t) = s.get(&format!("/threads/{own}")).await;
    assert_eq!(st, 200, "a thread's own TTL rules: {t}");

    // A store item with a 3 s TTL, read every 0.2 s for 4.5 s: each read restarts it.
    let ns = json!(["prefs", "u1"]);
    let (st, _) = s
        .http
        .put(s.u("/store/items"))
        .json(&json!({"namespace": ns, "key": "k", "value": {"v": 1}, "ttl": 0.05}))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(st, 204);
    let get = || async {
        let (st, v): (u16, Value) = s.get("/store/items?namespace=prefs.u1&key=k").await;
        (st, v)
    };
    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_millis(4500) {
        let (st, item) = get().await;
        assert_eq!(st, 200, "read {:?} after the put: {item}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Left alone (looked at only by searches that do not refresh), it expires.
    eventually("the store item's expiry", || async {
        let (st, found) = s
            .post(
                "/store/items/search",
                json!({"namespace_prefix": ["prefs"], "refresh_ttl": false}),
            )
            .await;
        assert_eq!(st, 200, "{found}");
        found["items"].as_array().unwrap().is_empty().then_some(())
    })
    .await;
    let (st, _) = get().await;
    assert_eq!(st, 404);
    s.stop().await;
}
