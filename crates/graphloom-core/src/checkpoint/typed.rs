//! Checkpoints whose contents another runtime serialized (LangGraph's savers in the Python
//! package): the shapes every backend's typed checkpoint tables take and give back. The
//! values are opaque here (a type tag and bytes from the writer's serializer); what a backend
//! needs to store and find them is plain: thread, namespace, id, parent, which version of
//! which channel a checkpoint holds, its metadata as JSON (for list filters) and its run.

use serde_json::{Map, Value};

/// A value serialized by its writer: a type tag and bytes (LangGraph's `dumps_typed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedValue {
    /// The serializer's type tag (`"msgpack"`, `"json"`, `"msgpack+aes"`, ...).
    pub type_tag: String,
    /// The serialized bytes.
    pub bytes: Vec<u8>,
}

impl TypedValue {
    /// `bytes` tagged `type_tag`.
    pub fn new(type_tag: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            type_tag: type_tag.into(),
            bytes,
        }
    }
}

/// A checkpoint to store with [`TypedSaver::put`].
#[derive(Debug, Clone, PartialEq)]
pub struct TypedPut {
    /// Thread id.
    pub thread_id: String,
    /// Namespace (empty for the root graph).
    pub checkpoint_ns: String,
    /// The checkpoint's id (ids sort by creation time).
    pub checkpoint_id: String,
    /// The checkpoint it follows, if any.
    pub parent_id: Option<String>,
    /// The checkpoint without its channel values.
    pub checkpoint: TypedValue,
    /// `(channel, version)` of every channel the checkpoint has a value for: a read fetches
    /// these blobs.
    pub channel_versions: Vec<(String, String)>,
    /// `(channel, version, value)` of the channel versions this checkpoint writes first.
    pub blobs: Vec<(String, String, TypedValue)>,
    /// Metadata as a JSON object (list filters match its keys).
    pub metadata: Map<String, Value>,
}

/// One task's writes, for [`TypedSaver::put_writes`].
#[derive(Debug, Clone, PartialEq)]
pub struct TypedWrites {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// The checkpoint the task ran from.
    pub checkpoint_id: String,
    /// The task.
    pub task_id: String,
    /// The task's path (writes are read back ordered by path, task id, idx).
    pub task_path: String,
    /// `(idx, channel, value)`.
    pub writes: Vec<(i64, String, TypedValue)>,
    /// Replace writes already stored under the same `(task_id, idx)` (special channels
    /// such as errors and interrupts); otherwise the first write of an idx is kept.
    pub replace: bool,
}

/// A pending write read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The channel written.
    pub channel: String,
    /// The value.
    pub value: TypedValue,
}

/// A stored checkpoint with its values and pending writes.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedTuple {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// The checkpoint it follows, if any.
    pub parent_id: Option<String>,
    /// The checkpoint without its channel values.
    pub checkpoint: TypedValue,
    /// The metadata JSON object, as stored.
    pub metadata: String,
    /// `(channel, value)` of every channel version the checkpoint names that has a value.
    pub values: Vec<(String, TypedValue)>,
    /// Pending writes, ordered by task path, task id and idx.
    pub writes: Vec<TypedWrite>,
}

/// What [`TypedSaver::list`] returns: newest first.
#[derive(Debug, Clone, Default)]
pub struct TypedQuery {
    /// Only this thread.
    pub thread_id: Option<String>,
    /// Only this namespace.
    pub checkpoint_ns: Option<String>,
    /// Only checkpoints whose metadata has every key with an equal value.
    pub filter: Map<String, Value>,
    /// Only checkpoints with an id below this one.
    pub before: Option<String>,
    /// At most this many.
    pub limit: Option<usize>,
}

impl TypedQuery {
    /// Whether the metadata JSON text has every key of the filter with an equal value
    /// (numbers equal by value: a filter's `2` matches a stored `2.0`).
    #[must_use]
    pub fn matches(&self, metadata: &str) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let Ok(Value::Object(stored)) = serde_json::from_str::<Value>(metadata) else {
            return false;
        };
        self.filter
            .iter()
            .all(|(k, want)| stored.get(k).is_some_and(|have| same(have, want)))
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_filter_matches_keys_by_value() {
        let query = |v: Value| TypedQuery {
            filter: v.as_object().cloned().unwrap_or_default(),
            ..TypedQuery::default()
        };
        let md = r#"{"source":"loop","step":2,"score":2.0}"#;
        assert!(query(json!({})).matches(md));
        assert!(query(json!({"source": "loop", "step": 2})).matches(md));
        assert!(query(json!({"score": 2})).matches(md));
        assert!(!query(json!({"step": 3})).matches(md));
        assert!(!query(json!({"missing": null})).matches(md));
        assert!(!query(json!({"step": 2})).matches("not json"));
    }
}
