//! `prune_to_latest`: a thread's history cut to its latest checkpoint per namespace, its
//! state and pending writes intact, and the thread going on from there.

use super::{
    append, checkpoint, full, get, list_ids, meta, must_get, new_thread, put, put_w, pw, ver, versions,
};
use graphloom_core::checkpoint::{CheckpointConfig, CheckpointSource, Checkpointer, ListQuery};
use serde_json::json;

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

async fn prune<C: Checkpointer>(saver: &C, name: &str, thread: &str) -> usize {
    saver.prune_to_latest(thread).await.unwrap_or_else(|e| {
        panic!("checkpointer conformance check `{name}` failed: prune_to_latest returned an error: {e}")
    })
}

/// `prune_to_latest`: older checkpoints and their writes go in every namespace; the latest
/// keeps its values (an append chain included) and its pending writes; the thread goes on
/// from it; other threads are untouched.
pub async fn prune_to_latest<C: Checkpointer>(saver: &C) {
    let name = "prune_to_latest/setup";
    let (thread, other) = (new_thread(), new_thread());
    let root = CheckpointConfig::thread(&thread);
    let m = |step| meta(CheckpointSource::Loop, step);
    let c1 = put(
        saver,
        name,
        &root,
        checkpoint(
            &[("msgs", ver(1)), ("step", ver(1))],
            vec![("msgs", full(json!(["a"]))), ("step", full(json!(1)))],
        ),
        m(1),
        versions(&[("msgs", ver(1)), ("step", ver(1))]),
    )
    .await;
    put_w(saver, name, &c1, &[("msgs", json!("old"))], "t-old", "").await;
    let c2 = put(
        saver,
        name,
        &c1,
        checkpoint(
            &[("msgs", ver(2)), ("step", ver(1))],
            vec![("msgs", append(ver(1), vec![json!("b")]))],
        ),
        m(2),
        versions(&[("msgs", ver(2))]),
    )
    .await;
    let c3 = put(
        saver,
        name,
        &c2,
        checkpoint(
            &[("msgs", ver(3)), ("step", ver(2))],
            vec![
                ("msgs", append(ver(2), vec![json!("c")])),
                ("step", full(json!(2))),
            ],
        ),
        m(3),
        versions(&[("msgs", ver(3)), ("step", ver(2))]),
    )
    .await;
    put_w(saver, name, &c3, &[("msgs", json!("pending"))], "t-new", "").await;
    let child = CheckpointConfig::thread(&thread).in_ns("child:1");
    let k1 = put(
        saver,
        name,
        &child,
        checkpoint(&[("x", ver(1))], vec![("x", full(json!(1)))]),
        m(1),
        versions(&[("x", ver(1))]),
    )
    .await;
    let k2 = put(
        saver,
        name,
        &k1,
        checkpoint(&[("x", ver(2))], vec![("x", full(json!(2)))]),
        m(2),
        versions(&[("x", ver(2))]),
    )
    .await;
    let o1 = put(
        saver,
        name,
        &CheckpointConfig::thread(&other),
        checkpoint(&[("msgs", ver(1))], vec![("msgs", full(json!(["z"])))]),
        m(1),
        versions(&[("msgs", ver(1))]),
    )
    .await;
    let o2 = put(
        saver,
        name,
        &o1,
        checkpoint(
            &[("msgs", ver(2))],
            vec![("msgs", append(ver(1), vec![json!("y")]))],
        ),
        m(2),
        versions(&[("msgs", ver(2))]),
    )
    .await;

    let name = "prune_to_latest/drops_older_checkpoints";
    check_eq!(
        name,
        prune(saver, name, &thread).await,
        3,
        "two root and one child checkpoint"
    );
    let mut left = all_ids(saver, name, &thread).await;
    left.sort();
    let mut want = vec![
        c3.checkpoint_id.clone().unwrap(),
        k2.checkpoint_id.clone().unwrap(),
    ];
    want.sort();
    check_eq!(name, left, want);
    check!(
        name,
        get(saver, name, &c2).await.is_none(),
        "an older checkpoint is still readable"
    );

    let name = "prune_to_latest/keeps_state_and_writes";
    let latest = must_get(saver, name, &root).await;
    check_eq!(name, latest.checkpoint.id, c3.checkpoint_id.clone().unwrap());
    check_eq!(
        name,
        latest.checkpoint.channel_values.get("msgs"),
        Some(&full(json!(["a", "b", "c"])))
    );
    check_eq!(
        name,
        latest.checkpoint.channel_values.get("step"),
        Some(&full(json!(2)))
    );
    check_eq!(
        name,
        latest.pending_writes,
        vec![pw("t-new", "msgs", json!("pending"))]
    );
    let kid = must_get(saver, name, &child).await;
    check_eq!(
        name,
        kid.checkpoint.channel_values.get("x"),
        Some(&full(json!(2)))
    );

    let name = "prune_to_latest/goes_on";
    let c4 = put(
        saver,
        name,
        &c3,
        checkpoint(
            &[("msgs", ver(4)), ("step", ver(2))],
            vec![("msgs", append(ver(3), vec![json!("d")]))],
        ),
        m(4),
        versions(&[("msgs", ver(4))]),
    )
    .await;
    let now = must_get(saver, name, &c4).await;
    check_eq!(
        name,
        now.checkpoint.channel_values.get("msgs"),
        Some(&full(json!(["a", "b", "c", "d"])))
    );
    check_eq!(
        name,
        now.checkpoint.channel_values.get("step"),
        Some(&full(json!(2)))
    );

    let name = "prune_to_latest/other_threads";
    check_eq!(name, all_ids(saver, name, &other).await.len(), 2);
    let o = must_get(saver, name, &o2).await;
    check_eq!(
        name,
        o.checkpoint.channel_values.get("msgs"),
        Some(&full(json!(["z", "y"])))
    );
    check_eq!(
        name,
        prune(saver, name, &new_thread()).await,
        0,
        "an unknown thread"
    );
}
