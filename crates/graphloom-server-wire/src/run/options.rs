//! The typed options of a run request: enums for the fields that take one of a few
//! words, and the shapes that take one value or a list.

use graphloom_core::NodeSet;
use serde::de::{self, value::StrDeserializer, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// What to do when the run's thread does not exist (`if_not_exists`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum IfNotExists {
    /// Answer 404 (the default).
    #[default]
    Reject,
    /// Create the thread.
    Create,
}

/// When a run's checkpoints become durable (`durability`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Each checkpoint is durable before the next step starts (the default).
    #[default]
    Sync,
    /// Checkpoints are written while the next step runs.
    Async,
    /// Only the last checkpoint is written, when the run exits.
    Exit,
}

impl From<Durability> for graphloom_core::Durability {
    fn from(d: Durability) -> Self {
        match d {
            Durability::Sync => Self::Sync,
            Durability::Async => Self::Async,
            Durability::Exit => Self::Exit,
        }
    }
}

/// What happens to a streamed run when its client disconnects (`on_disconnect`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDisconnect {
    /// The run goes on (the default).
    #[default]
    Continue,
    /// The run is cancelled.
    Cancel,
}

/// What happens to a stateless run's temporary thread when the run ends (`on_completion`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnCompletion {
    /// The thread is deleted (the default).
    #[default]
    Delete,
    /// The thread is kept.
    Keep,
}

/// One value or a list of them (`stream_mode: "values"` or `["values", "updates"]`).
/// Kept as given, so that it is stored and shown as the client wrote it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// One value.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The values, as a list.
    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        match self {
            Self::One(v) => vec![v.clone()],
            Self::Many(v) => v.clone(),
        }
    }

    /// The values.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        match self {
            Self::One(v) => std::slice::from_ref(v).iter(),
            Self::Many(v) => v.iter(),
        }
    }
}

/// A list deserializes element by element (an error names the index), anything else as
/// one `T` (whose own error names what it expected).
impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("one value or a list of them")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                T::deserialize(StrDeserializer::<E>::new(s)).map(OneOrMany::One)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(OneOrMany::One)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(OneOrMany::Many(out))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// The nodes to pause at (`interrupt_before`, `interrupt_after`): `"*"` for every node, or
/// a list of node names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeSelection {
    /// `"*"`: every node.
    All,
    /// These nodes (none for an empty list).
    Nodes(Vec<String>),
}

impl NodeSelection {
    /// The executor's node set.
    #[must_use]
    pub fn node_set(&self) -> NodeSet {
        match self {
            Self::All => NodeSet::All,
            Self::Nodes(n) if n.is_empty() => NodeSet::None,
            Self::Nodes(n) => NodeSet::Some(n.clone()),
        }
    }
}

impl Serialize for NodeSelection {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::All => s.serialize_str("*"),
            Self::Nodes(n) => n.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for NodeSelection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NodeSelection;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"*\" or a list of node names")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                if s == "*" {
                    Ok(NodeSelection::All)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(s), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(NodeSelection::Nodes(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl utoipa::PartialSchema for NodeSelection {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["*"])),
            )
            .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)))
            .into()
    }
}

impl utoipa::ToSchema for NodeSelection {}

/// Where a command sends the run next: a node name, or a `Send` (the node runs with
/// this input).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(
    untagged,
    expecting = "a node name or a Send {\"node\": <name>, \"input\": <value>}"
)]
pub enum GotoTarget {
    /// A node name.
    Node(String),
    /// A `Send`: run `node` with `input`.
    Send {
        /// The node.
        node: String,
        /// Its input.
        #[serde(default)]
        input: Value,
    },
}

impl GotoTarget {
    /// The JSON a hosted graph reads (see `graphloom_server::hosted::command_from_json`).
    fn to_json(&self) -> Value {
        match self {
            Self::Node(n) => Value::String(n.clone()),
            Self::Send { node, input } => serde_json::json!({"node": node, "input": input}),
        }
    }
}

/// Instead of input: resume an interrupted run, update the state, go to nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Command {
    /// A state update applied first (an object, or a list of `[key, value]` pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Value>,
    /// The resume value, or a map from interrupt id to value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Value>,
    /// Nodes to go to: a node name or a `Send`, or a list of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goto: Option<OneOrMany<GotoTarget>>,
}

impl Command {
    /// The command a hosted graph runs.
    #[must_use]
    pub fn to_json_command(&self) -> crate::json::JsonCommand {
        crate::json::JsonCommand {
            update: self.update.clone(),
            resume: self.resume.clone(),
            goto: self
                .goto
                .iter()
                .flat_map(OneOrMany::iter)
                .map(GotoTarget::to_json)
                .collect(),
        }
    }
}

/// A checkpoint to start from (`checkpoint`): LangGraph's `{thread_id, checkpoint_ns,
/// checkpoint_id, checkpoint_map}`, of which the server reads the id.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, utoipa::ToSchema)]
pub struct CheckpointRef {
    /// The checkpoint's id.
    #[serde(default)]
    pub checkpoint_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
        serde_path_to_error::deserialize(v).map_err(|e| format!("{}: {}", e.path(), e.inner()))
    }

    #[test]
    fn one_or_many_keeps_the_form_and_names_the_bad_element() {
        let one: OneOrMany<crate::stream::WireMode> = parse(json!("values")).unwrap();
        assert_eq!(serde_json::to_value(&one).unwrap(), json!("values"));
        let many: OneOrMany<crate::stream::WireMode> = parse(json!(["values", "messages-tuple"])).unwrap();
        assert_eq!(
            serde_json::to_value(&many).unwrap(),
            json!(["values", "messages-tuple"])
        );
        let e = parse::<OneOrMany<crate::stream::WireMode>>(json!(["values", "telepathy"])).unwrap_err();
        assert!(e.starts_with("[1]: unknown variant `telepathy`"), "{e}");
        assert!(parse::<OneOrMany<crate::stream::WireMode>>(json!(3)).is_err());
    }

    #[test]
    fn node_selections() {
        assert_eq!(parse::<NodeSelection>(json!("*")).unwrap(), NodeSelection::All);
        assert_eq!(
            parse::<NodeSelection>(json!("*")).unwrap().node_set(),
            NodeSet::All
        );
        let some = parse::<NodeSelection>(json!(["a", "b"])).unwrap();
        assert_eq!(some.node_set(), NodeSet::Some(vec!["a".into(), "b".into()]));
        assert_eq!(serde_json::to_value(&some).unwrap(), json!(["a", "b"]));
        assert_eq!(
            parse::<NodeSelection>(json!([])).unwrap().node_set(),
            NodeSet::None
        );
        for bad in [json!("agent"), json!(7), json!({"a": 1})] {
            assert!(parse::<NodeSelection>(bad.clone()).is_err(), "{bad}");
        }
        assert!(parse::<NodeSelection>(json!(["a", 1]))
            .unwrap_err()
            .starts_with("[1]"));
    }

    #[test]
    fn commands_round_trip_and_turn_into_json_commands() {
        let c: Command = parse(json!({"resume": "yes", "goto": "reply"})).unwrap();
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"resume": "yes", "goto": "reply"})
        );
        let c: Command =
            parse(json!({"update": {"n": 1}, "goto": ["a", {"node": "b", "input": {"x": 1}}]})).unwrap();
        let j = c.to_json_command();
        assert_eq!(j.update, Some(json!({"n": 1})));
        assert_eq!(j.goto, vec![json!("a"), json!({"node": "b", "input": {"x": 1}})]);
        let e = parse::<Command>(json!({"goto": {"node": 1}})).unwrap_err();
        assert!(e.starts_with("goto: a node name or a Send"), "{e}");
        assert!(parse::<Command>(json!("resume")).is_err());
    }
}
