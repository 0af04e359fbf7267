//! `delete_run`: rolling back a run removes its checkpoints and their writes, nothing else.

use super::{checkpoint, full, get, list_ids, meta, must_get, new_thread, put, put_w, pw, ver, versions};
use graphloom_core::checkpoint::{
    CheckpointConfig, CheckpointMetadata, CheckpointSource, Checkpointer, ListQuery, Version,
};
use serde_json::json;

fn of_run(run: &str, step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        run_id: Some(run.to_owned()),
        ..meta(CheckpointSource::Loop, step)
    }
}

/// Checkpoints `from..to` of channel `step` on `config`'s namespace after `parent`, by `run`.
async fn steps<C: Checkpointer>(
    saver: &C,
    name: &str,
    parent: &CheckpointConfig,
    run: &str,
    from: u64,
    to: u64,
) -> Vec<CheckpointConfig> {
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for n in from..to {
        let after = out.last().unwrap_or(parent).clone();
        let cp = checkpoint(&[("step", ver(n))], vec![("step", full(json!(n)))]);
        let meta = of_run(run, i64::try_from(n).unwrap_or(i64::MAX));
        out.push(put(saver, name, &after, cp, meta, versions(&[("step", ver(n))])).await);
    }
    out
}

async fn all_ids<C: Checkpointer>(saver: &C, name: &str, thread: &str) -> Vec<String> {
    list_ids(
        saver,
        name,
        &ListQuery {
            checkpoint_ns: None,
            ..ListQuery::thread(thread)
        },
    )
    .await
}

async fn delete_run_of<C: Checkpointer>(saver: &C, name: &str, thread: &str, run: &str) {
    saver.delete_run(thread, run).await.unwrap_or_else(|e| {
        panic!("checkpointer conformance check `{name}` failed: delete_run returned an error: {e}")
    });
}

/// `delete_run`: the checkpoints of one run on one thread (every namespace) and their
/// writes go; the run before it, its writes and other threads stay; the thread then goes
/// on from the checkpoint the run started from.
pub async fn delete_run<C: Checkpointer>(saver: &C) {
    let name = "delete_run/setup";
    let (thread, other) = (new_thread(), new_thread());
    let root = CheckpointConfig::thread(&thread);
    let before = steps(saver, name, &root, "run-1", 1, 3).await;
    let rolled = steps(saver, name, &before[1], "run-2", 3, 5).await;
    let child = steps(saver, name, &root.clone().in_ns("child:1"), "run-2", 1, 2).await;
    let elsewhere = steps(saver, name, &CheckpointConfig::thread(&other), "run-2", 1, 3).await;
    let task = uuid::Uuid::new_v4().to_string();
    put_w(saver, name, &before[1], &[("w", json!("kept"))], &task, "").await;
    put_w(saver, name, &rolled[1], &[("w", json!("rolled back"))], &task, "").await;
    put_w(
        saver,
        name,
        &child[0],
        &[("w", json!("rolled back child"))],
        &task,
        "",
    )
    .await;
    let other_before = all_ids(saver, name, &other).await;

    let name = "delete_run/unknown_run";
    delete_run_of(saver, name, &thread, "no-such-run").await;
    check_eq!(name, all_ids(saver, name, &thread).await.len(), 5);

    let name = "delete_run/removes_the_run";
    delete_run_of(saver, name, &thread, "run-2").await;
    let mut left = all_ids(saver, name, &thread).await;
    left.sort();
    let mut expected: Vec<String> = before.iter().filter_map(|c| c.checkpoint_id.clone()).collect();
    expected.sort();
    check_eq!(name, left, expected, "only run-1's checkpoints may stay");
    for gone in rolled.iter().chain(&child) {
        check!(
            name,
            get(saver, name, gone).await.is_none(),
            "checkpoint {:?} of the rolled-back run is still readable",
            gone.checkpoint_id
        );
    }

    let name = "delete_run/latest_is_where_the_run_started";
    let latest = must_get(saver, name, &root).await;
    check_eq!(
        name,
        Some(latest.checkpoint.id.clone()),
        before[1].checkpoint_id.clone()
    );
    check_eq!(
        name,
        latest.checkpoint.channel_values.get("step"),
        Some(&full(json!(2)))
    );
    check_eq!(name, latest.pending_writes, vec![pw(&task, "w", json!("kept"))]);

    let name = "delete_run/other_threads_untouched";
    check_eq!(name, all_ids(saver, name, &other).await, other_before);
    check_eq!(
        name,
        must_get(saver, name, &elsewhere[1])
            .await
            .checkpoint
            .channel_values
            .get("step"),
        Some(&full(json!(2)))
    );

    // The thread goes on from where the run started, with versions the rolled-back run
    // never used (a new run's versions carry their own salt).
    let name = "delete_run/the_thread_goes_on";
    let mut next = checkpoint(&[("step", ver(3))], vec![("step", full(json!("again")))]);
    next.channel_versions
        .insert("step".into(), Version { n: 3, salt: 77 });
    let c = put(
        saver,
        name,
        &before[1],
        next,
        of_run("run-3", 3),
        [("step".to_owned(), Version { n: 3, salt: 77 })].into(),
    )
    .await;
    let t = must_get(saver, name, &root).await;
    check_eq!(name, Some(t.checkpoint.id.clone()), c.checkpoint_id.clone());
    check_eq!(
        name,
        t.checkpoint.channel_values.get("step"),
        Some(&full(json!("again")))
    );
    check!(
        name,
        t.pending_writes.is_empty(),
        "writes came back: {:?}",
        t.pending_writes
    );
    check_eq!(
        name,
        t.parent_config.and_then(|p| p.checkpoint_id),
        before[1].checkpoint_id.clone()
    );
    super::delete(saver, name, &thread).await;
    super::delete(saver, name, &other).await;
}
