//! The server's storage: one conformance suite run against SQLite and PostgreSQL (the
//! queue under load is in `db_queue.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::db_fixtures;

use db_fixtures::*;
use graphloom_postgres::testing::test_database;
use graphloom_server::db::{
    AssistantPatch, AssistantQuery, Db, DbError, Lease, PgDb, SortOrder, SqliteDb, ThreadOutcome, ThreadQuery,
};
use graphloom_server::models::{
    Assistant, CancelAction, MultitaskStrategy, Run, RunStatus, Thread, ThreadStatus,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::Duration;

fn ids_a(v: &[Assistant]) -> Vec<&str> {
    v.iter().map(|a| a.assistant_id.as_str()).collect()
}

fn ids_t(v: &[Thread]) -> Vec<&str> {
    v.iter().map(|t| t.thread_id.as_str()).collect()
}

fn query_a(f: impl FnOnce(&mut AssistantQuery)) -> AssistantQuery {
    let mut q = AssistantQuery {
        limit: 10,
        ..AssistantQuery::default()
    };
    f(&mut q);
    q
}

fn query_t(f: impl FnOnce(&mut ThreadQuery)) -> ThreadQuery {
    let mut q = ThreadQuery {
        limit: 10,
        ..ThreadQuery::default()
    };
    f(&mut q);
    q
}

/// RFC 3339 with microseconds and `+00:00`, as the models render times.
fn assert_time(s: &str) {
    assert_eq!(s.len(), "2026-01-01T00:00:00.000000+00:00".len(), "{s}");
    assert!(s.ends_with("+00:00") && s.as_bytes()[10] == b'T', "{s}");
}

/// Every method of [`Db`] against an empty database.
async fn conformance(db: &dyn Db) {
    assistants(db).await;
    threads(db).await;
    runs(db).await;
}

async fn assistants(db: &dyn Db) {
    let a1 = db
        .create_assistant(
            ALICE,
            &assistant("a1", "g1", "alpha", json!({"team": "x", "n": 1})),
        )
        .await
        .unwrap();
    assert_eq!(a1.version, 1);
    assert_time(&a1.created_at);
    assert_eq!(a1.created_at, a1.updated_at);
    assert!(matches!(
        db.create_assistant(BOB, &assistant("a1", "g9", "other", json!({})))
            .await,
        Err(DbError::Conflict(_))
    ));
    assert!(matches!(
        db.create_assistant(ALICE, &assistant("a1", "g1", "again", json!({})))
            .await,
        Err(DbError::Conflict(_))
    ));
    assert_eq!(db.get_assistant(ALICE, "a1").await.unwrap(), Some(a1.clone()));
    assert_eq!(db.get_assistant(BOB, "a1").await.unwrap(), None);
    assert_eq!(db.get_assistant(ALICE, "nope").await.unwrap(), None);

    db.create_assistant(ALICE, &assistant("a2", "g2", "Beta Bot", json!({"team": "y"})))
        .await
        .unwrap();
    db.create_assistant(
        ALICE,
        &assistant(
            "a3",
            "g1",
            "gamma",
            json!({"team": "x", "nested": {"k": [1, 2], "z": 0}}),
        ),
    )
    .await
    .unwrap();
    db.create_assistant(BOB, &assistant("b1", "g1", "alpha", json!({"team": "x"})))
        .await
        .unwrap();

    // Search: default order is newest first; totals count every match, not the page.
    let (page, total) = db.search_assistants(ALICE, &query_a(|_| {})).await.unwrap();
    assert_eq!((ids_a(&page), total), (vec!["a3", "a2", "a1"], 3));
    let (page, total) = db
        .search_assistants(ALICE, &query_a(|q| q.metadata = obj(json!({"team": "x"}))))
        .await
        .unwrap();
    assert_eq!((ids_a(&page), total), (vec!["a3", "a1"], 2));
    let (page, total) = db
        .search_assistants(
            ALICE,
            &query_a(|q| q.metadata = obj(json!({"nested": {"k": [2]}}))),
        )
        .await
        .unwrap();
    assert_eq!((ids_a(&page), total), (vec!["a3"], 1));
    let (page, total) = db
        .search_assistants(
            ALICE,
            &query_a(|q| q.metadata = obj(json!({"team": "x", "n": 2}))),
        )
        .await
        .unwrap();
    assert_eq!((page.len(), total), (0, 0));
    let (page, total) = db
        .search_assistants(
            ALICE,
            &query_a(|q| {
                q.metadata = obj(json!({"team": "x"}));
                q.limit = 1;
                q.offset = 1;
            }),
        )
        .await
        .unwrap();
    assert_eq!((ids_a(&page), total), (vec!["a1"], 2));
    let (page, _) = db
        .search_assistants(ALICE, &query_a(|q| q.graph_id = Some("g1".into())))
        .await
        .unwrap();
    assert_eq!(ids_a(&page), vec!["a3", "a1"]);
    let (page, total) = db
        .search_assistants(ALICE, &query_a(|q| q.name = Some("BOT".into())))
        .await
        .unwrap();
    assert_eq!((ids_a(&page), total), (vec!["a2"], 1));
    let (page, total) = db
        .search_assistants(
            ALICE,
            &query_a(|q| {
                q.sort_order = SortOrder::Asc;
                q.limit = 1;
                q.offset = 1;
            }),
        )
        .await
        .unwrap();
    assert_eq!((ids_a(&page), total), (vec!["a2"], 3));
    let (page, _) = db
        .search_assistants(
            ALICE,
            &query_a(|q| {
                q.sort_by = Some("name".into());
                q.sort_order = SortOrder::Asc;
            }),
        )
        .await
        .unwrap();
    assert_eq!(
        ids_a(&page),
        vec!["a2", "a1", "a3"],
        "byte order: uppercase first"
    );
    let (page, total) = db.search_assistants(BOB, &query_a(|_| {})).await.unwrap();
    assert_eq!((ids_a(&page), total), (vec!["b1"], 1));

    // Patches make versions.
    let patch = || AssistantPatch {
        metadata: Some(obj(json!({"n": 2, "extra": true}))),
        name: Some("alpha2".into()),
        ..AssistantPatch::default()
    };
    assert_eq!(db.patch_assistant(BOB, "a1", patch()).await.unwrap(), None);
    let v2 = db.patch_assistant(ALICE, "a1", patch()).await.unwrap().unwrap();
    assert_eq!(v2.version, 2);
    assert_eq!(v2.name, "alpha2");
    assert_eq!(v2.graph_id, "g1");
    assert_eq!(v2.description, a1.description);
    assert_eq!(v2.metadata, obj(json!({"team": "x", "n": 2, "extra": true})));
    assert_eq!(v2.created_at, a1.created_at);
    assert!(v2.updated_at >= a1.updated_at);
    assert_eq!(db.get_assistant(ALICE, "a1").await.unwrap(), Some(v2.clone()));
    let v3 = db
        .patch_assistant(
            ALICE,
            "a1",
            AssistantPatch {
                config: Some(json!({"configurable": {"x": 1}})),
                graph_id: Some("g2".into()),
                description: Some("new".into()),
                context: Some(json!({"c": 1})),
                ..AssistantPatch::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v3.version, 3);
    assert_eq!((v3.graph_id.as_str(), v3.name.as_str()), ("g2", "alpha2"));
    assert_eq!(v3.config, json!({"configurable": {"x": 1}}));
    assert_eq!(v3.context, json!({"c": 1}));
    assert_eq!(v3.description.as_deref(), Some("new"));
    assert_eq!(v3.metadata, v2.metadata);

    let versions = |md: Value, limit: i64, offset: i64| {
        let md = obj(md);
        async move {
            db.assistant_versions(ALICE, "a1", &md, limit, offset)
                .await
                .unwrap()
                .iter()
                .map(|a| a.version)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(versions(json!({}), 10, 0).await, vec![3, 2, 1]);
    assert_eq!(versions(json!({"extra": true}), 10, 0).await, vec![3, 2]);
    assert_eq!(versions(json!({}), 1, 1).await, vec![2]);
    let all = db
        .assistant_versions(ALICE, "a1", &Map::new(), 10, 0)
        .await
        .unwrap();
    assert_eq!(all[2].name, "alpha");
    assert_eq!(all[2].metadata, a1.metadata);
    assert_eq!(all[0].graph_id, "g2");
    assert!(db
        .assistant_versions(BOB, "a1", &Map::new(), 10, 0)
        .await
        .unwrap()
        .is_empty());

    // Going back to version 1, then patching again: version 4.
    assert_eq!(db.set_assistant_version(BOB, "a1", 1).await.unwrap(), None);
    assert_eq!(db.set_assistant_version(ALICE, "a1", 9).await.unwrap(), None);
    let back = db.set_assistant_version(ALICE, "a1", 1).await.unwrap().unwrap();
    assert_eq!(back.version, 1);
    assert_eq!((back.name.as_str(), back.graph_id.as_str()), ("alpha", "g1"));
    assert_eq!(back.metadata, a1.metadata);
    assert_eq!(back.config, a1.config);
    assert_eq!(back.created_at, a1.created_at);
    assert_eq!(db.get_assistant(ALICE, "a1").await.unwrap(), Some(back.clone()));
    let v4 = db
        .patch_assistant(
            ALICE,
            "a1",
            AssistantPatch {
                metadata: Some(obj(json!({"v": 4}))),
                ..AssistantPatch::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v4.version, 4);
    assert_eq!(v4.name, "alpha");
    assert_eq!(v4.metadata, obj(json!({"team": "x", "n": 1, "v": 4})));
    assert_eq!(versions(json!({}), 0, 0).await, vec![4, 3, 2, 1]);

    assert!(!db.delete_assistant(BOB, "a1").await.unwrap());
    assert!(db.delete_assistant(ALICE, "a1").await.unwrap());
    assert_eq!(db.get_assistant(ALICE, "a1").await.unwrap(), None);
    assert!(versions(json!({}), 10, 0).await.is_empty());
    assert!(!db.delete_assistant(ALICE, "a1").await.unwrap());
    let (_, total) = db.search_assistants(ALICE, &query_a(|_| {})).await.unwrap();
    assert_eq!(total, 2);
    // The id is free again.
    db.create_assistant(ALICE, &assistant("a1", "g1", "alpha", json!({})))
        .await
        .unwrap();
}

async fn threads(db: &dyn Db) {
    let t1 = db
        .create_thread(ALICE, &thread("t1", json!({"user": "u1"})))
        .await
        .unwrap();
    assert_time(&t1.created_at);
    assert_eq!(t1.status, ThreadStatus::Idle);
    assert!(matches!(
        db.create_thread(BOB, &thread("t1", json!({}))).await,
        Err(DbError::Conflict(_))
    ));
    assert_eq!(db.get_thread(ALICE, "t1").await.unwrap(), Some(t1.clone()));
    assert_eq!(db.get_thread(BOB, "t1").await.unwrap(), None);

    let md = obj(json!({"graph_id": "g1"}));
    assert_eq!(db.patch_thread(BOB, "t1", Some(&md), None).await.unwrap(), None);
    let t1p = db
        .patch_thread(ALICE, "t1", Some(&md), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t1p.metadata, obj(json!({"user": "u1", "graph_id": "g1"})));
    assert_eq!(t1p.created_at, t1.created_at);
    assert!(t1p.updated_at >= t1.updated_at);
    assert_eq!(db.get_thread(ALICE, "t1").await.unwrap(), Some(t1p.clone()));

    // Outcomes.
    tokio::time::sleep(Duration::from_millis(2)).await;
    db.set_thread_outcome(
        "t1",
        &ThreadOutcome {
            status: ThreadStatus::Interrupted,
            values: Some(json!({"step": 3, "msg": "hi", "deep": {"a": [1, 2]}})),
            interrupts: json!({"task-1": [{"value": "ask", "id": "i1"}]}),
            error: None,
        },
    )
    .await
    .unwrap();
    let t = db.get_thread(ALICE, "t1").await.unwrap().unwrap();
    assert_eq!(t.status, ThreadStatus::Interrupted);
    assert_eq!(t.values, json!({"step": 3, "msg": "hi", "deep": {"a": [1, 2]}}));
    assert_eq!(t.interrupts, json!({"task-1": [{"value": "ask", "id": "i1"}]}));
    assert!(t.state_updated_at > t1p.state_updated_at);
    // Without its values, the thread as it is.
    let head = db.get_thread_head(ALICE, "t1").await.unwrap().unwrap();
    assert_eq!(
        head,
        Thread {
            values: Value::Null,
            ..t.clone()
        }
    );
    assert_eq!(db.get_thread_head(BOB, "t1").await.unwrap(), None);
    assert_eq!(db.get_thread_head(ALICE, "t404").await.unwrap(), None);
    db.set_thread_outcome(
        "t1",
        &ThreadOutcome {
            status: ThreadStatus::Error,
            values: None,
            interrupts: json!({}),
            error: Some(json!({"error": "Boom", "message": "bad"})),
        },
    )
    .await
    .unwrap();
    let t = db.get_thread(ALICE, "t1").await.unwrap().unwrap();
    assert_eq!(t.status, ThreadStatus::Error);
    assert_eq!(
        t.values["step"],
        json!(3),
        "values kept when the outcome has none"
    );
    assert_eq!(t.interrupts, json!({}));
    assert_eq!(t.error, Some(json!({"error": "Boom", "message": "bad"})));
    db.set_thread_status("t1", ThreadStatus::Busy).await.unwrap();
    assert_eq!(
        db.get_thread(ALICE, "t1").await.unwrap().unwrap().status,
        ThreadStatus::Busy
    );
    db.set_thread_outcome(
        "t1",
        &ThreadOutcome {
            status: ThreadStatus::Idle,
            values: Some(json!({"step": 4, "msg": "hi"})),
            interrupts: json!({}),
            error: None,
        },
    )
    .await
    .unwrap();
    let t = db.get_thread(ALICE, "t1").await.unwrap().unwrap();
    assert_eq!((t.status, t.error), (ThreadStatus::Idle, None));

    let mut t2 = thread("t2", json!({"user": "u2", "tags": ["a", "b"]}));
    t2.status = ThreadStatus::Interrupted;
    t2.values = json!({"step": 4});
    t2.config = json!({"configurable": {"thread_id": "t2"}});
    let t2 = db.create_thread(ALICE, &t2).await.unwrap();
    assert_eq!(t2.config, json!({"configurable": {"thread_id": "t2"}}));
    assert_eq!(db.get_thread(ALICE, "t2").await.unwrap(), Some(t2.clone()));
    db.create_thread(ALICE, &thread("t3", json!({"user": "u1"})))
        .await
        .unwrap();
    db.create_thread(BOB, &thread("tb", json!({"user": "u1"})))
        .await
        .unwrap();

    let search = |q: ThreadQuery| async move {
        let (page, total) = db.search_threads(ALICE, &q).await.unwrap();
        (
            ids_t(&page).into_iter().map(String::from).collect::<Vec<_>>(),
            total,
        )
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(search(query_t(|_| {})).await, (s(&["t3", "t2", "t1"]), 3));
    assert_eq!(
        search(query_t(
            |q| q.ids = Some(vec!["t1".into(), "t3".into(), "tb".into()])
        ))
        .await,
        (s(&["t3", "t1"]), 2)
    );
    assert_eq!(search(query_t(|q| q.ids = Some(vec![]))).await, (s(&[]), 0));
    assert_eq!(
        search(query_t(|q| q.metadata = obj(json!({"user": "u1"})))).await,
        (s(&["t3", "t1"]), 2)
    );
    assert_eq!(
        search(query_t(|q| q.metadata = obj(json!({"tags": ["b"]})))).await,
        (s(&["t2"]), 1)
    );
    assert_eq!(
        search(query_t(|q| q.values = obj(json!({"step": 4})))).await,
        (s(&["t2", "t1"]), 2)
    );
    assert_eq!(
        search(query_t(|q| q.values = obj(json!({"step": 4, "msg": "hi"})))).await,
        (s(&["t1"]), 1)
    );
    assert_eq!(
        search(query_t(|q| q.status = Some(ThreadStatus::Interrupted))).await,
        (s(&["t2"]), 1)
    );
    assert_eq!(
        search(query_t(|q| {
            q.metadata = obj(json!({"user": "u1"}));
            q.limit = 1;
        }))
        .await,
        (s(&["t3"]), 2)
    );
    assert_eq!(
        search(query_t(|q| {
            q.sort_by = Some("thread_id".into());
            q.sort_order = SortOrder::Asc;
            q.offset = 1;
        }))
        .await,
        (s(&["t2", "t3"]), 3)
    );
    assert_eq!(
        search(query_t(|q| {
            q.sort_by = Some("status".into());
            q.sort_order = SortOrder::Asc;
        }))
        .await,
        (s(&["t1", "t3", "t2"]), 3),
        "idle < interrupted, ties by id"
    );
    let (page, total) = db.search_threads(BOB, &query_t(|_| {})).await.unwrap();
    assert_eq!((ids_t(&page), total), (vec!["tb"], 1));

    // TTL: expiry counts from the last change of the row.
    let mut t4 = thread("t4", json!({}));
    t4.ttl = Some(json!({"strategy": "delete", "ttl": 0.002}));
    let t4 = db.create_thread(ALICE, &t4).await.unwrap();
    assert_eq!(t4.ttl, Some(json!({"strategy": "delete", "ttl": 0.002})));
    db.patch_thread(ALICE, "t2", None, Some(json!({"strategy": "delete", "ttl": 60})))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(db.expired_threads(10).await.unwrap(), vec!["t4".to_string()]);
    let cleared = db
        .patch_thread(ALICE, "t4", None, Some(Value::Null))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cleared.ttl, None);
    assert!(db.expired_threads(10).await.unwrap().is_empty());
    db.patch_thread(BOB, "tb", None, Some(json!({"ttl": 0.002})))
        .await
        .unwrap()
        .unwrap();
    db.patch_thread(ALICE, "t4", None, Some(json!({"ttl": 0.002})))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut expired = db.expired_threads(10).await.unwrap();
    expired.sort();
    assert_eq!(expired, vec!["t4".to_string(), "tb".to_string()]);
    assert_eq!(db.expired_threads(1).await.unwrap().len(), 1);
    // A change of the row pushes the expiry back.
    db.set_thread_status("tb", ThreadStatus::Idle).await.unwrap();
    assert_eq!(db.expired_threads(10).await.unwrap(), vec!["t4".to_string()]);
    assert!(!db.delete_thread_any("nope").await.unwrap());
    assert!(db.delete_thread_any("t4").await.unwrap());
    assert!(db.delete_thread_any("tb").await.unwrap());
    assert_eq!(db.get_thread(ALICE, "t4").await.unwrap(), None);
    assert!(db.expired_threads(10).await.unwrap().is_empty());

    assert!(!db.delete_thread(BOB, "t3").await.unwrap());
    assert!(db.delete_thread(ALICE, "t3").await.unwrap());
    assert!(!db.delete_thread(ALICE, "t3").await.unwrap());
    assert_eq!(search(query_t(|_| {})).await, (s(&["t2", "t1"]), 2));
}

async fn claim(db: &dyn Db, worker: &str, lease: Duration) -> Option<(Run, i64)> {
    db.claim_run(worker, lease)
        .await
        .unwrap()
        .map(|c| (c.run, c.attempt))
}

async fn status_of(db: &dyn Db, run_id: &str) -> Option<RunStatus> {
    db.get_run(ALICE, None, run_id).await.unwrap().map(|r| r.status)
}

async fn runs(db: &dyn Db) {
    let th = "rt";
    assert!(db.create_run(&enqueue("missing")).await.is_err());
    db.create_thread(ALICE, &thread(th, json!({}))).await.unwrap();
    assert_eq!(db.queue_depth().await.unwrap(), 0);
    assert!(db.runs_by_status().await.unwrap().is_empty());
    assert!(claim(db, "w0", LONG).await.is_none());

    let new1 = enqueue(th);
    let r1 = db.create_run(&new1).await.unwrap();
    assert_eq!(r1.status, RunStatus::Pending);
    assert_eq!(
        (r1.run_id.as_str(), r1.kwargs.clone()),
        (new1.run.run_id.as_str(), new1.run.kwargs.clone())
    );
    assert_time(&r1.created_at);
    assert!(matches!(db.create_run(&new1).await, Err(DbError::Conflict(_))));
    assert_eq!(
        db.get_run(ALICE, Some(th), &r1.run_id).await.unwrap(),
        Some(r1.clone())
    );
    assert_eq!(
        db.get_run(ALICE, None, &r1.run_id).await.unwrap(),
        Some(r1.clone())
    );
    assert_eq!(db.get_run(ALICE, Some("t1"), &r1.run_id).await.unwrap(), None);
    assert_eq!(db.get_run(BOB, None, &r1.run_id).await.unwrap(), None);

    // reject: refused while the thread has a pending run.
    let mut reject = enqueue(th);
    reject.reject_if_busy = true;
    reject.run.multitask_strategy = MultitaskStrategy::Reject;
    match db.create_run(&reject).await {
        Err(DbError::Busy(t)) => assert_eq!(t, th),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(db.get_run(ALICE, None, &reject.run.run_id).await.unwrap(), None);

    let r2 = db.create_run(&enqueue(th)).await.unwrap();
    assert_eq!(db.queue_depth().await.unwrap(), 2);
    let listed = db.list_runs(ALICE, th, None, 10, 0).await.unwrap();
    assert_eq!(listed, vec![r2.clone(), r1.clone()], "newest first");
    let listed = db
        .list_runs(ALICE, th, Some(RunStatus::Pending), 1, 1)
        .await
        .unwrap();
    assert_eq!(listed, vec![r1.clone()]);
    assert!(db
        .list_runs(ALICE, th, Some(RunStatus::Running), 10, 0)
        .await
        .unwrap()
        .is_empty());
    assert!(db.list_runs(BOB, th, None, 10, 0).await.unwrap().is_empty());

    // Claims: the oldest first; never two at once on one thread.
    let (c1, attempt) = claim(db, "w1", LONG).await.unwrap();
    assert_eq!(
        (c1.run_id.as_str(), attempt, c1.status),
        (r1.run_id.as_str(), 1, RunStatus::Running)
    );
    assert_eq!(
        db.get_thread(ALICE, th).await.unwrap().unwrap().status,
        ThreadStatus::Busy
    );
    assert_eq!(status_of(db, &r1.run_id).await, Some(RunStatus::Running));
    assert!(claim(db, "w2", LONG).await.is_none());
    // Without the look first, the same rules: r2 waits for r1.
    assert!(db.claim_expected_run("w2", LONG).await.unwrap().is_none());
    assert!(matches!(db.create_run(&reject).await, Err(DbError::Busy(_))));
    assert_eq!(db.heartbeat(&r1.run_id, "w1", LONG).await.unwrap(), Lease::Held);
    assert_eq!(db.heartbeat(&r1.run_id, "w2", LONG).await.unwrap(), Lease::Lost);
    assert!(!db.finish_run(&r1.run_id, "w2", RunStatus::Success).await.unwrap());
    assert_eq!(status_of(db, &r1.run_id).await, Some(RunStatus::Running));
    assert!(db.finish_run(&r1.run_id, "w1", RunStatus::Success).await.unwrap());
    assert_eq!(status_of(db, &r1.run_id).await, Some(RunStatus::Success));
    assert_eq!(db.heartbeat(&r1.run_id, "w1", LONG).await.unwrap(), Lease::Lost);
    assert!(!db.finish_run(&r1.run_id, "w1", RunStatus::Error).await.unwrap());
    assert_eq!(status_of(db, &r1.run_id).await, Some(RunStatus::Success));

    // interrupt: pending runs of the thread end interrupted, the running one is asked to stop.
    let (c2, _) = claim(db, "w2", LONG).await.unwrap();
    assert_eq!(c2.run_id, r2.run_id);
    let queued = db.create_run(&enqueue(th)).await.unwrap();
    let mut interrupt = enqueue(th);
    interrupt.cancel_active = Some(CancelAction::Interrupt);
    interrupt.run.multitask_strategy = MultitaskStrategy::Interrupt;
    let r3 = db.create_run(&interrupt).await.unwrap();
    assert_eq!(r3.multitask_strategy, MultitaskStrategy::Interrupt);
    assert_eq!(status_of(db, &queued.run_id).await, Some(RunStatus::Interrupted));
    assert_eq!(status_of(db, &r2.run_id).await, Some(RunStatus::Running));
    assert_eq!(
        db.heartbeat(&r2.run_id, "w2", LONG).await.unwrap(),
        Lease::Cancel(CancelAction::Interrupt)
    );
    assert!(claim(db, "w3", LONG).await.is_none(), "r2 still holds the thread");
    assert!(db
        .finish_run(&r2.run_id, "w2", RunStatus::Interrupted)
        .await
        .unwrap());

    // rollback: pending runs are deleted, the running one is asked to roll back.
    let (c3, _) = claim(db, "w3", LONG).await.unwrap();
    assert_eq!(c3.run_id, r3.run_id);
    assert_eq!(db.heartbeat(&r3.run_id, "w3", LONG).await.unwrap(), Lease::Held);
    let queued = db.create_run(&enqueue(th)).await.unwrap();
    let mut rollback = enqueue(th);
    rollback.cancel_active = Some(CancelAction::Rollback);
    rollback.run.multitask_strategy = MultitaskStrategy::Rollback;
    let r4 = db.create_run(&rollback).await.unwrap();
    assert_eq!(status_of(db, &queued.run_id).await, None);
    assert_eq!(
        db.heartbeat(&r3.run_id, "w3", LONG).await.unwrap(),
        Lease::Cancel(CancelAction::Rollback)
    );
    assert!(db.delete_run(ALICE, th, &r3.run_id).await.unwrap());
    assert_eq!(db.heartbeat(&r3.run_id, "w3", LONG).await.unwrap(), Lease::Lost);

    // Lease expiry: another worker takes the run over with attempt 2; the old one is locked out.
    let (c4, attempt) = claim(db, "w4", Duration::from_millis(150)).await.unwrap();
    assert_eq!((c4.run_id.as_str(), attempt), (r4.run_id.as_str(), 1));
    assert!(claim(db, "w5", LONG).await.is_none(), "the lease is live");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (c4b, attempt) = claim(db, "w5", LONG).await.unwrap();
    assert_eq!((c4b.run_id.as_str(), attempt), (r4.run_id.as_str(), 2));
    assert_eq!(db.heartbeat(&r4.run_id, "w4", LONG).await.unwrap(), Lease::Lost);
    assert!(!db.finish_run(&r4.run_id, "w4", RunStatus::Success).await.unwrap());
    assert_eq!(status_of(db, &r4.run_id).await, Some(RunStatus::Running));
    assert_eq!(db.heartbeat(&r4.run_id, "w5", LONG).await.unwrap(), Lease::Held);
    assert!(db.finish_run(&r4.run_id, "w5", RunStatus::Success).await.unwrap());
    assert_eq!(status_of(db, &r4.run_id).await, Some(RunStatus::Success));

    // A pending run waits for an expired running run of its thread to be taken over first.
    let r5 = db.create_run(&enqueue(th)).await.unwrap();
    let (c5, _) = claim(db, "w6", Duration::from_millis(50)).await.unwrap();
    assert_eq!(c5.run_id, r5.run_id);
    let r6 = db.create_run(&enqueue(th)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let (c5b, attempt) = claim(db, "w7", LONG).await.unwrap();
    assert_eq!((c5b.run_id.as_str(), attempt), (r5.run_id.as_str(), 2));
    // Back to the queue, then claimed again.
    assert!(db.finish_run(&r5.run_id, "w7", RunStatus::Pending).await.unwrap());
    assert_eq!(status_of(db, &r5.run_id).await, Some(RunStatus::Pending));
    let (c5c, attempt) = claim(db, "w7", LONG).await.unwrap();
    assert_eq!((c5c.run_id.as_str(), attempt), (r5.run_id.as_str(), 3));
    assert!(db.finish_run(&r5.run_id, "w7", RunStatus::Error).await.unwrap());
    let (c6, _) = claim(db, "w7", LONG).await.unwrap();
    assert_eq!(c6.run_id, r6.run_id);
    assert!(db.finish_run(&r6.run_id, "w7", RunStatus::Success).await.unwrap());

    // Delayed runs wait.
    let mut later = enqueue(th);
    later.delay = Some(Duration::from_millis(300));
    let r7 = db.create_run(&later).await.unwrap();
    assert!(claim(db, "w8", LONG).await.is_none());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (c7, _) = claim(db, "w8", LONG).await.unwrap();
    assert_eq!(c7.run_id, r7.run_id);
    assert!(db.finish_run(&r7.run_id, "w8", RunStatus::Timeout).await.unwrap());

    // Runs of other threads go ahead; reject without active runs is accepted.
    let mut solo = enqueue("t1");
    solo.reject_if_busy = true;
    let r8 = db.create_run(&solo).await.unwrap();

    // cancel_run.
    assert_eq!(
        db.cancel_run(BOB, None, &r8.run_id, CancelAction::Interrupt, "test")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.cancel_run(ALICE, Some(th), &r8.run_id, CancelAction::Interrupt, "test")
            .await
            .unwrap(),
        None,
        "wrong thread"
    );
    let c = db
        .cancel_run(
            ALICE,
            Some("t1"),
            &r8.run_id,
            CancelAction::Interrupt,
            "first reason",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.status, RunStatus::Interrupted);
    assert_eq!(c.cancel_reason.as_deref(), Some("first reason"));
    assert_eq!(status_of(db, &r8.run_id).await, Some(RunStatus::Interrupted));
    let stored = db.get_run(ALICE, None, &r8.run_id).await.unwrap().unwrap();
    assert_eq!(stored.cancel_reason.as_deref(), Some("first reason"));
    let r9 = db.create_run(&enqueue(th)).await.unwrap();
    let c = db
        .cancel_run(ALICE, None, &r9.run_id, CancelAction::Rollback, "test")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.run_id, r9.run_id);
    assert_eq!(
        status_of(db, &r9.run_id).await,
        None,
        "a pending run rolled back is gone"
    );
    let r10 = db.create_run(&enqueue(th)).await.unwrap();
    let (c10, _) = claim(db, "w9", LONG).await.unwrap();
    assert_eq!(c10.run_id, r10.run_id);
    let c = db
        .cancel_run(ALICE, None, &r10.run_id, CancelAction::Interrupt, "asked once")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.status, RunStatus::Running);
    assert_eq!(c.cancel_reason.as_deref(), Some("asked once"));
    let again = db
        .cancel_run(ALICE, None, &r10.run_id, CancelAction::Interrupt, "asked twice")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.cancel_reason.as_deref(),
        Some("asked once"),
        "the first reason stays"
    );
    assert_eq!(
        db.heartbeat(&r10.run_id, "w9", LONG).await.unwrap(),
        Lease::Cancel(CancelAction::Interrupt)
    );
    assert!(db
        .finish_run(&r10.run_id, "w9", RunStatus::Interrupted)
        .await
        .unwrap());
    let c = db
        .cancel_run(ALICE, None, &r4.run_id, CancelAction::Rollback, "test")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.status, RunStatus::Success, "final runs are left alone");
    assert_eq!(c.cancel_reason, None, "a final run is not marked cancelled");
    assert_eq!(status_of(db, &r4.run_id).await, Some(RunStatus::Success));
    assert_eq!(
        db.cancel_run(ALICE, None, "nope", CancelAction::Interrupt, "test")
            .await
            .unwrap(),
        None
    );

    // Metrics agree with the rows.
    let pending = db.create_run(&enqueue(th)).await.unwrap();
    assert_eq!(db.queue_depth().await.unwrap(), 1);
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in [th, "t1"] {
        for r in db.list_runs(ALICE, t, None, 0, 0).await.unwrap() {
            *counts.entry(r.status.as_str()).or_default() += 1;
        }
    }
    let by_status: HashMap<&str, i64> = db
        .runs_by_status()
        .await
        .unwrap()
        .into_iter()
        .map(|(s, n)| (s.as_str(), n))
        .collect();
    assert_eq!(by_status, counts);
    assert_eq!(by_status.get("success"), Some(&3));
    assert_eq!(by_status.get("interrupted"), Some(&4));

    // delete_run and delete_thread (which takes the thread's runs along).
    assert!(!db.delete_run(BOB, th, &pending.run_id).await.unwrap());
    assert!(!db.delete_run(ALICE, "t1", &pending.run_id).await.unwrap());
    assert!(db.delete_run(ALICE, th, &pending.run_id).await.unwrap());
    assert!(!db.delete_run(ALICE, th, &pending.run_id).await.unwrap());
    assert_eq!(db.queue_depth().await.unwrap(), 0);
    assert!(!db.delete_thread(BOB, th).await.unwrap());
    assert!(db.delete_thread(ALICE, th).await.unwrap());
    assert_eq!(db.get_run(ALICE, None, &r1.run_id).await.unwrap(), None);
    let left: i64 = db.runs_by_status().await.unwrap().iter().map(|(_, n)| n).sum();
    assert_eq!(left, 1, "only t1's run is left");
}

#[tokio::test]
async fn sqlite_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.db");
    let db = SqliteDb::open(&path).await.unwrap();
    conformance(&db).await;
    // Reopening finds the schema migrated and the rows there.
    drop(db);
    let again = SqliteDb::open(&path).await.unwrap();
    assert!(again.get_thread(ALICE, "t1").await.unwrap().is_some());
}

#[tokio::test]
async fn postgres_conformance() {
    let (url, _guard) = test_database().await;
    // Two processes migrating a fresh database at once both succeed.
    let (a, b) = tokio::join!(PgDb::connect(&url), PgDb::connect(&url));
    let (db, other) = (a.unwrap(), b.unwrap());
    conformance(&db).await;
    assert!(other.get_thread(ALICE, "t1").await.unwrap().is_some());
}
