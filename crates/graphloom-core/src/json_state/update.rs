//! [`JsonUpdate`]: a partial update of a [`JsonState`](super::JsonState), one
//! [`JsonWrite`] per channel.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One channel's write in a [`JsonUpdate`].
#[derive(Clone, Debug, PartialEq)]
pub enum JsonWrite {
    /// A JSON value (for list channels: a list of items, or one item).
    Value(Value),
    /// Shared items for a list channel (no copy of the items).
    Items(Vec<Arc<Value>>),
    /// One shared value: a last-value channel (or a [`JsonReducer::CustomShared`] one)
    /// keeps the pointer; other reducers see the value.
    Shared(Arc<Value>),
    /// The channel's new value, past its reducer (LangGraph's `Overwrite`): it replaces
    /// what the channel holds and every other write to it in the same step. Two in one
    /// step are [`StateError::OverwriteConflict`](crate::StateError::OverwriteConflict).
    /// In JSON it is `{"__overwrite__": value}`.
    Overwrite(Value),
}

/// The key of LangGraph's serialised `Overwrite`: `{"__overwrite__": value}`.
pub const OVERWRITE_KEY: &str = "__overwrite__";

impl JsonWrite {
    pub(super) fn into_value(self) -> Value {
        match self {
            JsonWrite::Value(v) => v,
            JsonWrite::Items(items) => Value::Array(items.iter().map(|v| (**v).clone()).collect()),
            JsonWrite::Shared(v) => Arc::unwrap_or_clone(v),
            JsonWrite::Overwrite(v) => v,
        }
    }
    /// The value a write overwrites its channel with, if it is an overwrite: a
    /// [`JsonWrite::Overwrite`], or a value in LangGraph's serialised form
    /// (`{"__overwrite__": v}`, or `{"type": "__overwrite__", "value": v}`).
    pub(super) fn overwrite(&self) -> Option<&Value> {
        match self {
            JsonWrite::Overwrite(v) => Some(v),
            JsonWrite::Value(v) => crate::state::overwrite_of(v),
            JsonWrite::Shared(v) => crate::state::overwrite_of(v),
            JsonWrite::Items(_) => None,
        }
    }
    pub(super) fn into_shared(self) -> Arc<Value> {
        match self {
            JsonWrite::Shared(v) => v,
            other => Arc::new(other.into_value()),
        }
    }
    pub(super) fn to_value(&self) -> Value {
        self.clone().into_value()
    }
    pub(super) fn into_items(self) -> Vec<Arc<Value>> {
        match self {
            JsonWrite::Items(items) => items,
            JsonWrite::Value(Value::Array(a)) => a.into_iter().map(Arc::new).collect(),
            JsonWrite::Value(one) => vec![Arc::new(one)],
            JsonWrite::Shared(v) => JsonWrite::Value(Arc::unwrap_or_clone(v)).into_items(),
            JsonWrite::Overwrite(v) => JsonWrite::Value(v).into_items(),
        }
    }
}

/// A partial update of a [`JsonState`](super::JsonState): channel name to write.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonUpdate(pub(super) BTreeMap<String, JsonWrite>);

impl JsonUpdate {
    /// An empty update.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// Write a JSON value to `channel`.
    #[must_use]
    pub fn set(mut self, channel: impl Into<String>, value: impl Into<Value>) -> Self {
        self.0.insert(channel.into(), JsonWrite::Value(value.into()));
        self
    }
    /// Write a shared value to `channel` without copying it: a last-value channel (and a
    /// [`JsonReducer::CustomShared`] one) keeps the pointer; other reducers see the value.
    #[must_use]
    pub fn set_shared(mut self, channel: impl Into<String>, value: Arc<Value>) -> Self {
        self.0.insert(channel.into(), JsonWrite::Shared(value));
        self
    }
    /// Append shared items to list channel `channel` (items read from another list are not
    /// copied).
    #[must_use]
    pub fn extend(mut self, channel: impl Into<String>, items: impl IntoIterator<Item = Arc<Value>>) -> Self {
        self.0
            .insert(channel.into(), JsonWrite::Items(items.into_iter().collect()));
        self
    }
    /// Write a list of shared items to `channel` without copying them: a list channel
    /// appends them (as [`JsonUpdate::extend`]), a last-value channel holds them as its new
    /// value (read back with [`JsonState::items`](super::JsonState::items)); other reducers see a JSON array.
    #[must_use]
    pub fn set_items(self, channel: impl Into<String>, items: impl IntoIterator<Item = Arc<Value>>) -> Self {
        self.extend(channel, items)
    }
    /// Replace `channel`'s value with `value`, past its reducer (LangGraph's
    /// `Overwrite(value)`): an append or `add_messages` channel then holds exactly `value`
    /// (a list), an `add` channel holds `value`, whatever else the step wrote to it. Two
    /// overwrites of one channel in a step are a conflict error. On a last-value channel it
    /// is a plain write.
    #[must_use]
    pub fn overwrite(mut self, channel: impl Into<String>, value: impl Into<Value>) -> Self {
        self.0.insert(channel.into(), JsonWrite::Overwrite(value.into()));
        self
    }
    /// The channels written.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }
    /// Whether nothing is written.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Map<String, Value>> for JsonUpdate {
    fn from(m: Map<String, Value>) -> Self {
        Self(m.into_iter().map(|(k, v)| (k, JsonWrite::Value(v))).collect())
    }
}
