//! Concurrent migrations and many concurrent writers never see "database is locked".
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    ListQuery, Version,
};
use graphloom_core::store::{namespace, PutOptions, SearchQuery, Store};
use graphloom_sqlite::{SqliteSaver, SqliteStore, SCHEMA_VERSION};
use serde_json::{json, Map};
use std::collections::BTreeMap;

fn meta(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: BTreeMap::new(),
        run_id: None,
        extra: Map::new(),
    }
}

async fn schema_versions(path: &std::path::Path) -> Vec<i64> {
    let conn = graphloom_sqlite::rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT version FROM graphloom_migrations ORDER BY version")
        .unwrap();
    let versions = stmt.query_map([], |r| r.get(0)).unwrap();
    versions.collect::<Result<_, _>>().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savers_and_stores_migrating_one_fresh_file_at_once_all_succeed() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("fresh-{round}.db"));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let path = path.clone();
            tasks.push(tokio::spawn(async move {
                if i % 2 == 0 {
                    let saver = SqliteSaver::open(&path).await.expect("saver opens");
                    let mut cp = Checkpoint::empty();
                    cp.channel_versions.insert("x".into(), Version { n: 1, salt: 0 });
                    cp.channel_values.insert("x".into(), ChannelValue::Full(json!(i)));
                    saver
                        .put(
                            &CheckpointConfig::thread(format!("t{i}")),
                            cp,
                            meta(0),
                            BTreeMap::from([("x".into(), Version { n: 1, salt: 0 })]),
                        )
                        .await
                        .expect("put after a concurrent migration");
                } else {
                    let store = SqliteStore::open(&path).await.expect("store opens");
                    store
                        .put(
                            &namespace(["n"]),
                            &format!("k{i}"),
                            json!({"i": i}),
                            PutOptions::new(),
                        )
                        .await
                        .expect("store put after a concurrent migration");
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            schema_versions(&path).await,
            (1..=SCHEMA_VERSION).collect::<Vec<_>>(),
            "each migration recorded once"
        );
        let saver = SqliteSaver::open(&path).await.unwrap();
        let all = saver
            .list(&ListQuery {
                thread_id: None,
                checkpoint_ns: None,
                ..ListQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(all.len(), 4);
        let store = SqliteStore::open(&path).await.unwrap();
        let items = store
            .search(&namespace(["n"]), SearchQuery::new().limit(100))
            .await
            .unwrap();
        assert_eq!(items.len(), 4);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_writing_checkpoints_on_distinct_threads_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::open(dir.path().join("busy.db")).await.unwrap();
    let steps = 10u64;
    let mut tasks = Vec::new();
    for t in 0..64 {
        let saver = saver.clone();
        tasks.push(tokio::spawn(async move {
            let thread = format!("thread-{t}");
            let mut parent = CheckpointConfig::thread(&thread);
            for step in 1..=steps {
                let v = Version { n: step, salt: 1 };
                let mut cp = Checkpoint::empty();
                cp.channel_versions.insert("messages".into(), v);
                let value = if step == 1 {
                    ChannelValue::Full(json!([format!("{thread}-1")]))
                } else {
                    ChannelValue::Append {
                        base: Version { n: step - 1, salt: 1 },
                        items: vec![json!(format!("{thread}-{step}"))],
                    }
                };
                cp.channel_values.insert("messages".into(), value);
                let next = saver
                    .put(
                        &parent,
                        cp,
                        meta(step as i64),
                        BTreeMap::from([("messages".into(), v)]),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("put on {thread} failed: {e}"));
                saver
                    .put_writes(
                        &next,
                        vec![("messages".into(), json!(format!("pending-{step}")))],
                        &format!("task-{step}"),
                        "",
                    )
                    .await
                    .unwrap_or_else(|e| panic!("put_writes on {thread} failed: {e}"));
                // Reads run concurrently with the writes of the other tasks.
                let got = saver.get_tuple(&next).await.unwrap().unwrap();
                assert_eq!(
                    got.checkpoint.channel_values["messages"],
                    ChannelValue::Full(json!((1..=step)
                        .map(|s| format!("{thread}-{s}"))
                        .collect::<Vec<_>>()))
                );
                parent = next;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let commits = saver.commit_stats();
    println!(
        "{} write operations in {} commits ({:.1} per commit)",
        commits.operations,
        commits.commits,
        commits.operations as f64 / commits.commits as f64
    );
    assert_eq!(commits.operations, 64 * steps * 2);
    assert!(
        commits.commits < commits.operations,
        "concurrent writes share commits: {commits:?}"
    );
    let stats = saver.storage_stats().await.unwrap();
    assert_eq!(stats.checkpoints, 64 * steps);
    assert_eq!(stats.blobs, 64 * steps);
    assert_eq!(stats.writes, 64 * steps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saver_and_a_store_writing_one_file_at_once_do_not_lock_each_other_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("both.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let store = SqliteStore::open(&path).await.unwrap();
    let mut tasks = Vec::new();
    for t in 0..16 {
        let saver = saver.clone();
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..10u64 {
                let mut cp = Checkpoint::empty();
                cp.channel_versions
                    .insert("x".into(), Version { n: i + 1, salt: 0 });
                cp.channel_values.insert("x".into(), ChannelValue::Full(json!(i)));
                saver
                    .put(
                        &CheckpointConfig::thread(format!("t{t}")),
                        cp,
                        meta(i as i64),
                        BTreeMap::from([("x".into(), Version { n: i + 1, salt: 0 })]),
                    )
                    .await
                    .unwrap();
                store
                    .put(
                        &namespace(["n", &t.to_string()]),
                        &i.to_string(),
                        json!({"i": i}),
                        PutOptions::new(),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(saver.storage_stats().await.unwrap().checkpoints, 160);
    let items = store
        .search(&namespace(["n"]), SearchQuery::new().limit(1000))
        .await
        .unwrap();
    assert_eq!(items.len(), 160);
}

#[tokio::test]
async fn put_and_put_writes_are_committed_before_they_return() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("durable.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    // Another connection, as another process would read the file.
    let other = graphloom_sqlite::rusqlite::Connection::open(&path).unwrap();
    let count = |sql: &str| -> i64 { other.query_row(sql, [], |r| r.get(0)).unwrap() };
    let mut parent = CheckpointConfig::thread("d");
    for i in 1..=20u64 {
        let mut cp = Checkpoint::empty();
        cp.channel_versions.insert("x".into(), Version { n: i, salt: 0 });
        cp.channel_values.insert("x".into(), ChannelValue::Full(json!(i)));
        parent = saver
            .put(
                &parent,
                cp,
                meta(i as i64),
                BTreeMap::from([("x".into(), Version { n: i, salt: 0 })]),
            )
            .await
            .unwrap();
        let seen: i64 = count("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'd'");
        assert_eq!(seen, i as i64);
        saver
            .put_writes(&parent, vec![("x".into(), json!("w"))], "task", "")
            .await
            .unwrap();
        let seen: i64 = count("SELECT COUNT(*) FROM checkpoint_writes WHERE thread_id = 'd'");
        assert_eq!(seen, i as i64);
    }
    let mode: String = other.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}
