//! The checkpointer conformance kit: checks that every [`Checkpointer`] backend keeps the
//! promises the executor relies on.
//!
//! A backend runs [`checkpointer_conformance`] against its own saver in its tests (enable the
//! `test-kit` feature of `graphloom-core` in its dev-dependencies):
//!
//! ```ignore
//! #[tokio::test]
//! async fn conformance() {
//!     let saver = MySaver::connect(...).await?;
//!     graphloom_core::test_kit::checkpointer_conformance(&saver).await;
//! }
//! ```
//!
//! Every check works on fresh random thread ids, so the saver may already hold data and may
//! be shared with other tests running at the same time. A failed check panics with a message
//! naming it (`checkpointer conformance check `area/check` failed: ...`). The areas can also
//! be run one by one: [`put_and_get`], [`deltas`], [`list`], [`put_writes`],
//! [`delete_thread`], [`copy_thread`], [`delete_run`].
//!
//! The checks follow the spirit of LangGraph's `checkpoint-conformance` suite, adapted to
//! graphloom's delta-encoded channel values and UUIDv7 checkpoint ids.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::checkpoint::{
    new_checkpoint_id, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
    CheckpointTuple, Checkpointer, ListQuery, PendingSend, PendingWrite, Version, ERROR, INTERRUPT,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Salt of the channel versions the kit writes.
const SALT: u64 = 0x6b69_7400;

/// Run every conformance check against `saver`, panicking on the first failure.
pub async fn checkpointer_conformance<C: Checkpointer>(saver: &C) {
    put_and_get(saver).await;
    deltas(saver).await;
    long_chain(saver).await;
    list(saver).await;
    put_writes(saver).await;
    writes_then_checkpoint(saver).await;
    shared_items(saver).await;
    delete_thread(saver).await;
    copy_thread(saver).await;
    delete_run(saver).await;
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

macro_rules! check {
    ($name:expr, $cond:expr, $($arg:tt)+) => {
        assert!($cond, "checkpointer conformance check `{}` failed: {}", $name, format_args!($($arg)+))
    };
}

macro_rules! check_eq {
    ($name:expr, $left:expr, $right:expr $(,)?) => {
        assert_eq!($left, $right, "checkpointer conformance check `{}` failed", $name)
    };
    ($name:expr, $left:expr, $right:expr, $($arg:tt)+) => {
        assert_eq!(
            $left,
            $right,
            "checkpointer conformance check `{}` failed: {}",
            $name,
            format_args!($($arg)+)
        )
    };
}

mod runs;
pub use runs::delete_run;

/// A fresh random thread id.
fn new_thread() -> String {
    format!("conformance-{}", uuid::Uuid::new_v4())
}

/// Version `n` of a channel, with the kit's salt.
fn ver(n: u64) -> Version {
    Version { n, salt: SALT }
}

/// An append chain across versions 1..=25 (so across 9 -> 10, where a backend comparing
/// version text without padding would go wrong) resolves to every item in order.
pub async fn long_chain<C: Checkpointer>(saver: &C) {
    let name = "deltas/long_chain";
    let tid = new_thread();
    let mut cfg = CheckpointConfig::thread(&tid);
    let mut expected = Vec::new();
    for n in 1..=25u64 {
        expected.push(json!(n));
        let value = if n == 1 {
            full(json!([1]))
        } else {
            append(ver(n - 1), vec![json!(n)])
        };
        let cp = checkpoint(&[("log", ver(n))], vec![("log", value)]);
        let meta = CheckpointMetadata {
            source: CheckpointSource::Loop,
            step: i64::try_from(n).unwrap_or(0),
            parents: BTreeMap::new(),
            run_id: None,
            extra: Map::new(),
        };
        cfg = put(saver, name, &cfg, cp, meta, versions(&[("log", ver(n))])).await;
    }
    let got = must_get(saver, name, &CheckpointConfig::thread(&tid)).await;
    assert_eq!(
        got.checkpoint.channel_values.get("log"),
        Some(&full(Value::Array(expected))),
        "checkpointer conformance check `{name}` failed: the chain did not resolve to 1..=25"
    );
}

/// Metadata with no parents, run id or extra keys.
fn meta(source: CheckpointSource, step: i64) -> CheckpointMetadata {
    CheckpointMetadata {
        source,
        step,
        parents: BTreeMap::new(),
        run_id: None,
        extra: Map::new(),
    }
}

/// Metadata with extra user keys.
fn meta_with(source: CheckpointSource, step: i64, extra: Value) -> CheckpointMetadata {
    let Value::Object(extra) = extra else {
        panic!("kit bug: extra metadata must be an object")
    };
    CheckpointMetadata {
        extra,
        ..meta(source, step)
    }
}

/// A checkpoint whose channels are at `versions`, carrying `values` (the delta to `put`).
fn checkpoint(versions: &[(&str, Version)], values: Vec<(&str, ChannelValue)>) -> Checkpoint {
    let mut cp = Checkpoint::empty();
    cp.channel_versions = versions.iter().map(|(c, v)| ((*c).to_owned(), *v)).collect();
    cp.channel_values = values.into_iter().map(|(c, v)| (c.to_owned(), v)).collect();
    cp
}

/// `new_versions` for `put`.
fn versions(pairs: &[(&str, Version)]) -> BTreeMap<String, Version> {
    pairs.iter().map(|(c, v)| ((*c).to_owned(), *v)).collect()
}

/// A full channel value.
fn full(value: Value) -> ChannelValue {
    ChannelValue::Full(value)
}

/// An append of `items` to version `base`.
fn append(base: Version, items: Vec<Value>) -> ChannelValue {
    ChannelValue::Append { base, items }
}

/// `cp` as a read should return it: `channel_values` replaced by the resolved values.
fn resolved(cp: &Checkpoint, values: &[(&str, Value)]) -> Checkpoint {
    let mut out = cp.clone();
    out.channel_values = values
        .iter()
        .map(|(c, v)| ((*c).to_owned(), full(v.clone())))
        .collect();
    out
}

/// A pending write as a tuple should hold it.
fn pw(task_id: &str, channel: &str, value: Value) -> PendingWrite {
    PendingWrite {
        task_id: task_id.to_owned(),
        channel: channel.to_owned(),
        value,
    }
}

/// Writes in the form `put_writes` takes.
fn writes(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
    pairs.iter().map(|(c, v)| ((*c).to_owned(), v.clone())).collect()
}

/// A metadata filter.
fn filter(value: Value) -> Map<String, Value> {
    let Value::Object(map) = value else {
        panic!("kit bug: a filter must be an object")
    };
    map
}

async fn put<C: Checkpointer>(
    saver: &C,
    name: &str,
    config: &CheckpointConfig,
    cp: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: BTreeMap<String, Version>,
) -> CheckpointConfig {
    saver
        .put(config, cp, metadata, new_versions)
        .await
        .unwrap_or_else(|e| {
            panic!("checkpointer conformance check `{name}` failed: put returned an error: {e}")
        })
}

async fn put_w<C: Checkpointer>(
    saver: &C,
    name: &str,
    config: &CheckpointConfig,
    pairs: &[(&str, Value)],
    task_id: &str,
    task_path: &str,
) {
    saver
        .put_writes(config, writes(pairs), task_id, task_path)
        .await
        .unwrap_or_else(|e| {
            panic!("checkpointer conformance check `{name}` failed: put_writes returned an error: {e}")
        });
}

async fn get<C: Checkpointer>(saver: &C, name: &str, config: &CheckpointConfig) -> Option<CheckpointTuple> {
    saver.get_tuple(config).await.unwrap_or_else(|e| {
        panic!("checkpointer conformance check `{name}` failed: get_tuple returned an error: {e}")
    })
}

async fn must_get<C: Checkpointer>(saver: &C, name: &str, config: &CheckpointConfig) -> CheckpointTuple {
    get(saver, name, config).await.unwrap_or_else(|| {
        panic!("checkpointer conformance check `{name}` failed: get_tuple({config:?}) returned None")
    })
}

async fn list_all<C: Checkpointer>(saver: &C, name: &str, query: &ListQuery) -> Vec<CheckpointTuple> {
    saver.list(query).await.unwrap_or_else(|e| {
        panic!("checkpointer conformance check `{name}` failed: list returned an error: {e}")
    })
}

async fn list_ids<C: Checkpointer>(saver: &C, name: &str, query: &ListQuery) -> Vec<String> {
    list_all(saver, name, query)
        .await
        .into_iter()
        .map(|t| t.checkpoint.id)
        .collect()
}

async fn delete<C: Checkpointer>(saver: &C, name: &str, thread_id: &str) {
    saver.delete_thread(thread_id).await.unwrap_or_else(|e| {
        panic!("checkpointer conformance check `{name}` failed: delete_thread returned an error: {e}")
    });
}

async fn copy<C: Checkpointer>(saver: &C, name: &str, source: &str, target: &str) {
    saver.copy_thread(source, target).await.unwrap_or_else(|e| {
        panic!("checkpointer conformance check `{name}` failed: copy_thread returned an error: {e}")
    });
}

/// Every value of a returned checkpoint must be resolved to a full value.
fn assert_all_full(name: &str, tuple: &CheckpointTuple) {
    for (channel, value) in &tuple.checkpoint.channel_values {
        check!(
            name,
            matches!(value, ChannelValue::Full(_)),
            "channel `{channel}` of checkpoint {} was returned unresolved: {value:?}",
            tuple.checkpoint.id
        );
    }
}

/// A chain of `n` checkpoints on `config`'s thread and namespace; checkpoint `i` sets
/// channel `step` to `i` and has metadata from `metadata(i)`. Returns the stored configs.
async fn chain<C: Checkpointer>(
    saver: &C,
    name: &str,
    config: &CheckpointConfig,
    n: u64,
    metadata: impl Fn(u64) -> CheckpointMetadata,
) -> Vec<CheckpointConfig> {
    let mut out: Vec<CheckpointConfig> = Vec::new();
    for i in 0..n {
        let parent = out.last().cloned().unwrap_or_else(|| config.clone());
        let cp = checkpoint(&[("step", ver(i + 1))], vec![("step", full(json!(i)))]);
        out.push(
            put(
                saver,
                name,
                &parent,
                cp,
                metadata(i),
                versions(&[("step", ver(i + 1))]),
            )
            .await,
        );
    }
    out
}

// ---------------------------------------------------------------------------------------
// put / get_tuple
// ---------------------------------------------------------------------------------------

/// `put` and `get_tuple`: lookup by id and latest, returned configs, parent configs,
/// metadata, channel versions, `versions_seen`, pending sends and namespace isolation.
pub async fn put_and_get<C: Checkpointer>(saver: &C) {
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);

    // --- put returns the config of the stored checkpoint.
    let name = "put_and_get/put_returns_config";
    let mut cp1 = checkpoint(
        &[("a", ver(1)), ("b", ver(1))],
        vec![
            ("a", full(json!(1))),
            ("b", full(json!({"text": "x", "n": [1, 2]}))),
        ],
    );
    cp1.versions_seen = BTreeMap::from([(
        "__input__".to_owned(),
        BTreeMap::from([("__start__".to_owned(), ver(1))]),
    )]);
    cp1.updated_channels = vec!["a".into(), "b".into()];
    let m1 = meta(CheckpointSource::Input, -1);
    let c1 = put(
        saver,
        name,
        &root,
        cp1.clone(),
        m1.clone(),
        versions(&[("a", ver(1)), ("b", ver(1))]),
    )
    .await;
    check_eq!(name, c1, root.clone().at(&cp1.id));

    // --- get by id returns exactly what was put, resolved.
    let name = "put_and_get/get_by_id";
    let t1 = must_get(saver, name, &c1).await;
    check_eq!(name, t1.config, c1);
    check_eq!(
        name,
        t1.checkpoint,
        resolved(&cp1, &[("a", json!(1)), ("b", json!({"text": "x", "n": [1, 2]}))])
    );
    check_eq!(name, t1.metadata, m1);
    check_eq!(name, t1.parent_config, None, "the first checkpoint has no parent");
    check!(
        name,
        t1.pending_writes.is_empty(),
        "unexpected writes {:?}",
        t1.pending_writes
    );

    // --- second checkpoint: parent, metadata, versions_seen and pending sends round trip.
    let name = "put_and_get/second_checkpoint";
    let mut cp2 = checkpoint(&[("a", ver(2)), ("b", ver(1))], vec![("a", full(json!(2)))]);
    cp2.versions_seen = BTreeMap::from([
        (
            "__input__".to_owned(),
            BTreeMap::from([("__start__".to_owned(), ver(1))]),
        ),
        (
            "node".to_owned(),
            BTreeMap::from([("a".to_owned(), ver(1)), ("b".to_owned(), ver(1))]),
        ),
    ]);
    cp2.pending_sends = vec![
        PendingSend {
            node: "worker".into(),
            packet: json!({"job": 1}),
        },
        PendingSend {
            node: "worker".into(),
            packet: json!({"job": 2}),
        },
    ];
    cp2.updated_channels = vec!["a".into()];
    let mut m2 = meta_with(
        CheckpointSource::Loop,
        0,
        json!({"user": "alice", "score": 42, "nested": {"k": [1, "two", null]}}),
    );
    m2.parents = BTreeMap::from([(String::new(), new_checkpoint_id())]);
    m2.run_id = Some("run-1".into());
    let c2 = put(
        saver,
        name,
        &c1,
        cp2.clone(),
        m2.clone(),
        versions(&[("a", ver(2))]),
    )
    .await;
    check_eq!(name, c2, root.clone().at(&cp2.id));
    let t2 = must_get(saver, name, &c2).await;
    check_eq!(
        name,
        t2.parent_config,
        Some(c1.clone()),
        "parent_config comes from put's config"
    );
    check_eq!(
        name,
        t2.metadata,
        m2,
        "metadata (source, step, parents, run_id, extra keys)"
    );
    check_eq!(
        name,
        t2.checkpoint,
        resolved(&cp2, &[("a", json!(2)), ("b", json!({"text": "x", "n": [1, 2]}))]),
        "channel values, versions, versions_seen, pending_sends and updated_channels"
    );
    assert_all_full(name, &t2);

    // --- latest and by id.
    let name = "put_and_get/latest";
    let latest = must_get(saver, name, &root).await;
    check_eq!(
        name,
        latest.checkpoint.id,
        cp2.id,
        "get_tuple without id returns the newest"
    );
    check_eq!(name, latest.config, c2);
    let name = "put_and_get/older_by_id";
    let again1 = must_get(saver, name, &c1).await;
    check_eq!(
        name,
        again1.checkpoint.channel_values.get("a"),
        Some(&full(json!(1)))
    );
    check_eq!(name, again1, t1, "an older checkpoint is unchanged by later puts");

    // --- a third checkpoint becomes the latest.
    let name = "put_and_get/latest_moves";
    let cp3 = checkpoint(&[("a", ver(3)), ("b", ver(1))], vec![("a", full(json!(3)))]);
    let c3 = put(
        saver,
        name,
        &c2,
        cp3.clone(),
        meta(CheckpointSource::Loop, 1),
        versions(&[("a", ver(3))]),
    )
    .await;
    check_eq!(name, must_get(saver, name, &root).await.config, c3);
    check_eq!(name, must_get(saver, name, &c2).await.checkpoint.id, cp2.id);

    // --- missing things are None.
    let name = "put_and_get/missing";
    check!(
        name,
        get(saver, name, &CheckpointConfig::thread(new_thread()))
            .await
            .is_none(),
        "unknown thread"
    );
    check!(
        name,
        get(saver, name, &root.clone().at(new_checkpoint_id()))
            .await
            .is_none(),
        "unknown id"
    );
    check!(
        name,
        get(saver, name, &root.clone().in_ns("nope:1")).await.is_none(),
        "unknown namespace"
    );
    check!(
        name,
        get(saver, name, &root.clone().in_ns("nope:1").at(&cp1.id))
            .await
            .is_none(),
        "a known id looked up in another namespace"
    );

    // --- namespaces of one thread are isolated.
    let name = "put_and_get/namespaces_isolated";
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let child = root.clone().in_ns("child:1");
    let cp_root = checkpoint(&[("a", ver(1))], vec![("a", full(json!("root")))]);
    let cp_child = checkpoint(&[("a", ver(1))], vec![("a", full(json!("child")))]);
    let c_root = put(
        saver,
        name,
        &root,
        cp_root.clone(),
        meta(CheckpointSource::Loop, 0),
        versions(&[("a", ver(1))]),
    )
    .await;
    let c_child = put(
        saver,
        name,
        &child,
        cp_child.clone(),
        meta(CheckpointSource::Loop, 0),
        versions(&[("a", ver(1))]),
    )
    .await;
    check_eq!(name, c_child, child.clone().at(&cp_child.id));
    let t_root = must_get(saver, name, &root).await;
    let t_child = must_get(saver, name, &child).await;
    check_eq!(name, t_root.config, c_root);
    check_eq!(
        name,
        t_root.checkpoint,
        resolved(&cp_root, &[("a", json!("root"))])
    );
    check_eq!(name, t_child.config, c_child);
    check_eq!(
        name,
        t_child.checkpoint,
        resolved(&cp_child, &[("a", json!("child"))])
    );
    check!(
        name,
        get(saver, name, &root.clone().at(&cp_child.id)).await.is_none(),
        "the child's checkpoint is visible in the root namespace"
    );
}

// ---------------------------------------------------------------------------------------
// Delta-encoded values
// ---------------------------------------------------------------------------------------

/// Delta-encoded channel values: appends resolve along their chain, unchanged channels keep
/// their earlier value, forks of one version do not share blobs, a channel given a new
/// version without a value is empty, and every returned value is [`ChannelValue::Full`].
pub async fn deltas<C: Checkpointer>(saver: &C) {
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let m = |step| meta(CheckpointSource::Loop, step);

    // Checkpoint 1: full values of both channels.
    let name = "deltas/full_values";
    let cp1 = checkpoint(
        &[("messages", ver(1)), ("other", ver(1))],
        vec![
            ("messages", full(json!(["m1", "m2"]))),
            ("other", full(json!({"k": 1}))),
        ],
    );
    let c1 = put(
        saver,
        name,
        &root,
        cp1.clone(),
        m(0),
        versions(&[("messages", ver(1)), ("other", ver(1))]),
    )
    .await;

    // Checkpoint 2: an append to `messages`; `other` unchanged (neither a new version nor a value).
    let name = "deltas/append_and_unchanged";
    let cp2 = checkpoint(
        &[("messages", ver(2)), ("other", ver(1))],
        vec![("messages", append(ver(1), vec![json!("m3")]))],
    );
    let c2 = put(
        saver,
        name,
        &c1,
        cp2.clone(),
        m(1),
        versions(&[("messages", ver(2))]),
    )
    .await;
    let t2 = must_get(saver, name, &c2).await;
    check_eq!(
        name,
        t2.checkpoint,
        resolved(
            &cp2,
            &[
                ("messages", json!(["m1", "m2", "m3"])),
                ("other", json!({"k": 1}))
            ]
        ),
        "the append is concatenated to its base and the unchanged channel keeps checkpoint 1's value"
    );
    assert_all_full(name, &t2);
    let t1 = must_get(saver, name, &c1).await;
    check_eq!(
        name,
        t1.checkpoint,
        resolved(
            &cp1,
            &[("messages", json!(["m1", "m2"])), ("other", json!({"k": 1}))]
        ),
        "the base checkpoint is unchanged"
    );

    // Checkpoint 3: an append to an append (a chain of two links), several items.
    let name = "deltas/append_chain";
    let cp3 = checkpoint(
        &[("messages", ver(3)), ("other", ver(1))],
        vec![(
            "messages",
            append(ver(2), vec![json!("m4"), json!({"role": "ai"})]),
        )],
    );
    let c3 = put(
        saver,
        name,
        &c2,
        cp3.clone(),
        m(2),
        versions(&[("messages", ver(3))]),
    )
    .await;
    let t3 = must_get(saver, name, &c3).await;
    check_eq!(
        name,
        t3.checkpoint.channel_values.get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "m4", {"role": "ai"}])))
    );
    check_eq!(
        name,
        t3.checkpoint.channel_values.get("other"),
        Some(&full(json!({"k": 1})))
    );

    // Lists return resolved values too.
    let name = "deltas/list_resolves";
    let listed = list_all(saver, name, &ListQuery::thread(&tid)).await;
    check_eq!(name, listed.len(), 3);
    for t in &listed {
        assert_all_full(name, t);
    }
    check_eq!(name, listed[0], t3, "list and get_tuple agree");
    check_eq!(name, listed[1], t2, "list and get_tuple agree");
    check_eq!(name, listed[2], t1, "list and get_tuple agree");

    // Two forks from checkpoint 2 write "version 3" of `messages` with different salts.
    let name = "deltas/forks_do_not_share_blobs";
    let fork_a = Version { n: 3, salt: SALT + 1 };
    let fork_b = Version { n: 3, salt: SALT + 2 };
    let cpa = checkpoint(
        &[("messages", fork_a), ("other", ver(1))],
        vec![("messages", append(ver(2), vec![json!("fork-a")]))],
    );
    let cpb = checkpoint(
        &[("messages", fork_b), ("other", ver(1))],
        vec![("messages", append(ver(2), vec![json!("fork-b")]))],
    );
    let ca = put(
        saver,
        name,
        &c2,
        cpa,
        meta(CheckpointSource::Fork, 2),
        versions(&[("messages", fork_a)]),
    )
    .await;
    let cb = put(
        saver,
        name,
        &c2,
        cpb,
        meta(CheckpointSource::Fork, 2),
        versions(&[("messages", fork_b)]),
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &ca)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "fork-a"])))
    );
    check_eq!(
        name,
        must_get(saver, name, &cb)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "fork-b"])))
    );
    check_eq!(
        name,
        must_get(saver, name, &c3)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["m1", "m2", "m3", "m4", {"role": "ai"}]))),
        "a fork must not change the other line of history"
    );

    // A full value after appends replaces the list.
    let name = "deltas/full_after_append";
    let cp4 = checkpoint(
        &[("messages", ver(4)), ("other", ver(1))],
        vec![("messages", full(json!(["fresh"])))],
    );
    let c4 = put(saver, name, &c3, cp4, m(3), versions(&[("messages", ver(4))])).await;
    check_eq!(
        name,
        must_get(saver, name, &c4)
            .await
            .checkpoint
            .channel_values
            .get("messages"),
        Some(&full(json!(["fresh"])))
    );

    // A channel with a new version but no value was emptied: no value is returned for it.
    let name = "deltas/emptied_channel";
    let cp5 = checkpoint(&[("messages", ver(4)), ("other", ver(2))], vec![]);
    let c5 = put(
        saver,
        name,
        &c4,
        cp5.clone(),
        m(4),
        versions(&[("other", ver(2))]),
    )
    .await;
    let t5 = must_get(saver, name, &c5).await;
    check_eq!(
        name,
        t5.checkpoint,
        resolved(&cp5, &[("messages", json!(["fresh"]))])
    );

    // Values that are not lists, and a channel first written in a later checkpoint.
    let name = "deltas/scalar_values";
    let cp6 = checkpoint(
        &[("messages", ver(4)), ("other", ver(3)), ("count", ver(1))],
        vec![("other", full(json!("back"))), ("count", full(json!(0)))],
    );
    let c6 = put(
        saver,
        name,
        &c5,
        cp6.clone(),
        m(5),
        versions(&[("other", ver(3)), ("count", ver(1))]),
    )
    .await;
    check_eq!(
        name,
        must_get(saver, name, &c6).await.checkpoint,
        resolved(
            &cp6,
            &[
                ("messages", json!(["fresh"])),
                ("other", json!("back")),
                ("count", json!(0))
            ]
        )
    );
}

// ---------------------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------------------

/// `list`: newest first, metadata filters (source, step, user keys, several keys), `before`,
/// `limit`, all threads when `thread_id` is `None`, namespace filters, and pending writes in
/// listed tuples.
pub async fn list<C: Checkpointer>(saver: &C) {
    let tag = uuid::Uuid::new_v4().to_string();
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let sources = [CheckpointSource::Input, CheckpointSource::Loop];
    let name = "list/setup";
    let configs = chain(saver, name, &root, 4, |i| {
        meta_with(
            sources[(i % 2) as usize],
            i as i64,
            json!({"kit_tag": tag, "score": i * 10}),
        )
    })
    .await;
    let ids: Vec<String> = configs.iter().map(|c| c.checkpoint_id.clone().unwrap()).collect();
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    let q = || ListQuery::thread(&tid);

    let name = "list/newest_first";
    let all = list_all(saver, name, &q()).await;
    check_eq!(
        name,
        all.iter().map(|t| t.checkpoint.id.clone()).collect::<Vec<_>>(),
        newest_first
    );
    for (i, t) in all.iter().rev().enumerate() {
        check_eq!(name, t.config, configs[i]);
        check_eq!(
            name,
            t.parent_config,
            if i == 0 {
                None
            } else {
                Some(configs[i - 1].clone())
            }
        );
        check_eq!(name, t.metadata.step, i as i64);
        check_eq!(
            name,
            t.checkpoint.channel_values.get("step"),
            Some(&full(json!(i)))
        );
        check_eq!(
            name,
            *t,
            must_get(saver, name, &configs[i]).await,
            "list and get_tuple agree"
        );
    }

    let name = "list/filter_source";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "input"})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone(), ids[0].clone()]);
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "loop"})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[3].clone(), ids[1].clone()]);

    let name = "list/filter_step";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"step": 1})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[1].clone()]);

    let name = "list/filter_user_key";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"score": 20})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);

    let name = "list/filter_several_keys";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "input", "step": 2, "kit_tag": tag})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"source": "input", "step": 1})),
            ..q()
        },
    )
    .await;
    check!(
        name,
        got.is_empty(),
        "keys matching different checkpoints must not match: {got:?}"
    );
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            filter: filter(json!({"missing_key": 1})),
            ..q()
        },
    )
    .await;
    check!(
        name,
        got.is_empty(),
        "a key no checkpoint has must match nothing: {got:?}"
    );

    let name = "list/before";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[2].clone()),
            ..q()
        },
    )
    .await;
    check_eq!(
        name,
        got,
        vec![ids[1].clone(), ids[0].clone()],
        "strictly before, newest first"
    );
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[0].clone()),
            ..q()
        },
    )
    .await;
    check!(
        name,
        got.is_empty(),
        "nothing is before the first checkpoint: {got:?}"
    );

    let name = "list/limit";
    check_eq!(
        name,
        list_ids(
            saver,
            name,
            &ListQuery {
                limit: Some(1),
                ..q()
            }
        )
        .await,
        vec![ids[3].clone()]
    );
    check_eq!(
        name,
        list_ids(
            saver,
            name,
            &ListQuery {
                limit: Some(2),
                ..q()
            }
        )
        .await,
        vec![ids[3].clone(), ids[2].clone()]
    );
    check_eq!(
        name,
        list_ids(
            saver,
            name,
            &ListQuery {
                limit: Some(10),
                ..q()
            }
        )
        .await,
        newest_first
    );

    let name = "list/before_and_limit";
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[3].clone()),
            limit: Some(1),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);
    let got = list_ids(
        saver,
        name,
        &ListQuery {
            before: Some(ids[3].clone()),
            limit: Some(1),
            filter: filter(json!({"source": "input"})),
            ..q()
        },
    )
    .await;
    check_eq!(name, got, vec![ids[2].clone()]);

    let name = "list/unknown_thread";
    let got = list_ids(saver, name, &ListQuery::thread(new_thread())).await;
    check!(name, got.is_empty(), "{got:?}");

    // All threads: a second thread with the same tag; the tag filter isolates this run.
    let name = "list/all_threads";
    let other = new_thread();
    let other_cfg = chain(saver, name, &CheckpointConfig::thread(&other), 1, |_| {
        meta_with(CheckpointSource::Loop, 7, json!({"kit_tag": tag}))
    })
    .await;
    let across = list_all(
        saver,
        name,
        &ListQuery {
            thread_id: None,
            checkpoint_ns: None,
            filter: filter(json!({"kit_tag": tag})),
            ..ListQuery::default()
        },
    )
    .await;
    let mut expected = vec![other_cfg[0].clone()];
    expected.extend(configs.iter().rev().cloned());
    check_eq!(
        name,
        across.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        expected,
        "newest first across threads"
    );
    let got = list_all(
        saver,
        name,
        &ListQuery {
            thread_id: None,
            checkpoint_ns: None,
            filter: filter(json!({"kit_tag": tag})),
            limit: Some(2),
            ..ListQuery::default()
        },
    )
    .await;
    check_eq!(
        name,
        got.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        expected[..2].to_vec()
    );

    // Namespaces.
    let name = "list/namespaces";
    let tid = new_thread();
    let root = CheckpointConfig::thread(&tid);
    let mut by_ns = Vec::new();
    for ns in ["", "child:1", "child:2"] {
        let c = chain(saver, name, &root.clone().in_ns(ns), 1, |_| {
            meta(CheckpointSource::Loop, 0)
        })
        .await;
        by_ns.push(c[0].clone());
    }
    for c in &by_ns {
        let got = list_all(
            saver,
            name,
            &ListQuery {
                checkpoint_ns: Some(c.checkpoint_ns.clone()),
                ..ListQuery::thread(&tid)
            },
        )
        .await;
        check_eq!(
            name,
            got.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
            vec![c.clone()]
        );
    }
    let got = list_all(
        saver,
        name,
        &ListQuery {
            checkpoint_ns: None,
            ..ListQuery::thread(&tid)
        },
    )
    .await;
    let expected: Vec<CheckpointConfig> = by_ns.iter().rev().cloned().collect();
    check_eq!(
        name,
        got.iter().map(|t| t.config.clone()).collect::<Vec<_>>(),
        expected,
        "all namespaces, newest first"
    );

    // Pending writes are part of listed tuples.
    let name = "list/includes_pending_writes";
    let task = uuid::Uuid::new_v4().to_string();
    put_w(saver, name, &by_ns[0], &[("ch", json!("val"))], &task, "").await;
    let got = list_all(saver, name, &ListQuery::thread(&tid)).await;
    check_eq!(name, got.len(), 1);
    check_eq!(name, got[0].pending_writes, vec![pw(&task, "ch", json!("val"))]);
}

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

// ---------------------------------------------------------------------------------------
// delete_thread
// ---------------------------------------------------------------------------------------

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
    let task_writes = crate::checkpoint::TaskWrites {
        config: c1.clone(),
        task_id: task.clone(),
        task_path: "~t".into(),
        writes: writes(&[
            ("step", json!(7)),
            (crate::checkpoint::ERROR, json!({"message": "x"})),
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
            pw(&task, crate::checkpoint::ERROR, json!({"message": "x"}))
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

#[cfg(test)]
mod tests {
    //! The kit must catch broken savers: each test wraps [`InMemorySaver`] with one bug and
    //! checks that the right area fails, naming the check.
    use super::*;
    use crate::checkpoint::InMemorySaver;
    use crate::error::Result;
    use futures::FutureExt;
    use std::future::Future;
    use std::panic::AssertUnwindSafe;

    #[derive(Clone, Copy, PartialEq)]
    enum Bug {
        OldestAsLatest,
        IgnoreBefore,
        DuplicateWrites,
        SortWritesByTask,
        NoCarryOver,
        IgnoreDelete,
        IgnoreCopy,
        NoParent,
        DeleteRunEverywhere,
    }

    struct Broken {
        inner: InMemorySaver,
        bug: Bug,
    }

    impl Broken {
        fn new(bug: Bug) -> Self {
            Self {
                inner: InMemorySaver::new(),
                bug,
            }
        }

        fn mangle(&self, mut t: CheckpointTuple) -> CheckpointTuple {
            match self.bug {
                Bug::DuplicateWrites => {
                    if let Some(first) = t.pending_writes.first().cloned() {
                        t.pending_writes.push(first);
                    }
                }
                Bug::SortWritesByTask => {
                    t.pending_writes.sort_by(|a, b| a.task_id.cmp(&b.task_id));
                }
                Bug::NoCarryOver => {
                    let updated = t.checkpoint.updated_channels.clone();
                    t.checkpoint.channel_values.retain(|c, _| updated.contains(c));
                }
                Bug::NoParent => t.parent_config = None,
                _ => {}
            }
            t
        }
    }

    impl Checkpointer for Broken {
        async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
            if self.bug == Bug::OldestAsLatest && config.checkpoint_id.is_none() {
                let query = ListQuery {
                    thread_id: Some(config.thread_id.clone()),
                    checkpoint_ns: Some(config.checkpoint_ns.clone()),
                    ..ListQuery::default()
                };
                return Ok(self.inner.list(&query).await?.pop());
            }
            Ok(self.inner.get_tuple(config).await?.map(|t| self.mangle(t)))
        }

        async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
            let mut query = query.clone();
            if self.bug == Bug::IgnoreBefore {
                query.before = None;
            }
            let got = self.inner.list(&query).await?;
            Ok(got.into_iter().map(|t| self.mangle(t)).collect())
        }

        async fn put(
            &self,
            config: &CheckpointConfig,
            checkpoint: Checkpoint,
            metadata: CheckpointMetadata,
            new_versions: BTreeMap<String, Version>,
        ) -> Result<CheckpointConfig> {
            self.inner.put(config, checkpoint, metadata, new_versions).await
        }

        async fn put_writes(
            &self,
            config: &CheckpointConfig,
            writes: Vec<(String, Value)>,
            task_id: &str,
            task_path: &str,
        ) -> Result<()> {
            self.inner.put_writes(config, writes, task_id, task_path).await
        }

        async fn delete_thread(&self, thread_id: &str) -> Result<()> {
            if self.bug == Bug::IgnoreDelete {
                return Ok(());
            }
            self.inner.delete_thread(thread_id).await
        }

        async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
            if self.bug == Bug::IgnoreCopy {
                return Ok(());
            }
            self.inner.copy_thread(source, target).await
        }

        async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<()> {
            if self.bug == Bug::DeleteRunEverywhere {
                // Every checkpoint of the thread, not only the run's.
                return self.inner.delete_thread(thread_id).await;
            }
            self.inner.delete_run(thread_id, run_id).await
        }
    }

    /// Run `area` and return the panic message it fails with.
    async fn failure(area: impl Future<Output = ()>) -> String {
        let Err(payload) = AssertUnwindSafe(area).catch_unwind().await else {
            panic!("the kit accepted a broken saver");
        };
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default()
    }

    async fn assert_caught<F: Future<Output = ()>>(area: F, check: &str) {
        let msg = failure(area).await;
        assert!(
            msg.contains(&format!("`{check}")),
            "expected a failure of `{check}`, got: {msg}"
        );
    }

    #[tokio::test]
    async fn catches_broken_savers() {
        let s = Broken::new(Bug::OldestAsLatest);
        assert_caught(put_and_get(&s), "put_and_get/latest").await;
        let s = Broken::new(Bug::NoParent);
        assert_caught(put_and_get(&s), "put_and_get/second_checkpoint").await;
        let s = Broken::new(Bug::IgnoreBefore);
        assert_caught(list(&s), "list/before").await;
        let s = Broken::new(Bug::DuplicateWrites);
        assert_caught(put_writes(&s), "put_writes/in_order").await;
        let s = Broken::new(Bug::SortWritesByTask);
        assert_caught(put_writes(&s), "put_writes/in_order").await;
        let s = Broken::new(Bug::NoCarryOver);
        assert_caught(deltas(&s), "deltas/").await;
        let s = Broken::new(Bug::IgnoreDelete);
        assert_caught(delete_thread(&s), "delete_thread/removes_everything").await;
        let s = Broken::new(Bug::IgnoreCopy);
        assert_caught(copy_thread(&s), "copy_thread/copies_everything").await;
        let s = Broken::new(Bug::DeleteRunEverywhere);
        assert_caught(delete_run(&s), "delete_run/unknown_run").await;
    }

    #[tokio::test]
    async fn kit_shares_a_saver_with_concurrent_runs() {
        let saver = InMemorySaver::new();
        futures::join!(
            checkpointer_conformance(&saver),
            checkpointer_conformance(&saver),
            checkpointer_conformance(&saver)
        );
    }
}
