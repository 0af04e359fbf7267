//! `put_writes`, shared list items, and writes saved with the checkpoint that follows.

#[allow(clippy::wildcard_imports)]
use super::*;

// ---------------------------------------------------------------------------------------
// put_writes
// ---------------------------------------------------------------------------------------

/// `put_writes`: writes come back in write order with their task ids, a repeated
/// `(task_id, idx)` is stored once, ERROR and INTERRUPT writes are kept and writing ERROR
/// again replaces it in place, namespaces are isolated, and writes belong to the checkpoint
/// they were written against.
pub async fn put_writes<C: Checkpointer>(saver: &C) {
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let cfg = chain(saver, "put_writes/setup", &root, 1, |_| {
        meta(CheckpointSource::Loop, 0)
    })
    .await;
    let c1 = cfg[0].clone();
    let (ta, tb) = (
        format!("a-{}", uuid::Uuid::new_v4()),
        format!("b-{}", uuid::Uuid::new_v4()),
    );

    let name = "put_writes/in_order";
    // Task b writes first, so write order differs from task-id order.
    put_w(saver, name, &c1, &[("ch", json!("from_b"))], &tb, "~b").await;
    put_w(
        saver,
        name,
        &c1,
        &[
            ("ch3", json!(3)),
            ("ch1", json!({"data": 1})),
            ("ch2", json!([2])),
        ],
        &ta,
        "~a",
    )
    .await;
    let expected = vec![
        pw(&tb, "ch", json!("from_b")),
        pw(&ta, "ch3", json!(3)),
        pw(&ta, "ch1", json!({"data": 1})),
        pw(&ta, "ch2", json!([2])),
    ];
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected.clone()
    );

    let name = "put_writes/idempotent";
    put_w(saver, name, &c1, &[("ch", json!("from_b"))], &tb, "~b").await;
    put_w(
        saver,
        name,
        &c1,
        &[
            ("ch3", json!(3)),
            ("ch1", json!({"data": 1})),
            ("ch2", json!([2])),
        ],
        &ta,
        "~a",
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected.clone(),
        "a replay is stored once"
    );
    put_w(saver, name, &c1, &[("ch3", json!("changed"))], &ta, "~a").await;
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected.clone(),
        "an ordinary write with a (task_id, idx) already stored keeps the first value"
    );

    let name = "put_writes/special_channels";
    let tc = format!("c-{}", uuid::Uuid::new_v4());
    put_w(
        saver,
        name,
        &c1,
        &[
            (ERROR, json!("something went wrong")),
            (INTERRUPT, json!({"reason": "human_input"})),
        ],
        &tc,
        "~c",
    )
    .await;
    let mut expected_special = expected.clone();
    expected_special.push(pw(&tc, ERROR, json!("something went wrong")));
    expected_special.push(pw(&tc, INTERRUPT, json!({"reason": "human_input"})));
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected_special.clone()
    );

    let name = "put_writes/error_replaces";
    put_w(saver, name, &c1, &[(ERROR, json!("failed again"))], &tc, "~c").await;
    expected_special[4] = pw(&tc, ERROR, json!("failed again"));
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected_special.clone(),
        "writing ERROR again for a task replaces its ERROR write, which keeps its place"
    );
    let td = format!("d-{}", uuid::Uuid::new_v4());
    put_w(saver, name, &c1, &[(ERROR, json!("other task"))], &td, "~d").await;
    expected_special.push(pw(&td, ERROR, json!("other task")));
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected_special.clone(),
        "an ERROR of another task does not replace it"
    );

    let name = "put_writes/latest_has_writes";
    check_eq!(
        name,
        must_get(saver, name, &root).await.pending_writes,
        expected_special.clone()
    );

    let name = "put_writes/namespaces_isolated";
    let child = root.clone().in_ns("child:1");
    let cc = chain(saver, name, &child, 1, |_| meta(CheckpointSource::Loop, 0)).await;
    let child_task = uuid::Uuid::new_v4().to_string();
    put_w(
        saver,
        name,
        &cc[0],
        &[("ch", json!("child_val"))],
        &child_task,
        "",
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &cc[0]).await.pending_writes,
        vec![pw(&child_task, "ch", json!("child_val"))]
    );
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected_special.clone()
    );
    // Same checkpoint id in another namespace: writes keyed by (thread, ns, id).
    let ghost = child.clone().at(c1.checkpoint_id.clone().unwrap());
    check!(
        name,
        get(saver, name, &ghost).await.is_none(),
        "root checkpoint visible in child namespace"
    );

    let name = "put_writes/new_checkpoint_has_none";
    let cp2 = checkpoint(&[("step", ver(1))], vec![]);
    let c2 = put(
        saver,
        name,
        &c1,
        cp2,
        meta(CheckpointSource::Loop, 1),
        BTreeMap::new(),
    )
    .await;
    let t2 = must_get(saver, name, &c2).await;
    check!(
        name,
        t2.pending_writes.is_empty(),
        "a new checkpoint starts with no writes: {:?}",
        t2.pending_writes
    );
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        expected_special,
        "the writes stay with the checkpoint they were written against"
    );
    let te = uuid::Uuid::new_v4().to_string();
    put_w(saver, name, &c2, &[("x", json!(1))], &te, "").await;
    check_eq!(
        name,
        must_get(saver, name, &c2).await.pending_writes,
        vec![pw(&te, "x", json!(1))]
    );
}

/// A list channel stored as shared items reads back as the same JSON array, and an append
/// to it resolves on top of it.
pub async fn shared_items<C: Checkpointer>(saver: &C) {
    let name = "shared_items";
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let doc = std::sync::Arc::new(json!({"k": [1, "two", null]}));
    let items = vec![std::sync::Arc::clone(&doc), std::sync::Arc::clone(&doc)];
    let cp1 = checkpoint(&[("list", ver(1))], vec![("list", ChannelValue::Items(items))]);
    let c1 = put(
        saver,
        name,
        &root,
        cp1.clone(),
        meta(CheckpointSource::Loop, 0),
        versions(&[("list", ver(1))]),
    )
    .await;
    let expected = json!([{"k": [1, "two", null]}, {"k": [1, "two", null]}]);
    check_eq!(
        name,
        must_get(saver, name, &c1).await.checkpoint,
        resolved(&cp1, &[("list", expected)])
    );
    let cp2 = checkpoint(
        &[("list", ver(2))],
        vec![("list", append(ver(1), vec![json!(3)]))],
    );
    let c2 = put(
        saver,
        name,
        &c1,
        cp2.clone(),
        meta(CheckpointSource::Loop, 1),
        versions(&[("list", ver(2))]),
    )
    .await;
    let expected = json!([{"k": [1, "two", null]}, {"k": [1, "two", null]}, 3]);
    check_eq!(
        name,
        must_get(saver, name, &c2).await.checkpoint,
        resolved(&cp2, &[("list", expected)])
    );
}

/// `put_writes_then_checkpoint`: the writes land on the parent checkpoint, the checkpoint
/// (with its channel value) becomes the latest, and a special write keeps its meaning.
pub async fn writes_then_checkpoint<C: Checkpointer>(saver: &C) {
    let name = "writes_then_checkpoint";
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let c1 = chain(saver, name, &root, 1, |_| meta(CheckpointSource::Loop, 0)).await[0].clone();
    let task = format!("t-{}", uuid::Uuid::new_v4());
    let task_writes = graphloom_core::checkpoint::TaskWrites {
        config: c1.clone(),
        task_id: task.clone(),
        task_path: "~t".into(),
        writes: writes(&[
            ("step", json!(7)),
            (graphloom_core::checkpoint::ERROR, json!({"message": "x"})),
        ]),
    };
    let cp = checkpoint(&[("step", ver(2))], vec![("step", full(json!(7)))]);
    let c2 = saver
        .put_writes_then_checkpoint(
            task_writes,
            &c1,
            cp.clone(),
            meta(CheckpointSource::Loop, 1),
            versions(&[("step", ver(2))]),
        )
        .await
        .unwrap_or_else(|e| panic!("checkpointer conformance check `{name}` failed: {e}"));
    check_eq!(name, c2.checkpoint_id.as_deref(), Some(cp.id.as_str()));
    check_eq!(
        name,
        must_get(saver, name, &c1).await.pending_writes,
        vec![
            pw(&task, "step", json!(7)),
            pw(&task, graphloom_core::checkpoint::ERROR, json!({"message": "x"}))
        ]
    );
    let latest = must_get(saver, name, &root).await;
    check_eq!(name, latest.config, c2, "the new checkpoint must be the latest");
    check_eq!(name, latest.checkpoint, resolved(&cp, &[("step", json!(7))]));
    check_eq!(name, latest.parent_config, Some(c1));
    check!(
        name,
        latest.pending_writes.is_empty(),
        "the new checkpoint has no writes yet: {:?}",
        latest.pending_writes
    );
}
