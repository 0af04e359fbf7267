//! [`AgentGraphState`]: the state of a [`create_agent`](crate::create_agent) graph: the
//! conversation and the structured response as typed fields, plus the fields middleware
//! (and the caller) declare, each a JSON channel with a named reducer.

use graphloom_core::json_state::JsonStateBuilder;
use graphloom_core::state::{Changed, StateError, TaskUpdate};
use graphloom_core::{JsonReducer, JsonState, JsonUpdate, Message, Seq, State};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// The typed part of the state.
#[derive(State, Clone, Default, Debug)]
pub(crate) struct Core {
    /// The conversation, merged with `add_messages`.
    #[reducer(add_messages)]
    pub messages: Seq<Message>,
    /// The validated structured answer, when a response format is set.
    pub structured_response: Option<Value>,
}

/// Number of typed fields before the declared ones.
const CORE_FIELDS: usize = 2;

/// A state field a middleware (or the caller) adds to the agent's state: a name, a
/// reducer and, for documentation and the schema, the JSON Schema of its values.
#[derive(Debug, Clone)]
pub struct StateField {
    /// The field's name (unique in the agent's state).
    pub name: String,
    /// How writes of one step combine with the value.
    pub reducer: JsonReducer,
    /// JSON Schema of the field's values.
    pub schema: Value,
}

impl StateField {
    /// A field holding `T`, keeping its last value.
    #[must_use]
    pub fn last<T: schemars::JsonSchema>(name: impl Into<String>) -> Self {
        Self::new::<T>(name, JsonReducer::LastValue)
    }
    /// A field holding `T` with reducer `reducer`.
    #[must_use]
    pub fn new<T: schemars::JsonSchema>(name: impl Into<String>, reducer: JsonReducer) -> Self {
        Self {
            name: name.into(),
            reducer,
            schema: graphloom_llm::provider_schema::<T>(),
        }
    }
}

/// The state of an agent built by [`create_agent`](crate::create_agent).
///
/// `messages` (merged with `add_messages`) and `structured_response` are typed fields;
/// every field a middleware or [`AgentBuilder::state_field`](crate::AgentBuilder::state_field)
/// declares is a JSON channel, read typed with [`AgentGraphState::get`]. Its JSON form
/// (checkpoints, the server, `values` streams) is one object with every field.
#[derive(Clone, Debug)]
pub struct AgentGraphState {
    /// The conversation.
    pub messages: Seq<Message>,
    /// The structured response, once the model gave a valid one (see
    /// [`AgentGraphState::structured`]).
    pub structured_response: Option<Value>,
    extra: JsonState,
}

impl Default for AgentGraphState {
    fn default() -> Self {
        Self::with_fields(&[])
    }
}

impl AgentGraphState {
    /// An empty state with these declared fields.
    #[must_use]
    pub fn with_fields(fields: &[StateField]) -> Self {
        let mut b: JsonStateBuilder = JsonState::builder();
        for f in fields {
            b = b.field(f.name.clone(), f.reducer.clone());
        }
        Self {
            messages: Seq::new(),
            structured_response: None,
            extra: b.build(),
        }
    }

    fn core(&self) -> Core {
        Core {
            messages: self.messages.clone(),
            structured_response: self.structured_response.clone(),
        }
    }

    fn set_core(&mut self, core: Core) {
        self.messages = core.messages;
        self.structured_response = core.structured_response;
    }

    /// A declared field as JSON (`None` for an unknown name).
    #[must_use]
    pub fn get_json(&self, name: &str) -> Option<Value> {
        self.extra.get(name)
    }

    /// A declared field as a `T`; `None` when the field is unknown, unset (`null`) or does
    /// not decode as a `T`.
    #[must_use]
    pub fn get<T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        match self.extra.value(name) {
            Some(Value::Null) => None,
            Some(v) => T::deserialize(v).ok(),
            None => self.extra.get(name).and_then(|v| serde_json::from_value(v).ok()),
        }
    }

    /// The structured response as a `T`.
    #[must_use]
    pub fn structured<T: DeserializeOwned>(&self) -> Option<T> {
        self.structured_response
            .as_ref()
            .and_then(|v| T::deserialize(v).ok())
    }

    /// The last message, if any.
    #[must_use]
    pub fn last_message(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// Names of the declared fields.
    pub fn declared_fields(&self) -> impl Iterator<Item = &str> {
        (0..self.extra.field_count()).map(|i| self.extra.field_name(i))
    }
}

/// A partial update of an [`AgentGraphState`].
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct AgentGraphUpdate {
    messages: Option<Vec<Message>>,
    overwrite: bool,
    structured_response: Option<Option<Value>>,
    extra: Map<String, Value>,
}

impl AgentGraphUpdate {
    /// An update that writes nothing.
    pub fn new() -> Self {
        Self::default()
    }
    /// Add (or replace, by id) these messages.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        match &mut self.messages {
            Some(m) => m.extend(messages),
            None => self.messages = Some(messages),
        }
        self
    }
    /// Replace the whole conversation with `messages` (LangGraph's `Overwrite`).
    pub fn messages_overwrite(mut self, messages: Vec<Message>) -> Self {
        self.messages = Some(messages);
        self.overwrite = true;
        self
    }
    /// Set the structured response.
    pub fn structured_response(mut self, value: Option<Value>) -> Self {
        self.structured_response = Some(value);
        self
    }
    /// Write `value` to the declared field `name` (through its reducer).
    pub fn set(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(name.into(), value.into());
        self
    }
    /// Write a serialisable value to the declared field `name`; a value that does not
    /// serialise is written as `null`.
    pub fn set_typed<T: Serialize + ?Sized>(self, name: impl Into<String>, value: &T) -> Self {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.set(name, v)
    }
    /// Whether the update writes nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.messages.is_none() && self.structured_response.is_none() && self.extra.is_empty()
    }
    /// Both updates in one: messages concatenated (an overwrite in `later` replaces them),
    /// the other writes of `later` winning.
    pub fn and(mut self, later: AgentGraphUpdate) -> Self {
        if let Some(msgs) = later.messages {
            if later.overwrite {
                self = self.messages_overwrite(msgs);
            } else {
                self = self.messages(msgs);
            }
        }
        if later.structured_response.is_some() {
            self.structured_response = later.structured_response;
        }
        self.extra.extend(later.extra);
        self
    }
    /// The messages this update writes, if any.
    #[must_use]
    pub fn written_messages(&self) -> Option<&[Message]> {
        self.messages.as_deref()
    }
    /// Whether the messages this update writes replace the conversation.
    #[must_use]
    pub fn overwrites_messages(&self) -> bool {
        self.overwrite
    }
    /// The structured response this update writes, if it writes one.
    #[must_use]
    pub fn written_structured_response(&self) -> Option<&Option<Value>> {
        self.structured_response.as_ref()
    }
    /// The JSON this update writes to the declared field `name`.
    #[must_use]
    pub fn written(&self, name: &str) -> Option<&Value> {
        self.extra.get(name)
    }

    fn core(&self) -> CoreUpdate {
        let mut u = CoreUpdate::new();
        if let Some(m) = &self.messages {
            u = if self.overwrite {
                u.messages_overwrite(m.iter().cloned().collect())
            } else {
                u.messages(m.clone())
            };
        }
        if let Some(s) = &self.structured_response {
            u = u.structured_response(s.clone());
        }
        u
    }

    fn core_fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.messages.is_some() {
            out.push("messages".to_owned());
        }
        if self.structured_response.is_some() {
            out.push("structured_response".to_owned());
        }
        out
    }
}

impl From<AgentGraphUpdate> for graphloom_core::NodeOutput<AgentGraphState> {
    fn from(u: AgentGraphUpdate) -> Self {
        graphloom_core::NodeOutput::Update(u)
    }
}

impl State for AgentGraphState {
    type Update = AgentGraphUpdate;

    fn field_count(&self) -> usize {
        CORE_FIELDS + self.extra.field_count()
    }
    fn field_name(&self, idx: usize) -> &str {
        match idx {
            0 => "messages",
            1 => "structured_response",
            i => self.extra.field_name(i - CORE_FIELDS),
        }
    }
    fn field_index(&self, name: &str) -> Option<usize> {
        match name {
            "messages" => Some(0),
            "structured_response" => Some(1),
            other => self.extra.field_index(other).map(|i| i + CORE_FIELDS),
        }
    }

    fn merge(
        &mut self,
        updates: Vec<TaskUpdate<'_, Self::Update>>,
        changes: &mut Vec<Changed>,
    ) -> Result<(), StateError> {
        let mut core_updates = Vec::new();
        let mut extra_updates = Vec::new();
        for u in updates {
            let AgentGraphUpdate {
                messages,
                overwrite,
                structured_response,
                extra,
            } = u.update;
            if messages.is_some() || structured_response.is_some() {
                let mut core = CoreUpdate::new();
                if let Some(m) = messages {
                    core = if overwrite {
                        core.messages_overwrite(m.into_iter().collect())
                    } else {
                        core.messages(m)
                    };
                }
                if let Some(s) = structured_response {
                    core = core.structured_response(s);
                }
                core_updates.push(TaskUpdate {
                    node: u.node,
                    update: core,
                });
            }
            if !extra.is_empty() {
                extra_updates.push(TaskUpdate {
                    node: u.node,
                    update: JsonUpdate::from(extra),
                });
            }
        }
        if !core_updates.is_empty() {
            let mut core = self.core();
            core.merge(core_updates, changes)?;
            self.set_core(core);
        }
        if !extra_updates.is_empty() {
            let mut extra_changes = Vec::new();
            self.extra.merge(extra_updates, &mut extra_changes)?;
            changes.extend(extra_changes.into_iter().map(|c| Changed {
                field: c.field + CORE_FIELDS,
                change: c.change,
            }));
        }
        Ok(())
    }

    fn field_reducer(&self, idx: usize) -> Option<&'static str> {
        match idx {
            0 => Some("add_messages"),
            1 => Some("last"),
            i => self.extra.field_reducer(i - CORE_FIELDS),
        }
    }

    fn update_fields(&self, update: &Self::Update) -> Vec<String> {
        let mut out = update.core_fields();
        out.extend(update.extra.keys().cloned());
        out
    }

    fn field_to_json(&self, idx: usize) -> Result<Value, StateError> {
        if idx < CORE_FIELDS {
            self.core().field_to_json(idx)
        } else {
            self.extra.field_to_json(idx - CORE_FIELDS)
        }
    }

    fn field_shared_items(&self, idx: usize) -> Option<Vec<std::sync::Arc<Value>>> {
        if idx < CORE_FIELDS {
            None
        } else {
            self.extra.field_shared_items(idx - CORE_FIELDS)
        }
    }

    fn field_tail_to_json(&self, idx: usize, n: usize) -> Option<Result<Vec<Value>, StateError>> {
        if idx < CORE_FIELDS {
            self.core().field_tail_to_json(idx, n)
        } else {
            self.extra.field_tail_to_json(idx - CORE_FIELDS, n)
        }
    }

    fn set_field_from_json(&mut self, idx: usize, value: Value) -> Result<(), StateError> {
        if idx < CORE_FIELDS {
            let mut core = self.core();
            core.set_field_from_json(idx, value)?;
            self.set_core(core);
            Ok(())
        } else {
            self.extra.set_field_from_json(idx - CORE_FIELDS, value)
        }
    }

    fn update_to_json(&self, update: &Self::Update) -> Result<Value, StateError> {
        let mut out = match Core::default().update_to_json(&update.core())? {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        if !update.extra.is_empty() {
            let extra = JsonUpdate::from(update.extra.clone());
            if let Value::Object(m) = self.extra.update_to_json(&extra)? {
                out.extend(m);
            }
        }
        Ok(Value::Object(out))
    }

    fn update_from_json(&self, value: Value) -> Result<Self::Update, StateError> {
        let map = match value {
            Value::Object(m) => m,
            Value::Null => return Ok(AgentGraphUpdate::new()),
            other => {
                return Err(StateError::Decode {
                    field: String::new(),
                    message: format!("input must be a JSON object, got {other}"),
                })
            }
        };
        let mut core = Map::new();
        let mut extra = Map::new();
        for (k, v) in map {
            match k.as_str() {
                "messages" | "structured_response" => {
                    core.insert(k, v);
                }
                _ if self.extra.field_index(&k).is_some() => {
                    extra.insert(k, v);
                }
                _ => return Err(StateError::UnknownField(k)),
            }
        }
        // An overwrite of the messages (`{"__overwrite__": [...]}`) is decoded as plain
        // messages and marked.
        let mut overwrite = false;
        if let Some(v) = core.get_mut("messages") {
            if graphloom_core::state::overwrite_of(v).is_some() {
                overwrite = true;
                *v = graphloom_core::state::split_overwrite(std::mem::take(v)).unwrap_or(Value::Null);
            }
        }
        let core = Core::default().update_from_json(Value::Object(core))?;
        // Checked (and messages put in their stored form) by the channels' own decoder.
        let checked = self.extra.update_from_json(Value::Object(extra))?;
        let extra = match self.extra.update_to_json(&checked)? {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Ok(AgentGraphUpdate {
            messages: core.messages,
            overwrite,
            structured_response: core.structured_response,
            extra,
        })
    }

    fn json_schema(&self) -> Value {
        let mut schema = Core::default().json_schema();
        let extra = self.extra.json_schema();
        if let (Some(Value::Object(props)), Some(Value::Object(more))) =
            (schema.get_mut("properties"), extra.get("properties").cloned())
        {
            props.extend(more);
        }
        if let Value::Object(m) = &mut schema {
            m.insert("title".into(), Value::String("AgentState".into()));
        }
        schema
    }

    fn empty_like(&self) -> Self {
        Self {
            messages: Seq::new(),
            structured_response: None,
            extra: self.extra.empty_like(),
        }
    }

    fn update_messages(&self, update: &mut Self::Update) -> Vec<Value> {
        let mut core = update.core();
        let out = Core::default().update_messages(&mut core);
        // Ids given to new messages are kept in the update itself.
        if let (Some(given), Some(mine)) = (core.messages, update.messages.as_mut()) {
            if !update.overwrite {
                *mine = given;
            }
        }
        out
    }

    fn has_message(&self, id: &str) -> bool {
        self.core().has_message(id)
    }
}
