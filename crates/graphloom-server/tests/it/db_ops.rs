//! The server's storage of operations beside runs, one conformance suite run against SQLite
//! and PostgreSQL: crons (firing a tick creates its run at most once, whoever fires it),
//! the webhook delivery queue, and which threads retention expires.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::db_fixtures;

use db_fixtures::*;
use graphloom_postgres::testing::test_database;
use graphloom_server::db::{
    CronPatch, CronQuery, CronTick, Db, DbError, DefaultTtl, Fired, NewCron, NewWebhook, PgDb, SortOrder,
    SqliteDb, ThreadOutcome, TtlStrategy,
};
use graphloom_server::models::{Cron, RunStatus, ThreadStatus};
use graphloom_server_db::kit::now_micros;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const MINUTE: i64 = 60_000_000;

fn cron(id: &str, thread: Option<&str>, assistant: &str, metadata: Value) -> Cron {
    Cron {
        cron_id: id.into(),
        assistant_id: assistant.into(),
        thread_id: thread.map(str::to_owned),
        user_id: None,
        end_time: None,
        schedule: "* * * * *".into(),
        timezone: None,
        payload: json!({"assistant_id": assistant, "input": {"n": 1}}),
        next_run_date: None,
        metadata: obj(metadata),
        on_run_completed: None,
        enabled: true,
        created_at: String::new(),
        updated_at: String::new(),
    }
}

fn new_cron(c: Cron, owner: &str, next: Option<i64>) -> NewCron {
    NewCron {
        cron: c,
        owner: owner.into(),
        next_run_us: next,
        end_time_us: None,
    }
}

fn ids(v: &[Cron]) -> Vec<&str> {
    v.iter().map(|c| c.cron_id.as_str()).collect()
}

fn q(f: impl FnOnce(&mut CronQuery)) -> CronQuery {
    let mut q = CronQuery {
        limit: 10,
        ..CronQuery::default()
    };
    f(&mut q);
    q
}

async fn ops(db: Arc<dyn Db>) {
    crons(&db).await;
    firing(&db).await;
    webhooks(db.as_ref()).await;
    retention(db.as_ref()).await;
}

async fn crons(db: &Arc<dyn Db>) {
    let db = db.as_ref();
    db.create_thread(ALICE, &thread("ct1", json!({}))).await.unwrap();
    let now = now_micros();
    let c1 = db
        .create_cron(&new_cron(
            cron("c1", Some("ct1"), "a1", json!({"team": "x"})),
            ALICE,
            Some(now - 1000),
        ))
        .await
        .unwrap();
    assert_eq!(c1.user_id.as_deref(), Some(ALICE));
    assert!(c1.next_run_date.is_some() && !c1.created_at.is_empty());
    assert_eq!(c1.created_at, c1.updated_at);
    assert_eq!(c1.payload["input"], json!({"n": 1}));
    assert!(matches!(
        db.create_cron(&new_cron(cron("c1", None, "a1", json!({})), BOB, None))
            .await,
        Err(DbError::Conflict(_))
    ));
    db.create_cron(&new_cron(
        cron("c2", None, "a2", json!({"team": "y"})),
        ALICE,
        Some(now + 10 * MINUTE),
    ))
    .await
    .unwrap();
    db.create_cron(&new_cron(
        cron("c3", None, "a1", json!({})),
        BOB,
        Some(now - 1000),
    ))
    .await
    .unwrap();
    assert_eq!(db.get_cron(ALICE, "c1").await.unwrap().unwrap(), c1);
    assert_eq!(
        db.get_cron(BOB, "c1").await.unwrap(),
        None,
        "another owner's cron"
    );

    let (all, total) = db.search_crons(ALICE, &q(|_| {})).await.unwrap();
    assert_eq!(
        (ids(&all), total),
        (vec!["c2", "c1"], 2),
        "newest first, own only"
    );
    let (found, total) = db
        .search_crons(ALICE, &q(|q| q.thread_id = Some("ct1".into())))
        .await
        .unwrap();
    assert_eq!((ids(&found), total), (vec!["c1"], 1));
    let (found, _) = db
        .search_crons(ALICE, &q(|q| q.assistant_id = Some("a2".into())))
        .await
        .unwrap();
    assert_eq!(ids(&found), vec!["c2"]);
    let (found, _) = db
        .search_crons(ALICE, &q(|q| q.metadata = obj(json!({"team": "x"}))))
        .await
        .unwrap();
    assert_eq!(ids(&found), vec!["c1"]);
    let (found, total) = db
        .search_crons(
            ALICE,
            &q(|q| {
                q.sort_by = Some("next_run_date".into());
                q.sort_order = SortOrder::Asc;
                q.limit = 1;
            }),
        )
        .await
        .unwrap();
    assert_eq!(
        (ids(&found), total),
        (vec!["c1"], 2),
        "a page of one, the total of all"
    );

    let patched = db
        .patch_cron(
            ALICE,
            "c2",
            &CronPatch {
                schedule: Some("0 * * * *".into()),
                metadata: Some(obj(json!({"more": 1}))),
                enabled: Some(false),
                end_time_us: Some(Some(now + 60 * MINUTE)),
                next_run_us: Some(None),
                ..CronPatch::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(patched.schedule, "0 * * * *");
    assert_eq!(patched.metadata, obj(json!({"team": "y", "more": 1})), "merged");
    assert!(!patched.enabled && patched.next_run_date.is_none() && patched.end_time.is_some());
    assert_eq!(patched.timezone, None, "unchanged");
    let (found, _) = db
        .search_crons(ALICE, &q(|q| q.enabled = Some(false)))
        .await
        .unwrap();
    assert_eq!(ids(&found), vec!["c2"]);
    assert!(db
        .patch_cron(BOB, "c2", &CronPatch::default())
        .await
        .unwrap()
        .is_none());

    // Due: enabled, with a next run at or before now; any owner.
    let due = db.due_crons(now_micros(), 10).await.unwrap();
    let mut due_ids: Vec<&str> = due.iter().map(|d| d.cron.cron_id.as_str()).collect();
    due_ids.sort_unstable();
    assert_eq!(due_ids, vec!["c1", "c3"]);
    let d1 = due.iter().find(|d| d.cron.cron_id == "c1").unwrap();
    assert_eq!((d1.owner.as_str(), d1.due_us), (ALICE, now - 1000));
    assert_eq!(db.due_crons(now_micros(), 1).await.unwrap().len(), 1, "limit");

    assert!(!db.delete_cron(BOB, "c2").await.unwrap());
    assert!(db.delete_cron(ALICE, "c2").await.unwrap());
    assert!(!db.delete_cron(ALICE, "c2").await.unwrap());
    assert!(db.delete_cron(BOB, "c3").await.unwrap());
}

async fn firing(db: &Arc<dyn Db>) {
    let now = now_micros();
    db.create_thread(ALICE, &thread("ft1", json!({}))).await.unwrap();
    db.create_cron(&new_cron(
        cron("f1", Some("ft1"), "a1", json!({})),
        ALICE,
        Some(now - 5),
    ))
    .await
    .unwrap();
    let tick = CronTick {
        cron_id: "f1".into(),
        due_us: now - 5,
        next_us: Some(now + MINUTE),
    };
    // Eight replicas fire the same tick at once: one run.
    let mut tries = Vec::new();
    for _ in 0..8 {
        let (db, tick) = (Arc::clone(db), tick.clone());
        tries.push(tokio::spawn(async move {
            let new = enqueue("ft1");
            db.fire_cron(&tick, Some(&new)).await.unwrap()
        }));
    }
    let mut runs = Vec::new();
    for t in tries {
        match t.await.unwrap() {
            Fired::Run(r) => runs.push(r),
            Fired::Taken => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(runs.len(), 1, "exactly one replica fired the tick");
    let listed = db.list_runs(ALICE, "ft1", None, 100, 0).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].run_id, runs[0].run_id);
    let c = db.get_cron(ALICE, "f1").await.unwrap().unwrap();
    assert_eq!(
        c.next_run_date,
        Some(graphloom_server::models::rfc3339_from_micros(now + MINUTE))
    );
    // The same tick again, or a stale one: nothing.
    assert_eq!(
        db.fire_cron(&tick, Some(&enqueue("ft1"))).await.unwrap(),
        Fired::Taken
    );
    assert_eq!(db.list_runs(ALICE, "ft1", None, 100, 0).await.unwrap().len(), 1);

    // A busy thread and a `reject` run: nothing written, the tick still due.
    let next = CronTick {
        cron_id: "f1".into(),
        due_us: now + MINUTE,
        next_us: Some(now + 2 * MINUTE),
    };
    let mut reject = enqueue("ft1");
    reject.reject_if_busy = true;
    assert_eq!(db.fire_cron(&next, Some(&reject)).await.unwrap(), Fired::Busy);
    assert_eq!(db.list_runs(ALICE, "ft1", None, 100, 0).await.unwrap().len(), 1);
    // Skipped: the cron moves on without a run.
    assert_eq!(db.fire_cron(&next, None).await.unwrap(), Fired::Skipped);
    let c = db.get_cron(ALICE, "f1").await.unwrap().unwrap();
    assert_eq!(
        c.next_run_date,
        Some(graphloom_server::models::rfc3339_from_micros(now + 2 * MINUTE))
    );
    // Its thread gone: nothing written.
    let gone = CronTick {
        cron_id: "f1".into(),
        due_us: now + 2 * MINUTE,
        next_us: None,
    };
    assert_eq!(
        db.fire_cron(&gone, Some(&enqueue("no-such-thread")))
            .await
            .unwrap(),
        Fired::ThreadGone
    );
    assert!(db
        .get_cron(ALICE, "f1")
        .await
        .unwrap()
        .unwrap()
        .next_run_date
        .is_some());
    // The last tick: no next date, no longer due.
    assert_eq!(db.fire_cron(&gone, None).await.unwrap(), Fired::Skipped);
    assert!(db
        .get_cron(ALICE, "f1")
        .await
        .unwrap()
        .unwrap()
        .next_run_date
        .is_none());
    assert!(db
        .due_crons(now_micros() + 10 * MINUTE, 100)
        .await
        .unwrap()
        .iter()
        .all(|d| d.cron.cron_id != "f1"));
    // A disabled cron's tick is not fired.
    db.patch_cron(
        ALICE,
        "f1",
        &CronPatch {
            enabled: Some(false),
            next_run_us: Some(Some(now)),
            ..CronPatch::default()
        },
    )
    .await
    .unwrap();
    let off = CronTick {
        cron_id: "f1".into(),
        due_us: now,
        next_us: None,
    };
    assert_eq!(db.fire_cron(&off, None).await.unwrap(), Fired::Taken);
}

async fn webhooks(db: &dyn Db) {
    db.create_thread(ALICE, &thread("wt1", json!({}))).await.unwrap();
    let run = db.create_run(&enqueue("wt1")).await.unwrap();
    let hook = NewWebhook {
        run_id: run.run_id.clone(),
        thread_id: "wt1".into(),
        url: "https://example.com/hook".into(),
        body: json!({"run_id": run.run_id, "status": "success"}),
    };
    assert!(db.enqueue_webhook(&hook).await.unwrap());
    let again = NewWebhook {
        body: json!({"second": true}),
        ..hook.clone()
    };
    assert!(!db.enqueue_webhook(&again).await.unwrap(), "one delivery per run");
    // Not before the run has ended.
    assert_eq!(db.claim_webhook("w1", LONG).await.unwrap(), None);
    // Claim every queued run (the earlier tests' too); end the others.
    let mut held = Vec::new();
    while let Some(c) = db.claim_run("runner", LONG).await.unwrap() {
        held.push(c.run.run_id);
    }
    assert!(held.contains(&run.run_id));
    for id in held.iter().filter(|id| **id != run.run_id) {
        assert!(db.finish_run(id, "runner", RunStatus::Success).await.unwrap());
    }
    assert_eq!(db.claim_webhook("w1", LONG).await.unwrap(), None, "still running");
    assert!(db
        .finish_run(&run.run_id, "runner", RunStatus::Success)
        .await
        .unwrap());
    let d = db.claim_webhook("w1", LONG).await.unwrap().unwrap();
    assert_eq!(
        (d.run_id.as_str(), d.url.as_str(), d.attempts),
        (run.run_id.as_str(), hook.url.as_str(), 0)
    );
    assert_eq!(d.body, hook.body, "the first body is kept");
    assert_eq!(db.claim_webhook("w2", LONG).await.unwrap(), None, "held by w1");
    // A failed attempt comes back after its backoff, counted.
    assert!(!db
        .webhook_failed(&run.run_id, "w2", "not mine", None)
        .await
        .unwrap());
    assert!(db
        .webhook_failed(&run.run_id, "w1", "503", Some(Duration::ZERO))
        .await
        .unwrap());
    let st = db.webhook_status(&run.run_id).await.unwrap().unwrap();
    assert_eq!(
        (st.status.as_str(), st.attempts, st.last_error.as_deref()),
        ("pending", 1, Some("503"))
    );
    let d = db
        .claim_webhook("w2", Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.attempts, 1);
    // An expired lease: another dispatcher takes it over.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let d = db.claim_webhook("w3", LONG).await.unwrap().unwrap();
    assert_eq!(d.run_id, run.run_id);
    assert!(
        !db.webhook_delivered(&run.run_id, "w2").await.unwrap(),
        "w2 lost it"
    );
    assert!(db.webhook_delivered(&run.run_id, "w3").await.unwrap());
    let st = db.webhook_status(&run.run_id).await.unwrap().unwrap();
    assert_eq!(
        (st.status.as_str(), st.attempts, st.last_error),
        ("delivered", 2, None)
    );
    // Delivered: never claimed again, never failed afterwards.
    assert_eq!(db.claim_webhook("w4", LONG).await.unwrap(), None);
    assert!(!db.webhook_delivered(&run.run_id, "w3").await.unwrap());
    assert!(!db
        .webhook_failed(&run.run_id, "w3", "late", Some(Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(db.webhook_status("nope").await.unwrap(), None);

    // A run whose thread is gone (a stateless run's): its delivery is claimable.
    db.create_thread(ALICE, &thread("wt2", json!({}))).await.unwrap();
    let run2 = db.create_run(&enqueue("wt2")).await.unwrap();
    db.enqueue_webhook(&NewWebhook {
        run_id: run2.run_id.clone(),
        thread_id: "wt2".into(),
        url: "https://example.com/two".into(),
        body: json!({}),
    })
    .await
    .unwrap();
    assert!(db.delete_thread_any("wt2").await.unwrap());
    let d = db.claim_webhook("w1", LONG).await.unwrap().unwrap();
    assert_eq!(d.run_id, run2.run_id);
    assert!(db
        .webhook_failed(&run2.run_id, "w1", "gave up", None)
        .await
        .unwrap());
    assert_eq!(
        db.webhook_status(&run2.run_id).await.unwrap().unwrap().status,
        "failed"
    );
    assert_eq!(db.claim_webhook("w1", LONG).await.unwrap(), None, "given up");
    // Old ended deliveries are pruned; a pending one is not.
    db.create_thread(ALICE, &thread("wt3", json!({}))).await.unwrap();
    let run3 = db.create_run(&enqueue("wt3")).await.unwrap();
    db.enqueue_webhook(&NewWebhook {
        run_id: run3.run_id.clone(),
        thread_id: "wt3".into(),
        url: "https://example.com/three".into(),
        body: json!({}),
    })
    .await
    .unwrap();
    assert_eq!(
        db.prune_webhooks(now_micros() - MINUTE, 100).await.unwrap(),
        0,
        "none that old"
    );
    assert_eq!(db.prune_webhooks(now_micros() + 1, 100).await.unwrap(), 2);
    assert!(db.webhook_status(&run.run_id).await.unwrap().is_none());
    assert!(db.webhook_status(&run3.run_id).await.unwrap().is_some());
}

async fn retention(db: &dyn Db) {
    let ttl = |strategy: &str| {
        let mut t = thread("", json!({}));
        t.ttl = Some(json!({"strategy": strategy, "ttl": 0}));
        t
    };
    let named = |id: &str, mut t: graphloom_server::models::Thread| {
        t.thread_id = id.into();
        t
    };
    db.create_thread(ALICE, &named("rd", ttl("delete")))
        .await
        .unwrap();
    db.create_thread(BOB, &named("rk", ttl("keep_latest")))
        .await
        .unwrap();
    db.create_thread(ALICE, &named("rb", ttl("delete")))
        .await
        .unwrap();
    db.set_thread_status("rb", ThreadStatus::Busy).await.unwrap();
    let mut long = thread("rl", json!({}));
    long.ttl = Some(json!({"strategy": "delete", "ttl": 60}));
    db.create_thread(ALICE, &long).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    let now = now_micros();
    let mut got: Vec<(String, TtlStrategy)> = db
        .expired_threads_for(now, None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.thread_id, e.strategy))
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("rd".into(), TtlStrategy::Delete),
            ("rk".into(), TtlStrategy::KeepLatest)
        ],
        "own ttls passed, any owner, not busy, not those still alive"
    );
    assert_eq!(
        db.expired_threads_for(now, None, 1).await.unwrap().len(),
        1,
        "limit"
    );
    // The server's default takes threads without a ttl of their own.
    let default = DefaultTtl {
        strategy: TtlStrategy::KeepLatest,
        ttl: Duration::ZERO,
    };
    let with_default: Vec<String> = db
        .expired_threads_for(now, Some(default), 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.strategy == TtlStrategy::KeepLatest)
        .map(|e| e.thread_id)
        .collect();
    for id in ["ct1", "rk"] {
        assert!(with_default.contains(&id.to_owned()), "{id} in {with_default:?}");
    }
    assert!(!with_default.contains(&"rl".to_owned()), "its own ttl rules");
    let later = DefaultTtl {
        strategy: TtlStrategy::Delete,
        ttl: Duration::from_secs(3600),
    };
    let none: Vec<_> = db
        .expired_threads_for(now, Some(later), 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| !["rd", "rk"].contains(&e.thread_id.as_str()))
        .collect();
    assert!(none.is_empty(), "{none:?}");
    // keep_latest: pruned once, then not again until the thread changes.
    db.mark_retained("rk", now_micros()).await.unwrap();
    let ids_now = |v: Vec<graphloom_server::db::ExpiredThread>| -> Vec<String> {
        v.into_iter().map(|e| e.thread_id).collect()
    };
    assert!(!ids_now(db.expired_threads_for(now_micros(), None, 100).await.unwrap()).contains(&"rk".into()));
    tokio::time::sleep(Duration::from_millis(2)).await;
    let outcome = ThreadOutcome {
        status: ThreadStatus::Idle,
        values: Some(json!({"n": 2})),
        interrupts: json!({}),
        error: None,
    };
    db.set_thread_outcome("rk", &outcome).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert!(ids_now(db.expired_threads_for(now_micros(), None, 100).await.unwrap()).contains(&"rk".into()));
}

#[tokio::test]
async fn sqlite_ops_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDb::open(dir.path().join("server.db")).await.unwrap();
    ops(Arc::new(db)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_ops_conformance() {
    let (url, _guard) = test_database().await;
    let db = PgDb::connect(&url).await.unwrap();
    ops(Arc::new(db)).await;
}
