//! Optional encryption (feature `encryption`): an encrypting saver passes the conformance
//! kit, stores no plaintext, refuses plaintext rows, and does not decode rows sealed under
//! another key or moved to another row.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "encryption")]
use graphloom_core::checkpoint::{
    BlobCodec, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
    Checkpointer, Version,
};
use graphloom_core::Error;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresSaver;
use graphloom_test_kit::checkpointer_conformance;
use serde_json::json;
use std::collections::BTreeMap;

const KEY: [u8; 32] = [42; 32];
const SECRET: &str = "the-secret-marker-7f3a";

async fn sealed(url: &str, key: &[u8; 32]) -> PostgresSaver {
    PostgresSaver::connect(url)
        .await
        .unwrap()
        .with_codec(BlobCodec::encrypted(key))
}

/// A checkpoint with the secret in a channel value, a pending send and a pending write.
async fn put_secret(saver: &PostgresSaver, thread: &str) -> CheckpointConfig {
    let v = Version { n: 1, salt: 1 };
    let mut cp = Checkpoint::empty();
    cp.channel_versions.insert("msgs".into(), v);
    cp.channel_values
        .insert("msgs".into(), ChannelValue::Full(json!([SECRET])));
    cp.pending_sends.push(graphloom_core::checkpoint::PendingSend {
        node: "n".into(),
        packet: json!({"s": SECRET}),
    });
    let cfg = saver
        .put(
            &CheckpointConfig::thread(thread),
            cp,
            CheckpointMetadata {
                source: CheckpointSource::Loop,
                step: 0,
                parents: BTreeMap::new(),
                run_id: None,
                extra: Default::default(),
            },
            BTreeMap::from([("msgs".to_owned(), v)]),
        )
        .await
        .unwrap();
    saver
        .put_writes(&cfg, vec![("msgs".into(), json!(SECRET))], "task", "")
        .await
        .unwrap();
    cfg
}

fn assert_corrupt(result: graphloom_core::Result<impl std::fmt::Debug>, needle: &str) {
    match result {
        Err(Error::CorruptCheckpoint { message, .. }) => {
            assert!(message.contains(needle), "{message:?} should mention {needle:?}")
        }
        other => panic!("want a corrupt-checkpoint error mentioning {needle:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn an_encrypting_saver_passes_the_kit() {
    let (url, _db) = test_database().await;
    checkpointer_conformance(&sealed(&url, &KEY).await).await;
}

#[tokio::test]
async fn nothing_is_stored_in_plaintext_but_metadata() {
    let (url, _db) = test_database().await;
    let saver = sealed(&url, &KEY).await;
    let cfg = put_secret(&saver, "t").await;
    let plain_rows: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM graphloom_checkpoint_blobs WHERE position(convert_to($1, 'UTF8') IN value) > 0)
              + (SELECT count(*) FROM graphloom_checkpoint_writes WHERE position(convert_to($1, 'UTF8') IN value) > 0)
              + (SELECT count(*) FROM graphloom_checkpoints WHERE position(convert_to($1, 'UTF8') IN checkpoint) > 0)",
    )
    .bind(SECRET)
    .fetch_one(saver.pool())
    .await
    .unwrap();
    assert_eq!(plain_rows, 0);
    let got = saver.get_tuple(&cfg).await.unwrap().unwrap();
    assert_eq!(
        got.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!([SECRET]))
    );
    assert_eq!(got.checkpoint.pending_sends[0].packet, json!({"s": SECRET}));
    assert_eq!(got.pending_writes[0].value, json!(SECRET));
}

#[tokio::test]
async fn an_encrypting_saver_refuses_plaintext_rows() {
    let (url, _db) = test_database().await;
    let plain = PostgresSaver::connect(&url).await.unwrap();
    let cfg = put_secret(&plain, "t").await;
    let saver = sealed(&url, &KEY).await;
    assert_corrupt(saver.get_tuple(&cfg).await, "plaintext row refused");
    // A plaintext saver cannot read sealed rows either.
    let sealed_cfg = put_secret(&saver, "s").await;
    assert_corrupt(plain.get_tuple(&sealed_cfg).await, "encrypted");
}

#[tokio::test]
async fn the_wrong_key_or_a_moved_row_does_not_decode() {
    let (url, _db) = test_database().await;
    let saver = sealed(&url, &KEY).await;
    let cfg = put_secret(&saver, "t").await;
    assert_corrupt(
        sealed(&url, &[7; 32]).await.get_tuple(&cfg).await,
        "does not authenticate",
    );
    // Move the sealed blob to another channel's row: the associated data no longer matches.
    let other = put_secret(&saver, "u").await;
    sqlx::query(
        "UPDATE graphloom_checkpoint_blobs SET value = (SELECT value FROM graphloom_checkpoint_blobs WHERE thread_id = 't')
         WHERE thread_id = 'u'",
    )
    .execute(saver.pool())
    .await
    .unwrap();
    assert_corrupt(saver.get_tuple(&other).await, "msgs");
    assert!(saver.get_tuple(&cfg).await.is_ok(), "the source row is intact");
    // copy_thread re-seals for the target thread, so the copy reads back.
    saver.copy_thread("t", "copy").await.unwrap();
    let copied = saver
        .get_tuple(&CheckpointConfig::thread("copy"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        copied.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!([SECRET]))
    );
}
