//! The shared checkpointer conformance kit against PostgreSQL: alone, shared by concurrent
//! runs, and across two savers (two pools) on one database; plus list-filter exactness.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use graphloom_core::checkpoint::{
    ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer,
    ListQuery, Version,
};
use graphloom_postgres::testing::test_database;
use graphloom_postgres::PostgresSaver;
use graphloom_test_kit::checkpointer_conformance;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

#[tokio::test]
async fn passes_the_conformance_kit() {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    checkpointer_conformance(&saver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_the_kit_three_times_at_once_on_one_saver() {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    futures::join!(
        checkpointer_conformance(&saver),
        checkpointer_conformance(&saver),
        checkpointer_conformance(&saver)
    );
}

fn meta(step: i64, extra: Value) -> CheckpointMetadata {
    let Value::Object(extra) = extra else {
        panic!("object")
    };
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step,
        parents: BTreeMap::new(),
        run_id: None,
        extra,
    }
}

fn filter(v: Value) -> Map<String, Value> {
    let Value::Object(m) = v else { panic!("object") };
    m
}

#[tokio::test]
async fn two_savers_on_one_database_see_each_others_checkpoints() {
    let (url, _db) = test_database().await;
    let a = PostgresSaver::connect(&url).await.unwrap();
    let b = PostgresSaver::connect(&url).await.unwrap();
    let v = Version { n: 1, salt: 9 };
    let mut cp = Checkpoint::empty();
    cp.channel_versions.insert("x".into(), v);
    cp.channel_values
        .insert("x".into(), ChannelValue::Full(json!([1, 2])));
    let cfg = a
        .put(
            &CheckpointConfig::thread("shared"),
            cp.clone(),
            meta(0, json!({})),
            BTreeMap::from([("x".to_owned(), v)]),
        )
        .await
        .unwrap();
    let got = b
        .get_tuple(&CheckpointConfig::thread("shared"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.config, cfg);
    assert_eq!(
        got.checkpoint.channel_values["x"],
        ChannelValue::Full(json!([1, 2]))
    );
    b.put_writes(&cfg, vec![("x".into(), json!(3))], "task", "")
        .await
        .unwrap();
    let again = a.get_tuple(&cfg).await.unwrap().unwrap();
    assert_eq!(again.pending_writes.len(), 1);
}

#[tokio::test]
async fn metadata_filters_are_exact_not_containment() {
    let (url, _db) = test_database().await;
    let saver = PostgresSaver::connect(&url).await.unwrap();
    let root = CheckpointConfig::thread("f");
    let mut parent = root.clone();
    let metas = [
        json!({"tags": [1, 2], "who": {"name": "ada", "age": 36}, "n": 1}),
        json!({"tags": [1], "who": {"name": "ada"}, "n": 2.5}),
    ];
    let mut ids = Vec::new();
    for (i, m) in metas.iter().enumerate() {
        let cp = Checkpoint::empty();
        ids.push(cp.id.clone());
        parent = saver
            .put(&parent, cp, meta(i as i64, m.clone()), BTreeMap::new())
            .await
            .unwrap();
    }
    let ids_for = |f: Value| {
        let saver = saver.clone();
        async move {
            saver
                .list(&ListQuery {
                    filter: filter(f),
                    ..ListQuery::thread("f")
                })
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.checkpoint.id)
                .collect::<Vec<_>>()
        }
    };
    // JSONB containment alone would let [1, 2] match [1] and a bigger object match a smaller.
    assert_eq!(ids_for(json!({"tags": [1]})).await, vec![ids[1].clone()]);
    assert_eq!(ids_for(json!({"tags": [1, 2]})).await, vec![ids[0].clone()]);
    assert_eq!(
        ids_for(json!({"who": {"name": "ada"}})).await,
        vec![ids[1].clone()]
    );
    assert_eq!(ids_for(json!({"n": 2.5})).await, vec![ids[1].clone()]);
    assert_eq!(ids_for(json!({"n": 1, "step": 0})).await, vec![ids[0].clone()]);
    assert!(ids_for(json!({"n": null})).await.is_empty());
    assert!(
        ids_for(json!({"run_id": null})).await.is_empty(),
        "absent keys match nothing"
    );
}
