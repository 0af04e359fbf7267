//! With `BlobCodec::encrypted`, rows are sealed, plaintext rows are refused, and a sealed
//! value moved to another row does not decode (feature `encryption`).
#![cfg(feature = "encryption")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    BlobCodec, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
    Checkpointer, Version,
};
use graphloom_core::store::{namespace, PutOptions, Store};
use graphloom_core::{BackendErrorKind, Error};
use graphloom_sqlite::{SqliteSaver, SqliteStore};
use graphloom_test_kit::checkpointer_conformance;
use graphloom_test_kit::store::store_conformance;
use serde_json::{json, Map};
use std::collections::BTreeMap;
use std::path::Path;

const KEY: [u8; 32] = [7; 32];
const SECRET: &str = "the-launch-code-is-0000";

fn meta() -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: BTreeMap::new(),
        run_id: None,
        extra: Map::new(),
    }
}

async fn encrypted_saver(path: &Path) -> SqliteSaver {
    SqliteSaver::builder(path)
        .codec(BlobCodec::encrypted(&KEY))
        .open()
        .await
        .unwrap()
}

async fn put_secret(saver: &SqliteSaver, thread: &str) -> CheckpointConfig {
    let v = Version { n: 1, salt: 0 };
    let mut cp = Checkpoint::empty();
    cp.channel_versions.insert("msgs".into(), v);
    cp.channel_values
        .insert("msgs".into(), ChannelValue::Full(json!([SECRET])));
    let c = saver
        .put(
            &CheckpointConfig::thread(thread),
            cp,
            meta(),
            BTreeMap::from([("msgs".into(), v)]),
        )
        .await
        .unwrap();
    saver
        .put_writes(&c, vec![("msgs".into(), json!(SECRET))], "task", "")
        .await
        .unwrap();
    c
}

/// Every byte of the database file and its WAL.
fn file_bytes(path: &Path) -> Vec<u8> {
    let mut all = std::fs::read(path).unwrap();
    let wal = path.with_extension("db-wal");
    if let Ok(more) = std::fs::read(wal) {
        all.extend(more);
    }
    all
}

async fn exec(path: &Path, sql: &str) {
    let conn = graphloom_sqlite::rusqlite::Connection::open(path).unwrap();
    conn.execute(sql, []).unwrap();
    conn.close().unwrap();
}

#[tokio::test]
async fn encrypted_saver_passes_the_kit_and_seals_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sealed.db");
    let saver = encrypted_saver(&path).await;
    checkpointer_conformance(&saver).await;
    let c = put_secret(&saver, "t").await;
    let got = saver.get_tuple(&c).await.unwrap().unwrap();
    assert_eq!(
        got.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!([SECRET]))
    );
    assert_eq!(got.pending_writes[0].value, json!(SECRET));
    // Copies are re-sealed for their own rows and stay readable.
    saver.copy_thread("t", "t-copy").await.unwrap();
    let copy = saver
        .get_tuple(&CheckpointConfig::thread("t-copy"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        copy.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!([SECRET]))
    );
    let bytes = file_bytes(&path);
    assert!(
        !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "a secret is stored in the clear"
    );
}

#[tokio::test]
async fn plaintext_rows_are_refused_when_encryption_is_on_and_sealed_rows_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.db");
    let plain = SqliteSaver::open(&path).await.unwrap();
    let pc = put_secret(&plain, "plain").await;
    let sealed = encrypted_saver(&path).await;
    let sc = put_secret(&sealed, "sealed").await;

    match sealed.get_tuple(&pc).await {
        Err(Error::CorruptCheckpoint {
            thread_id, message, ..
        }) => {
            assert_eq!(thread_id, "plain");
            assert!(message.contains("plaintext row refused"), "{message}");
        }
        other => panic!("a plaintext row must be refused, got {other:?}"),
    }
    match plain.get_tuple(&sc).await {
        Err(Error::CorruptCheckpoint { thread_id, .. }) => assert_eq!(thread_id, "sealed"),
        other => panic!("a sealed row must not decode without the key, got {other:?}"),
    }
    let wrong_key = SqliteSaver::builder(&path)
        .codec(BlobCodec::encrypted(&[8; 32]))
        .open()
        .await
        .unwrap();
    assert!(matches!(
        wrong_key.get_tuple(&sc).await,
        Err(Error::CorruptCheckpoint { .. })
    ));
    assert!(sealed.get_tuple(&sc).await.unwrap().is_some());
}

#[tokio::test]
async fn sealed_values_moved_or_relabelled_do_not_decode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moved.db");
    let saver = encrypted_saver(&path).await;
    let a = put_secret(&saver, "a").await;
    let b = put_secret(&saver, "b").await;
    // Thread b's blob replaced by thread a's (valid, sealed under the same key).
    exec(
        &path,
        "UPDATE checkpoint_blobs SET value = (SELECT value FROM checkpoint_blobs WHERE thread_id = 'a') WHERE thread_id = 'b'",
    )
    .await;
    assert!(matches!(
        saver.get_tuple(&b).await,
        Err(Error::CorruptCheckpoint { ref thread_id, .. }) if thread_id == "b"
    ));
    assert!(saver.get_tuple(&a).await.unwrap().is_some());
    // Plaintext metadata is authenticated by the sealed checkpoint row.
    exec(
        &path,
        "UPDATE checkpoints SET metadata = '{\"source\":\"input\",\"step\":0}' WHERE thread_id = 'a'",
    )
    .await;
    assert!(matches!(
        saver.get_tuple(&a).await,
        Err(Error::CorruptCheckpoint { ref thread_id, .. }) if thread_id == "a"
    ));
}

#[tokio::test]
async fn encrypted_store_passes_the_kit_and_refuses_plaintext_items() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let sealed = SqliteStore::builder(&path)
        .codec(BlobCodec::encrypted(&KEY))
        .open()
        .await
        .unwrap();
    store_conformance(&sealed).await;
    let ns = namespace(["secrets"]);
    sealed
        .put(&ns, "k", json!({"code": SECRET}), PutOptions::new())
        .await
        .unwrap();
    assert_eq!(
        sealed.get(&ns, "k").await.unwrap().unwrap().value,
        json!({"code": SECRET})
    );
    let plain = SqliteStore::open(&path).await.unwrap();
    plain
        .put(&ns, "plain", json!({"x": 1}), PutOptions::new())
        .await
        .unwrap();
    let corrupt = |res: graphloom_core::Result<Option<graphloom_core::store::Item>>| matches!(res, Err(Error::Backend(e)) if e.kind() == BackendErrorKind::Corrupt);
    assert!(corrupt(sealed.get(&ns, "plain").await), "plaintext item refused");
    assert!(
        corrupt(plain.get(&ns, "k").await),
        "sealed item unreadable without the key"
    );
    assert!(!file_bytes(&path)
        .windows(SECRET.len())
        .any(|w| w == SECRET.as_bytes()));
}
