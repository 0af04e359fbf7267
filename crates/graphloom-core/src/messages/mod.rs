//! Chat messages and the `add_messages` reducer.
//!
//! [`Message`] serialises to the message JSON LangChain and the LangGraph clients use
//! (`type`, `content`, `id`, `name`, `tool_calls`, `tool_call_id`, ...); fields it does not
//! model are kept in `extra` so a round trip loses nothing. It reads every form clients
//! send (OpenAI's `role` form, a plain string, a `[role, content]` pair: see [`input`]).

pub mod input;

pub use input::{canonical_message_json, kind_from_name, RoleError};

use crate::change::{FieldChange, ReducerError};
use crate::seq::SeqLike;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// Id of a removal marker that clears every message before it.
pub const REMOVE_ALL_MESSAGES: &str = "__remove_all__";

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// System instructions.
    System,
    /// The user.
    Human,
    /// The model.
    Ai,
    /// A tool's result.
    Tool,
    /// A removal marker for the `add_messages` reducer.
    Remove,
}

/// A tool call requested by the model. Serialised as LangChain does, with
/// `"type": "tool_call"`; read with or without it, and in OpenAI's shape too
/// (`{"id", "type": "function", "function": {"name", "arguments"}}`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Id the tool result refers back to.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as the model wrote them.
    pub args: Value,
}

impl Serialize for ToolCall {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        use serde::ser::SerializeStruct as _;
        let mut st = s.serialize_struct("ToolCall", 4)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("args", &self.args)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("type", "tool_call")?;
        st.end()
    }
}

/// One chat message: a shared, copy-on-write handle to its [`MessageBody`].
///
/// Serialised in LangChain's `type` form; read from any form in [`input`]. The fields are
/// reached through the body (`m.kind`, `m.content = ..`), so a message reads and writes like
/// a plain struct; cloning one is a reference-count bump, not a copy of its content, and
/// writing to a field of a shared message copies that one body first. A conversation held
/// by a checkpoint, a stream consumer and the request handed to a chat model is therefore
/// one set of bodies, however many times it is cloned.
#[derive(Clone, PartialEq)]
pub struct Message(Arc<MessageBody>);

/// The fields of a [`Message`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageBody {
    /// Who it is from.
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// Text, or a list of content parts.
    #[serde(default)]
    pub content: Value,
    /// Stable id; assigned by `add_messages` when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Optional author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls of an AI message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Everything else (usage, response metadata, status, ...), kept for round trips.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Deref for Message {
    type Target = MessageBody;
    fn deref(&self) -> &MessageBody {
        &self.0
    }
}

impl DerefMut for Message {
    /// The body, copied first when another message shares it.
    fn deref_mut(&mut self) -> &mut MessageBody {
        Arc::make_mut(&mut self.0)
    }
}

impl From<MessageBody> for Message {
    fn from(body: MessageBody) -> Self {
        Self(Arc::new(body))
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &*self.0;
        f.debug_struct("Message")
            .field("kind", &b.kind)
            .field("content", &b.content)
            .field("id", &b.id)
            .field("name", &b.name)
            .field("tool_calls", &b.tool_calls)
            .field("tool_call_id", &b.tool_call_id)
            .field("extra", &b.extra)
            .finish()
    }
}

impl Serialize for Message {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.0.serialize(s)
    }
}

impl Message {
    fn with(kind: MessageKind, content: impl Into<String>) -> Self {
        Self::from(MessageBody {
            kind,
            content: Value::String(content.into()),
            id: None,
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            extra: Map::new(),
        })
    }
    /// The body, without copying it when this message is its only holder.
    #[must_use]
    pub fn into_body(self) -> MessageBody {
        Arc::unwrap_or_clone(self.0)
    }
    /// True when `a` and `b` share one body (a clone, not an equal copy).
    #[must_use]
    pub fn shares_body(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
    /// A user message.
    #[must_use]
    pub fn human(content: impl Into<String>) -> Self {
        Self::with(MessageKind::Human, content)
    }
    /// A system message.
    #[must_use]
    pub fn system(content: impl Into<String>) -> Self {
        Self::with(MessageKind::System, content)
    }
    /// A model message.
    #[must_use]
    pub fn ai(content: impl Into<String>) -> Self {
        Self::with(MessageKind::Ai, content)
    }
    /// A model message that calls tools.
    #[must_use]
    pub fn ai_with_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        let mut m = Self::with(MessageKind::Ai, content);
        m.tool_calls = calls;
        m
    }
    /// A tool result for `tool_call_id`.
    #[must_use]
    pub fn tool(content: impl Into<String>, tool_call_id: impl Into<String>) -> Self {
        let mut m = Self::with(MessageKind::Tool, content);
        m.tool_call_id = Some(tool_call_id.into());
        m
    }
    /// A marker that removes the message with `id` when merged by `add_messages`.
    #[must_use]
    pub fn remove(id: impl Into<String>) -> Self {
        let mut m = Self::with(MessageKind::Remove, "");
        m.id = Some(id.into());
        m
    }
    /// Set the id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
    /// The text content: the content itself when it is text, else its text parts joined
    /// (see [`content_text`]).
    #[must_use]
    pub fn text(&self) -> String {
        content_text(&self.content)
    }
}

/// The text of message content: a string as is; of a list of content parts, the strings
/// and the `text` of text parts (`{"type": "text", "text": ..}`), joined; other parts
/// (images, audio, tool use) add nothing.
#[must_use]
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) if o.get("type").is_none_or(|t| t == "text") => {
                    o.get("text").and_then(Value::as_str)
                }
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

/// What `add_messages` needs of a message type.
pub trait MessageLike {
    /// The message id, if any.
    fn message_id(&self) -> Option<&str>;
    /// Set the id.
    fn set_message_id(&mut self, id: String);
    /// True for a removal marker (its id names the message to remove).
    fn is_removal(&self) -> bool;
}

impl MessageLike for Message {
    fn message_id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn set_message_id(&mut self, id: String) {
        self.id = Some(id);
    }
    fn is_removal(&self) -> bool {
        self.kind == MessageKind::Remove
    }
}

/// Merge `update` into `current`: same id replaces in place, a removal marker deletes (the
/// special id [`REMOVE_ALL_MESSAGES`] clears everything before it), others are appended with
/// a fresh id when they have none. Removing an unknown id is an error.
///
/// # Errors
/// When a removal names an id that no message has.
pub fn add_messages_into<S>(current: &mut S, update: Vec<S::Item>) -> Result<FieldChange, ReducerError>
where
    S: SeqLike,
    S::Item: MessageLike,
{
    let mut appended = 0usize;
    let mut pure_append = true;
    let mut pending_removals: Vec<String> = Vec::new();
    for mut msg in update {
        if msg.is_removal() {
            let id = msg.message_id().unwrap_or_default().to_owned();
            pure_append = false;
            if id == REMOVE_ALL_MESSAGES {
                current.retain_items(&mut |_| false);
                pending_removals.clear();
                appended = 0;
                continue;
            }
            pending_removals.push(id);
            continue;
        }
        let existing = msg
            .message_id()
            .and_then(|id| current.last_position_by_key(id, <S::Item as MessageLike>::message_id));
        match existing {
            Some(i) => {
                pure_append = false;
                current.set_item(i, msg);
            }
            None => {
                if msg.message_id().is_none() {
                    msg.set_message_id(uuid::Uuid::new_v4().to_string());
                }
                current.extend_items(vec![msg]);
                appended += 1;
            }
        }
    }
    for id in pending_removals {
        let before = current.seq_len();
        current.retain_items(&mut |m: &S::Item| m.message_id() != Some(id.as_str()));
        if current.seq_len() == before {
            return Err(ReducerError::new(format!(
                "cannot remove message `{id}`: no message has that id"
            )));
        }
    }
    Ok(if pure_append {
        FieldChange::Appended(appended)
    } else {
        FieldChange::Replaced
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seq::Seq;

    #[test]
    fn assigns_ids_replaces_and_removes() {
        let mut msgs: Seq<Message> = Seq::new();
        let ch = add_messages_into(
            &mut msgs,
            vec![Message::human("a"), Message::ai("b").with_id("x")],
        );
        assert_eq!(ch, Ok(FieldChange::Appended(2)));
        assert!(msgs.get(0).and_then(|m| m.id.clone()).is_some());
        let ch = add_messages_into(&mut msgs, vec![Message::ai("b2").with_id("x")]);
        assert_eq!(ch, Ok(FieldChange::Replaced));
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs.get(1).map(Message::text).as_deref(), Some("b2"));
        assert!(add_messages_into(&mut msgs, vec![Message::remove("x")]).is_ok());
        assert_eq!(msgs.len(), 1);
        assert!(add_messages_into(&mut msgs, vec![Message::remove("nope")]).is_err());
        assert!(add_messages_into(
            &mut msgs,
            vec![Message::remove(REMOVE_ALL_MESSAGES), Message::human("c")]
        )
        .is_ok());
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs.get(0).map(Message::text).as_deref(), Some("c"));
    }

    #[test]
    fn langchain_json_round_trip() {
        let v = serde_json::json!({"type":"ai","content":"hi","id":"1","tool_calls":[{"id":"c","name":"t","args":{"q":1}}],"usage_metadata":{"input_tokens":3}});
        let m: Message = serde_json::from_value(v.clone()).unwrap_or_else(|_| Message::human(""));
        assert_eq!(m.kind, MessageKind::Ai);
        // Written back the way LangChain writes tool calls: with `"type": "tool_call"`.
        let mut expected = v;
        expected["tool_calls"][0]["type"] = serde_json::json!("tool_call");
        assert_eq!(serde_json::to_value(&m).ok(), Some(expected.clone()));
        let again: Message = serde_json::from_value(expected).unwrap_or_else(|_| Message::human(""));
        assert_eq!(again, m);
    }
}
