//! What a message may look like when it comes in.
//!
//! Clients send messages in several shapes, and LangGraph's `add_messages` coerces all of
//! them. [`Message`]'s deserialiser accepts the same set, and its JSON Schema describes that
//! set, so a server that validates input with the schema and the state that decodes it
//! agree:
//!
//! - `{"type": "human" | "ai" | "system" | "tool" | "remove", "content": ..}`: LangChain's
//!   form, the one graphloom stores and emits;
//! - `{"role": "user" | "human" | "assistant" | "ai" | "system" | "developer" | "tool", ..}`:
//!   OpenAI's form; `tool_calls` may be in OpenAI's shape (`{"id", "type": "function",
//!   "function": {"name", "arguments": "<JSON text>"}}`) or LangChain's (`{"id", "name",
//!   "args"}`), in either form;
//! - a string: a human message;
//! - a `[role, content]` pair.
//!
//! Content is text or a list of content parts (OpenAI's `{"type": "text", "text"}` and
//! `{"type": "image_url", ..}`, LangChain's blocks) and is kept as given. A tool call whose
//! `arguments` text is not JSON is kept in `invalid_tool_calls`, as LangChain keeps it.

use super::{Message, MessageBody, MessageKind, ToolCall};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::fmt;

/// Every name a message's `type` or `role` may have, and the kind it stands for.
const KIND_NAMES: [(&str, MessageKind); 12] = [
    ("human", MessageKind::Human),
    ("user", MessageKind::Human),
    ("ai", MessageKind::Ai),
    ("assistant", MessageKind::Ai),
    ("system", MessageKind::System),
    ("developer", MessageKind::System),
    ("tool", MessageKind::Tool),
    ("remove", MessageKind::Remove),
    ("HumanMessageChunk", MessageKind::Human),
    ("AIMessageChunk", MessageKind::Ai),
    ("SystemMessageChunk", MessageKind::System),
    ("ToolMessageChunk", MessageKind::Tool),
];

/// The kind a message `type` or `role` names, if it names one.
#[must_use]
pub fn kind_from_name(name: &str) -> Option<MessageKind> {
    KIND_NAMES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
}

fn unknown_kind(name: &str) -> String {
    format!(
        "unknown message role `{name}`: use one of human, user, ai, assistant, system, developer, tool, remove"
    )
}

/// A role that [`Message::from_role`] cannot make a message of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RoleError {
    /// No message kind has this role.
    #[error("unknown message role `{0}`: use one of human, user, ai, assistant, system, developer")]
    Unknown(String),
    /// The role's message needs more than a role and content (a tool message needs the id
    /// of the call it answers, a removal the id of the message it removes).
    #[error("a `{role}` message needs {needs}: use `Message::{constructor}`")]
    NeedsMore {
        /// The role.
        role: String,
        /// What else it needs.
        needs: &'static str,
        /// The constructor that takes it.
        constructor: &'static str,
    },
}

impl Message {
    /// A message from LangChain's role form, `("user", "hi")` or
    /// `{"role": "user", "content": "hi"}`, as `convert_to_messages` coerces it: `human` and
    /// `user` a human message, `ai` and `assistant` an AI message, `system` and `developer`
    /// a system message. `content` is text or a list of content parts.
    ///
    /// ```
    /// use graphloom_core::{Message, MessageKind};
    ///
    /// let m = Message::from_role("assistant", "hello")?;
    /// assert_eq!((m.kind, m.text()), (MessageKind::Ai, "hello".to_owned()));
    /// let m = Message::try_from(("user", "hi"))?;
    /// assert_eq!(m.kind, MessageKind::Human);
    /// assert!(Message::from_role("robot", "beep").is_err());
    /// # Ok::<(), graphloom_core::messages::RoleError>(())
    /// ```
    ///
    /// # Errors
    /// [`RoleError::Unknown`] for a role no message has; [`RoleError::NeedsMore`] for `tool`
    /// and `remove`, whose messages need an id ([`Message::tool`], [`Message::remove`]),
    /// as LangChain refuses a `("tool", ..)` pair without a `tool_call_id`.
    pub fn from_role(role: &str, content: impl Into<Value>) -> Result<Self, RoleError> {
        let needs = |needs, constructor| RoleError::NeedsMore {
            role: role.to_owned(),
            needs,
            constructor,
        };
        let kind = match role {
            "human" | "user" => MessageKind::Human,
            "ai" | "assistant" => MessageKind::Ai,
            "system" | "developer" => MessageKind::System,
            "tool" => return Err(needs("the id of the call it answers", "tool")),
            "remove" => return Err(needs("the id of the message it removes", "remove")),
            _ => return Err(RoleError::Unknown(role.to_owned())),
        };
        let mut m = Message::with(kind, "");
        m.content = content.into();
        Ok(m)
    }
}

impl TryFrom<(&str, &str)> for Message {
    type Error = RoleError;
    /// `("user", "hi")`: see [`Message::from_role`].
    fn try_from((role, content): (&str, &str)) -> Result<Self, RoleError> {
        Message::from_role(role, content)
    }
}

impl TryFrom<(&str, String)> for Message {
    type Error = RoleError;
    /// `("user", text)`: see [`Message::from_role`].
    fn try_from((role, content): (&str, String)) -> Result<Self, RoleError> {
        Message::from_role(role, content)
    }
}

/// A tool call as it may arrive: LangChain's `{"id", "name", "args"}` or OpenAI's
/// `{"id", "type": "function", "function": {"name", "arguments"}}`.
#[derive(Deserialize)]
struct ToolCallObject {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    function: Option<FunctionObject>,
}

#[derive(Deserialize)]
struct FunctionObject {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Value,
}

/// Why a tool call could not be read.
enum CallError {
    /// The call is unusable: the message is refused with this reason.
    Refused(String),
    /// The arguments are not JSON: kept as an `invalid_tool_calls` entry.
    Invalid(Value),
}

impl ToolCallObject {
    fn resolve(self) -> Result<ToolCall, CallError> {
        let (name, args) = match self.function {
            Some(f) => {
                let name = f
                    .name
                    .or(self.name)
                    .ok_or_else(|| CallError::Refused("a tool call's `function` has no `name`".to_owned()))?;
                let args = match f.arguments {
                    Value::String(text) if text.trim().is_empty() => json!({}),
                    Value::String(text) => match serde_json::from_str::<Value>(&text) {
                        Ok(v) => v,
                        Err(e) => {
                            return Err(CallError::Invalid(json!({
                                "type": "invalid_tool_call",
                                "id": self.id,
                                "name": name,
                                "args": text,
                                "error": format!("arguments are not valid JSON: {e}"),
                            })))
                        }
                    },
                    Value::Null => json!({}),
                    other => other,
                };
                (name, args)
            }
            None => {
                let name = self
                    .name
                    .ok_or_else(|| CallError::Refused("a tool call has no `name`".to_owned()))?;
                (name, self.args.unwrap_or(Value::Null))
            }
        };
        let id = self
            .id
            .ok_or_else(|| CallError::Refused(format!("tool call `{name}` has no `id`")))?;
        Ok(ToolCall { id, name, args })
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match ToolCallObject::deserialize(d)?.resolve() {
            Ok(c) => Ok(c),
            Err(CallError::Refused(why)) => Err(de::Error::custom(why)),
            Err(CallError::Invalid(v)) => Err(de::Error::custom(
                v.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("invalid tool call"),
            )),
        }
    }
}

/// A message object in either form.
#[derive(Deserialize)]
struct MessageObject {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallObject>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl MessageObject {
    fn into_message<E: de::Error>(self) -> Result<Message, E> {
        // As LangChain reads a dict: `role` first, then `type`.
        let named = self
            .role
            .or(self.kind)
            .ok_or_else(|| E::custom("a message needs a `type` or a `role`"))?;
        let kind = kind_from_name(&named).ok_or_else(|| E::custom(unknown_kind(&named)))?;
        let mut extra = self.extra;
        let mut tool_calls = Vec::new();
        let mut invalid = Vec::new();
        for call in self.tool_calls.unwrap_or_default() {
            match call.resolve() {
                Ok(c) => tool_calls.push(c),
                Err(CallError::Invalid(v)) => invalid.push(v),
                Err(CallError::Refused(why)) => return Err(E::custom(why)),
            }
        }
        if !invalid.is_empty() {
            match extra.get_mut("invalid_tool_calls") {
                Some(Value::Array(list)) => list.extend(invalid),
                _ => {
                    extra.insert("invalid_tool_calls".into(), Value::Array(invalid));
                }
            }
        }
        Ok(Message::from(MessageBody {
            kind,
            content: self.content,
            id: self.id,
            name: self.name,
            tool_calls,
            tool_call_id: self.tool_call_id,
            extra,
        }))
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message: an object with a `type` or a `role`, a string, or a [role, content] pair")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Message, E> {
        Ok(Message::human(s))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Message, E> {
        Ok(Message::human(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Message, A::Error> {
        let pair = &"a [role, content] pair";
        let role: String = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, pair))?;
        let content: Value = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, pair))?;
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, pair));
        }
        let kind = kind_from_name(&role).ok_or_else(|| de::Error::custom(unknown_kind(&role)))?;
        let mut m = Message::with(kind, "");
        m.content = content;
        Ok(m)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Message, A::Error> {
        MessageObject::deserialize(de::value::MapAccessDeserializer::new(map))?.into_message()
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageVisitor)
    }
}

/// Message JSON in the form graphloom stores (`type`, tool calls in LangChain's shape),
/// from any form [`Message`] accepts. Already canonical objects pass through untouched.
///
/// # Errors
/// When the value is not a message (an unknown role, a tool call without a name, ...).
pub fn canonical_message_json(v: Value) -> Result<Value, serde_json::Error> {
    if is_canonical(&v) {
        return Ok(v);
    }
    let m: Message = serde_json::from_value(v)?;
    serde_json::to_value(m)
}

/// Whether `v` is message JSON in the stored form already (a cheap check of its shape).
pub(crate) fn is_canonical(v: &Value) -> bool {
    v.as_object().is_some_and(|o| {
        !o.contains_key("role")
            && o.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| matches!(t, "human" | "ai" | "system" | "tool" | "remove"))
            && o.get("tool_calls").is_none_or(|calls| {
                calls
                    .as_array()
                    .is_some_and(|a| a.iter().all(|c| c.get("function").is_none()))
            })
    })
}

fn kind_names() -> Vec<&'static str> {
    KIND_NAMES.iter().map(|(n, _)| *n).collect()
}

impl schemars::JsonSchema for ToolCall {
    fn schema_name() -> Cow<'static, str> {
        "ToolCall".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A tool call: LangChain's {id, name, args} or OpenAI's {id, type: \"function\", function: {name, arguments}}.",
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "name": {"type": "string"},
                "args": {"description": "The arguments (a JSON object)."},
                "type": {"type": "string"},
                "function": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "arguments": {"description": "The arguments as JSON text (or a JSON object)."}
                    },
                    "required": ["name"]
                }
            },
            "required": ["id"],
            "anyOf": [{"required": ["name"]}, {"required": ["function"]}]
        })
    }
}

impl schemars::JsonSchema for Message {
    fn schema_name() -> Cow<'static, str> {
        "Message".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let call = generator.subschema_for::<ToolCall>();
        let names = kind_names();
        schemars::json_schema!({
            "description": "A chat message: an object with `type` (human, ai, system, tool, remove) or `role` (user, assistant, system, developer, tool), a string (a human message), or a [role, content] pair. Content is text or a list of content parts.",
            "type": ["object", "string", "array"],
            "properties": {
                "type": {"enum": names},
                "role": {"enum": names},
                "content": {"description": "Text, or a list of content parts."},
                "id": {"type": ["string", "null"]},
                "name": {"type": ["string", "null"]},
                "tool_calls": {"type": ["array", "null"], "items": call},
                "tool_call_id": {"type": ["string", "null"]}
            },
            "anyOf": [{"required": ["type"]}, {"required": ["role"]}],
            "prefixItems": [{"enum": names}, {}],
            "minItems": 2,
            "maxItems": 2
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Result<Message, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn from_role_coerces_as_the_json_role_form_does() {
        for (role, kind) in [
            ("user", MessageKind::Human),
            ("human", MessageKind::Human),
            ("assistant", MessageKind::Ai),
            ("ai", MessageKind::Ai),
            ("system", MessageKind::System),
            ("developer", MessageKind::System),
        ] {
            let typed = Message::from_role(role, "x").unwrap();
            assert_eq!(typed, read(json!([role, "x"])).unwrap(), "{role}");
            assert_eq!(typed.kind, kind);
            assert_eq!(Message::try_from((role, "x".to_owned())).unwrap(), typed);
        }
        let parts = Message::from_role("user", json!([{"type": "text", "text": "hi"}])).unwrap();
        assert_eq!(parts.text(), "hi");
        assert_eq!(
            Message::try_from(("robot", "beep")).unwrap_err(),
            RoleError::Unknown("robot".into())
        );
        let tool = Message::from_role("tool", "r").unwrap_err().to_string();
        assert!(
            tool.contains("the id of the call it answers") && tool.contains("Message::tool"),
            "{tool}"
        );
        assert!(matches!(
            Message::from_role("remove", ""),
            Err(RoleError::NeedsMore {
                constructor: "remove",
                ..
            })
        ));
        // A chunk's type name is not a role.
        assert!(Message::from_role("AIMessageChunk", "x").is_err());
    }

    #[test]
    fn role_forms_become_the_type_form() {
        for (role, kind) in [
            ("user", MessageKind::Human),
            ("human", MessageKind::Human),
            ("assistant", MessageKind::Ai),
            ("ai", MessageKind::Ai),
            ("system", MessageKind::System),
            ("developer", MessageKind::System),
            ("tool", MessageKind::Tool),
        ] {
            let m = read(json!({"role": role, "content": "x", "tool_call_id": "c"})).unwrap();
            assert_eq!(m.kind, kind, "{role}");
            let out = serde_json::to_value(&m).unwrap();
            assert!(out.get("role").is_none(), "{out}");
            assert_eq!(out["type"], serde_json::to_value(kind).unwrap());
        }
        assert_eq!(read(json!("hi")).unwrap(), Message::human("hi"));
        let pair = read(json!(["assistant", "hello"])).unwrap();
        assert_eq!((pair.kind, pair.text()), (MessageKind::Ai, "hello".to_owned()));
    }

    #[test]
    fn openai_tool_calls_are_parsed_and_bad_arguments_kept_as_invalid() {
        let m = read(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"rust\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "noargs", "arguments": ""}},
                {"id": "c3", "type": "function", "function": {"name": "broken", "arguments": "{\"q\":"}}
            ]
        }))
        .unwrap();
        assert_eq!(m.tool_calls.len(), 2);
        assert_eq!(m.tool_calls[0].args, json!({"q": "rust"}));
        assert_eq!(m.tool_calls[1].args, json!({}));
        let bad = &m.extra["invalid_tool_calls"][0];
        assert_eq!(
            (bad["id"].as_str(), bad["name"].as_str()),
            (Some("c3"), Some("broken"))
        );
        let out = serde_json::to_value(&m).unwrap();
        assert_eq!(
            out["tool_calls"][0],
            json!({"name": "search", "args": {"q": "rust"}, "id": "c1", "type": "tool_call"})
        );
        // The canonical form reads back as the same message.
        assert_eq!(read(out).unwrap(), m);
    }

    #[test]
    fn unknown_roles_and_shapes_are_named_in_the_error() {
        let e = read(json!({"role": "robot", "content": "x"})).unwrap_err();
        assert!(e.contains("unknown message role `robot`"), "{e}");
        let e = read(json!(["wizard", "x"])).unwrap_err();
        assert!(e.contains("`wizard`"), "{e}");
        let e = read(json!({"content": "x"})).unwrap_err();
        assert!(e.contains("`type` or a `role`"), "{e}");
        let e = read(json!({"type": "ai", "tool_calls": [{"id": "c", "type": "function", "function": {}}]}))
            .unwrap_err();
        assert!(e.contains("no `name`"), "{e}");
        assert!(read(json!(["user", "x", "extra"])).is_err());
        assert!(read(json!(42)).is_err());
    }

    #[test]
    fn content_parts_keep_their_shape_and_give_their_text() {
        let m = read(json!({"role": "user", "content": [
            {"type": "text", "text": "look at "},
            {"type": "image_url", "image_url": {"url": "https://x.example/cat.png"}},
            "this"
        ]}))
        .unwrap();
        assert_eq!(m.text(), "look at this");
        assert_eq!(m.content[1]["image_url"]["url"], "https://x.example/cat.png");
    }

    #[test]
    fn canonical_json_passes_through_and_other_forms_are_rewritten() {
        let canon = json!({"type": "human", "content": "hi", "id": "1"});
        assert_eq!(canonical_message_json(canon.clone()).ok(), Some(canon));
        let v = canonical_message_json(json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(v, json!({"type": "human", "content": "hi"}));
        assert_eq!(canonical_message_json(json!("yo")).unwrap()["type"], "human");
        assert!(canonical_message_json(json!({"role": "robot"})).is_err());
    }

    #[test]
    fn the_schema_accepts_every_form_the_decoder_accepts() {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<Vec<Message>>();
        let schema = serde_json::to_value(schema).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        let good = json!([
            {"type": "human", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
            {"role": "tool", "content": "r", "tool_call_id": "c"},
            "plain",
            ["user", "pair"]
        ]);
        assert!(
            v.is_valid(&good),
            "{:?}",
            v.iter_errors(&good).map(|e| e.to_string()).collect::<Vec<_>>()
        );
        let decoded: Vec<Message> = serde_json::from_value(good).unwrap();
        assert_eq!(decoded.len(), 6);
        for bad in [
            json!([{"role": "robot", "content": "x"}]),
            json!([{"content": "x"}]),
            json!([7]),
        ] {
            assert!(!v.is_valid(&bad), "{bad}");
            assert!(serde_json::from_value::<Vec<Message>>(bad).is_err());
        }
        let robot = json!([{"role": "robot"}]);
        let err = v.iter_errors(&robot).next().unwrap();
        assert!(err.to_string().contains("robot"), "{err}");
    }
}
