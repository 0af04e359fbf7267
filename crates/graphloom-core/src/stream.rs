//! Stream events.
//!
//! A run's stream yields [`StreamPart`]s in the modes asked for, then exactly one terminal
//! event. Payloads stay typed ([`StreamPart::values`], [`StreamPart::update`]) and turn into
//! JSON only when a consumer asks ([`StreamPart::data_json`]).

use crate::state::{encode_field, StateError};
use crate::types::Interrupt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// Stream modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// The whole state after each superstep.
    Values,
    /// Each node's update, as `{node: update}`.
    Updates,
    /// Whatever nodes and tools write with the stream writer.
    Custom,
    /// Chunks of model messages, with the metadata of the node that produced them.
    Messages,
    /// Task start and result events.
    Tasks,
    /// Each checkpoint as it is created.
    Checkpoints,
    /// Checkpoints and tasks, wrapped with step and type.
    Debug,
    /// LangChain's `astream_events` (v2) events of the graph, its nodes, and the models
    /// and tools they call ([`crate::events`]). Subgraphs report theirs whether or not
    /// subgraph streaming is on: their nesting is in `parent_ids`.
    Events,
}

/// What a run's `checkpoints` stream events carry ([`crate::RunConfig::checkpoint_events`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckpointEvents {
    /// LangGraph's whole event: `config`, `parent_config`, `metadata`, `values`, `next`
    /// and `tasks`.
    #[default]
    Full,
    /// The checkpoint's envelope only: `config`, `parent_config` and `metadata`. A caller
    /// that only follows which checkpoints were made (a thread protocol's `checkpoints`
    /// channel) asks for this: the run does not plan the next tasks nor copy the state
    /// into each event, and a kept event is a few hundred bytes, not the whole state.
    Envelope,
}

/// What a run's `messages` stream events carry ([`crate::RunConfig::message_events`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageEvents {
    /// LangGraph's events: the chunks of the models called in nodes, and the messages a
    /// node returns that were neither streamed nor in its input, whole.
    #[default]
    All,
    /// The models' chunks only. A caller that reads nothing else (a thread protocol's
    /// `messages` channel) asks for this: the run does not look at what nodes return.
    ModelChunks,
}

impl StreamMode {
    /// The mode's wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Values => "values",
            StreamMode::Updates => "updates",
            StreamMode::Custom => "custom",
            StreamMode::Messages => "messages",
            StreamMode::Tasks => "tasks",
            StreamMode::Checkpoints => "checkpoints",
            StreamMode::Debug => "debug",
            StreamMode::Events => "events",
        }
    }
}

/// A payload that can be read typed or turned into JSON.
pub trait StreamValue: Send + Sync {
    /// The payload as JSON.
    ///
    /// # Errors
    /// When a field of the state or update does not serialise.
    fn to_json(&self) -> Result<Value, StateError>;
    /// The payload as `Any`, to downcast.
    fn as_any(&self) -> &dyn Any;
}

impl StreamValue for Value {
    fn to_json(&self) -> Result<Value, StateError> {
        Ok(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The data of a stream part.
#[derive(Clone)]
pub enum StreamData {
    /// State values (`values` mode).
    Values(Arc<dyn StreamValue>),
    /// One node's update (`updates` mode).
    Update {
        /// The node.
        node: String,
        /// Its update.
        update: Arc<dyn StreamValue>,
    },
    /// Interrupts raised in the step (`updates` mode, and `values` mode for clients that
    /// only ask for values).
    Interrupts(Vec<Interrupt>),
    /// Any JSON (`custom`, `messages`, `tasks`, `checkpoints`, `debug`).
    Json(Value),
    /// One `astream_events` event (`events` mode).
    Event(Box<crate::events::StreamEvent>),
}

impl fmt::Debug for StreamData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamData::Values(_) => f.write_str("Values(..)"),
            StreamData::Update { node, .. } => write!(f, "Update({node})"),
            StreamData::Interrupts(i) => write!(f, "Interrupts({i:?})"),
            StreamData::Json(v) => write!(f, "Json({v})"),
            StreamData::Event(e) => write!(f, "Event({} {})", e.event.as_str(), e.name),
        }
    }
}

/// One event of a run's stream.
#[derive(Clone, Debug)]
pub struct StreamPart {
    /// Namespace path: empty for the root graph, `node:task_id` segments for subgraphs.
    pub ns: Vec<String>,
    /// The mode it belongs to.
    pub mode: StreamMode,
    /// The data.
    pub data: StreamData,
}

impl StreamPart {
    /// The state, if this is a `values` part of a graph whose state type is `S`.
    #[must_use]
    pub fn values<S: 'static>(&self) -> Option<&S> {
        match &self.data {
            StreamData::Values(v) => v.as_any().downcast_ref::<S>(),
            _ => None,
        }
    }
    /// `(node, update)`, if this is an `updates` part with update type `U`.
    #[must_use]
    pub fn update<U: 'static>(&self) -> Option<(&str, &U)> {
        match &self.data {
            StreamData::Update { node, update } => {
                update.as_any().downcast_ref::<U>().map(|u| (node.as_str(), u))
            }
            _ => None,
        }
    }
    /// The data as JSON, shaped as LangGraph streams it: `values` the state, `updates`
    /// `{node: update}` or `{"__interrupt__": [...]}`, other modes their JSON.
    ///
    /// # Errors
    /// When a field of the state or update does not serialise.
    pub fn data_json(&self) -> Result<Value, StateError> {
        match &self.data {
            StreamData::Values(v) => v.to_json(),
            StreamData::Update { node, update } => {
                let mut m = serde_json::Map::new();
                m.insert(node.clone(), update.to_json()?);
                Ok(Value::Object(m))
            }
            StreamData::Interrupts(i) => {
                let list = encode_field("__interrupt__", i)?;
                Ok(serde_json::json!({ "__interrupt__": list }))
            }
            StreamData::Json(v) => Ok(v.clone()),
            StreamData::Event(e) => encode_field("event", e),
        }
    }
    /// [`data_json`](Self::data_json), moving a JSON payload out instead of copying it.
    ///
    /// # Errors
    /// As [`data_json`](Self::data_json).
    pub fn into_data_json(self) -> Result<Value, StateError> {
        match self.data {
            StreamData::Json(v) => Ok(v),
            data => Self { data, ..self }.data_json(),
        }
    }
    /// The event, if this is an `events` part.
    #[must_use]
    pub fn event(&self) -> Option<&crate::events::StreamEvent> {
        match &self.data {
            StreamData::Event(e) => Some(e),
            _ => None,
        }
    }
}
