//! `delete_thread` and `copy_thread`.

#[allow(clippy::wildcard_imports)]
use super::*;

// ---------------------------------------------------------------------------------------
// delete_thread
// ---------------------------------------------------------------------------------------
/// `delete_thread`: removes the thread's checkpoints, values and writes in every namespace,
/// and nothing of any other thread.
pub async fn delete_thread<C: Checkpointer>(saver: &C) {
    let name = "delete_thread/setup";
    let (gone, kept) = (new_thread(), new_thread());
    let gone_root = CheckpointConfig::thread(&gone);
    let gone_child = gone_root.clone().in_ns("child:1");
    let kept_root = CheckpointConfig::thread(&kept);
    let g = chain(saver, name, &gone_root, 2, |i| {
        meta(CheckpointSource::Loop, i as i64)
    })
    .await;
    let gc = chain(saver, name, &gone_child, 1, |_| meta(CheckpointSource::Loop, 0)).await;
    let k = chain(saver, name, &kept_root, 2, |i| {
        meta(CheckpointSource::Loop, i as i64)
    })
    .await;
    let task = uuid::Uuid::new_v4().to_string();
    put_w(saver, name, &g[1], &[("w", json!("gone"))], &task, "").await;
    put_w(saver, name, &gc[0], &[("w", json!("gone child"))], &task, "").await;
    put_w(saver, name, &k[1], &[("w", json!("kept"))], &task, "").await;
    let kept_before = list_all(
        saver,
        name,
        &ListQuery {
            checkpoint_ns: None,
            ..ListQuery::thread(&kept)
        },
    )
    .await;

    let name = "delete_thread/removes_everything";
    delete(saver, name, &gone).await;
    check!(
        name,
        get(saver, name, &gone_root).await.is_none(),
        "root namespace still has a checkpoint"
    );
    check!(
        name,
        get(saver, name, &gone_child).await.is_none(),
        "child namespace still has a checkpoint"
    );
    check!(
        name,
        get(saver, name, &g[0]).await.is_none(),
        "a checkpoint is still readable by id"
    );
    let left = list_all(
        saver,
        name,
        &ListQuery {
            checkpoint_ns: None,
            ..ListQuery::thread(&gone)
        },
    )
    .await;
    check!(
        name,
        left.is_empty(),
        "list still finds {} checkpoints",
        left.len()
    );

    let name = "delete_thread/other_threads_untouched";
    let kept_after = list_all(
        saver,
        name,
        &ListQuery {
            checkpoint_ns: None,
            ..ListQuery::thread(&kept)
        },
    )
    .await;
    check_eq!(name, kept_after, kept_before);
    check_eq!(
        name,
        must_get(saver, name, &kept_root).await.pending_writes,
        vec![pw(&task, "w", json!("kept"))]
    );

    // Putting the same checkpoint ids and versions again starts from nothing: old values
    // and writes must not come back.
    let name = "delete_thread/nothing_left_behind";
    let id = g[1].checkpoint_id.clone().unwrap();
    let mut cp = checkpoint(&[("step", ver(2))], vec![("step", full(json!("new")))]);
    cp.id = id;
    let c = put(
        saver,
        name,
        &gone_root,
        cp,
        meta(CheckpointSource::Loop, 0),
        versions(&[("step", ver(2))]),
    )
    .await;
    let t = must_get(saver, name, &c).await;
    check_eq!(
        name,
        t.checkpoint.channel_values.get("step"),
        Some(&full(json!("new"))),
        "an old blob survived"
    );
    check!(
        name,
        t.pending_writes.is_empty(),
        "old writes survived: {:?}",
        t.pending_writes
    );
    check_eq!(name, t.parent_config, None);
    delete(saver, name, &gone).await;

    let name = "delete_thread/unknown_thread";
    delete(saver, name, &new_thread()).await;
}

// ---------------------------------------------------------------------------------------
// copy_thread
// ---------------------------------------------------------------------------------------

/// `copy_thread`: copies every checkpoint (all namespaces), resolved value, metadata,
/// parent link and write to the target thread, leaves the source unchanged, and the copy
/// stays readable after the source is deleted.
pub async fn copy_thread<C: Checkpointer>(saver: &C) {
    let name = "copy_thread/setup";
    let (src, dst) = (new_thread(), new_thread());
    let src_root = CheckpointConfig::thread(&src);
    let src_child = src_root.clone().in_ns("child:1");
    // Root: a delta chain of three checkpoints; child: one checkpoint.
    let cp1 = checkpoint(
        &[("messages", ver(1)), ("other", ver(1))],
        vec![("messages", full(json!(["m1"]))), ("other", full(json!(1)))],
    );
    let c1 = put(
        saver,
        name,
        &src_root,
        cp1,
        meta_with(CheckpointSource::Input, -1, json!({"user": "bob"})),
        versions(&[("messages", ver(1)), ("other", ver(1))]),
    )
    .await;
    let cp2 = checkpoint(
        &[("messages", ver(2)), ("other", ver(1))],
        vec![("messages", append(ver(1), vec![json!("m2")]))],
    );
    let c2 = put(
        saver,
        name,
        &c1,
        cp2,
        meta(CheckpointSource::Loop, 0),
        versions(&[("messages", ver(2))]),
    )
    .await;
    let cp3 = checkpoint(
        &[("messages", ver(3)), ("other", ver(1))],
        vec![("messages", append(ver(2), vec![json!("m3")]))],
    );
    let c3 = put(
        saver,
        name,
        &c2,
        cp3,
        meta(CheckpointSource::Loop, 1),
        versions(&[("messages", ver(3))]),
    )
    .await;
    let cc = chain(saver, name, &src_child, 1, |_| meta(CheckpointSource::Loop, 0)).await;
    let task = uuid::Uuid::new_v4().to_string();
    put_w(
        saver,
        name,
        &c3,
        &[("ch", json!("write_val")), (ERROR, json!("err"))],
        &task,
        "",
    )
    .await;
    put_w(saver, name, &cc[0], &[("ch", json!("child_write"))], &task, "").await;
    let all_ns = |t: &str| ListQuery {
        checkpoint_ns: None,
        ..ListQuery::thread(t)
    };
    let src_before = list_all(saver, name, &all_ns(&src)).await;
    check_eq!(name, src_before.len(), 4);

    let name = "copy_thread/copies_everything";
    copy(saver, name, &src, &dst).await;
    let copied = list_all(saver, name, &all_ns(&dst)).await;
    let rethread = |c: &CheckpointConfig| CheckpointConfig {
        thread_id: dst.clone(),
        ..c.clone()
    };
    let expected: Vec<CheckpointTuple> = src_before
        .iter()
        .map(|t| CheckpointTuple {
            config: rethread(&t.config),
            parent_config: t.parent_config.as_ref().map(rethread),
            ..t.clone()
        })
        .collect();
    check_eq!(
        name,
        copied,
        expected,
        "the target holds the same checkpoints, values, metadata and writes, under its own thread id"
    );

    let name = "copy_thread/latest_and_writes";
    let latest = must_get(saver, name, &CheckpointConfig::thread(&dst)).await;
    check_eq!(name, latest.config, rethread(&c3));
    check_eq!(
        name,
        latest.checkpoint.channel_values.get("messages"),
        Some(&full(json!(["m1", "m2", "m3"])))
    );
    check_eq!(
        name,
        latest.pending_writes,
        vec![
            pw(&task, "ch", json!("write_val")),
            pw(&task, ERROR, json!("err"))
        ]
    );
    check_eq!(
        name,
        must_get(saver, name, &CheckpointConfig::thread(&dst).in_ns("child:1"))
            .await
            .pending_writes,
        vec![pw(&task, "ch", json!("child_write"))]
    );

    let name = "copy_thread/source_unchanged";
    check_eq!(name, list_all(saver, name, &all_ns(&src)).await, src_before);

    let name = "copy_thread/independent_copy";
    let other_task = uuid::Uuid::new_v4().to_string();
    put_w(
        saver,
        name,
        &rethread(&c3),
        &[("extra", json!(true))],
        &other_task,
        "",
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &c3).await.pending_writes,
        vec![
            pw(&task, "ch", json!("write_val")),
            pw(&task, ERROR, json!("err"))
        ],
        "a write to the copy must not show up in the source"
    );
    delete(saver, name, &src).await;
    let after = must_get(saver, name, &rethread(&c3)).await;
    check_eq!(
        name,
        after.checkpoint.channel_values.get("messages"),
        Some(&full(json!(["m1", "m2", "m3"]))),
        "the copy must stay readable after the source is deleted"
    );
    check_eq!(name, list_all(saver, name, &all_ns(&dst)).await.len(), 4);

    let name = "copy_thread/unknown_source";
    let (nobody, target) = (new_thread(), new_thread());
    // A backend may refuse to copy a thread that does not exist, but must not create one.
    let _ = saver.copy_thread(&nobody, &target).await;
    let got = list_all(saver, name, &all_ns(&target)).await;
    check!(
        name,
        got.is_empty(),
        "copying an unknown thread created {} checkpoints",
        got.len()
    );
    delete(saver, name, &dst).await;
}
