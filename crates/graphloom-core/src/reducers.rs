//! Reducers: how the writes of one superstep combine with a field's value.
//!
//! `#[derive(State)]` picks one per field with `#[reducer(...)]`:
//!
//! | attribute | reducer | update type | several writers in one step |
//! |---|---|---|---|
//! | (none) or `last` | [`LastValue`] | `T` | error naming field and nodes |
//! | `append` | [`Append`] | `Vec<Item>` | concatenated in merge order |
//! | `add` | [`Add`] | `T` | summed |
//! | `merge` | [`MergeMap`] | `T` (a map) | later keys win |
//! | `add_messages` | [`AddMessages`] | `Vec<M>` | merged by id |
//! | `with = path` | custom `fn(&mut T, T)` | `T` | folded in merge order |

pub use crate::change::ReducerError;
use crate::messages::{add_messages_into, MessageLike};
use crate::seq::SeqLike;
use crate::state::FieldChange;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// A reducer for fields of type `T`.
pub trait Reducer<T> {
    /// What a node writes to the field.
    type Update: Clone + Send + Sync + Serialize + DeserializeOwned + 'static;
    /// True when the field keeps one value per step and several writers are a conflict.
    const SINGLE_WRITER: bool = false;
    /// Fold one update into the current value.
    ///
    /// # Errors
    /// When the update cannot be folded in (the merge then fails naming the field).
    fn reduce(current: &mut T, update: Self::Update) -> Result<FieldChange, ReducerError>;
    /// The last `n` items as JSON when the field is a sequence (append-only storage).
    fn tail_json(_current: &T, _n: usize) -> Option<Result<Vec<Value>, serde_json::Error>> {
        None
    }
}

/// Keep the last value written. Two writes in one step are a conflict.
#[derive(Debug, Clone, Copy, Default)]
pub struct LastValue;

impl<T: Clone + Send + Sync + Serialize + DeserializeOwned + 'static> Reducer<T> for LastValue {
    type Update = T;
    const SINGLE_WRITER: bool = true;
    fn reduce(current: &mut T, update: T) -> Result<FieldChange, ReducerError> {
        *current = update;
        Ok(FieldChange::Replaced)
    }
}

/// Append the written items to a sequence.
#[derive(Debug, Clone, Copy, Default)]
pub struct Append;

impl<S> Reducer<S> for Append
where
    S: SeqLike,
    S::Item: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    type Update = Vec<S::Item>;
    fn reduce(current: &mut S, update: Vec<S::Item>) -> Result<FieldChange, ReducerError> {
        let n = update.len();
        current.extend_items(update);
        Ok(FieldChange::Appended(n))
    }
    fn tail_json(current: &S, n: usize) -> Option<Result<Vec<Value>, serde_json::Error>> {
        Some(current.tail(n).map(serde_json::to_value).collect())
    }
}

/// Add the written value (numbers, or anything with `+=`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Add;

impl<T> Reducer<T> for Add
where
    T: Clone + Send + Sync + Serialize + DeserializeOwned + std::ops::AddAssign + 'static,
{
    type Update = T;
    fn reduce(current: &mut T, update: T) -> Result<FieldChange, ReducerError> {
        *current += update;
        Ok(FieldChange::Replaced)
    }
}

/// Maps that can absorb another map, later keys winning.
pub trait MapLike: Sized {
    /// Insert every entry of `other`, replacing existing keys.
    fn merge_from(&mut self, other: Self);
}

impl<K: Ord, V> MapLike for std::collections::BTreeMap<K, V> {
    fn merge_from(&mut self, other: Self) {
        self.extend(other);
    }
}
impl<K: std::hash::Hash + Eq, V, H: std::hash::BuildHasher> MapLike for std::collections::HashMap<K, V, H> {
    fn merge_from(&mut self, other: Self) {
        self.extend(other);
    }
}
impl<K: Ord + Clone, V: Clone> MapLike for imbl::OrdMap<K, V> {
    fn merge_from(&mut self, other: Self) {
        self.extend(other);
    }
}
impl MapLike for serde_json::Map<String, Value> {
    fn merge_from(&mut self, other: Self) {
        self.extend(other);
    }
}

/// Merge written maps into the field, later keys winning.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergeMap;

impl<T> Reducer<T> for MergeMap
where
    T: MapLike + Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    type Update = T;
    fn reduce(current: &mut T, update: T) -> Result<FieldChange, ReducerError> {
        current.merge_from(update);
        Ok(FieldChange::Replaced)
    }
}

/// Merge messages by id: replace a message with the same id, remove on a removal marker,
/// append new ones, assigning ids to those that have none.
#[derive(Debug, Clone, Copy, Default)]
pub struct AddMessages;

impl<S> Reducer<S> for AddMessages
where
    S: SeqLike,
    S::Item: MessageLike + Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    type Update = Vec<S::Item>;
    fn reduce(current: &mut S, update: Vec<S::Item>) -> Result<FieldChange, ReducerError> {
        add_messages_into(current, update)
    }
    fn tail_json(current: &S, n: usize) -> Option<Result<Vec<Value>, serde_json::Error>> {
        Some(current.tail(n).map(serde_json::to_value).collect())
    }
}
