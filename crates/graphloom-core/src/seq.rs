//! [`Seq`], a persistent sequence for append-heavy fields.
//!
//! Cloning a `Seq` is O(1) and pushing onto a clone does not copy the items: the state of
//! the previous superstep (still held by a checkpoint or a stream consumer) and the new one
//! share structure. Use it for message lists and logs; a plain `Vec` works with the same
//! reducers but is copied whenever a step's snapshot is still referenced.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How an item's key is read (a message's id, for `add_messages`).
pub type KeyFn<T> = for<'a> fn(&'a T) -> Option<&'a str>;

/// Sequences the `append` and `add_messages` reducers can extend.
pub trait SeqLike {
    /// The element type.
    type Item;
    /// Number of items.
    fn seq_len(&self) -> usize;
    /// Append items in order.
    fn extend_items(&mut self, items: Vec<Self::Item>);
    /// The last `n` items, oldest first.
    fn tail(&self, n: usize) -> Box<dyn Iterator<Item = &Self::Item> + '_>;
    /// Item at `idx`.
    fn item(&self, idx: usize) -> Option<&Self::Item>;
    /// Replace the item at `idx`.
    fn set_item(&mut self, idx: usize, item: Self::Item);
    /// Keep only items for which `keep` returns true.
    fn retain_items(&mut self, keep: &mut dyn FnMut(&Self::Item) -> bool);
    /// Position of the last item whose key (by `key_of`) is `key`.
    ///
    /// The default scans from the end; [`Seq`] keeps an index by key instead, so a lookup
    /// does not grow with the sequence.
    fn last_position_by_key(&mut self, key: &str, key_of: KeyFn<Self::Item>) -> Option<usize> {
        (0..self.seq_len())
            .rev()
            .find(|&i| self.item(i).and_then(key_of) == Some(key))
    }
}

impl<T> SeqLike for Vec<T> {
    type Item = T;
    fn seq_len(&self) -> usize {
        self.len()
    }
    fn extend_items(&mut self, items: Vec<T>) {
        self.extend(items);
    }
    fn tail(&self, n: usize) -> Box<dyn Iterator<Item = &T> + '_> {
        let start = self.len().saturating_sub(n);
        Box::new(self[start..].iter())
    }
    fn item(&self, idx: usize) -> Option<&T> {
        self.get(idx)
    }
    fn set_item(&mut self, idx: usize, item: T) {
        if let Some(slot) = self.get_mut(idx) {
            *slot = item;
        }
    }
    fn retain_items(&mut self, keep: &mut dyn FnMut(&T) -> bool) {
        self.retain(|x| keep(x));
    }
}

/// A persistent vector (structurally shared between clones).
///
/// It may carry an index of its items by key (a message's id), built by the first
/// [`SeqLike::last_position_by_key`] and kept by appends and same-key replacements, so
/// `add_messages` finds a message by id without scanning the conversation. The index is
/// shared between clones like the items; equality, hashing and serialisation see only the
/// items.
#[derive(Clone)]
pub struct Seq<T: Clone> {
    items: imbl::Vector<T>,
    keys: Option<KeyIndex<T>>,
}

/// The last position of each key among a sequence's items.
#[derive(Clone)]
struct KeyIndex<T> {
    key_of: KeyFn<T>,
    positions: imbl::HashMap<Arc<str>, usize>,
}

impl<T> KeyIndex<T> {
    fn build<'a>(key_of: KeyFn<T>, items: impl Iterator<Item = &'a T>) -> Self
    where
        T: 'a,
    {
        let mut positions = imbl::HashMap::new();
        for (i, item) in items.enumerate() {
            if let Some(k) = key_of(item) {
                positions.insert(Arc::from(k), i);
            }
        }
        Self { key_of, positions }
    }

    fn note(&mut self, item: &T, at: usize) {
        if let Some(k) = (self.key_of)(item) {
            self.positions.insert(Arc::from(k), at);
        }
    }
}

impl<T: Clone> Seq<T> {
    /// An empty sequence.
    #[must_use]
    pub fn new() -> Self {
        Self::of(imbl::Vector::new())
    }
    fn of(items: imbl::Vector<T>) -> Self {
        Self { items, keys: None }
    }
    /// Number of items.
    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Append one item.
    pub fn push(&mut self, item: T) {
        if let Some(keys) = &mut self.keys {
            keys.note(&item, self.items.len());
        }
        self.items.push_back(item);
    }
    /// Item at `idx`.
    #[must_use]
    pub fn get(&self, idx: usize) -> Option<&T> {
        self.items.get(idx)
    }
    /// The last item.
    #[must_use]
    pub fn last(&self) -> Option<&T> {
        self.items.last()
    }
    /// The first item.
    #[must_use]
    pub fn first(&self) -> Option<&T> {
        self.items.front()
    }
    /// Iterate in order.
    pub fn iter(&self) -> imbl::vector::Iter<'_, T, imbl::shared_ptr::DefaultSharedPtr> {
        self.items.iter()
    }
    /// Iterate in order from item `start` (none when `start` is past the end).
    ///
    /// Unlike `iter().skip(start)`, which steps over the first `start` items one by one,
    /// this starts at `start` directly, so reading the newest items of a long sequence does
    /// not pay for the older ones.
    pub fn iter_from(&self, start: usize) -> imbl::vector::Iter<'_, T, imbl::shared_ptr::DefaultSharedPtr> {
        let start = start.min(self.items.len());
        self.items.focus().narrow(start..).into_iter()
    }
    /// Copy into a `Vec`.
    #[must_use]
    pub fn to_vec(&self) -> Vec<T> {
        // Chunk by chunk: a clone per item, not a tree lookup per item as well.
        let mut out = Vec::with_capacity(self.items.len());
        for chunk in self.items.leaves() {
            out.extend_from_slice(chunk);
        }
        out
    }
    /// The underlying persistent vector.
    #[must_use]
    pub fn as_vector(&self) -> &imbl::Vector<T> {
        &self.items
    }
}

impl<T: Clone + PartialEq> PartialEq for Seq<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T: Clone + Eq> Eq for Seq<T> {}

impl<T: Clone + Hash> Hash for Seq<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.items.hash(state);
    }
}

impl<T: Clone> Default for Seq<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + fmt::Debug> fmt::Debug for Seq<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

impl<T: Clone> SeqLike for Seq<T> {
    type Item = T;
    fn seq_len(&self) -> usize {
        self.items.len()
    }
    fn extend_items(&mut self, items: Vec<T>) {
        if let Some(keys) = &mut self.keys {
            for (i, it) in items.iter().enumerate() {
                keys.note(it, self.items.len() + i);
            }
        }
        if items.len() > 16 {
            // Concatenating persistent vectors is O(log n); pushing one by one is not.
            self.items.append(items.into_iter().collect());
        } else {
            for it in items {
                self.items.push_back(it);
            }
        }
    }
    fn tail(&self, n: usize) -> Box<dyn Iterator<Item = &T> + '_> {
        Box::new(self.iter_from(self.items.len().saturating_sub(n)))
    }
    fn item(&self, idx: usize) -> Option<&T> {
        self.items.get(idx)
    }
    fn set_item(&mut self, idx: usize, item: T) {
        let Some(old) = self.items.get(idx) else {
            return;
        };
        if let Some(keys) = &self.keys {
            if (keys.key_of)(old) != (keys.key_of)(&item) {
                // The old key may still be held by an earlier item: rebuild when asked.
                self.keys = None;
            }
        }
        self.items.set(idx, item);
    }
    fn retain_items(&mut self, keep: &mut dyn FnMut(&T) -> bool) {
        self.keys = None;
        self.items.retain(|x| keep(x));
    }
    fn last_position_by_key(&mut self, key: &str, key_of: KeyFn<T>) -> Option<usize> {
        let keys = match &mut self.keys {
            Some(k) if std::ptr::fn_addr_eq(k.key_of, key_of) => k,
            slot => slot.insert(KeyIndex::build(key_of, self.items.iter())),
        };
        keys.positions.get(key).copied()
    }
}

impl<T: Clone> From<Vec<T>> for Seq<T> {
    fn from(v: Vec<T>) -> Self {
        Self::of(v.into_iter().collect())
    }
}

impl<T: Clone> FromIterator<T> for Seq<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self::of(iter.into_iter().collect())
    }
}

impl<'a, T: Clone> IntoIterator for &'a Seq<T> {
    type Item = &'a T;
    type IntoIter = imbl::vector::Iter<'a, T, imbl::shared_ptr::DefaultSharedPtr>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<T: Clone + Serialize> Serialize for Seq<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.items.iter())
    }
}

impl<'de, T: Clone + Deserialize<'de>> Deserialize<'de> for Seq<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<T>::deserialize(d).map(Self::from)
    }
}

impl<T: Clone + schemars::JsonSchema> schemars::JsonSchema for Seq<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Vec<T> as schemars::JsonSchema>::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<T> as schemars::JsonSchema>::json_schema(generator)
    }
    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iter_from_and_tail_read_what_skip_reads() {
        // Long enough for a tree of chunks, not only the inline head.
        let seq: Seq<usize> = (0..5_000).collect();
        for start in [0, 1, 63, 64, 65, 1_000, 4_999, 5_000, 7_000] {
            let a: Vec<usize> = seq.iter_from(start).copied().collect();
            let b: Vec<usize> = seq.iter().skip(start).copied().collect();
            assert_eq!(a, b, "from {start}");
            let t: Vec<usize> = seq.tail(start).copied().collect();
            let expected: Vec<usize> = seq
                .iter()
                .skip(5_000usize.saturating_sub(start))
                .copied()
                .collect();
            assert_eq!(t, expected, "tail {start}");
        }
        assert_eq!(Seq::<usize>::new().iter_from(3).count(), 0);
        assert_eq!(seq.to_vec(), seq.iter().copied().collect::<Vec<_>>());
        let mut grown = seq.clone();
        grown.push(5_000);
        assert_eq!(grown.to_vec(), (0..5_001).collect::<Vec<_>>());
    }
}
