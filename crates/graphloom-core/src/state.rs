//! The state a graph carries from superstep to superstep.
//!
//! A state is a set of named fields ("channels"), each with a reducer that says how the
//! writes of one superstep combine with the current value. Typed states implement [`State`]
//! through `#[derive(State)]`; graphs defined at run time use [`crate::JsonState`].
//!
//! The executor never serialises a typed state inside its loop: JSON appears only where a
//! value leaves the process (a checkpoint, a stream consumer that asks for JSON, the server).

pub use crate::change::{Changed, FieldChange};
use crate::messages::Message;
use serde_json::Value;

/// A task's update, tagged with the node that wrote it (for conflict messages).
#[derive(Debug, Clone)]
pub struct TaskUpdate<'a, U> {
    /// The node whose task produced the update.
    pub node: &'a str,
    /// The partial update itself.
    pub update: U,
}

/// Errors a state raises while merging or decoding.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum StateError {
    /// Two tasks of one superstep wrote a field that keeps only its last value.
    #[error("field `{field}` keeps one value per step but received several, from nodes {nodes:?}; give it a reducer or write it from one node")]
    Conflict {
        /// The field that was written twice.
        field: String,
        /// The nodes that wrote it, in merge order.
        nodes: Vec<String>,
    },
    /// A value (from a checkpoint, a request or an update) did not fit the field's type.
    #[error("field `{field}`: {message}")]
    Decode {
        /// The field being decoded.
        field: String,
        /// What was wrong.
        message: String,
    },
    /// Two tasks of one superstep overwrote the same field (LangGraph's `Overwrite`): only
    /// one value can replace a field per step.
    #[error(
        "field `{field}` can receive only one Overwrite per step but received several, from nodes {nodes:?}"
    )]
    OverwriteConflict {
        /// The field overwritten twice.
        field: String,
        /// The nodes that overwrote it, in merge order.
        nodes: Vec<String>,
    },
    /// An update named a field the state does not have.
    #[error("unknown field `{0}`")]
    UnknownField(String),
    /// A reducer rejected the update (for example removing a message id that is absent).
    #[error("field `{field}`: {message}")]
    Reducer {
        /// The field whose reducer failed.
        field: String,
        /// Why it failed.
        message: String,
    },
}

impl StateError {
    /// Whether this is an invalid update of one step, what LangGraph raises as
    /// `InvalidUpdateError`: several values for a field that keeps one per step
    /// ([`StateError::Conflict`]) or several `Overwrite`s of one field
    /// ([`StateError::OverwriteConflict`]). [`crate::Error::is_invalid_update`] finds it
    /// in a run's error.
    #[must_use]
    pub fn is_invalid_update(&self) -> bool {
        matches!(
            self,
            StateError::Conflict { .. } | StateError::OverwriteConflict { .. }
        )
    }
}

/// The state of a graph.
///
/// Implemented by `#[derive(State)]` for structs, and by [`crate::JsonState`]. All methods
/// that take `&self` and speak of fields work on the field list of this value, so a dynamic
/// state can carry its own schema.
pub trait State: Clone + Send + Sync + 'static {
    /// A partial update: every field optional, each in the form its reducer accepts.
    type Update: Clone + Send + Sync + 'static;

    /// Number of fields.
    fn field_count(&self) -> usize;
    /// Name of field `idx` (declaration order).
    fn field_name(&self, idx: usize) -> &str;
    /// Index of the field called `name`.
    fn field_index(&self, name: &str) -> Option<usize> {
        (0..self.field_count()).find(|&i| self.field_name(i) == name)
    }

    /// Merge the updates of one superstep, in the order given (the executor sorts them
    /// deterministically). Records every changed field in `changes`. A failed merge leaves
    /// `self` in an unspecified but valid state; the executor discards it.
    fn merge(
        &mut self,
        updates: Vec<TaskUpdate<'_, Self::Update>>,
        changes: &mut Vec<Changed>,
    ) -> Result<(), StateError>;

    /// The name of field `idx`'s reducer: `last`, `append`, `add`, `merge`, `add_messages`
    /// or `custom` (what `#[reducer(..)]` or [`crate::JsonReducer::name`] says). Code that
    /// combines JSON updates before they reach the merge (the tool node, joining the
    /// `Command`s of parallel tool calls) reads it. The default knows none.
    fn field_reducer(&self, idx: usize) -> Option<&'static str> {
        let _ = idx;
        None
    }

    /// Names of the fields an update writes.
    fn update_fields(&self, update: &Self::Update) -> Vec<String>;

    /// Field `idx` as JSON.
    fn field_to_json(&self, idx: usize) -> Result<Value, StateError>;
    /// Field `idx` as the JSON items it shares with the state, when it is a list of shared
    /// JSON values (`Seq<Arc<Value>>`, or a list channel of [`crate::JsonState`]): a
    /// checkpoint keeps the pointers instead of copying every item. `None` otherwise (the
    /// default); then [`State::field_to_json`] is used.
    fn field_shared_items(&self, idx: usize) -> Option<Vec<std::sync::Arc<Value>>> {
        let _ = idx;
        None
    }
    /// The last `n` items of a sequence field as JSON, or `None` if the field is not a
    /// sequence (then the whole field is stored).
    fn field_tail_to_json(&self, idx: usize, n: usize) -> Option<Result<Vec<Value>, StateError>>;
    /// Replace field `idx` with a JSON value (used when restoring a checkpoint).
    fn set_field_from_json(&mut self, idx: usize, value: Value) -> Result<(), StateError>;

    /// An update as JSON (pending writes, update streams).
    fn update_to_json(&self, update: &Self::Update) -> Result<Value, StateError>;
    /// An update from JSON (a request body, a stored pending write). Unknown keys are an error.
    fn update_from_json(&self, value: Value) -> Result<Self::Update, StateError>;

    /// JSON Schema of the state (object with one property per field).
    fn json_schema(&self) -> Value;

    /// The whole state as a JSON object.
    fn to_json(&self) -> Result<Value, StateError> {
        let mut map = serde_json::Map::with_capacity(self.field_count());
        for i in 0..self.field_count() {
            map.insert(self.field_name(i).to_owned(), self.field_to_json(i)?);
        }
        Ok(Value::Object(map))
    }

    /// A state of the same shape with every field at its default.
    fn empty_like(&self) -> Self;

    /// The chat messages `update` writes (fields whose update is a message or a list of
    /// messages), as JSON, after giving each message without an id a fresh one in the
    /// update itself. `messages` stream mode emits them; the default finds none.
    fn update_messages(&self, update: &mut Self::Update) -> Vec<Value> {
        let _ = update;
        Vec::new()
    }

    /// Whether a field of messages holds one with this id (`messages` stream mode does not
    /// emit what a node had in its input). The default says no.
    fn has_message(&self, id: &str) -> bool {
        let _ = id;
        false
    }

    /// A state of the same shape built from a JSON object; missing fields keep defaults.
    fn state_from_json(&self, value: Value) -> Result<Self, StateError> {
        let mut out = self.empty_like();
        let Value::Object(map) = value else {
            return Err(StateError::Decode {
                field: String::new(),
                message: "state must be a JSON object".into(),
            });
        };
        for (k, v) in map {
            let idx = out
                .field_index(&k)
                .ok_or_else(|| StateError::UnknownField(k.clone()))?;
            out.set_field_from_json(idx, v)?;
        }
        Ok(out)
    }
}

/// Helper for derived code: the items of a field that is a list of shared JSON values
/// (`Seq<Arc<Value>>` or `Option<Seq<Arc<Value>>>` holding one), without copying them.
#[must_use]
pub fn shared_items<T: 'static>(field: &T) -> Option<Vec<std::sync::Arc<Value>>> {
    use crate::seq::Seq;
    use std::any::Any;
    use std::sync::Arc;
    let any: &dyn Any = field;
    if let Some(seq) = any.downcast_ref::<Seq<Arc<Value>>>() {
        return Some(seq.iter().cloned().collect());
    }
    if let Some(Some(seq)) = any.downcast_ref::<Option<Seq<Arc<Value>>>>() {
        return Some(seq.iter().cloned().collect());
    }
    None
}

/// Helper for derived code: the messages of one field's write (a [`Message`], a list of
/// them, or an optional one), each given an id when it has none, pushed to `out` as JSON.
pub fn update_messages<T: 'static>(write: &mut Option<T>, out: &mut Vec<Value>) {
    use crate::seq::Seq;
    use std::any::Any;
    let Some(w) = write else { return };
    let any: &mut dyn Any = w;
    let mut push = |m: &mut Message| {
        if m.id.is_none() {
            m.id = Some(uuid::Uuid::new_v4().to_string());
        }
        if let Ok(v) = serde_json::to_value(&*m) {
            out.push(v);
        }
    };
    if let Some(list) = any.downcast_mut::<Vec<Message>>() {
        list.iter_mut().for_each(push);
    } else if let Some(m) = any.downcast_mut::<Message>() {
        push(m);
    } else if let Some(Some(m)) = any.downcast_mut::<Option<Message>>() {
        push(m);
    } else if let Some(seq) = any.downcast_mut::<Seq<Message>>() {
        let mut items = seq.to_vec();
        items.iter_mut().for_each(push);
        *seq = items.into();
    }
}

/// Helper for derived code: whether a field (a list of [`Message`]s, or one) holds a
/// message with `id`.
#[must_use]
pub fn holds_message<T: 'static>(field: &T, id: &str) -> bool {
    use crate::seq::Seq;
    use std::any::Any;
    let any: &dyn Any = field;
    let is = |m: &Message| m.id.as_deref() == Some(id);
    if let Some(seq) = any.downcast_ref::<Seq<Message>>() {
        return seq.iter().rev().any(is);
    }
    if let Some(list) = any.downcast_ref::<Vec<Message>>() {
        return list.iter().rev().any(is);
    }
    if let Some(m) = any.downcast_ref::<Message>() {
        return is(m);
    }
    if let Some(Some(m)) = any.downcast_ref::<Option<Message>>() {
        return is(m);
    }
    false
}

/// Helper for derived code: decode a field from JSON with a message naming the field.
pub fn decode_field<T: serde::de::DeserializeOwned>(field: &str, value: Value) -> Result<T, StateError> {
    serde_json::from_value(value).map_err(|e| StateError::Decode {
        field: field.to_owned(),
        message: e.to_string(),
    })
}

/// Helper for derived code: encode a field as JSON with a message naming the field.
pub fn encode_field<T: serde::Serialize + ?Sized>(field: &str, value: &T) -> Result<Value, StateError> {
    serde_json::to_value(value).map_err(|e| StateError::Decode {
        field: field.to_owned(),
        message: e.to_string(),
    })
}

/// The value a JSON write overwrites its field with, when it is in LangGraph's serialised
/// `Overwrite` form: `{"__overwrite__": value}`, or `{"type": "__overwrite__", "value":
/// value}` (what a dataclass `Overwrite` becomes in JSON).
#[must_use]
pub fn overwrite_of(value: &Value) -> Option<&Value> {
    let Value::Object(m) = value else { return None };
    if m.len() == 1 {
        if let Some(v) = m.get(crate::json_state::OVERWRITE_KEY) {
            return Some(v);
        }
    }
    if m.get("type").and_then(Value::as_str) == Some(crate::json_state::OVERWRITE_KEY) {
        return m.get("value");
    }
    None
}

/// Helper for derived code: split a field's JSON write into an overwrite (`Ok`) or a
/// write through the reducer (`Err`).
pub fn split_overwrite(value: Value) -> Result<Value, Value> {
    if overwrite_of(&value).is_none() {
        return Err(value);
    }
    match value {
        Value::Object(mut m) => match m.remove(crate::json_state::OVERWRITE_KEY) {
            Some(v) => Ok(v),
            None => Ok(m.remove("value").unwrap_or(Value::Null)),
        },
        other => Err(other),
    }
}

/// Helper for derived code: an overwrite as JSON (`{"__overwrite__": value}`).
pub fn overwrite_to_json<T: serde::Serialize + ?Sized>(field: &str, value: &T) -> Result<Value, StateError> {
    let mut m = serde_json::Map::with_capacity(1);
    m.insert(
        crate::json_state::OVERWRITE_KEY.to_owned(),
        encode_field(field, value)?,
    );
    Ok(Value::Object(m))
}
