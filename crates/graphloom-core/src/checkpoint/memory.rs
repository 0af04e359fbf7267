//! [`InMemorySaver`]: a checkpointer that keeps everything in process memory.
//!
//! It mirrors LangGraph's `InMemorySaver`, with delta-encoded channel values: every
//! `(thread, namespace, channel, version)` is stored once as a blob (a full value or an
//! append to an earlier version), and reads resolve the chain back to full values. Meant
//! for tests, examples and short-lived processes; nothing survives a restart.

use super::{
    resolve_channel, write_idx, ChannelValue, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointTuple, Checkpointer, ListQuery, PendingWrite, Version,
};
use crate::error::{BackendError, BackendErrorKind, Error, Result};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A checkpointer that keeps checkpoints, channel blobs and pending writes in memory.
///
/// Cloning is cheap and clones share the same storage.
#[derive(Debug, Clone, Default)]
pub struct InMemorySaver {
    inner: Arc<Mutex<Inner>>,
}

/// Everything stored, by thread id, then namespace.
#[derive(Debug, Default)]
struct Inner {
    threads: HashMap<String, BTreeMap<String, NsData>>,
}

/// What one namespace of one thread holds.
#[derive(Debug, Clone, Default)]
struct NsData {
    /// Checkpoints by id (UUIDv7, so the last key is the newest).
    checkpoints: BTreeMap<String, StoredCheckpoint>,
    /// Channel blobs: channel -> version -> value (full or an append).
    blobs: HashMap<String, BTreeMap<Version, ChannelValue>>,
    /// Pending writes by checkpoint id, in the order they were first written.
    writes: HashMap<String, Vec<StoredWrite>>,
}

/// A checkpoint as stored: without its channel values, which live in the blobs.
#[derive(Debug, Clone)]
struct StoredCheckpoint {
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    parent_id: Option<String>,
}

/// One pending write.
#[derive(Debug, Clone)]
struct StoredWrite {
    task_id: String,
    idx: i64,
    channel: String,
    value: Value,
    /// Kept as LangGraph keeps it; not part of what a tuple returns.
    #[allow(dead_code)]
    task_path: String,
}

impl InMemorySaver {
    /// An empty saver.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of stored channel blobs (all threads and namespaces).
    #[must_use]
    pub fn blob_count(&self) -> usize {
        let inner = self.lock();
        inner
            .threads
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(|ns| ns.blobs.values())
            .map(BTreeMap::len)
            .sum()
    }

    /// Total size of the stored channel blobs, serialized as JSON, in bytes.
    #[must_use]
    pub fn stored_bytes(&self) -> usize {
        let inner = self.lock();
        inner
            .threads
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(|ns| ns.blobs.values())
            .flat_map(BTreeMap::values)
            .map(|blob| serde_json::to_vec(blob).map_or(0, |bytes| bytes.len()))
            .sum()
    }

    /// The storage, recovering it if another thread panicked while holding the lock (every
    /// mutation leaves the maps consistent, so the data is still usable).
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get_tuple_now(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        let inner = self.lock();
        let Some(ns) = inner
            .threads
            .get(&config.thread_id)
            .and_then(|thread| thread.get(&config.checkpoint_ns))
        else {
            return Ok(None);
        };
        let found = match &config.checkpoint_id {
            Some(id) => ns.checkpoints.get_key_value(id),
            None => ns.checkpoints.last_key_value(),
        };
        found
            .map(|(id, stored)| build_tuple(&config.thread_id, &config.checkpoint_ns, ns, id, stored))
            .transpose()
    }

    fn list_now(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        let inner = self.lock();
        let threads: Vec<(&String, &BTreeMap<String, NsData>)> = match &query.thread_id {
            Some(t) => inner.threads.get_key_value(t).into_iter().collect(),
            None => inner.threads.iter().collect(),
        };
        let upper = query.before.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut found: Vec<(&str, &str, &NsData, &str, &StoredCheckpoint)> = Vec::new();
        for (thread_id, namespaces) in threads {
            let namespaces: Vec<(&String, &NsData)> = match &query.checkpoint_ns {
                Some(n) => namespaces.get_key_value(n).into_iter().collect(),
                None => namespaces.iter().collect(),
            };
            for (ns_name, ns) in namespaces {
                for (id, stored) in ns.checkpoints.range::<str, _>((Bound::Unbounded, upper)) {
                    if stored.metadata.matches(&query.filter) {
                        found.push((thread_id, ns_name, ns, id, stored));
                    }
                }
            }
        }
        // Newest first; ties (copied threads share ids) in a stable thread/ns order.
        found.sort_by(|a, b| b.3.cmp(a.3).then_with(|| a.0.cmp(b.0)).then_with(|| a.1.cmp(b.1)));
        if let Some(limit) = query.limit {
            found.truncate(limit);
        }
        found
            .into_iter()
            .map(|(thread_id, ns_name, ns, id, stored)| build_tuple(thread_id, ns_name, ns, id, stored))
            .collect()
    }

    fn put_now(
        &self,
        config: &CheckpointConfig,
        mut checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> CheckpointConfig {
        let mut values = std::mem::take(&mut checkpoint.channel_values);
        let id = checkpoint.id.clone();
        let mut inner = self.lock();
        let ns = inner
            .threads
            .entry(config.thread_id.clone())
            .or_default()
            .entry(config.checkpoint_ns.clone())
            .or_default();
        for (channel, version) in new_versions {
            // A channel with a new version but no value was emptied: nothing to store.
            if let Some(value) = values.remove(&channel) {
                ns.blobs
                    .entry(channel)
                    .or_default()
                    .entry(version)
                    .or_insert(value);
            }
        }
        ns.checkpoints.insert(
            id.clone(),
            StoredCheckpoint {
                checkpoint,
                metadata,
                parent_id: config.checkpoint_id.clone(),
            },
        );
        CheckpointConfig {
            thread_id: config.thread_id.clone(),
            checkpoint_ns: config.checkpoint_ns.clone(),
            checkpoint_id: Some(id),
        }
    }

    fn put_writes_now(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let Some(checkpoint_id) = &config.checkpoint_id else {
            return Err(BackendError::new(
                BackendErrorKind::InvalidInput,
                "put_writes needs a config with a checkpoint id",
            )
            .into());
        };
        let mut inner = self.lock();
        let list = inner
            .threads
            .entry(config.thread_id.clone())
            .or_default()
            .entry(config.checkpoint_ns.clone())
            .or_default()
            .writes
            .entry(checkpoint_id.clone())
            .or_default();
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let idx = write_idx(&channel, position);
            insert_write(
                list,
                StoredWrite {
                    task_id: task_id.to_owned(),
                    idx,
                    channel,
                    value,
                    task_path: task_path.to_owned(),
                },
            );
        }
        Ok(())
    }

    fn delete_thread_now(&self, thread_id: &str) {
        self.lock().threads.remove(thread_id);
    }

    fn delete_run_now(&self, thread_id: &str, run_id: &str) {
        let mut inner = self.lock();
        let Some(thread) = inner.threads.get_mut(thread_id) else {
            return;
        };
        for ns in thread.values_mut() {
            let NsData {
                checkpoints, writes, ..
            } = ns;
            checkpoints.retain(|id, cp| {
                let keep = cp.metadata.run_id.as_deref() != Some(run_id);
                if !keep {
                    writes.remove(id);
                }
                keep
            });
        }
    }

    fn prune_to_latest_now(&self, thread_id: &str) -> Result<usize> {
        let mut inner = self.lock();
        let Some(thread) = inner.threads.get_mut(thread_id) else {
            return Ok(0);
        };
        let mut dropped = 0;
        for (ns_name, ns) in thread.iter_mut() {
            let Some((latest, stored)) = ns.checkpoints.last_key_value() else {
                continue;
            };
            let latest = latest.clone();
            // The latest checkpoint's values, whole: its blobs no longer lean on older ones.
            let tuple = build_tuple(thread_id, ns_name, ns, &latest, stored)?;
            let mut blobs: HashMap<String, BTreeMap<Version, ChannelValue>> = HashMap::new();
            for (channel, value) in tuple.checkpoint.channel_values {
                if let Some(version) = tuple.checkpoint.channel_versions.get(&channel) {
                    blobs.entry(channel).or_default().insert(*version, value);
                }
            }
            dropped += ns.checkpoints.len() - 1;
            ns.checkpoints.retain(|id, _| *id == latest);
            ns.writes.retain(|id, _| *id == latest);
            ns.blobs = blobs;
        }
        Ok(dropped)
    }

    fn copy_thread_now(&self, source: &str, target: &str) {
        if source == target {
            return;
        }
        let mut inner = self.lock();
        let Some(src) = inner.threads.get(source).cloned() else {
            return;
        };
        let dst = inner.threads.entry(target.to_owned()).or_default();
        for (ns_name, data) in src {
            let ns = dst.entry(ns_name).or_default();
            ns.checkpoints.extend(data.checkpoints);
            for (channel, versions) in data.blobs {
                let chain = ns.blobs.entry(channel).or_default();
                for (version, blob) in versions {
                    chain.entry(version).or_insert(blob);
                }
            }
            for (checkpoint_id, writes) in data.writes {
                let list = ns.writes.entry(checkpoint_id).or_default();
                for write in writes {
                    insert_write(list, write);
                }
            }
        }
    }
}

/// Add a write to a checkpoint's list: an ordinary write whose `(task_id, idx)` is already
/// there is dropped; a special one (negative idx) replaces the earlier one in place.
fn insert_write(list: &mut Vec<StoredWrite>, write: StoredWrite) {
    match list
        .iter_mut()
        .find(|w| w.task_id == write.task_id && w.idx == write.idx)
    {
        Some(existing) if write.idx < 0 => *existing = write,
        Some(_) => {}
        None => list.push(write),
    }
}

/// Rebuild a tuple, resolving every channel of the checkpoint to its full value.
fn build_tuple(
    thread_id: &str,
    ns_name: &str,
    ns: &NsData,
    checkpoint_id: &str,
    stored: &StoredCheckpoint,
) -> Result<CheckpointTuple> {
    let mut checkpoint = stored.checkpoint.clone();
    let mut values = BTreeMap::new();
    for (channel, version) in &checkpoint.channel_versions {
        // No blob at the current version: the channel is empty.
        let Some(chain) = ns.blobs.get(channel).filter(|chain| chain.contains_key(version)) else {
            continue;
        };
        let value = resolve_channel(channel, version, |v| chain.get(v).cloned()).map_err(|e| {
            Error::CorruptCheckpoint {
                thread_id: thread_id.to_owned(),
                checkpoint_id: checkpoint_id.to_owned(),
                message: e.to_string(),
            }
        })?;
        values.insert(channel.clone(), ChannelValue::Full(value));
    }
    checkpoint.channel_values = values;
    let config = CheckpointConfig {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: ns_name.to_owned(),
        checkpoint_id: Some(checkpoint_id.to_owned()),
    };
    let parent_config = stored.parent_id.as_ref().map(|parent| CheckpointConfig {
        checkpoint_id: Some(parent.clone()),
        ..config.clone()
    });
    let pending_writes = ns
        .writes
        .get(checkpoint_id)
        .map(|writes| {
            writes
                .iter()
                .map(|w| PendingWrite {
                    task_id: w.task_id.clone(),
                    channel: w.channel.clone(),
                    value: w.value.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CheckpointTuple {
        config,
        checkpoint,
        metadata: stored.metadata.clone(),
        parent_config,
        pending_writes,
    })
}

impl Checkpointer for InMemorySaver {
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.get_tuple_now(config)
    }

    async fn list(&self, query: &ListQuery) -> Result<Vec<CheckpointTuple>> {
        self.list_now(query)
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: BTreeMap<String, Version>,
    ) -> Result<CheckpointConfig> {
        Ok(self.put_now(config, checkpoint, metadata, new_versions))
    }

    /// Every save is done when its future is first polled.
    fn saves_in_order(&self) -> bool {
        true
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        self.put_writes_now(config, writes, task_id, task_path)
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        self.delete_thread_now(thread_id);
        Ok(())
    }

    async fn copy_thread(&self, source: &str, target: &str) -> Result<()> {
        self.copy_thread_now(source, target);
        Ok(())
    }

    async fn delete_run(&self, thread_id: &str, run_id: &str) -> Result<()> {
        self.delete_run_now(thread_id, run_id);
        Ok(())
    }

    async fn prune_to_latest(&self, thread_id: &str) -> Result<usize> {
        self.prune_to_latest_now(thread_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::CheckpointSource;
    use serde_json::{json, Map};

    fn meta(step: i64) -> CheckpointMetadata {
        CheckpointMetadata {
            source: CheckpointSource::Loop,
            step,
            parents: BTreeMap::new(),
            run_id: None,
            extra: Map::new(),
        }
    }

    fn v(n: u64) -> Version {
        Version { n, salt: 7 }
    }

    #[tokio::test]
    async fn append_with_missing_base_is_corrupt() {
        let saver = InMemorySaver::new();
        let mut cp = Checkpoint::empty();
        cp.channel_versions.insert("msgs".into(), v(2));
        cp.channel_values.insert(
            "msgs".into(),
            ChannelValue::Append {
                base: v(1),
                items: vec![json!(1)],
            },
        );
        let id = cp.id.clone();
        let config = saver
            .put(
                &CheckpointConfig::thread("t"),
                cp,
                meta(0),
                BTreeMap::from([("msgs".into(), v(2))]),
            )
            .await
            .unwrap();
        match saver.get_tuple(&config).await {
            Err(Error::CorruptCheckpoint {
                thread_id,
                checkpoint_id,
                message,
            }) => {
                assert_eq!(thread_id, "t");
                assert_eq!(checkpoint_id, id);
                assert!(message.contains("msgs"), "{message}");
            }
            other => panic!("expected a corrupt checkpoint error, got {other:?}"),
        }
        assert!(matches!(
            saver.list(&ListQuery::thread("t")).await,
            Err(Error::CorruptCheckpoint { .. })
        ));
    }

    #[tokio::test]
    async fn blobs_are_stored_once_and_counted() {
        let saver = InMemorySaver::new();
        let mut cp1 = Checkpoint::empty();
        cp1.channel_versions.insert("a".into(), v(1));
        cp1.channel_values
            .insert("a".into(), ChannelValue::Full(json!([1, 2])));
        let c1 = saver
            .put(
                &CheckpointConfig::thread("t"),
                cp1,
                meta(0),
                BTreeMap::from([("a".into(), v(1))]),
            )
            .await
            .unwrap();
        assert_eq!(saver.blob_count(), 1);
        let one = saver.stored_bytes();
        assert!(one > 0);

        // Same version again with another value: the stored blob is never rewritten.
        let mut cp2 = Checkpoint::empty();
        cp2.channel_versions.insert("a".into(), v(1));
        cp2.channel_values
            .insert("a".into(), ChannelValue::Full(json!("other")));
        let c2 = saver
            .put(&c1, cp2, meta(1), BTreeMap::from([("a".into(), v(1))]))
            .await
            .unwrap();
        assert_eq!(saver.blob_count(), 1);
        assert_eq!(saver.stored_bytes(), one);
        let got = saver.get_tuple(&c2).await.unwrap().unwrap();
        assert_eq!(
            got.checkpoint.channel_values["a"],
            ChannelValue::Full(json!([1, 2]))
        );

        // Clones share storage; a poisoned lock is recovered.
        let clone = saver.clone();
        let poisoner = saver.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.inner.lock();
            panic!("poison the lock");
        })
        .join();
        assert_eq!(clone.blob_count(), 1);
        assert!(clone.get_tuple(&c1).await.unwrap().is_some());
        saver.delete_thread("t").await.unwrap();
        assert_eq!(clone.blob_count(), 0);
        assert_eq!(clone.stored_bytes(), 0);
    }

    #[tokio::test]
    async fn put_writes_without_checkpoint_id_is_invalid_input() {
        let saver = InMemorySaver::new();
        let err = saver
            .put_writes(
                &CheckpointConfig::thread("t"),
                vec![("c".into(), json!(1))],
                "task",
                "",
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Backend(ref e) if e.kind() == BackendErrorKind::InvalidInput));
    }
}
