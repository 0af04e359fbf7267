//! The cache of resolved channel values never changes what a read returns.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    ListQuery, Version,
};
use graphloom_sqlite::SqliteSaver;
use graphloom_test_kit::checkpointer_conformance;
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

fn v(n: u64) -> Version {
    Version { n, salt: 9 }
}

/// A chain of `n` checkpoints appending one item each (a full value every 16).
async fn chain(saver: &SqliteSaver, thread: &str, n: u64) -> Vec<CheckpointConfig> {
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for i in 1..=n {
        let mut cp = Checkpoint::empty();
        cp.channel_versions.insert("msgs".into(), v(i));
        let value = if i % 16 == 1 {
            ChannelValue::Full(json!((1..=i).collect::<Vec<_>>()))
        } else {
            ChannelValue::Append {
                base: v(i - 1),
                items: vec![json!(i)],
            }
        };
        cp.channel_values.insert("msgs".into(), value);
        let parent = out
            .last()
            .cloned()
            .unwrap_or_else(|| CheckpointConfig::thread(thread));
        out.push(
            saver
                .put(
                    &parent,
                    cp,
                    meta(i as i64),
                    BTreeMap::from([("msgs".into(), v(i))]),
                )
                .await
                .unwrap(),
        );
    }
    out
}

#[tokio::test]
async fn saver_without_a_value_cache_passes_the_kit() {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::builder(dir.path().join("nocache.db"))
        .value_cache_bytes(0)
        .open()
        .await
        .unwrap();
    checkpointer_conformance(&saver).await;
}

#[tokio::test]
async fn cached_small_and_uncached_savers_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("same.db");
    let cached = SqliteSaver::open(&path).await.unwrap();
    let tiny = SqliteSaver::builder(&path)
        .value_cache_bytes(2_000)
        .open()
        .await
        .unwrap();
    let none = SqliteSaver::builder(&path)
        .value_cache_bytes(0)
        .open()
        .await
        .unwrap();
    let configs = chain(&cached, "t", 60).await;
    // Read the latest as a run would after each step, then everything in random-ish order.
    for (i, c) in configs.iter().enumerate() {
        let want = ChannelValue::Full(json!((1..=i as u64 + 1).collect::<Vec<_>>()));
        for saver in [&cached, &tiny, &none] {
            let got = saver.get_tuple(c).await.unwrap().unwrap();
            assert_eq!(got.checkpoint.channel_values["msgs"], want, "checkpoint {i}");
        }
    }
    for c in configs.iter().rev().step_by(7) {
        let a = cached.get_tuple(c).await.unwrap();
        assert_eq!(a, tiny.get_tuple(c).await.unwrap());
        assert_eq!(a, none.get_tuple(c).await.unwrap());
    }
    let q = ListQuery::thread("t");
    let listed = cached.list(&q).await.unwrap();
    assert_eq!(listed.len(), 60);
    assert_eq!(listed, none.list(&q).await.unwrap());
    assert_eq!(listed, tiny.list(&q).await.unwrap());
}

#[tokio::test]
async fn a_deleted_thread_leaves_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::open(dir.path().join("del.db")).await.unwrap();
    let configs = chain(&saver, "t", 3).await;
    let latest = saver
        .get_tuple(&CheckpointConfig::thread("t"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        latest.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!([1, 2, 3]))
    );
    saver.delete_thread("t").await.unwrap();
    // The same checkpoint id and channel version again, with another value.
    let mut cp = Checkpoint::empty();
    cp.id = configs[2].checkpoint_id.clone().unwrap();
    cp.channel_versions.insert("msgs".into(), v(3));
    cp.channel_values
        .insert("msgs".into(), ChannelValue::Full(json!(["new"])));
    let c = saver
        .put(
            &CheckpointConfig::thread("t"),
            cp,
            meta(0),
            BTreeMap::from([("msgs".into(), v(3))]),
        )
        .await
        .unwrap();
    let got = saver.get_tuple(&c).await.unwrap().unwrap();
    assert_eq!(
        got.checkpoint.channel_values["msgs"],
        ChannelValue::Full(json!(["new"]))
    );
}
