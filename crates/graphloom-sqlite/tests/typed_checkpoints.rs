//! The typed checkpoint tables (`graphloom_sqlite::typed`): what LangGraph's savers in the
//! Python package rely on, checked from Rust on a temp file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use graphloom_sqlite::typed::{TypedPut, TypedQuery, TypedSaver, TypedValue, TypedWrites};
use graphloom_sqlite::{SqliteDatabase, SqliteOptions};
use serde_json::json;

fn value(s: &str) -> TypedValue {
    TypedValue::new("json", s.as_bytes().to_vec())
}

fn put(
    thread: &str,
    ns: &str,
    id: &str,
    parent: Option<&str>,
    versions: &[(&str, &str)],
    new: &[(&str, &str, &str)],
    md: serde_json::Value,
) -> TypedPut {
    TypedPut {
        thread_id: thread.into(),
        checkpoint_ns: ns.into(),
        checkpoint_id: id.into(),
        parent_id: parent.map(Into::into),
        checkpoint: value(&format!("cp-{id}")),
        channel_versions: versions.iter().map(|(c, v)| ((*c).into(), (*v).into())).collect(),
        blobs: new
            .iter()
            .map(|(c, v, x)| ((*c).into(), (*v).into(), value(x)))
            .collect(),
        metadata: md.as_object().cloned().unwrap(),
    }
}

async fn open(dir: &tempfile::TempDir) -> TypedSaver {
    TypedSaver::open(SqliteOptions::new(dir.path().join("typed.db")))
        .await
        .unwrap()
}

fn blob_count(saver_dir: &tempfile::TempDir) -> i64 {
    let conn = rusqlite::Connection::open(saver_dir.path().join("typed.db")).unwrap();
    conn.query_row("SELECT COUNT(*) FROM typed_blobs", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_checkpoint_reads_each_channel_at_the_version_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let saver = open(&dir).await;
    saver
        .put(put(
            "t",
            "",
            "1",
            None,
            &[("a", "1"), ("b", "1")],
            &[("a", "1", "a1"), ("b", "1", "b1")],
            json!({"step": 0}),
        ))
        .await
        .unwrap();
    saver
        .put(put(
            "t",
            "",
            "2",
            Some("1"),
            &[("a", "2"), ("b", "1")],
            &[("a", "2", "a2")],
            json!({"step": 1}),
        ))
        .await
        .unwrap();
    // A channel dropped from the versions is not read back.
    saver
        .put(put(
            "t",
            "",
            "3",
            Some("2"),
            &[("a", "2")],
            &[],
            json!({"step": 2}),
        ))
        .await
        .unwrap();

    let values = |id: &str| {
        let t = saver.get_tuple("t", "", Some(id)).unwrap().unwrap();
        t.values
            .into_iter()
            .map(|(c, v)| (c, String::from_utf8(v.bytes).unwrap()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        values("1"),
        [("a".into(), "a1".into()), ("b".into(), "b1".into())]
    );
    assert_eq!(
        values("2"),
        [("a".into(), "a2".into()), ("b".into(), "b1".into())]
    );
    assert_eq!(values("3"), [("a".to_string(), "a2".to_string())]);
    let latest = saver.get_tuple("t", "", None).unwrap().unwrap();
    assert_eq!(
        (latest.checkpoint_id.as_str(), latest.parent_id.as_deref()),
        ("3", Some("2"))
    );
    assert_eq!(latest.checkpoint.bytes, b"cp-3");
    assert!(saver.get_tuple("t", "child", None).unwrap().is_none());
    // Three blobs for five channel values named.
    assert_eq!(blob_count(&dir), 3);
}

#[tokio::test]
async fn writes_read_back_in_task_path_order_and_special_ones_replace() {
    let dir = tempfile::tempdir().unwrap();
    let saver = open(&dir).await;
    saver
        .put(put("t", "", "1", None, &[], &[], json!({})))
        .await
        .unwrap();
    let writes = |task: &str, path: &str, w: &[(i64, &str, &str)], replace: bool| TypedWrites {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        checkpoint_id: "1".into(),
        task_id: task.into(),
        task_path: path.into(),
        writes: w.iter().map(|(i, c, v)| (*i, (*c).into(), value(v))).collect(),
        replace,
    };
    saver
        .put_writes(writes("t2", "~b", &[(0, "x", "late")], false))
        .await
        .unwrap();
    saver
        .put_writes(writes(
            "t1",
            "~a",
            &[(0, "x", "first"), (1, "y", "second")],
            false,
        ))
        .await
        .unwrap();
    // The same idx again: the first write stays.
    saver
        .put_writes(writes("t1", "~a", &[(0, "x", "again")], false))
        .await
        .unwrap();
    // A special write replaces.
    saver
        .put_writes(writes("t1", "~a", &[(-1, "__error__", "e1")], true))
        .await
        .unwrap();
    saver
        .put_writes(writes("t1", "~a", &[(-1, "__error__", "e2")], true))
        .await
        .unwrap();

    let t = saver.get_tuple("t", "", None).unwrap().unwrap();
    let got: Vec<(String, String)> = t
        .writes
        .into_iter()
        .map(|w| (w.task_id, String::from_utf8(w.value.bytes).unwrap()))
        .collect();
    let want = [("t1", "e2"), ("t1", "first"), ("t1", "second"), ("t2", "late")];
    assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
}

#[tokio::test]
async fn list_filters_pages_and_limits_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let saver = open(&dir).await;
    for (i, source) in ["input", "loop", "loop", "update"].iter().enumerate() {
        let id = format!("{i}");
        saver
            .put(put(
                "t",
                "",
                &id,
                None,
                &[],
                &[],
                json!({"source": source, "step": i}),
            ))
            .await
            .unwrap();
    }
    saver
        .put(put("other", "", "9", None, &[], &[], json!({"source": "loop"})))
        .await
        .unwrap();
    let ids = |q: TypedQuery| {
        saver
            .list(&q)
            .unwrap()
            .into_iter()
            .map(|t| t.checkpoint_id)
            .collect::<Vec<_>>()
    };
    let thread = || TypedQuery {
        thread_id: Some("t".into()),
        ..TypedQuery::default()
    };
    assert_eq!(ids(thread()), ["3", "2", "1", "0"]);
    assert_eq!(
        ids(TypedQuery {
            filter: json!({"source": "loop"}).as_object().cloned().unwrap(),
            ..thread()
        }),
        ["2", "1"]
    );
    assert_eq!(
        ids(TypedQuery {
            before: Some("3".into()),
            limit: Some(2),
            ..thread()
        }),
        ["2", "1"]
    );
    assert_eq!(
        ids(TypedQuery {
            filter: json!({"source": "loop"}).as_object().cloned().unwrap(),
            ..TypedQuery::default()
        }),
        ["9", "2", "1"]
    );
    assert_eq!(
        ids(TypedQuery {
            limit: Some(0),
            ..thread()
        }),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn prune_keeps_the_latest_checkpoint_per_namespace_and_its_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let saver = open(&dir).await;
    saver
        .put(put(
            "t",
            "",
            "1",
            None,
            &[("a", "1"), ("b", "1")],
            &[("a", "1", "a1"), ("b", "1", "b1")],
            json!({}),
        ))
        .await
        .unwrap();
    saver
        .put(put(
            "t",
            "",
            "2",
            Some("1"),
            &[("a", "2"), ("b", "1")],
            &[("a", "2", "a2")],
            json!({}),
        ))
        .await
        .unwrap();
    saver
        .put(put(
            "t",
            "sub:1",
            "1",
            None,
            &[("c", "1")],
            &[("c", "1", "c1")],
            json!({}),
        ))
        .await
        .unwrap();
    saver.prune(vec!["t".into()], true).await.unwrap();
    let left = saver
        .list(&TypedQuery {
            thread_id: Some("t".into()),
            ..TypedQuery::default()
        })
        .unwrap();
    let mut kept: Vec<(String, String)> = left
        .iter()
        .map(|t| (t.checkpoint_ns.clone(), t.checkpoint_id.clone()))
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [("".to_string(), "2".to_string()), ("sub:1".into(), "1".into())]
    );
    // a@1 is named by no kept checkpoint: dropped; b@1 still is.
    assert_eq!(blob_count(&dir), 3);
    let root = saver.get_tuple("t", "", None).unwrap().unwrap();
    assert_eq!(root.values.len(), 2);
    saver.prune(vec!["t".into()], false).await.unwrap();
    assert!(saver.get_tuple("t", "", None).unwrap().is_none());
    assert_eq!(blob_count(&dir), 0);
}

#[tokio::test]
async fn runs_are_deleted_and_threads_copied_whole() {
    let dir = tempfile::tempdir().unwrap();
    let saver = open(&dir).await;
    saver
        .put(put(
            "t",
            "",
            "1",
            None,
            &[("a", "1")],
            &[("a", "1", "a1")],
            json!({"run_id": "r1"}),
        ))
        .await
        .unwrap();
    saver
        .put(put(
            "t",
            "",
            "2",
            Some("1"),
            &[("a", "2")],
            &[("a", "2", "a2")],
            json!({"run_id": "r2"}),
        ))
        .await
        .unwrap();
    saver.copy_thread("t", "u").await.unwrap();
    saver.delete_for_runs(vec!["r2".into()]).await.unwrap();
    let latest = saver.get_tuple("t", "", None).unwrap().unwrap();
    assert_eq!(latest.checkpoint_id, "1");
    // Runs are not per thread: the copy of run r2's checkpoint went with it.
    assert!(saver.get_tuple("u", "", Some("2")).unwrap().is_none());
    let copied = saver.get_tuple("u", "", Some("1")).unwrap().unwrap();
    assert_eq!(copied.values[0].1.bytes, b"a1");
    saver.delete_thread("t").await.unwrap();
    assert!(saver.get_tuple("t", "", None).unwrap().is_none());
    assert!(saver.get_tuple("u", "", None).unwrap().is_some());
}

#[tokio::test]
async fn a_shared_database_writes_typed_checkpoints_through_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteDatabase::open(SqliteOptions::new(dir.path().join("typed.db")))
        .await
        .unwrap();
    let saver = TypedSaver::from_database(&db).await.unwrap();
    let before = db.commit_stats().operations;
    saver
        .put(put("t", "", "1", None, &[], &[], json!({})))
        .await
        .unwrap();
    assert_eq!(db.commit_stats().operations, before + 1);
    assert!(saver.get_tuple("t", "", Some("1")).unwrap().is_some());
}
