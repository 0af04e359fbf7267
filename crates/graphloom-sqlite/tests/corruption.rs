//! Corrupt or tampered rows give typed errors naming the row, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    ListQuery, Version,
};
use graphloom_core::store::{namespace, PutOptions, SearchQuery, Store};
use graphloom_core::{BackendErrorKind, Error};
use graphloom_sqlite::{SqliteSaver, SqliteStore};
use serde_json::{json, Map};
use std::collections::BTreeMap;
use std::path::Path;

fn meta(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: BTreeMap::new(),
        run_id: None,
        extra: Map::new(),
    }
}

async fn exec(path: &Path, sql: &str) -> u64 {
    let conn = graphloom_sqlite::rusqlite::Connection::open(path).unwrap();
    let n = conn.execute(sql, []).unwrap() as u64;
    conn.close().unwrap();
    n
}

/// A thread with two checkpoints (a full value, then an append) and a pending write.
async fn setup(saver: &SqliteSaver, thread: &str) -> (CheckpointConfig, CheckpointConfig) {
    let v1 = Version { n: 1, salt: 3 };
    let v2 = Version { n: 2, salt: 3 };
    let mut cp1 = Checkpoint::empty();
    cp1.channel_versions.insert("msgs".into(), v1);
    cp1.channel_values
        .insert("msgs".into(), ChannelValue::Full(json!(["a"])));
    let c1 = saver
        .put(
            &CheckpointConfig::thread(thread),
            cp1,
            meta(0),
            BTreeMap::from([("msgs".into(), v1)]),
        )
        .await
        .unwrap();
    let mut cp2 = Checkpoint::empty();
    cp2.channel_versions.insert("msgs".into(), v2);
    cp2.channel_values.insert(
        "msgs".into(),
        ChannelValue::Append {
            base: v1,
            items: vec![json!("b")],
        },
    );
    let c2 = saver
        .put(&c1, cp2, meta(1), BTreeMap::from([("msgs".into(), v2)]))
        .await
        .unwrap();
    saver
        .put_writes(&c2, vec![("msgs".into(), json!("c"))], "task", "")
        .await
        .unwrap();
    (c1, c2)
}

#[track_caller]
fn assert_corrupt<T: std::fmt::Debug>(res: graphloom_core::Result<T>, thread: &str, id: &str, hint: &str) {
    match res {
        Err(Error::CorruptCheckpoint {
            thread_id,
            checkpoint_id,
            message,
        }) => {
            assert_eq!(thread_id, thread);
            assert_eq!(checkpoint_id, id);
            assert!(
                message.contains(hint),
                "message {message:?} should mention {hint:?}"
            );
        }
        other => panic!("expected CorruptCheckpoint for {thread}/{id}, got {other:?}"),
    }
}

#[tokio::test]
async fn garbage_in_a_blob_row_is_a_corrupt_checkpoint_naming_thread_and_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let (c1, c2) = setup(&saver, "victim").await;
    setup(&saver, "bystander").await;
    let id2 = c2.checkpoint_id.clone().unwrap();
    let id1 = c1.checkpoint_id.clone().unwrap();

    // The base of the append chain is overwritten with garbage.
    let n = exec(
        &path,
        "UPDATE checkpoint_blobs SET value = X'DEADBEEF00FF' WHERE thread_id = 'victim' AND version LIKE '%1.%'",
    )
    .await;
    assert_eq!(n, 1);
    assert_corrupt(saver.get_tuple(&c2).await, "victim", &id2, "msgs");
    assert_corrupt(
        saver.get_tuple(&CheckpointConfig::thread("victim")).await,
        "victim",
        &id2,
        "msgs",
    );
    assert_corrupt(saver.get_tuple(&c1).await, "victim", &id1, "msgs");
    assert!(matches!(
        saver.list(&ListQuery::thread("victim")).await,
        Err(Error::CorruptCheckpoint { .. })
    ));
    // Copying a corrupt thread refuses rather than spreading the damage.
    assert!(saver.copy_thread("victim", "copy").await.is_err());
    assert!(saver.list(&ListQuery::thread("copy")).await.unwrap().is_empty());
    // Other threads are unaffected.
    let ok = saver
        .get_tuple(&CheckpointConfig::thread("bystander"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ok.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!(["a", "b"]))
    );

    // A value of the wrong SQL type, and a valid JSON value of the wrong shape.
    exec(
        &path,
        "UPDATE checkpoint_blobs SET value = 42 WHERE thread_id = 'victim'",
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "victim", &id2, "msgs");
    exec(
        &path,
        "UPDATE checkpoint_blobs SET value = CAST('{\"t\":\"append\",\"v\":{\"base\":\"zz\",\"items\":[]}}' AS BLOB) WHERE thread_id = 'victim'",
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "victim", &id2, "msgs");
}

#[tokio::test]
async fn a_broken_append_chain_is_corrupt_and_a_missing_current_blob_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let (c1, c2) = setup(&saver, "t").await;
    // Drop the base: the append at version 2 links to nothing.
    exec(&path, "DELETE FROM checkpoint_blobs WHERE version LIKE '%1.%'").await;
    assert_corrupt(
        saver.get_tuple(&c2).await,
        "t",
        c2.checkpoint_id.as_deref().unwrap(),
        "no stored value",
    );
    // The first checkpoint's exact version has no blob: the channel is empty.
    let t1 = saver.get_tuple(&c1).await.unwrap().unwrap();
    assert!(t1.checkpoint.channel_values.is_empty());
}

#[tokio::test]
async fn garbage_in_checkpoint_metadata_and_write_rows_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let (_c1, c2) = setup(&saver, "t").await;
    let id2 = c2.checkpoint_id.clone().unwrap();

    exec(
        &path,
        &format!("UPDATE checkpoint_writes SET value = X'00' WHERE checkpoint_id = '{id2}'"),
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "t", &id2, "task");
    exec(&path, "DELETE FROM checkpoint_writes").await;
    assert!(saver.get_tuple(&c2).await.unwrap().is_some());

    exec(
        &path,
        &format!("UPDATE checkpoints SET metadata = 'not json' WHERE checkpoint_id = '{id2}'"),
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "t", &id2, "metadata");
    exec(
        &path,
        &format!(
            "UPDATE checkpoints SET metadata = '{{\"source\":\"loop\",\"step\":1}}', checkpoint = X'7B7D' WHERE checkpoint_id = '{id2}'"
        ),
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "t", &id2, "checkpoint row");
    exec(
        &path,
        &format!("UPDATE checkpoints SET enc = 'pickle' WHERE checkpoint_id = '{id2}'"),
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "t", &id2, "pickle");
}

#[tokio::test]
async fn a_checkpoint_row_moved_under_another_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moved.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    let (c1, c2) = setup(&saver, "t").await;
    let (id1, id2) = (c1.checkpoint_id.unwrap(), c2.checkpoint_id.clone().unwrap());
    exec(
        &path,
        &format!(
            "UPDATE checkpoints SET checkpoint = (SELECT checkpoint FROM checkpoints WHERE checkpoint_id = '{id1}') WHERE checkpoint_id = '{id2}'"
        ),
    )
    .await;
    assert_corrupt(saver.get_tuple(&c2).await, "t", &id2, "another checkpoint");
}

#[tokio::test]
async fn a_corrupt_store_row_is_a_corrupt_backend_error_naming_the_item() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let ns = namespace(["users", "u1"]);
    store
        .put(&ns, "prefs", json!({"tea": true}), PutOptions::new())
        .await
        .unwrap();
    store
        .put(&ns, "fine", json!({"ok": 1}), PutOptions::new())
        .await
        .unwrap();
    exec(
        &path,
        "UPDATE store_items SET value = X'FFFE00' WHERE key = 'prefs'",
    )
    .await;
    let check = |res: graphloom_core::Result<_>| match res {
        Err(Error::Backend(e)) => {
            assert_eq!(e.kind(), BackendErrorKind::Corrupt);
            assert!(
                e.message.contains("prefs") && e.message.contains("u1"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a Corrupt backend error, got {other:?}"),
    };
    check(store.get(&ns, "prefs").await.map(|_| ()));
    check(store.search(&ns, SearchQuery::new()).await.map(|_| ()));
    assert!(store.get(&ns, "fine").await.unwrap().is_some());
    // Valid JSON that is not an object is refused too.
    exec(
        &path,
        "UPDATE store_items SET value = CAST('[1,2]' AS BLOB) WHERE key = 'prefs'",
    )
    .await;
    check(store.get(&ns, "prefs").await.map(|_| ()));
    // Deleting the bad row heals the namespace.
    store.delete(&ns, "prefs").await.unwrap();
    assert_eq!(store.search(&ns, SearchQuery::new()).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_database_from_a_newer_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    drop(SqliteSaver::open(&path).await.unwrap());
    exec(
        &path,
        "INSERT INTO graphloom_migrations (version, component, description, applied_at) \
         VALUES (999, 'storage', 'future', 'now')",
    )
    .await;
    let err = SqliteSaver::open(&path).await.unwrap_err();
    assert!(err.to_string().contains("newer"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_in_a_shared_batch_does_not_undo_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batch.db");
    let saver = SqliteSaver::open(&path).await.unwrap();
    setup(&saver, "victim").await;
    exec(
        &path,
        "UPDATE checkpoint_blobs SET value = X'00' WHERE thread_id = 'victim'",
    )
    .await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let saver = saver.clone();
        tasks.push(tokio::spawn(async move {
            if i % 10 == 0 {
                // Fails half-way (after copying the checkpoint rows): rolled back alone.
                saver
                    .copy_thread("victim", &format!("copy-{i}"))
                    .await
                    .map(|_| false)
            } else {
                setup(&saver, &format!("ok-{i}")).await;
                Ok(true)
            }
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(true) => ok += 1,
            Ok(false) => panic!("copying a corrupt thread succeeded"),
            Err(Error::CorruptCheckpoint { thread_id, .. }) => assert_eq!(thread_id, "victim"),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert_eq!(ok, 36);
    let stats = saver.storage_stats().await.unwrap();
    // victim's 2 checkpoints + 36 threads of 2; no copy left a checkpoint behind.
    assert_eq!(stats.checkpoints, 2 + 36 * 2);
    let commits = saver.commit_stats();
    assert!(commits.commits < commits.operations, "{commits:?}");
}
