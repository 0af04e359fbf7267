//! The checkpointer conformance kit: checks that every [`Checkpointer`] backend keeps the
//! promises the executor relies on.
//!
//! A backend runs [`checkpointer_conformance`] against its own saver in its tests (with
//! `graphloom-test-kit` among its dev-dependencies):
//!
//! ```ignore
//! #[tokio::test]
//! async fn conformance() {
//!     let saver = MySaver::connect(...).await?;
//!     graphloom_test_kit::checkpointer_conformance(&saver).await;
//! }
//! ```
//!
//! Every check works on fresh random thread ids, so the saver may already hold data and may
//! be shared with other tests running at the same time. A failed check panics with a message
//! naming it (`checkpointer conformance check `area/check` failed: ...`). The areas can also
//! be run one by one: [`put_and_get`], [`deltas`], [`list`], [`put_writes`],
//! [`delete_thread`], [`copy_thread`], [`delete_run`], [`prune_to_latest`].
//!
//! The checks follow the spirit of LangGraph's `checkpoint-conformance` suite, adapted to
//! graphloom's delta-encoded channel values and UUIDv7 checkpoint ids.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use graphloom_core::checkpoint::{
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
    prune_to_latest(saver).await;
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

mod list;
mod prune;
mod runs;
mod threads;
mod values;
mod writes;
pub use list::list;
pub use prune::prune_to_latest;
pub use runs::delete_run;
pub use threads::{copy_thread, delete_thread};
pub use values::{deltas, put_and_get};
pub use writes::{put_writes, shared_items, writes_then_checkpoint};

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

#[cfg(test)]
mod tests {
    //! The kit must catch broken savers: each test wraps [`InMemorySaver`] with one bug and
    //! checks that the right area fails, naming the check.
    use super::*;
    use futures::FutureExt;
    use graphloom_core::checkpoint::InMemorySaver;
    use graphloom_core::Result;
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
