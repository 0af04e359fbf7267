//! The value cache's budget bounds the memory it holds, not the encoded size of what it
//! holds (decoded JSON takes several times its encoded length). A test binary of its own:
//! it weighs the whole process's heap, which other tests running beside it would disturb.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer, Version,
};
use graphloom_sqlite::SqliteSaver;
use serde_json::{json, Map, Value};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::collections::BTreeMap;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const BUDGET: usize = 1 << 20;
const THREADS: usize = 150;
const MESSAGES: usize = 40;

/// A conversation as a chat graph keeps it: small objects, short strings.
fn conversation(thread: usize) -> Value {
    let msgs: Vec<Value> = (0..MESSAGES)
        .map(|i| {
            json!({
                "type": if i % 2 == 0 { "human" } else { "ai" },
                "content": format!("message {i} of thread {thread}"),
                "id": format!("{thread:08}-{i:04}"),
                "additional_kwargs": {},
                "response_metadata": {},
                "name": null,
            })
        })
        .collect();
    Value::Array(msgs)
}

fn meta() -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: BTreeMap::new(),
        run_id: None,
        extra: Map::new(),
    }
}

/// The heap a saver with a value cache of `budget` bytes holds after reading every
/// thread's latest checkpoint once (its connections and statements made before weighing).
async fn held_after_reading(budget: usize) -> i64 {
    let dir = tempfile::tempdir().unwrap();
    let saver = SqliteSaver::builder(dir.path().join("weigh.db"))
        .value_cache_bytes(budget)
        .open()
        .await
        .unwrap();
    let version = Version { n: 1, salt: 7 };
    let mut encoded = 0;
    for t in 0..THREADS {
        let value = conversation(t);
        encoded += serde_json::to_vec(&value).unwrap().len();
        let mut cp = Checkpoint::empty();
        cp.channel_versions.insert("messages".into(), version);
        cp.channel_values
            .insert("messages".into(), ChannelValue::Full(value));
        saver
            .put(
                &CheckpointConfig::thread(format!("t{t}")),
                cp,
                meta(),
                BTreeMap::from([("messages".into(), version)]),
            )
            .await
            .unwrap();
    }
    // Every conversation's encoded size together fits the budget: a budget counting
    // encoded bytes would keep them all, several times the budget in memory.
    assert!(encoded < BUDGET, "{encoded} encoded bytes");
    let read = |t: usize| {
        let saver = saver.clone();
        async move {
            let got = saver
                .get_tuple(&CheckpointConfig::thread(format!("t{t}")))
                .await
                .unwrap()
                .unwrap();
            let ChannelValue::Full(Value::Array(msgs)) = &got.checkpoint.channel_values["messages"] else {
                panic!("not the conversation: {got:?}");
            };
            assert_eq!(msgs.len(), MESSAGES);
        }
    };
    read(0).await;
    read(1).await;
    let region = Region::new(GLOBAL);
    for t in 0..THREADS {
        read(t).await;
    }
    let change = region.change();
    let held =
        change.bytes_allocated as i64 - change.bytes_deallocated as i64 + change.bytes_reallocated as i64;
    drop(saver);
    held
}

#[tokio::test(flavor = "current_thread")]
async fn the_value_cache_holds_no_more_memory_than_its_budget() {
    // What reading holds besides the cache: the same reads without one.
    let base = held_after_reading(0).await;
    let cached = held_after_reading(BUDGET).await - base;
    let budget = BUDGET as i64;
    assert!(
        cached <= budget + budget / 10,
        "the cache holds {cached} bytes with a budget of {BUDGET}"
    );
    // And it is in use: it fills to about its budget.
    assert!(
        cached >= budget / 2,
        "the cache holds {cached} bytes: nothing cached?"
    );
}
