//! The typed checkpoint tables (`graphloom_postgres::typed`): what LangGraph's savers in the
//! Python package rely on, on a fresh database of a real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_postgres::testing::test_database;
use graphloom_postgres::typed::{TypedPut, TypedQuery, TypedSaver, TypedValue, TypedWrites};
use serde_json::json;

fn value(s: &str) -> TypedValue {
    TypedValue::new("json", s.as_bytes().to_vec())
}

fn put(
    thread: &str,
    id: &str,
    versions: &[(&str, &str)],
    new: &[(&str, &str, &str)],
    md: serde_json::Value,
) -> TypedPut {
    TypedPut {
        thread_id: thread.into(),
        checkpoint_ns: String::new(),
        checkpoint_id: id.into(),
        parent_id: None,
        checkpoint: value(&format!("cp-{id}")),
        channel_versions: versions.iter().map(|(c, v)| ((*c).into(), (*v).into())).collect(),
        blobs: new
            .iter()
            .map(|(c, v, x)| ((*c).into(), (*v).into(), value(x)))
            .collect(),
        metadata: md.as_object().cloned().unwrap(),
    }
}

fn values(t: &graphloom_postgres::typed::TypedTuple) -> Vec<(String, String)> {
    t.values
        .iter()
        .map(|(c, v)| (c.clone(), String::from_utf8(v.bytes.clone()).unwrap()))
        .collect()
}

async fn blob_count(saver: &TypedSaver) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM typed_blobs")
        .fetch_one(saver.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn checkpoints_writes_listing_and_thread_operations() {
    let (url, _db) = test_database().await;
    let saver = TypedSaver::connect(&url).await.unwrap();
    saver
        .put(put(
            "t",
            "1",
            &[("a", "1"), ("b", "1")],
            &[("a", "1", "a1"), ("b", "1", "b1")],
            json!({"run_id": "r1", "step": 0}),
        ))
        .await
        .unwrap();
    saver
        .put(put(
            "t",
            "2",
            &[("a", "2"), ("b", "1")],
            &[("a", "2", "a2")],
            json!({"run_id": "r2", "step": 1}),
        ))
        .await
        .unwrap();

    let latest = saver.get_tuple("t", "", None).await.unwrap().unwrap();
    assert_eq!(latest.checkpoint_id, "2");
    assert_eq!(
        values(&latest),
        [("a".into(), "a2".into()), ("b".into(), "b1".into())]
    );
    let first = saver.get_tuple("t", "", Some("1")).await.unwrap().unwrap();
    assert_eq!(
        values(&first),
        [("a".into(), "a1".into()), ("b".into(), "b1".into())]
    );

    let writes = |task: &str, w: &[(i64, &str, &str)], replace: bool| TypedWrites {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        checkpoint_id: "2".into(),
        task_id: task.into(),
        task_path: "~p".into(),
        writes: w.iter().map(|(i, c, v)| (*i, (*c).into(), value(v))).collect(),
        replace,
    };
    saver
        .put_writes(writes("k", &[(0, "x", "first")], false))
        .await
        .unwrap();
    saver
        .put_writes(writes("k", &[(0, "x", "again")], false))
        .await
        .unwrap();
    saver
        .put_writes(writes("k", &[(-1, "__error__", "e1")], true))
        .await
        .unwrap();
    saver
        .put_writes(writes("k", &[(-1, "__error__", "e2")], true))
        .await
        .unwrap();
    let got: Vec<Vec<u8>> = saver
        .get_tuple("t", "", None)
        .await
        .unwrap()
        .unwrap()
        .writes
        .into_iter()
        .map(|w| w.value.bytes)
        .collect();
    assert_eq!(got, [b"e2".to_vec(), b"first".to_vec()]);

    let ids = |q: Vec<graphloom_postgres::typed::TypedTuple>| {
        q.into_iter().map(|t| t.checkpoint_id).collect::<Vec<_>>()
    };
    let thread = TypedQuery {
        thread_id: Some("t".into()),
        ..TypedQuery::default()
    };
    assert_eq!(ids(saver.list(&thread).await.unwrap()), ["2", "1"]);
    let filtered = TypedQuery {
        filter: json!({"step": 0}).as_object().cloned().unwrap(),
        limit: Some(1),
        ..thread.clone()
    };
    assert_eq!(ids(saver.list(&filtered).await.unwrap()), ["1"]);
    let before = TypedQuery {
        before: Some("2".into()),
        ..thread.clone()
    };
    assert_eq!(ids(saver.list(&before).await.unwrap()), ["1"]);

    saver.copy_thread("t", "u").await.unwrap();
    assert_eq!(
        ids(saver
            .list(&TypedQuery {
                thread_id: Some("u".into()),
                ..TypedQuery::default()
            })
            .await
            .unwrap()),
        ["2", "1"]
    );
    saver.prune(vec!["t".into()], true).await.unwrap();
    assert_eq!(ids(saver.list(&thread).await.unwrap()), ["2"]);
    // t: a@2, b@1 kept, a@1 dropped; u: all three.
    assert_eq!(blob_count(&saver).await, 5);
    assert_eq!(
        saver
            .get_tuple("t", "", None)
            .await
            .unwrap()
            .unwrap()
            .writes
            .len(),
        2
    );

    saver.delete_for_runs(vec!["r2".into()]).await.unwrap();
    assert!(saver.get_tuple("t", "", None).await.unwrap().is_none());
    assert_eq!(
        saver
            .get_tuple("u", "", None)
            .await
            .unwrap()
            .unwrap()
            .checkpoint_id,
        "1"
    );
    // u keeps only what checkpoint 1 names.
    assert_eq!(blob_count(&saver).await, 2);
    saver.delete_thread("u").await.unwrap();
    assert_eq!(blob_count(&saver).await, 0);
}
