//! [`Seq`], a persistent sequence for append-heavy fields.
//!
//! Cloning a `Seq` is O(1) and pushing onto a clone does not copy the items: the state of
//! the previous superstep (still held by a checkpoint or a stream consumer) and the new one
//! share structure. Use it for message lists and logs; a plain `Vec` works with the same
//! reducers but is copied whenever a step's snapshot is still referenced.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

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
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Seq<T: Clone>(imbl::Vector<T>);

impl<T: Clone> Seq<T> {
    /// An empty sequence.
    #[must_use]
    pub fn new() -> Self {
        Self(imbl::Vector::new())
    }
    /// Number of items.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Append one item.
    pub fn push(&mut self, item: T) {
        self.0.push_back(item);
    }
    /// Item at `idx`.
    #[must_use]
    pub fn get(&self, idx: usize) -> Option<&T> {
        self.0.get(idx)
    }
    /// The last item.
    #[must_use]
    pub fn last(&self) -> Option<&T> {
        self.0.last()
    }
    /// The first item.
    #[must_use]
    pub fn first(&self) -> Option<&T> {
        self.0.front()
    }
    /// Iterate in order.
    pub fn iter(&self) -> imbl::vector::Iter<'_, T, imbl::shared_ptr::DefaultSharedPtr> {
        self.0.iter()
    }
    /// Copy into a `Vec`.
    #[must_use]
    pub fn to_vec(&self) -> Vec<T> {
        self.0.iter().cloned().collect()
    }
    /// The underlying persistent vector.
    #[must_use]
    pub fn as_vector(&self) -> &imbl::Vector<T> {
        &self.0
    }
}

impl<T: Clone> Default for Seq<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + fmt::Debug> fmt::Debug for Seq<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<T: Clone> SeqLike for Seq<T> {
    type Item = T;
    fn seq_len(&self) -> usize {
        self.0.len()
    }
    fn extend_items(&mut self, items: Vec<T>) {
        if items.len() > 16 {
            // Concatenating persistent vectors is O(log n); pushing one by one is not.
            self.0.append(items.into_iter().collect());
        } else {
            for it in items {
                self.0.push_back(it);
            }
        }
    }
    fn tail(&self, n: usize) -> Box<dyn Iterator<Item = &T> + '_> {
        let start = self.0.len().saturating_sub(n);
        Box::new(self.0.iter().skip(start))
    }
    fn item(&self, idx: usize) -> Option<&T> {
        self.0.get(idx)
    }
    fn set_item(&mut self, idx: usize, item: T) {
        if idx < self.0.len() {
            self.0.set(idx, item);
        }
    }
    fn retain_items(&mut self, keep: &mut dyn FnMut(&T) -> bool) {
        self.0.retain(|x| keep(x));
    }
}

impl<T: Clone> From<Vec<T>> for Seq<T> {
    fn from(v: Vec<T>) -> Self {
        Self(v.into_iter().collect())
    }
}

impl<T: Clone> FromIterator<T> for Seq<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl<'a, T: Clone> IntoIterator for &'a Seq<T> {
    type Item = &'a T;
    type IntoIter = imbl::vector::Iter<'a, T, imbl::shared_ptr::DefaultSharedPtr>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T: Clone + Serialize> Serialize for Seq<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter())
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
