//! [`JsonState`]: a state of JSON channels with named reducers, for graphs defined at run
//! time and for the server.
//!
//! ```
//! use graphloom_core::{JsonReducer, JsonState, State};
//! let shape = JsonState::builder()
//!     .field("messages", JsonReducer::AddMessages)
//!     .field("topic", JsonReducer::LastValue)
//!     .build();
//! assert_eq!(shape.field_count(), 2);
//! ```

mod reducer;
mod update;

use self::reducer::{canonical_item, reduce, Slot};
pub use self::reducer::{JsonReduceFn, JsonReduceSharedFn, JsonReducer};
pub use self::update::{JsonUpdate, JsonWrite, OVERWRITE_KEY};
use crate::messages::MessageLike;
use crate::seq::{Seq, SeqLike};
use crate::state::{Changed, FieldChange, State, StateError, TaskUpdate};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The channels of a [`JsonState`].
#[derive(Debug)]
pub struct JsonSchemaSpec {
    fields: Vec<(String, JsonReducer)>,
    index: HashMap<String, usize>,
}

/// Builds a [`JsonState`] shape.
#[derive(Debug, Default)]
#[must_use]
pub struct JsonStateBuilder {
    fields: Vec<(String, JsonReducer)>,
}

impl JsonStateBuilder {
    /// Add a channel.
    pub fn field(mut self, name: impl Into<String>, reducer: JsonReducer) -> Self {
        self.fields.push((name.into(), reducer));
        self
    }
    /// The empty state of this shape.
    pub fn build(self) -> JsonState {
        let index = self
            .fields
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        let spec = Arc::new(JsonSchemaSpec {
            fields: self.fields,
            index,
        });
        JsonState::empty_of(spec)
    }
}

impl From<JsonUpdate> for crate::types::NodeOutput<JsonState> {
    fn from(u: JsonUpdate) -> Self {
        crate::types::NodeOutput::Update(u)
    }
}

/// A state of JSON channels. Cloning is cheap for list channels (persistent sequences).
#[derive(Clone)]
pub struct JsonState {
    spec: Arc<JsonSchemaSpec>,
    slots: Vec<Slot>,
}

impl fmt::Debug for JsonState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_json() {
            Ok(v) => write!(f, "JsonState({v})"),
            Err(_) => f.write_str("JsonState(..)"),
        }
    }
}

impl JsonState {
    /// Start describing a shape.
    pub fn builder() -> JsonStateBuilder {
        JsonStateBuilder::default()
    }

    /// A shape from `(name, reducer name)` pairs; unknown reducer names are an error.
    pub fn from_reducer_names<'a>(
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, StateError> {
        let mut b = Self::builder();
        for (name, reducer) in fields {
            let r = JsonReducer::by_name(reducer).ok_or_else(|| StateError::Reducer {
                field: name.to_owned(),
                message: format!(
                    "unknown reducer `{reducer}` (known: last, append, add, merge, add_messages)"
                ),
            })?;
            b = b.field(name, r);
        }
        Ok(b.build())
    }

    fn empty_of(spec: Arc<JsonSchemaSpec>) -> Self {
        let slots = spec
            .fields
            .iter()
            .map(|(_, r)| match r {
                r if r.is_seq() => Slot::Seq(Seq::new()),
                JsonReducer::Merge => Slot::Value(Arc::new(json!({}))),
                _ => Slot::Value(Arc::new(Value::Null)),
            })
            .collect();
        Self { spec, slots }
    }

    /// A channel's value (a copy; see [`JsonState::items`] and [`JsonState::value`] to
    /// borrow).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Value> {
        let i = *self.spec.index.get(name)?;
        self.slot_json(i).ok()
    }

    /// The shared items of a list channel, or of a last-value channel written with
    /// [`JsonUpdate::set_items`].
    #[must_use]
    pub fn items(&self, name: &str) -> Option<&Seq<Arc<Value>>> {
        match self.slots.get(*self.spec.index.get(name)?)? {
            Slot::Seq(s) => Some(s),
            Slot::Value(_) => None,
        }
    }

    /// The shared value of a channel that is not a list channel (clone the `Arc` to write
    /// it elsewhere without a copy, with [`JsonUpdate::set_shared`]).
    #[must_use]
    pub fn value_shared(&self, name: &str) -> Option<&Arc<Value>> {
        match self.slots.get(*self.spec.index.get(name)?)? {
            Slot::Value(v) => Some(v),
            Slot::Seq(_) => None,
        }
    }

    /// The value of a channel that is not a list channel.
    #[must_use]
    pub fn value(&self, name: &str) -> Option<&Value> {
        match self.slots.get(*self.spec.index.get(name)?)? {
            Slot::Value(v) => Some(&**v),
            Slot::Seq(_) => None,
        }
    }

    /// Put an overwrite's value in channel `i` (a list channel takes a list, or `null` for
    /// empty; a message channel's items in their stored form).
    fn set_overwrite(&mut self, i: usize, value: Value) -> Result<(), StateError> {
        if matches!(self.spec.fields[i].1, JsonReducer::AddMessages) {
            let name = self.spec.fields[i].0.clone();
            let items = match value {
                Value::Array(a) => a,
                Value::Null => Vec::new(),
                one => vec![one],
            };
            let items = items
                .into_iter()
                .map(|m| {
                    canonical_item(Arc::new(m)).map(|mut m| {
                        if m.is_object() && m.message_id().is_none() {
                            m.set_message_id(uuid::Uuid::new_v4().to_string());
                        }
                        m
                    })
                })
                .collect::<Result<Seq<_>, _>>()
                .map_err(|e| StateError::Decode {
                    field: name,
                    message: e.to_string(),
                })?;
            self.slots[i] = Slot::Seq(items);
            return Ok(());
        }
        self.set_field_from_json(i, value)
    }

    fn slot_json(&self, i: usize) -> Result<Value, StateError> {
        match self.slots.get(i) {
            Some(Slot::Value(v)) => Ok((**v).clone()),
            Some(Slot::Seq(s)) => Ok(Value::Array(s.iter().map(|v| (**v).clone()).collect())),
            None => Err(StateError::UnknownField(i.to_string())),
        }
    }
}

impl State for JsonState {
    type Update = JsonUpdate;

    fn field_count(&self) -> usize {
        self.spec.fields.len()
    }
    fn field_name(&self, idx: usize) -> &str {
        self.spec.fields.get(idx).map_or("", |(n, _)| n.as_str())
    }
    fn field_index(&self, name: &str) -> Option<usize> {
        self.spec.index.get(name).copied()
    }

    fn merge(
        &mut self,
        updates: Vec<TaskUpdate<'_, Self::Update>>,
        changes: &mut Vec<Changed>,
    ) -> Result<(), StateError> {
        // Conflicts first, so a failed merge changes nothing.
        let mut writers: Vec<Vec<&str>> = vec![Vec::new(); self.spec.fields.len()];
        for u in &updates {
            for k in u.update.keys() {
                let i = self
                    .field_index(k)
                    .ok_or_else(|| StateError::UnknownField(k.clone()))?;
                writers[i].push(u.node);
            }
        }
        for (i, w) in writers.iter().enumerate() {
            if w.len() > 1 && matches!(self.spec.fields[i].1, JsonReducer::LastValue) {
                return Err(StateError::Conflict {
                    field: self.spec.fields[i].0.clone(),
                    nodes: w.iter().map(|s| (*s).to_owned()).collect(),
                });
            }
        }
        // An overwrite replaces the channel and every other write to it this step.
        let mut overwritten = vec![false; self.spec.fields.len()];
        for (i, (name, reducer)) in self.spec.fields.iter().enumerate() {
            if matches!(reducer, JsonReducer::LastValue) || writers[i].is_empty() {
                continue;
            }
            let by: Vec<String> = updates
                .iter()
                .filter(|u| u.update.0.get(name).and_then(JsonWrite::overwrite).is_some())
                .map(|u| u.node.to_owned())
                .collect();
            if by.len() > 1 {
                return Err(StateError::OverwriteConflict {
                    field: name.clone(),
                    nodes: by,
                });
            }
            overwritten[i] = by.len() == 1;
        }
        let mut acc: Vec<Option<FieldChange>> = vec![None; self.spec.fields.len()];
        for u in updates {
            for (k, v) in u.update.0 {
                let i = self.field_index(&k).ok_or(StateError::UnknownField(k))?;
                let c = if overwritten[i] {
                    match v.overwrite() {
                        Some(value) => {
                            let value = value.clone();
                            self.set_overwrite(i, value)?;
                            FieldChange::Replaced
                        }
                        None => continue,
                    }
                } else {
                    let (name, reducer) = &self.spec.fields[i];
                    let v = match v {
                        JsonWrite::Overwrite(value) => JsonWrite::Value(value),
                        v => v,
                    };
                    reduce(name, reducer, &mut self.slots[i], v)?
                };
                acc[i] = Some(acc[i].map_or(c, |p| p.then(c)));
            }
        }
        changes.extend(
            acc.into_iter()
                .enumerate()
                .filter_map(|(field, c)| c.map(|change| Changed { field, change })),
        );
        Ok(())
    }

    fn field_reducer(&self, idx: usize) -> Option<&'static str> {
        self.spec.fields.get(idx).map(|(_, r)| r.name())
    }
    fn update_fields(&self, update: &Self::Update) -> Vec<String> {
        update.keys().cloned().collect()
    }
    fn field_to_json(&self, idx: usize) -> Result<Value, StateError> {
        self.slot_json(idx)
    }
    fn field_shared_items(&self, idx: usize) -> Option<Vec<Arc<Value>>> {
        match self.slots.get(idx)? {
            Slot::Seq(s) => Some(s.iter().cloned().collect()),
            Slot::Value(_) => None,
        }
    }
    fn field_tail_to_json(&self, idx: usize, n: usize) -> Option<Result<Vec<Value>, StateError>> {
        match self.slots.get(idx)? {
            Slot::Seq(s) => Some(Ok(s.tail(n).map(|v| (**v).clone()).collect())),
            Slot::Value(_) => None,
        }
    }
    fn set_field_from_json(&mut self, idx: usize, value: Value) -> Result<(), StateError> {
        let name = self.field_name(idx).to_owned();
        let slot = self
            .slots
            .get_mut(idx)
            .ok_or_else(|| StateError::UnknownField(idx.to_string()))?;
        *slot = if self.spec.fields[idx].1.is_seq() {
            match value {
                Value::Array(a) => Slot::Seq(a.into_iter().map(Arc::new).collect()),
                Value::Null => Slot::Seq(Seq::new()),
                other => {
                    return Err(StateError::Decode {
                        field: name,
                        message: format!("expected a list, got {other}"),
                    })
                }
            }
        } else {
            Slot::Value(Arc::new(value))
        };
        Ok(())
    }
    fn update_to_json(&self, update: &Self::Update) -> Result<Value, StateError> {
        Ok(Value::Object(
            update
                .0
                .iter()
                .map(|(k, w)| {
                    let v = match w {
                        JsonWrite::Overwrite(v) => json!({ OVERWRITE_KEY: v }),
                        w => w.to_value(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ))
    }
    fn update_from_json(&self, value: Value) -> Result<Self::Update, StateError> {
        match value {
            Value::Object(mut m) => {
                if let Some(k) = m.keys().find(|k| self.field_index(k).is_none()) {
                    return Err(StateError::UnknownField(k.clone()));
                }
                // Messages in any accepted form are rewritten to the stored form here, so a
                // bad one is refused with the update, naming its channel.
                for (name, reducer) in &self.spec.fields {
                    if !matches!(reducer, JsonReducer::AddMessages) {
                        continue;
                    }
                    let Some(v) = m.get_mut(name) else { continue };
                    let decode = |e: serde_json::Error| StateError::Decode {
                        field: name.clone(),
                        message: e.to_string(),
                    };
                    // An overwrite's messages are rewritten inside it.
                    let v = if crate::state::overwrite_of(v).is_some() {
                        let inner = crate::state::split_overwrite(std::mem::take(v)).unwrap_or(Value::Null);
                        *v = json!({ OVERWRITE_KEY: inner });
                        match v.get_mut(OVERWRITE_KEY) {
                            Some(inner) => inner,
                            None => continue,
                        }
                    } else {
                        v
                    };
                    *v = match std::mem::take(v) {
                        Value::Array(items) => Value::Array(
                            items
                                .into_iter()
                                .map(crate::messages::canonical_message_json)
                                .collect::<Result<_, _>>()
                                .map_err(decode)?,
                        ),
                        one => crate::messages::canonical_message_json(one).map_err(decode)?,
                    };
                }
                Ok(m.into())
            }
            Value::Null => Ok(JsonUpdate::new()),
            other => Err(StateError::Decode {
                field: String::new(),
                message: format!("input must be a JSON object, got {other}"),
            }),
        }
    }
    fn json_schema(&self) -> Value {
        let props: Map<String, Value> = self
            .spec
            .fields
            .iter()
            .map(|(n, r)| {
                let s = match r {
                    r if r.is_seq() => json!({"type": "array", "x-reducer": r.name()}),
                    JsonReducer::Merge => json!({"type": "object", "x-reducer": "merge"}),
                    r => json!({"x-reducer": r.name()}),
                };
                (n.clone(), s)
            })
            .collect();
        json!({"type": "object", "title": "State", "properties": props, "additionalProperties": false})
    }
    fn empty_like(&self) -> Self {
        Self::empty_of(Arc::clone(&self.spec))
    }
    fn update_messages(&self, update: &mut Self::Update) -> Vec<Value> {
        let mut out = Vec::new();
        for (k, w) in &mut update.0 {
            if !matches!(
                self.field_index(k).map(|i| &self.spec.fields[i].1),
                Some(JsonReducer::AddMessages)
            ) {
                continue;
            }
            if w.overwrite().is_some() {
                continue;
            }
            // In the stored form with an id, written back so the merge keeps that id.
            let items = std::mem::replace(w, JsonWrite::Items(Vec::new())).into_items();
            let items: Vec<Arc<Value>> = items
                .into_iter()
                .map(|item| {
                    let mut item = canonical_item(Arc::clone(&item)).unwrap_or(item);
                    if item.is_object() && item.message_id().is_none() {
                        item.set_message_id(uuid::Uuid::new_v4().to_string());
                    }
                    out.push((*item).clone());
                    item
                })
                .collect();
            *w = JsonWrite::Items(items);
        }
        out
    }
    fn has_message(&self, id: &str) -> bool {
        self.spec.fields.iter().zip(&self.slots).any(|((_, r), slot)| {
            matches!(r, JsonReducer::AddMessages)
                && matches!(slot, Slot::Seq(s) if s.iter().rev().any(|m| m.message_id() == Some(id)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> JsonState {
        JsonState::from_reducer_names([
            ("messages", "add_messages"),
            ("n", "add"),
            ("topic", "last"),
            ("log", "append"),
        ])
        .unwrap()
    }

    #[test]
    fn merges_by_reducer_and_detects_conflicts() {
        let mut s = shape();
        let mut ch = Vec::new();
        let u1: JsonUpdate = json!({"messages": ["hi"], "n": 2, "log": [1]})
            .as_object()
            .cloned()
            .unwrap()
            .into();
        let u2 = JsonUpdate::new()
            .set("n", 3)
            .extend("log", [Arc::new(json!(2))])
            .set("topic", "x");
        s.merge(
            vec![
                TaskUpdate {
                    node: "a",
                    update: u1,
                },
                TaskUpdate {
                    node: "b",
                    update: u2,
                },
            ],
            &mut ch,
        )
        .unwrap();
        assert_eq!(s.get("n"), Some(json!(5)));
        assert_eq!(s.get("log"), Some(json!([1, 2])));
        assert_eq!(s.get("messages").unwrap()[0]["type"], "human");
        assert!(ch.contains(&Changed {
            field: 3,
            change: FieldChange::Appended(2)
        }));
        let c1 = JsonUpdate::new().set("topic", "a");
        let err = s
            .merge(
                vec![
                    TaskUpdate {
                        node: "x",
                        update: c1.clone(),
                    },
                    TaskUpdate {
                        node: "y",
                        update: c1,
                    },
                ],
                &mut ch,
            )
            .unwrap_err();
        assert_eq!(
            err,
            StateError::Conflict {
                field: "topic".into(),
                nodes: vec!["x".into(), "y".into()]
            }
        );
        assert!(s.update_from_json(json!({"nope": 1})).is_err());
        assert!(JsonState::from_reducer_names([("a", "bogus")]).is_err());
    }

    #[test]
    fn last_value_channels_hold_shared_items_without_copying() {
        let mut s = shape();
        let doc = Arc::new(json!({"big": [1, 2, 3]}));
        let mut ch = Vec::new();
        let u = JsonUpdate::new().set_items("topic", [Arc::clone(&doc), Arc::clone(&doc)]);
        s.merge(vec![TaskUpdate { node: "a", update: u }], &mut ch)
            .unwrap();
        let items = s.items("topic").unwrap();
        assert_eq!(items.len(), 2);
        assert!(items.iter().all(|i| Arc::ptr_eq(i, &doc)), "items were copied");
        assert_eq!(s.value("topic"), None);
        assert_eq!(
            s.get("topic"),
            Some(json!([{"big": [1, 2, 3]}, {"big": [1, 2, 3]}]))
        );
        assert_eq!(
            ch,
            vec![Changed {
                field: 2,
                change: FieldChange::Replaced
            }]
        );
        // A plain write replaces the shared list; restoring from JSON gives a value.
        let u = JsonUpdate::new().set("topic", "plain");
        s.merge(vec![TaskUpdate { node: "b", update: u }], &mut ch)
            .unwrap();
        assert_eq!(s.value("topic"), Some(&json!("plain")));
        assert!(s.items("topic").is_none());
        let mut restored = s.empty_like();
        let idx = restored.field_index("topic").unwrap();
        restored.set_field_from_json(idx, json!([1, 2])).unwrap();
        assert_eq!(restored.value("topic"), Some(&json!([1, 2])));
        // A list channel still refuses a non-list.
        let log = restored.field_index("log").unwrap();
        assert!(restored.set_field_from_json(log, json!("x")).is_err());
    }

    #[test]
    fn shared_values_are_kept_by_pointer_by_last_value_and_shared_custom_reducers() {
        let mut s = JsonState::builder()
            .field("last", JsonReducer::LastValue)
            .field(
                "keep",
                JsonReducer::CustomShared(Arc::new(|x: &Arc<Value>, y: Arc<Value>| {
                    Ok(if y.is_null() { Arc::clone(x) } else { y })
                })),
            )
            .field("merged", JsonReducer::Merge)
            .field("list", JsonReducer::Append)
            .build();
        let doc = Arc::new(json!({"a": [1, 2]}));
        let u = JsonUpdate::new()
            .set_shared("last", Arc::clone(&doc))
            .set_shared("keep", Arc::clone(&doc))
            .set_shared("merged", Arc::clone(&doc))
            .set_shared("list", Arc::new(json!([1, 2])));
        let mut ch = Vec::new();
        s.merge(vec![TaskUpdate { node: "a", update: u }], &mut ch)
            .unwrap();
        assert!(Arc::ptr_eq(s.value_shared("last").unwrap(), &doc));
        assert!(Arc::ptr_eq(s.value_shared("keep").unwrap(), &doc));
        assert_eq!(s.get("merged"), Some(json!({"a": [1, 2]})));
        assert_eq!(
            s.get("list"),
            Some(json!([1, 2])),
            "an array write appends its items"
        );
        // The shared custom reducer keeps the current pointer on a null update.
        let u = JsonUpdate::new().set("keep", Value::Null);
        s.merge(vec![TaskUpdate { node: "b", update: u }], &mut ch)
            .unwrap();
        assert!(Arc::ptr_eq(s.value_shared("keep").unwrap(), &doc));
        assert_eq!(
            s.update_to_json(&JsonUpdate::new().set_shared("last", doc))
                .unwrap(),
            json!({"last": {"a": [1, 2]}})
        );
    }

    #[test]
    fn messages_in_any_client_form_are_stored_in_the_type_form() {
        let mut s = shape();
        let u = s
            .update_from_json(json!({"messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                ["assistant", "hello"],
                "plain",
            ]}))
            .unwrap();
        let mut ch = Vec::new();
        s.merge(vec![TaskUpdate { node: "a", update: u }], &mut ch)
            .unwrap();
        let msgs = s.get("messages").unwrap();
        let kinds: Vec<&str> = msgs
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["human", "ai", "human"]);
        assert!(msgs[0].get("role").is_none());
        let err = s
            .update_from_json(json!({"messages": [{"role": "robot", "content": "x"}]}))
            .unwrap_err();
        assert!(
            matches!(&err, StateError::Decode { field, message } if field == "messages" && message.contains("robot")),
            "{err}"
        );
        // Items written by code are checked at the merge.
        let u = JsonUpdate::new().extend("messages", [Arc::new(json!({"role": "wizard"}))]);
        let err = s
            .merge(vec![TaskUpdate { node: "b", update: u }], &mut ch)
            .unwrap_err();
        assert!(err.to_string().contains("wizard"), "{err}");
    }
}
