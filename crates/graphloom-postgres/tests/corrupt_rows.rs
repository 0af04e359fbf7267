//! Rows that do not decode, or chains that do not resolve, are typed corruption errors
//! naming the thread and checkpoint, never a panic, a hang or a wrong value; a missing
//! exact version is an empty channel.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    ListQuery, Version,
};
use graphloom_core::*;
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresSaver;
use serde_json::json;
use std::collections::BTreeMap;

fn v(n: u64) -> Version {
    Version { n, salt: 5 }
}

fn meta(step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: BTreeMap::new(),
        run_id: None,
        extra: Default::default(),
    }
}

/// Thread "t": checkpoint 1 stores msgs [a] (v1); checkpoint 2 appends b (v2 -> v1), with a
/// pending write. Returns (saver, config of checkpoint 2).
async fn setup(url: &str) -> (PostgresSaver, CheckpointConfig) {
    let saver = PostgresSaver::connect(url).await.unwrap();
    let mut cp1 = Checkpoint::empty();
    cp1.channel_versions.insert("msgs".into(), v(1));
    cp1.channel_values
        .insert("msgs".into(), ChannelValue::Full(json!(["a"])));
    let c1 = saver
        .put(
            &CheckpointConfig::thread("t"),
            cp1,
            meta(0),
            BTreeMap::from([("msgs".to_owned(), v(1))]),
        )
        .await
        .unwrap();
    let mut cp2 = Checkpoint::empty();
    cp2.channel_versions.insert("msgs".into(), v(2));
    cp2.channel_values.insert(
        "msgs".into(),
        ChannelValue::Append {
            base: v(1),
            items: vec![json!("b")],
        },
    );
    let c2 = saver
        .put(&c1, cp2, meta(1), BTreeMap::from([("msgs".to_owned(), v(2))]))
        .await
        .unwrap();
    saver
        .put_writes(&c2, vec![("msgs".into(), json!("c"))], "task-1", "")
        .await
        .unwrap();
    let got = saver.get_tuple(&c2).await.unwrap().unwrap();
    assert_eq!(
        got.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!(["a", "b"]))
    );
    (saver, c2)
}

async fn exec(saver: &PostgresSaver, sql: &str) {
    sqlx::query(sql).execute(saver.pool()).await.unwrap();
}

/// `get_tuple` and `list` of `cfg` fail with a corruption error naming it and `needle`.
async fn assert_corrupt(saver: &PostgresSaver, cfg: &CheckpointConfig, needle: &str) {
    for result in [
        saver.get_tuple(cfg).await.map(|_| ()),
        saver.list(&ListQuery::thread("t")).await.map(|_| ()),
    ] {
        match result {
            Err(Error::CorruptCheckpoint {
                thread_id,
                checkpoint_id,
                message,
            }) => {
                assert_eq!(thread_id, "t");
                assert_eq!(Some(checkpoint_id), cfg.checkpoint_id);
                assert!(message.contains(needle), "{message:?} should mention {needle:?}");
            }
            other => panic!("want a corrupt-checkpoint error mentioning {needle:?}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn garbage_in_a_blob_is_corrupt() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    exec(
        &saver,
        "UPDATE graphloom_checkpoint_blobs SET value = '\\x7b6e6f74206a736f6e' WHERE version LIKE '%2.%'",
    )
    .await;
    assert_corrupt(&saver, &c2, "msgs").await;
}

#[tokio::test]
async fn a_blob_of_the_wrong_shape_is_corrupt() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    // Valid JSON, but not a ChannelValue.
    exec(
        &saver,
        "UPDATE graphloom_checkpoint_blobs SET value = convert_to('{\"t\":\"exec\",\"v\":\"rm -rf /\"}', 'UTF8')
         WHERE version LIKE '%2.%'",
    )
    .await;
    assert_corrupt(&saver, &c2, "does not decode").await;
}

#[tokio::test]
async fn an_unknown_encoding_is_corrupt() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    exec(
        &saver,
        "UPDATE graphloom_checkpoint_blobs SET encoding = 'pickle'",
    )
    .await;
    assert_corrupt(&saver, &c2, "unknown encoding `pickle`").await;
}

#[tokio::test]
async fn a_broken_append_chain_is_corrupt() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    exec(
        &saver,
        "DELETE FROM graphloom_checkpoint_blobs WHERE base_version IS NULL",
    )
    .await;
    assert_corrupt(&saver, &c2, "no stored value for version").await;
}

#[tokio::test]
async fn a_tampered_chain_link_cannot_loop_or_lie() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    // The plaintext link (a fetch hint) points at itself: the fetch stops instead of looping.
    exec(
        &saver,
        "UPDATE graphloom_checkpoint_blobs SET base_version = version WHERE base_version IS NOT NULL",
    )
    .await;
    // Alone, checkpoint 2's chain cannot be followed to v1 (the sealed value's own link):
    match saver.get_tuple(&c2).await {
        Err(Error::CorruptCheckpoint {
            thread_id,
            checkpoint_id,
            message,
        }) => {
            assert_eq!(
                (thread_id.as_str(), Some(checkpoint_id)),
                ("t", c2.checkpoint_id.clone())
            );
            assert!(message.contains("msgs"), "{message}");
        }
        other => panic!("want a corrupt-checkpoint error, got {other:?}"),
    }
    // Listed with checkpoint 1 (which fetches v1), the sealed link still gives the true value.
    let listed = saver.list(&ListQuery::thread("t")).await.unwrap();
    assert_eq!(
        listed[0].checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!(["a", "b"]))
    );
}

#[tokio::test]
async fn the_exact_version_missing_is_an_empty_channel() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    exec(
        &saver,
        "DELETE FROM graphloom_checkpoint_blobs WHERE base_version IS NOT NULL",
    )
    .await;
    let got = saver.get_tuple(&c2).await.unwrap().unwrap();
    assert!(
        got.checkpoint.channel_values.is_empty(),
        "{:?}",
        got.checkpoint.channel_values
    );
}

#[tokio::test]
async fn a_tampered_checkpoint_row_or_write_is_corrupt() {
    let (url, _db) = test_database().await;
    let (saver, c2) = setup(&url).await;
    exec(&saver, "UPDATE graphloom_checkpoint_writes SET value = '\\x00ff'").await;
    assert_corrupt(&saver, &c2, "pending write of task `task-1`").await;
    exec(&saver, "DELETE FROM graphloom_checkpoint_writes").await;

    // A checkpoint row holding another checkpoint.
    let id = c2.checkpoint_id.clone().unwrap();
    exec(
        &saver,
        &format!(
            "UPDATE graphloom_checkpoints SET checkpoint = (SELECT checkpoint FROM graphloom_checkpoints
             WHERE checkpoint_id <> '{id}') WHERE checkpoint_id = '{id}'"
        ),
    )
    .await;
    assert_corrupt(&saver, &c2, "holds checkpoint").await;

    exec(
        &saver,
        &format!(
            "UPDATE graphloom_checkpoints SET metadata = '{{\"source\": 7}}' WHERE checkpoint_id = '{id}'"
        ),
    )
    .await;
    exec(
        &saver,
        &format!("UPDATE graphloom_checkpoints SET checkpoint = '\\x5b5d' WHERE checkpoint_id = '{id}'"),
    )
    .await;
    assert_corrupt(&saver, &c2, "checkpoint row").await;
}

#[derive(State, Clone, Default, Debug)]
struct Typed {
    count: i64,
}

#[tokio::test]
async fn a_graph_reading_a_corrupt_thread_gets_a_typed_error() {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    let g = StateGraph::<Typed>::new()
        .add_node("a", |_s, _rt| async { Ok(NodeOutput::None) })
        .add_edge(START, "a")
        .add_edge("a", END)
        .checkpointer(saver.clone())
        .compile()
        .unwrap();
    g.invoke(TypedUpdate::new().count(1), RunConfig::thread("t"))
        .await
        .unwrap();
    exec(&saver, "UPDATE graphloom_checkpoint_blobs SET value = '\\x7b'").await;
    for err in [
        g.get_state(&RunConfig::thread("t")).await.unwrap_err(),
        g.invoke_input(RunInput::Continue, RunConfig::thread("t"))
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::CorruptCheckpoint { thread_id, .. } if thread_id == "t"),
            "{err:?}"
        );
    }
}
