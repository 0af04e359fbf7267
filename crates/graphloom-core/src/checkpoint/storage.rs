//! [`ThreadStorage`]: how much room a thread's checkpoints take, as a saver stores them.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// How many rows of one kind a thread has, and their stored bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoredCount {
    /// Rows (checkpoints, channel value versions, pending writes).
    pub count: u64,
    /// Bytes of their stored values (checkpoint and metadata for a checkpoint).
    pub bytes: u64,
}

impl StoredCount {
    fn add(&mut self, other: StoredCount) {
        self.count += other.count;
        self.bytes += other.bytes;
    }
}

/// What a thread's checkpoints take in storage, every namespace included: its checkpoints,
/// its channel values (each stored version of each channel) and its pending writes. The
/// server's `GET /threads/{thread_id}/storage` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadStorage {
    /// The checkpoints.
    pub checkpoints: StoredCount,
    /// Every channel's stored versions (`count` is the number of versions).
    pub channels: BTreeMap<String, StoredCount>,
    /// The pending writes.
    pub pending_writes: StoredCount,
}

impl ThreadStorage {
    /// Every channel's versions together.
    #[must_use]
    pub fn channel_values(&self) -> StoredCount {
        let mut all = StoredCount::default();
        for c in self.channels.values() {
            all.add(*c);
        }
        all
    }

    /// Bytes of checkpoints, channel values and pending writes together.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.checkpoints.bytes + self.channel_values().bytes + self.pending_writes.bytes
    }

    /// Add what another store of the same thread holds (a second saver's tables).
    pub fn add(&mut self, other: &ThreadStorage) {
        self.checkpoints.add(other.checkpoints);
        self.pending_writes.add(other.pending_writes);
        for (name, c) in &other.channels {
            self.channels.entry(name.clone()).or_default().add(*c);
        }
    }

    /// The JSON of the Agent Server's thread storage report.
    #[must_use]
    pub fn to_json(&self, thread_id: &str) -> Value {
        let count = |c: StoredCount| json!({"count": c.count, "bytes": c.bytes});
        let by_channel: Map<String, Value> = self
            .channels
            .iter()
            .map(|(name, c)| (name.clone(), json!({"versions": c.count, "bytes": c.bytes})))
            .collect();
        let values = self.channel_values();
        json!({
            "thread_id": thread_id,
            "total_bytes": self.total_bytes(),
            "checkpoints": count(self.checkpoints),
            "channel_values": {"count": values.count, "bytes": values.bytes, "by_channel": by_channel},
            "pending_writes": count(self.pending_writes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_every_kind_and_channel() {
        let mut a = ThreadStorage {
            checkpoints: StoredCount { count: 2, bytes: 100 },
            channels: BTreeMap::from([("messages".to_owned(), StoredCount { count: 2, bytes: 40 })]),
            pending_writes: StoredCount { count: 1, bytes: 5 },
        };
        let b = ThreadStorage {
            checkpoints: StoredCount { count: 1, bytes: 10 },
            channels: BTreeMap::from([
                ("messages".to_owned(), StoredCount { count: 1, bytes: 2 }),
                ("n".to_owned(), StoredCount { count: 1, bytes: 1 }),
            ]),
            pending_writes: StoredCount::default(),
        };
        a.add(&b);
        assert_eq!(a.total_bytes(), 110 + 43 + 5);
        let v = a.to_json("t");
        assert_eq!(v["thread_id"], "t");
        assert_eq!(v["total_bytes"], 158);
        assert_eq!(v["checkpoints"], json!({"count": 3, "bytes": 110}));
        assert_eq!(v["channel_values"]["count"], 4);
        assert_eq!(
            v["channel_values"]["by_channel"]["messages"],
            json!({"versions": 3, "bytes": 42})
        );
        assert_eq!(v["pending_writes"], json!({"count": 1, "bytes": 5}));
    }
}
