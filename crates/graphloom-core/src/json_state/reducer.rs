//! How a channel of a [`JsonState`](super::JsonState) combines writes: the built-in
//! reducers by name, custom functions, and the slot each channel keeps its value in.

use super::update::JsonWrite;
use crate::change::ReducerError;
use crate::messages::{add_messages_into, MessageLike};
use crate::seq::{Seq, SeqLike};
use crate::state::{FieldChange, StateError};
use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;

/// A custom JSON reducer: `(current, update) -> new value`, or why the update is refused
/// (`ReducerError::from("...")`).
pub type JsonReduceFn = Arc<dyn Fn(&Value, Value) -> Result<Value, ReducerError> + Send + Sync>;

/// A custom JSON reducer over shared values: `(current, update) -> new value`, where keeping
/// either side costs a pointer copy.
pub type JsonReduceSharedFn =
    Arc<dyn Fn(&Arc<Value>, Arc<Value>) -> Result<Arc<Value>, ReducerError> + Send + Sync>;

/// How a JSON channel combines writes.
#[derive(Clone)]
pub enum JsonReducer {
    /// One value per step; several writers are a conflict.
    LastValue,
    /// A list; writes (a list, or one item) are appended.
    Append,
    /// Numbers add, strings and lists concatenate.
    Add,
    /// Objects merge, later keys winning.
    Merge,
    /// Chat messages merged by id (see [`crate::reducers::AddMessages`]).
    AddMessages,
    /// A custom function.
    Custom(JsonReduceFn),
    /// A custom function over shared values (no copy when it keeps one side).
    CustomShared(JsonReduceSharedFn),
}

impl fmt::Debug for JsonReducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl JsonReducer {
    /// The reducer's name (as [`JsonReducer::by_name`] reads it).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            JsonReducer::LastValue => "last",
            JsonReducer::Append => "append",
            JsonReducer::Add => "add",
            JsonReducer::Merge => "merge",
            JsonReducer::AddMessages => "add_messages",
            JsonReducer::Custom(_) | JsonReducer::CustomShared(_) => "custom",
        }
    }
    /// A built-in reducer by name.
    #[must_use]
    pub fn by_name(name: &str) -> Option<Self> {
        Some(match name {
            "last" | "last_value" => JsonReducer::LastValue,
            "append" => JsonReducer::Append,
            "add" => JsonReducer::Add,
            "merge" => JsonReducer::Merge,
            "add_messages" => JsonReducer::AddMessages,
            _ => return None,
        })
    }
    pub(super) fn is_seq(&self) -> bool {
        matches!(self, JsonReducer::Append | JsonReducer::AddMessages)
    }
}

/// Where a [`JsonState`](super::JsonState) keeps one channel's value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Slot {
    /// A value, shared: cloning the state (every step that merges) copies a pointer.
    Value(Arc<Value>),
    /// List channels, and last-value channels written with shared items, hold shared
    /// items: writing a list a node read copies pointers only.
    Seq(Seq<Arc<Value>>),
}

impl MessageLike for Arc<Value> {
    fn message_id(&self) -> Option<&str> {
        self.get("id").and_then(Value::as_str)
    }
    fn set_message_id(&mut self, id: String) {
        if let Value::Object(m) = Arc::make_mut(self) {
            m.insert("id".into(), Value::String(id));
        }
    }
    fn is_removal(&self) -> bool {
        self.get("type").and_then(Value::as_str) == Some("remove")
    }
}

impl MessageLike for Value {
    fn message_id(&self) -> Option<&str> {
        self.get("id").and_then(Value::as_str)
    }
    fn set_message_id(&mut self, id: String) {
        if let Value::Object(m) = self {
            m.insert("id".into(), Value::String(id));
        }
    }
    fn is_removal(&self) -> bool {
        self.get("type").and_then(Value::as_str) == Some("remove")
    }
}

/// A message item of an `add_messages` channel in the stored form: what clients send (a
/// string, a `[role, content]` pair, OpenAI's `role` form) is rewritten, stored forms pass
/// through without a copy.
pub(super) fn canonical_item(item: Arc<Value>) -> Result<Arc<Value>, serde_json::Error> {
    if crate::messages::input::is_canonical(&item) {
        return Ok(item);
    }
    crate::messages::canonical_message_json(Arc::unwrap_or_clone(item)).map(Arc::new)
}

fn add_json(cur: &Value, upd: Value) -> Result<Value, ReducerError> {
    Ok(match (cur, upd) {
        (Value::Null, u) => u,
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => json!(x.checked_add(y).ok_or("integer overflow")?),
            _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
        },
        (Value::String(a), Value::String(b)) => Value::String(format!("{a}{b}")),
        (Value::Array(a), Value::Array(b)) => Value::Array(a.iter().cloned().chain(b).collect()),
        (a, b) => return Err(ReducerError::new(format!("cannot add {b} to {a}"))),
    })
}

/// Fold one write into channel `name`'s slot with its reducer.
pub(super) fn reduce(
    name: &str,
    reducer: &JsonReducer,
    slot: &mut Slot,
    upd: JsonWrite,
) -> Result<FieldChange, StateError> {
    let err = |e: ReducerError| StateError::Reducer {
        field: name.to_owned(),
        message: e.to_string(),
    };
    match (reducer, slot) {
        (JsonReducer::LastValue, slot) => {
            *slot = match upd {
                JsonWrite::Items(items) => Slot::Seq(items.into_iter().collect()),
                JsonWrite::Value(v) | JsonWrite::Overwrite(v) => Slot::Value(Arc::new(v)),
                JsonWrite::Shared(v) => Slot::Value(v),
            };
            Ok(FieldChange::Replaced)
        }
        (JsonReducer::Append, Slot::Seq(s)) => {
            let items = upd.into_items();
            let n = items.len();
            s.extend_items(items);
            Ok(FieldChange::Appended(n))
        }
        (JsonReducer::AddMessages, Slot::Seq(s)) => {
            let items = upd
                .into_items()
                .into_iter()
                .map(canonical_item)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| err(ReducerError::new(e.to_string())))?;
            add_messages_into(s, items).map_err(err)
        }
        (JsonReducer::Add, Slot::Value(v)) => {
            *v = Arc::new(add_json(v, upd.into_value()).map_err(err)?);
            Ok(FieldChange::Replaced)
        }
        (JsonReducer::Merge, Slot::Value(v)) => {
            match (Arc::make_mut(v), upd.into_value()) {
                (Value::Object(cur), Value::Object(u)) => cur.extend(u),
                (v, u) if v.is_null() => *v = u,
                (_, u) => return Err(err(ReducerError::new(format!("cannot merge {u} into an object")))),
            }
            Ok(FieldChange::Replaced)
        }
        (JsonReducer::Custom(f), Slot::Value(v)) => {
            *v = Arc::new(f(v, upd.into_value()).map_err(err)?);
            Ok(FieldChange::Replaced)
        }
        (JsonReducer::CustomShared(f), Slot::Value(v)) => {
            *v = f(v, upd.into_shared()).map_err(err)?;
            Ok(FieldChange::Replaced)
        }
        _ => Err(err(ReducerError::new(
            "internal: slot kind does not match reducer",
        ))),
    }
}
