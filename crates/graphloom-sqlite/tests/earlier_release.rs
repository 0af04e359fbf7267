//! A file written by the earlier release opens and migrates: its two tables of applied
//! migrations (the saver's `graphloom_migrations` of version and name, the server's own
//! `server_schema_version`) become the one `graphloom_migrations`, and the rows already
//! stored are read as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer, Version,
};
use graphloom_server_db::models::{MultitaskStrategy, Run, RunStatus, ThreadStatus};
use graphloom_server_db::{Db, NewRun};
use graphloom_sqlite::migrate::{MIGRATIONS, SERVER_MIGRATIONS};
use graphloom_sqlite::rusqlite::{params, Connection};
use graphloom_sqlite::server::SqliteDb;
use graphloom_sqlite::{SqliteDatabase, SqliteOptions, SqliteSaver};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// A file as the earlier release left it: the storage tables and their bookkeeping, and
/// (when `server_versions` is not empty) the server's tables of those versions and theirs,
/// with one idle thread and one pending run on it.
fn earlier_release_file(path: &Path, server_versions: &[i64]) {
    let conn = Connection::open(path).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    // graphloom-sqlite's bookkeeping, as its migrations created it.
    conn.execute_batch(
        "CREATE TABLE graphloom_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at TEXT NOT NULL
        )",
    )
    .unwrap();
    for (m, name) in MIGRATIONS.iter().zip(["checkpoints", "store"]) {
        for statement in m.statements {
            conn.execute_batch(statement).unwrap();
        }
        conn.execute(
            "INSERT INTO graphloom_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            params![m.version, name, "2025-01-01T00:00:00.000000+00:00"],
        )
        .unwrap();
    }
    if server_versions.is_empty() {
        return;
    }
    // The server's, as its own migrator created them (versions 1 and 2 then).
    conn.execute_batch(
        "CREATE TABLE server_schema_version (
            version    INTEGER NOT NULL PRIMARY KEY,
            applied_at INTEGER NOT NULL
        )",
    )
    .unwrap();
    for (old, m) in [1i64, 2].iter().zip(SERVER_MIGRATIONS) {
        if !server_versions.contains(old) {
            continue;
        }
        for statement in m.statements {
            conn.execute_batch(statement).unwrap();
        }
        conn.execute(
            "INSERT INTO server_schema_version (version, applied_at) VALUES (?1, ?2)",
            params![old, 1_700_000_000_000_000i64],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, metadata, \
         config, status, state_values, interrupts, error, ttl, ttl_us, expires_at) \
         VALUES ('t-old', 'alice', 1, 1, 1, '{\"from\":\"before\"}', '{}', 'idle', '{\"n\":1}', '{}', NULL, NULL, NULL, NULL)",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, status, \
         metadata, kwargs, multitask_strategy, due_at, worker, lease_expires_at, attempt, cancel_action) \
         VALUES ('r-old', 't-old', 'alice', 'a', 2, 2, 'pending', '{}', '{\"input\":{\"n\":2}}', 'enqueue', 0, \
         NULL, NULL, 0, NULL)",
        [],
    )
    .unwrap();
}

/// `(version, component, description)` of every applied migration.
fn applied(path: &Path) -> Vec<(i64, String, String)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT version, component, description FROM graphloom_migrations ORDER BY version")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

fn table_exists(path: &Path, table: &str) -> bool {
    let conn = Connection::open(path).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        > 0
}

/// Every migration this build knows, as the one table records them.
fn all_known() -> Vec<(i64, String, String)> {
    MIGRATIONS
        .iter()
        .chain(SERVER_MIGRATIONS)
        .map(|m| (m.version, m.component.to_owned(), m.description.to_owned()))
        .collect()
}

async fn put_and_read_a_checkpoint(saver: &SqliteSaver) {
    let mut cp = Checkpoint::empty();
    cp.channel_versions.insert("x".into(), Version { n: 1, salt: 0 });
    cp.channel_values
        .insert("x".into(), ChannelValue::Full(json!("after")));
    let config = saver
        .put(
            &CheckpointConfig::thread("t-new"),
            cp,
            CheckpointMetadata {
                source: CheckpointSource::Loop,
                step: 0,
                parents: BTreeMap::new(),
                run_id: None,
                extra: Default::default(),
            },
            BTreeMap::from([("x".into(), Version { n: 1, salt: 0 })]),
        )
        .await
        .unwrap();
    let tuple = saver.get_tuple(&config).await.unwrap().unwrap();
    assert_eq!(
        tuple.checkpoint.channel_values.get("x"),
        Some(&ChannelValue::Full(json!("after")))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_file_of_the_earlier_release_opens_with_one_table_of_migrations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("earlier.db");
    earlier_release_file(&path, &[1, 2]);

    // Several openers at once (as several processes would): the upgrade happens once.
    let mut opens = Vec::new();
    for _ in 0..4 {
        let path = path.clone();
        opens.push(tokio::spawn(async move {
            let shared = SqliteDatabase::open(SqliteOptions::new(&path)).await.unwrap();
            let db = SqliteDb::new(shared.clone()).await.unwrap();
            (shared, db)
        }));
    }
    let mut opened = Vec::new();
    for o in opens {
        opened.push(o.await.unwrap());
    }
    let (shared, db) = opened.pop().unwrap();
    drop(opened);

    let mut want = all_known();
    // The rows the earlier release wrote keep their names.
    want[0].2 = "checkpoints".into();
    want[1].2 = "store".into();
    assert_eq!(applied(&path), want);
    assert!(!table_exists(&path, "server_schema_version"));

    // What was stored before reads as before.
    let t = db.get_thread("alice", "t-old").await.unwrap().unwrap();
    assert_eq!(t.metadata.get("from"), Some(&json!("before")));
    assert_eq!(t.values, json!({"n": 1}));
    assert_eq!(t.status, ThreadStatus::Idle);
    let claimed = db
        .claim_run("w", Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the earlier release's pending run is claimable");
    assert_eq!(claimed.run.run_id, "r-old");
    assert_eq!(claimed.run.kwargs, json!({"input": {"n": 2}}));
    assert_eq!(claimed.attempt, 1);
    put_and_read_a_checkpoint(&shared.saver()).await;

    // Opening again changes nothing.
    drop((shared, db));
    let again = SqliteDb::open(&path).await.unwrap();
    assert_eq!(applied(&path), want);
    assert_eq!(
        again
            .get_run("alice", None, "r-old")
            .await
            .unwrap()
            .unwrap()
            .status,
        RunStatus::Running
    );
}

/// A new run `id` of alice's on thread `thread`, queued.
fn new_run(id: &str, thread: &str) -> NewRun {
    NewRun {
        run: Run {
            run_id: id.into(),
            thread_id: thread.into(),
            assistant_id: "a".into(),
            created_at: String::new(),
            updated_at: String::new(),
            status: RunStatus::Pending,
            metadata: Default::default(),
            kwargs: json!({}),
            multitask_strategy: MultitaskStrategy::Enqueue,
            cancel_reason: None,
            ordinal: 0,
        },
        owner: "alice".into(),
        delay: None,
        reject_if_busy: false,
        cancel_active: None,
        thread_metadata: None,
        claim: None,
        create_thread: None,
    }
}

#[tokio::test]
async fn an_earlier_server_without_stored_run_events_gets_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("older.db");
    earlier_release_file(&path, &[1]);
    assert!(!table_exists(&path, "server_run_events"));
    let db = SqliteDb::open(&path).await.unwrap();
    // Every migration this build knows is applied (the server's later ones as well).
    let known = all_known();
    assert_eq!(
        applied(&path)
            .iter()
            .map(|(v, c, _)| (*v, c.as_str()))
            .collect::<Vec<_>>(),
        known.iter().map(|(v, c, _)| (*v, c.as_str())).collect::<Vec<_>>()
    );
    let record = graphloom_server_db::RunEventRecord {
        id: 0,
        event: "values".into(),
        data: json!({"n": 1}).into(),
    };
    db.append_run_events("r-old", vec![record.clone()]).await.unwrap();
    assert_eq!(db.run_events("r-old", 0, 10).await.unwrap(), [record]);
    // A new run on the old thread goes through the queue as usual.
    let created = db.create_run(&new_run("r-new", "t-old")).await.unwrap();
    assert_eq!(created.status, RunStatus::Pending);
}

#[tokio::test]
async fn a_saver_file_of_the_earlier_release_opens_without_the_server_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saver.db");
    earlier_release_file(&path, &[]);
    let saver = SqliteSaver::open(&path).await.unwrap();
    put_and_read_a_checkpoint(&saver).await;
    assert_eq!(
        applied(&path),
        [
            (1, "storage".to_owned(), "checkpoints".to_owned()),
            (2, "storage".to_owned(), "store".to_owned())
        ]
    );
    // The saver leaves the server's tables to the server.
    assert!(!table_exists(&path, "server_runs"));
}

/// A file whose server stored a run's events a row per event (migrations up to 6): the
/// batches migration moves them, drops the old table, and they read as before; an event
/// whose text was not JSON (unreadable before too) is left out instead of failing the
/// migration.
/// A file with every migration up to `version` applied, as this build would have made
/// it then.
fn file_at(path: &Path, version: i64) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE graphloom_migrations (
            version     INTEGER PRIMARY KEY,
            component   TEXT NOT NULL DEFAULT 'storage',
            description TEXT NOT NULL,
            applied_at  TEXT NOT NULL
        )",
    )
    .unwrap();
    for m in MIGRATIONS
        .iter()
        .chain(SERVER_MIGRATIONS)
        .filter(|m| m.version <= version)
    {
        for statement in m.statements {
            conn.execute_batch(statement).unwrap();
        }
        conn.execute(
            "INSERT INTO graphloom_migrations (version, component, description, applied_at) \
             VALUES (?1, ?2, ?3, '2026-01-01T00:00:00.000000+00:00')",
            params![m.version, m.component, m.description],
        )
        .unwrap();
    }
    conn
}

#[tokio::test]
async fn events_stored_a_row_each_are_read_after_the_batches_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.db");
    {
        let conn = file_at(&path, 6);
        let rows = [
            ("r1", 0, "metadata", r#"{"run_id":"r1"}"#),
            ("r1", 1, "values", r#"{"messages":["hi \"there\""]}"#),
            ("r1", 2, "updates|sub:1", r#"{"n":[1,2.5,null,true]}"#),
            ("r2", 0, "values", "not json"),
            ("r2", 1, "end", "null"),
        ];
        for (run, seq, event, data) in rows {
            conn.execute(
                "INSERT INTO server_run_events (run_id, seq, event, data) VALUES (?1, ?2, ?3, ?4)",
                params![run, seq, event, data],
            )
            .unwrap();
        }
    }
    let db = SqliteDb::open(&path).await.unwrap();
    assert!(!table_exists(&path, "server_run_events"));
    let rec = |id: u64, event: &str, data: serde_json::Value| graphloom_server_db::RunEventRecord {
        id,
        event: event.into(),
        data: data.into(),
    };
    let r1 = [
        rec(0, "metadata", json!({"run_id": "r1"})),
        rec(1, "values", json!({"messages": ["hi \"there\""]})),
        rec(2, "updates|sub:1", json!({"n": [1, 2.5, null, true]})),
    ];
    assert_eq!(db.run_events("r1", 0, 10).await.unwrap(), r1);
    assert_eq!(db.run_events("r1", 1, 1).await.unwrap(), r1[1..2]);
    assert_eq!(
        db.run_events("r2", 0, 10).await.unwrap(),
        [rec(1, "end", serde_json::Value::Null)]
    );
    // New events of the run go on after the moved ones.
    db.append_run_events(
        "r1",
        vec![rec(3, "values", json!({"n": 3})), rec(4, "end", json!(null))],
    )
    .await
    .unwrap();
    let all = db.run_events("r1", 2, 10).await.unwrap();
    assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 3, 4]);
}

/// Runs stored before runs had ordinals get them in the order their thread lists them
/// (creation time, then id), and the thread's next run the one after.
#[tokio::test]
async fn runs_made_before_ordinals_get_them_in_their_threads_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    {
        let conn = file_at(&path, 7);
        for t in ["t1", "t2"] {
            conn.execute(
                "INSERT INTO server_threads (thread_id, owner, created_at, updated_at, state_updated_at, \
                 metadata, config, status, state_values, interrupts) \
                 VALUES (?1, 'alice', 1, 1, 1, '{}', '{}', 'idle', 'null', '{}')",
                params![t],
            )
            .unwrap();
        }
        // Two runs at the same time on t1: the id decides.
        for (run, thread, at) in [
            ("r-c", "t1", 30),
            ("r-b", "t1", 20),
            ("r-a2", "t1", 20),
            ("r-x", "t2", 5),
        ] {
            conn.execute(
                "INSERT INTO server_runs (run_id, thread_id, owner, assistant_id, created_at, updated_at, \
                 status, metadata, kwargs, multitask_strategy, due_at) \
                 VALUES (?1, ?2, 'alice', 'a', ?3, ?3, 'success', '{}', '{}', 'enqueue', ?3)",
                params![run, thread, at],
            )
            .unwrap();
        }
    }
    let db = SqliteDb::open(&path).await.unwrap();
    let listed: Vec<(String, i64)> = db
        .list_runs("alice", "t1", None, 10, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.ordinal))
        .collect();
    let expected = [("r-c", 2), ("r-b", 1), ("r-a2", 0)].map(|(r, o)| (r.to_owned(), o));
    assert_eq!(listed, expected);
    let other = db.get_run("alice", Some("t2"), "r-x").await.unwrap().unwrap();
    assert_eq!(other.ordinal, 0);
    assert_eq!(db.create_run(&new_run("r-d", "t1")).await.unwrap().ordinal, 3);
}
