//! A bounded, least-recently-used cache of resolved channel values: the newest version
//! read of each channel.
//!
//! Blobs are immutable once written (a `(thread, namespace, channel, version)` is never
//! rewritten), so the resolved value of a channel version stays valid until its thread is
//! deleted. Caching it lets the next read resolve a one-link append chain instead of
//! decoding the whole history of a long thread again: reads cost what changed.
//!
//! One entry per `(thread, namespace, channel)`: a newer version replaces the older one
//! (reads of a thread's latest state move forward), and an older version read later
//! (history, time travel) does not displace a newer one. Keeping every version read would
//! hold a whole copy of a growing channel per version until the budget filled: on one long
//! thread that is many full copies of its conversation, not the conversation once.
//!
//! Deleting a thread through a saver drops its entries and bumps an epoch; a read that
//! started before the delete does not put what it read into the cache.
//!
//! The budget counts memory: each entry at the estimated size of its decoded value and
//! key ([`entry_bytes`]). Decoded JSON holds several times its encoded length (every
//! object a B-tree node sized for eleven entries, every string its own allocation), so a
//! budget of encoded bytes held five to seven times its size in memory.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// `(thread, namespace, channel, version)`.
pub(crate) type Key = (String, String, String, String);

/// `(thread, namespace, channel)`: where one entry lives.
type Slot = (String, String, String);

struct Entry {
    /// The version cached (the key's last part).
    version: String,
    /// Its order: versions of a channel grow with each write.
    n: u64,
    value: Arc<Value>,
    size: usize,
    tick: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Slot, Entry>,
    /// Entries by last use, oldest first.
    order: BTreeMap<u64, Slot>,
    tick: u64,
    bytes: usize,
}

/// The cache; `budget` bounds the memory its entries take ([`entry_bytes`]).
pub(crate) struct ValueCache {
    inner: Mutex<Inner>,
    budget: usize,
    epoch: AtomicU64,
}

impl std::fmt::Debug for ValueCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueCache")
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// About how much memory an entry holding `value` under `key` takes: the value's heap
/// (estimated, see [`value_bytes`]), its `Arc`, the key's strings (the map and the
/// recency order each hold the slot) and the entry's bookkeeping.
pub(crate) fn entry_bytes(key: &Key, value: &Value) -> usize {
    const PER_STRING: usize = std::mem::size_of::<String>() + ALLOC_SLACK;
    const BOOKKEEPING: usize = std::mem::size_of::<Entry>() + std::mem::size_of::<Value>() + 64;
    let slot = key.0.len() + key.1.len() + key.2.len() + 3 * PER_STRING;
    2 * slot + key.3.len() + ALLOC_SLACK + BOOKKEEPING + value_bytes(value)
}

/// What the allocator adds to a request, on average (size classes, headers).
const ALLOC_SLACK: usize = 8;

/// Entries one B-tree node of a JSON object holds (`std`'s `BTreeMap` capacity).
const NODE_ENTRIES: usize = 11;

/// The estimated heap bytes of a decoded JSON value: strings' bytes, arrays' slots, and
/// objects' B-tree nodes (a node holds up to [`NODE_ENTRIES`] keys and values, and a
/// map's nodes are on average about two thirds full once it has split). Walks the value
/// without recursion, so no depth of nesting can overflow the stack.
pub(crate) fn value_bytes(value: &Value) -> usize {
    const VALUE: usize = std::mem::size_of::<Value>();
    const NODE: usize = NODE_ENTRIES * (std::mem::size_of::<String>() + VALUE) + 16 + ALLOC_SLACK;
    let mut total = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
            Value::String(s) => total += heap_string(s),
            Value::Array(items) => {
                if !items.is_empty() {
                    total += items.len() * VALUE + ALLOC_SLACK;
                }
                stack.extend(items.iter());
            }
            Value::Object(map) => {
                let n = map.len();
                let nodes = match n {
                    0 => 0,
                    1..=NODE_ENTRIES => 1,
                    _ => (3 * n).div_ceil(2 * NODE_ENTRIES) + 1,
                };
                total += nodes * NODE;
                for (k, v) in map {
                    total += heap_string(k);
                    stack.push(v);
                }
            }
        }
    }
    total
}

fn heap_string(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        s.len() + ALLOC_SLACK
    }
}

fn split(key: &Key) -> (Slot, &str) {
    ((key.0.clone(), key.1.clone(), key.2.clone()), key.3.as_str())
}

impl ValueCache {
    /// A cache holding values of up to `budget` bytes in total (0 disables it).
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            budget,
            epoch: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every mutation keeps the maps consistent; a panic elsewhere cannot break them.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current epoch: take it before a read begins and pass it to [`Self::insert`].
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The cached value and its size, marking it recently used.
    pub(crate) fn get(&self, key: &Key) -> Option<(Arc<Value>, usize)> {
        if self.budget == 0 {
            return None;
        }
        let (slot, version) = split(key);
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (value, size, old) = {
            let entry = inner.map.get_mut(&slot).filter(|e| e.version == version)?;
            let old = std::mem::replace(&mut entry.tick, tick);
            (Arc::clone(&entry.value), entry.size, old)
        };
        inner.order.remove(&old);
        inner.order.insert(tick, slot);
        Some((value, size))
    }

    /// Whether a value of `size` bytes would be kept (at most a quarter of the budget).
    pub(crate) fn accepts(&self, size: usize) -> bool {
        size <= self.budget / 4 && self.budget > 0
    }

    /// Cache `value` (an entry of `size` bytes, see [`entry_bytes`]), the channel's version
    /// `n` (its order), unless the epoch moved since `epoch` or a newer version of the
    /// channel is cached.
    pub(crate) fn insert(&self, key: Key, n: u64, value: Arc<Value>, size: usize, epoch: u64) {
        if !self.accepts(size) {
            return;
        }
        let mut inner = self.lock();
        if self.epoch() != epoch {
            return;
        }
        let (slot, version) = split(&key);
        if inner.map.get(&slot).is_some_and(|e| e.n > n) {
            return;
        }
        inner.tick += 1;
        let tick = inner.tick;
        let entry = Entry {
            version: version.to_owned(),
            n,
            value,
            size,
            tick,
        };
        if let Some(old) = inner.map.insert(slot.clone(), entry) {
            inner.order.remove(&old.tick);
            inner.bytes -= old.size;
        }
        inner.order.insert(tick, slot);
        inner.bytes += size;
        while inner.bytes > self.budget {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some(gone) = inner.map.remove(&oldest) {
                inner.bytes -= gone.size;
            }
        }
    }

    /// Drop every entry of `thread` and move to a new epoch.
    pub(crate) fn forget_thread(&self, thread: &str) {
        let mut inner = self.lock();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let gone: Vec<(Slot, u64, usize)> = inner
            .map
            .iter()
            .filter(|(k, _)| k.0 == thread)
            .map(|(k, e)| (k.clone(), e.tick, e.size))
            .collect();
        for (key, tick, size) in gone {
            inner.map.remove(&key);
            inner.order.remove(&tick);
            inner.bytes -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(t: &str, v: &str) -> Key {
        (t.into(), String::new(), "c".into(), v.into())
    }

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let c = ValueCache::new(400);
        c.insert(key("t1", "1"), 1, Arc::new(json!(1)), 100, 0);
        c.insert(key("t2", "1"), 1, Arc::new(json!(2)), 100, 0);
        c.insert(key("t3", "1"), 1, Arc::new(json!(3)), 100, 0);
        assert!(c.get(&key("t1", "1")).is_some());
        c.insert(key("t4", "1"), 1, Arc::new(json!(4)), 100, 0);
        c.insert(key("t5", "1"), 1, Arc::new(json!(5)), 100, 0);
        // t2 was least recently used.
        assert!(c.get(&key("t2", "1")).is_none());
        assert!(c.get(&key("t1", "1")).is_some());
        assert!(c.get(&key("t5", "1")).is_some());
        // Too big for the budget: not cached.
        c.insert(key("t", "big"), 1, Arc::new(json!(0)), 101, 0);
        assert!(c.get(&key("t", "big")).is_none());
    }

    #[test]
    fn forgetting_a_thread_drops_it_and_refuses_reads_from_before() {
        let c = ValueCache::new(1000);
        let before = c.epoch();
        c.insert(key("a", "1"), 1, Arc::new(json!(1)), 10, before);
        c.insert(key("b", "1"), 1, Arc::new(json!(1)), 10, before);
        c.forget_thread("a");
        assert!(c.get(&key("a", "1")).is_none());
        assert!(c.get(&key("b", "1")).is_some());
        c.insert(key("a", "2"), 2, Arc::new(json!(2)), 10, before);
        assert!(c.get(&key("a", "2")).is_none(), "a read from before the delete");
        c.insert(key("a", "2"), 2, Arc::new(json!(2)), 10, c.epoch());
        assert!(c.get(&key("a", "2")).is_some());
        assert!(ValueCache::new(0).get(&key("a", "2")).is_none());
    }

    /// One growing channel holds one entry, its newest version, not a copy per version.
    #[test]
    fn a_channel_keeps_only_its_newest_version() {
        let c = ValueCache::new(1_000_000);
        for n in 1..=100u64 {
            c.insert(key("t", &n.to_string()), n, Arc::new(json!(n)), 1_000, 0);
        }
        assert_eq!(c.lock().map.len(), 1);
        assert_eq!(c.lock().bytes, 1_000);
        assert!(c.get(&key("t", "99")).is_none());
        assert_eq!(*c.get(&key("t", "100")).unwrap().0, json!(100));
        // An older version read later (history) does not displace the newest.
        c.insert(key("t", "7"), 7, Arc::new(json!(7)), 1_000, 0);
        assert!(c.get(&key("t", "7")).is_none());
        assert!(c.get(&key("t", "100")).is_some());
        // Another channel of the thread has its own entry.
        c.insert(
            ("t".into(), String::new(), "other".into(), "1".into()),
            1,
            Arc::new(json!(0)),
            10,
            0,
        );
        assert_eq!(c.lock().map.len(), 2);
        c.forget_thread("t");
        assert_eq!(c.lock().bytes, 0);
    }
}
